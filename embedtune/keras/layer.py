"""``Embedding``: keras.layers.Embedding's place in a model, with frozen rows no optimizer can reach.

Weights (all saved by ``.keras`` files and ``tf.train.Checkpoint``):
- ``table`` [V, dim], not trainable: every row as it started (the vectors as read, the new words'
  starts). Frozen rows are read from it; no optimizer, weight decay, EMA, regulariser, constraint or
  loss scale is ever given it.
- ``rows`` [T, dim], trainable: the T trainable rows, in row order.
- ``slot_of`` [V] int32: an id's row of ``rows`` (T, past its end, for a frozen id); ``row_ids`` [T]
  int32: a trainable row's id.

A lookup gathers every id's ``table`` row and puts the trainable ones' ``rows`` rows in their place
(one gather of those and one scatter into the batch's rows): nothing in it grows with V, a frozen id's
output is its ``table`` row, bit for bit, and the gradient's slices hold the batch's trainable rows
only. Its shapes follow the batch's trainable ids, so XLA cannot compile it (``supports_jit``).
"""

from __future__ import annotations

import json
import os
import types
import weakref

import numpy as np
import keras
from keras import ops

from embedtune._tf import tf
from embedtune.keras import _project as project
from embedtune.keras.proof import digest, row_hashes, warn_once

# Keras's own layer arguments that from_vectors passes on; the vectors fix input_dim and output_dim.
KERAS_ARGUMENTS = ("embeddings_regularizer", "embeddings_constraint", "mask_zero", "dtype", "name", "trainable")
PLAIN_OPTIMIZER = ("a Keras optimizer other than embedtune.keras.LazyRows updates {name}'s trainable rows: the frozen "
                   "rows stay as they are, but Keras's optimizers move trainable rows no batch touched (momentum, "
                   "weight decay) and cost the whole rows table each step; wrap it: LazyRows(optimizer) "
                   "(docs/keras.md)")


def layer_of(variable):
    """The Embedding whose trainable rows ``variable`` is, or None."""
    ref = getattr(variable, "_embedtune_layer", None)
    return ref() if ref is not None else None


def _constant(value: np.ndarray):
    def initializer(shape, dtype=None):
        return tf.constant(value, dtype=dtype)

    return initializer


@keras.saving.register_keras_serializable(package="embedtune")
class Embedding(keras.layers.Layer):
    """Turns ids into vectors, as keras.layers.Embedding does, from pretrained vectors with frozen rows.

    Make it with ``Embedding.from_vectors``. Ids are rows of ``vocabulary`` (the vectors' words in
    file order, then the new words); negative ids count from the end and ``mask_zero`` masks id 0, as
    in keras.layers.Embedding. Outputs are in the layer's compute dtype (``mixed_float16``: float16);
    its weights stay float32.

    input_dim, output_dim : the table's shape [V, dim]; trainable_rows : T, the rows that train
    n_pretrained : rows from the vectors (the rest are new words); frozen_digest : the frozen rows'
    digest as read (embedtune.keras.proof); source, source_format : where the vectors came from
    embeddings_regularizer, embeddings_constraint : Keras's, on the trainable rows (a frozen row's
    term would be a constant)
    """

    def __init__(self, input_dim: int, output_dim: int, trainable_rows: int, n_pretrained: int | None = None,
                 embeddings_regularizer=None, embeddings_constraint=None, mask_zero: bool = False,
                 frozen_digest: str | None = None, source: str | None = None, source_format: str | None = None,
                 **kwargs):
        initial = kwargs.pop("_initial", None)
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.trainable_rows = int(trainable_rows)
        self.n_pretrained = self.input_dim if n_pretrained is None else int(n_pretrained)
        self.embeddings_regularizer = keras.regularizers.get(embeddings_regularizer)
        self.embeddings_constraint = keras.constraints.get(embeddings_constraint)
        self.mask_zero = mask_zero
        self.supports_masking = mask_zero
        self.autocast = False   # weights stay float32; the output is cast, as keras.layers.Embedding does
        # The lookup's shapes follow the batch's trainable ids and the optimizer's merge of repeated ids
        # (tf.unique) has no XLA kernel: model.fit's jit_compile="auto" leaves XLA off with this layer.
        self.supports_jit = False
        self.frozen_digest, self.source, self.source_format = frozen_digest, source, source_format
        self._initial = initial               # from_vectors' arrays, until build
        self._vocabulary = initial["words"] if initial else None
        self._reference = initial["hashes"] if initial else None   # per-row hashes of the frozen rows as read
        self._lazy_rows = False               # set by LazyRows.build (stepped_by_lazy_rows)
        self._suspect = False                 # a training call saw no LazyRows (warn_plain_optimizer)

    def stepped_by_lazy_rows(self) -> None:
        """Told by LazyRows when it takes this layer's rows: a plain Keras optimizer's warning does not apply."""
        self._lazy_rows = True

    # --- making one ----------------------------------------------------------------------------
    @classmethod
    def from_vectors(cls, vectors, *, corpus=None, config=None, keep_first_duplicate: bool = False,
                     allow_nan: bool = False, replace_bad_utf8: bool = False, **options) -> Embedding:
        """A layer over ``vectors`` (a path in any supported format, or an embedtune.Vectors).

        options : fine_tune's names for the vocabulary (``freeze_top=5000``, ``freeze_list="words.txt"``,
            ``train_pattern=...``, ``freeze_pretrained=True``, ``new_words="new.txt"``, ``min_count``,
            ``init``, ``lowercase``, ``format``, ``dim`` (the expected dimension), ``seed``), and
            keras.layers.Embedding's own (``embeddings_regularizer``, ``embeddings_constraint``,
            ``mask_zero``, ``dtype``, ``name``, ``trainable``)
        corpus : a path or sentences: new words (``min_count``, ``new_words``) start from their
            contexts and spelling there, as ``embedtune train`` starts them
        config : a TOML config file (its [vocab] table) or a Config; ``options`` override it
        keep_first_duplicate, allow_nan, replace_bad_utf8 : how a vectors path is read (train's options)
        Bad input (a missing file, a duplicate word, an unknown option, a dimension that differs from
        ``dim``) raises EmbedtuneError naming it.
        """
        keras_args = {key: options.pop(key) for key in KERAS_ARGUMENTS if key in options}
        for key in ("input_dim", "output_dim", "weights"):
            if key in options:
                raise project.EmbedtuneError(f"'{key}' comes from the vectors; pass dim= to check the dimension")
        reading = project.Reading(keep_first_duplicate, allow_nan, replace_bad_utf8)
        rows = project.layer_rows(vectors, options, config, corpus, reading)
        plan, matrix = rows.plan, rows.vectors.matrix
        trainable = np.flatnonzero(~plan.frozen)
        slot_of = np.full(len(plan.words), len(trainable), np.int32)
        slot_of[trainable] = np.arange(len(trainable), dtype=np.int32)
        table = np.concatenate([matrix, rows.new_start]) if len(rows.new_start) else matrix
        start = table[trainable]
        frozen_rows = np.flatnonzero(plan.frozen)
        hashes = row_hashes(matrix, frozen_rows)
        initial = {"table": table, "rows": start, "slot_of": slot_of, "row_ids": trainable.astype(np.int32),
                   "words": list(plan.words), "hashes": hashes}
        layer = cls(len(plan.words), table.shape[1], len(trainable), plan.n_pretrained, frozen_digest=digest(hashes),
                    source=rows.source, source_format=rows.format, _initial=initial, **keras_args)
        layer.build()   # its shapes are known: the weights take the vectors now, not on a first call
        # A fastText model read: its subword rows, for save_vectors to write a model back (not serialised).
        layer._fasttext = getattr(rows.vectors, "fasttext", None)
        return layer

    def build(self, input_shape=None):
        if self.built:
            return
        values = self._initial or {}
        v, d, t = self.input_dim, self.output_dim, self.trainable_rows

        def start(name, default="zeros"):
            return _constant(values[name]) if name in values else default

        self.table = self.add_weight(name="table", shape=(v, d), initializer=start("table"), trainable=False)
        # With no trainable row, no trainable weight: an optimizer's dense extras (Keras's EMA) fail on a [0, d] one.
        self.rows = self.add_weight(name="rows", shape=(t, d), initializer=start("rows"), trainable=t > 0,
                                    regularizer=self.embeddings_regularizer, constraint=self.embeddings_constraint)
        self.slot_of = self.add_weight(name="slot_of", shape=(v,), dtype="int32", trainable=False,
                                       initializer=start("slot_of", keras.initializers.Constant(t)))
        self.row_ids = self.add_weight(name="row_ids", shape=(t,), dtype="int32", trainable=False,
                                       initializer=start("row_ids"))
        self.rows._embedtune_layer = weakref.ref(self)
        self._initial = None   # the variables hold them now
        self.built = True

    # --- the lookup ----------------------------------------------------------------------------
    def call(self, inputs, training=None):
        if inputs.dtype != "int32" and inputs.dtype != "int64":
            inputs = ops.cast(inputs, "int32")
        if training and not self._lazy_rows and self.trainable_rows:
            self._note_training()
        if tf.executing_eagerly():
            self._check_ids(inputs)
        ids = tf.where(inputs < 0, inputs + tf.cast(self.input_dim, inputs.dtype), inputs)   # keras's ops.take
        return ops.cast(self.lookup(ids), self.compute_dtype)

    def lookup(self, ids):
        """The rows of ``ids`` (0 <= id < V) in the weights' dtype: the table's, with the trainable ones
        replaced by their ``rows`` rows. Selecting by a mask over every id instead (two gathers of the
        whole batch and a where) cost more a step, and its gradient carried a slice for every frozen id
        (benchmarks/README.md, keras_rows)."""
        ids = tf.convert_to_tensor(ids)
        shape = (ids.shape.as_list() + [self.output_dim] if ids.shape.is_fully_defined()
                 else tf.concat([tf.shape(ids), [self.output_dim]], 0))
        flat = tf.reshape(ids, [-1])
        slot = tf.gather(self.slot_of.value, flat)
        at = tf.where(slot < self.trainable_rows)   # [k, 1]: the batch's trainable positions
        moved = tf.gather(self.rows.value, tf.gather_nd(slot, at))
        return tf.reshape(tf.tensor_scatter_nd_update(tf.gather(self.table.value, flat), at, moved), shape)

    def _check_ids(self, ids) -> None:
        if tf.size(ids) == 0:
            return
        low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
        bad = high if high >= self.input_dim else low if low < -self.input_dim else None
        if bad is not None:
            raise project.EmbedtuneError(f"{self.name}: id {bad} is past the table ({self.input_dim:,} rows: ids 0 to "
                                         f"{self.input_dim - 1}, or -1 to -{self.input_dim} from the end)")

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)

    # --- words ---------------------------------------------------------------------------------
    @property
    def vocabulary(self) -> list[str]:
        """The words in row order: id i is ``vocabulary[i]``."""
        if self._vocabulary is None:
            raise project.EmbedtuneError(f"{self.name} has no vocabulary (made without from_vectors or loaded "
                                         "without its assets)")
        return self._vocabulary

    def ids(self, tokens, oov: str | int | None = None) -> np.ndarray:
        """int32 ids of ``tokens`` (a list of str, or of lists of str of one length). A token the
        vocabulary lacks is an error naming it, unless ``oov`` names a word or an id it becomes."""
        index = self._index()
        nested = bool(tokens) and not isinstance(tokens[0], str)
        flat = [t for row in tokens for t in row] if nested else list(tokens)
        fallback = index.get(oov, None) if isinstance(oov, str) else oov
        if isinstance(oov, str) and fallback is None:
            raise project.EmbedtuneError(f"oov word {oov!r} is not in the vocabulary")
        out = np.empty(len(flat), np.int32)
        for i, token in enumerate(flat):
            row = index.get(token, fallback)
            if row is None:
                raise project.EmbedtuneError(f"token {token!r} (at {i}) is not in the vocabulary; pass oov= (a word "
                                             "or an id) to map such tokens")
            out[i] = row
        return out.reshape(len(tokens), -1) if nested else out

    def _index(self) -> dict:
        if getattr(self, "_word_index", None) is None:
            self._word_index = {w: i for i, w in enumerate(self.vocabulary)}
        return self._word_index

    def string_lookup(self, **kwargs):
        """A keras.layers.StringLookup whose ids are this layer's rows (no OOV index: an unknown token
        is an error when it is looked up; pass ``num_oov_indices`` etc. only if the ids may shift)."""
        return keras.layers.StringLookup(vocabulary=self.vocabulary, num_oov_indices=kwargs.pop("num_oov_indices", 0),
                                         **kwargs)

    @property
    def frozen(self) -> np.ndarray:
        """bool [V]: True where a row is frozen."""
        return self.slot_of.numpy() >= self.trainable_rows

    # --- the frozen rows' proof and the output ---------------------------------------------------
    def check_frozen(self) -> int:
        """Read every frozen row through the lookup and compare its bits with the vectors as read
        (the per-row hashes taken then; after a reload, the digest saved with the layer). Returns the
        rows compared; a difference is an EmbedtuneError."""
        if not self._lazy_rows and self._suspect:
            self.warn_plain_optimizer()
        frozen = np.flatnonzero(self.frozen)
        seen = np.concatenate([self.lookup(tf.constant(frozen[i:i + 65536], tf.int32)).numpy().astype(np.float32)
                               for i in range(0, len(frozen), 65536)] or [np.zeros((0, self.output_dim), np.float32)])
        hashes = row_hashes(seen, np.arange(len(frozen)))
        if self._reference is not None and len(self._reference) == len(hashes):
            changed = np.flatnonzero(hashes != self._reference)
            if len(changed):
                raise project.EmbedtuneError(f"{self.name}: {project.counted(len(changed), 'frozen row')} changed "
                                             f"(first: {self.vocabulary[frozen[changed[0]]]!r})")
        elif self.frozen_digest is not None and digest(hashes) != self.frozen_digest:
            raise project.EmbedtuneError(f"{self.name}: the frozen rows differ from the vectors the layer was "
                                         "made from")
        return len(frozen)

    def save_vectors(self, path, to: str | None = None):
        """Write the whole table (trained rows in place, new words after the pretrained ones) to
        ``path`` in ``to`` (default: as the name's extension says, else the input's format), with its
        frozen rows read back from the bytes written and compared with the input's, as ``embedtune
        train`` writes (a difference leaves no file). Returns the check (``checked``, ``worst``)."""
        project.check_not_input(path, self.source)
        self.check_frozen()
        table, n_pre = self.table.numpy(), self.n_pretrained
        row_ids = self.row_ids.numpy().astype(np.int64)
        trained = self.rows.numpy()[: self.trainable_rows]
        out = project.PatchedVectors(self.vocabulary, table[:n_pre], row_ids, trained)
        plan = project.Plan(self.vocabulary, self.frozen, n_pre)
        fmt = project.output_format(path, to, self.source_format)
        source = types.SimpleNamespace(matrix=table[:n_pre], fasttext=getattr(self, "_fasttext", None))
        return project.save_checked(out, source, plan, os.fspath(path), fmt)

    def warn_plain_optimizer(self) -> None:
        warn_once(self, PLAIN_OPTIMIZER.format(name=self.name))

    def _note_training(self) -> None:
        # Keras's fit builds the optimizer before it traces the step; a custom loop may build it in its
        # first step, after the forward pass: a second training call without LazyRows settles it.
        if self._suspect:
            self.warn_plain_optimizer()
        self._suspect = True

    # --- saving --------------------------------------------------------------------------------
    def get_config(self):
        config = super().get_config()
        config.update(input_dim=self.input_dim, output_dim=self.output_dim, trainable_rows=self.trainable_rows,
                      n_pretrained=self.n_pretrained, mask_zero=self.mask_zero,
                      embeddings_regularizer=keras.regularizers.serialize(self.embeddings_regularizer),
                      embeddings_constraint=keras.constraints.serialize(self.embeddings_constraint),
                      frozen_digest=self.frozen_digest, source=self.source, source_format=self.source_format)
        return config

    def load_own_variables(self, store):
        super().load_own_variables(store)
        self.check_frozen()   # the frozen rows as loaded against the digest of the vectors they came from

    def save_assets(self, dir_path):
        with open(os.path.join(dir_path, "vocabulary.json"), "w", encoding="utf-8") as f:
            json.dump(self.vocabulary, f, ensure_ascii=False)

    def load_assets(self, dir_path):
        with open(os.path.join(dir_path, "vocabulary.json"), encoding="utf-8") as f:
            self._vocabulary = json.load(f)
        self._word_index = None
