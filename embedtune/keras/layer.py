"""``Embedding``: keras.layers.Embedding's place in a model, with frozen rows no optimizer can reach.

Rows: a padding row (``mask_token``) and an unknown-word row (``oov_token``) when asked for, in
keras.layers.StringLookup's order, then the vectors' words in file order, then the new words.

Weights (all saved by ``.keras`` files and ``tf.train.Checkpoint``):
- ``table`` [V, dim], not trainable: every row as it started (the vectors as read, the new words'
  starts). Frozen rows are read from it; no optimizer, weight decay, EMA, regulariser, constraint or
  loss scale is ever given it.
- ``rows`` [T, dim], trainable: the T trainable rows, in row order. None when T is 0: an empty
  trainable variable is not "nothing to train" to every Keras optimizer (AdamW with EMA fails on one).
- ``slot_of`` [V] int32: an id's row of ``rows`` (T, past its end, for a frozen id); ``row_ids`` [T]
  int32: a trainable row's id.

A lookup gathers every id's ``table`` row and puts the trainable ones' ``rows`` rows in their place
(one gather of those, written into the batch's gathered rows): nothing in it grows with V, a frozen id's
output is its ``table`` row, bit for bit, and the gradient's slices hold the batch's trainable rows
only. Its shapes follow the batch's trainable ids, so XLA cannot compile it (``supports_jit``).
"""

from __future__ import annotations

import json
import os
import warnings
import weakref

import numpy as np
import keras
from keras import ops

from embedtune._tf import tf
from embedtune.frozen import digest, row_hashes, save_checked
from embedtune.keras import _project as project
from embedtune.keras.lookup import local_copy, put_rows

# Keras's own layer arguments that from_vectors passes on; the vectors fix input_dim and output_dim.
KERAS_ARGUMENTS = ("embeddings_regularizer", "embeddings_constraint", "mask_zero", "dtype", "name", "trainable")
# What string_lookup and text_vectorization decide themselves: the ids must be the layer's rows.
LOOKUP_DECIDES = ("vocabulary", "mask_token", "oov_token", "num_oov_indices")
PLAIN_OPTIMIZER = ("a Keras optimizer other than embedtune.keras.LazyRows updates {name}'s trainable rows: the frozen "
                   "rows stay as they are, but Keras's optimizers move trainable rows no batch touched (momentum, "
                   "weight decay) and cost the whole rows table each step; wrap it: LazyRows(optimizer) "
                   "(docs/keras.md)")


# Every Embedding built, held weakly: the layers are ours to list, Keras's variables carry nothing of ours
# (LazyRows finds a rows variable's layer here, FrozenRowsCallback a model's layers).
_BUILT: weakref.WeakSet = weakref.WeakSet()


def layer_of(variable):
    """The Embedding whose trainable rows ``variable`` is, or None."""
    return next((layer for layer in list(_BUILT) if layer.rows is variable), None)


def layers_in(model) -> list:
    """The Embedding layers of ``model``, at any depth (inside nested models and layers), each once, in
    the order of the model's variables: those whose ``table`` is one of them."""
    tables = {id(layer.table): layer for layer in list(_BUILT)}
    found = {}
    for variable in model.variables:
        layer = tables.get(id(variable))
        if layer is not None and layer.table is variable:
            found[id(layer)] = layer
    return list(found.values())


def _constant(value: np.ndarray):
    def initializer(shape, dtype=None):
        return tf.constant(value, dtype=dtype)

    return initializer


@keras.saving.register_keras_serializable(package="embedtune")
class Embedding(keras.layers.Layer):
    """Turns ids into vectors, as keras.layers.Embedding does, from pretrained vectors with frozen rows.

    Make it with ``Embedding.from_vectors``. Ids are rows of ``vocabulary`` (the padding and
    unknown-word rows when asked for, then the vectors' words in file order, then the new words);
    negative ids count from the end and ``mask_zero`` masks id 0, as in keras.layers.Embedding; ids may
    be a tf.RaggedTensor. Outputs are in the layer's compute dtype (``mixed_float16``: float16); its
    weights stay float32. ``layer(h, reverse=True)`` is ``h @ embeddings^T`` (a tied output projection).

    input_dim, output_dim : the table's shape [V, dim]; trainable_rows : T, the rows that train
    n_pretrained : rows from the vectors (the rest are new words); frozen_digest : the frozen rows'
    digest as read (embedtune.frozen.digest); source, source_format : where the vectors came from
    embeddings_regularizer, embeddings_constraint : Keras's, on the trainable rows (a frozen row's
    term would be a constant)
    mask_token, oov_token : the words of the padding row (id 0) and of the unknown-word row (next), None
    where there is none; vocabulary : list of str [V] (None: unknown)
    """

    def __init__(self, input_dim: int, output_dim: int, trainable_rows: int, n_pretrained: int | None = None,
                 embeddings_regularizer=None, embeddings_constraint=None, mask_zero: bool = False,
                 frozen_digest: str | None = None, source: str | None = None, source_format: str | None = None,
                 mask_token: str | None = None, oov_token: str | None = None, vocabulary: list[str] | None = None,
                 **kwargs):
        initial = kwargs.pop("_initial", None)
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.trainable_rows = int(trainable_rows)
        self.mask_token, self.oov_token = mask_token, oov_token
        self.reserved = (mask_token is not None) + (oov_token is not None)   # rows before the vectors' words
        self.n_pretrained = self.input_dim - self.reserved if n_pretrained is None else int(n_pretrained)
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
        self._vocabulary = list(vocabulary) if vocabulary is not None else initial["words"] if initial else None
        if self._vocabulary is not None and len(self._vocabulary) != self.input_dim:
            raise project.EmbedtuneError(f"vocabulary has {len(self._vocabulary):,} words for {self.input_dim:,} rows")
        self._reference = initial["hashes"] if initial else None   # per-row hashes of the frozen rows as read
        # The fastText model the vectors were read from (Vectors.model), for save_vectors to write a model
        # back; not serialised: a layer loaded from a .keras file writes other formats only.
        self.fasttext_model = initial["model"] if initial else None
        self._warned_plain = False
        self._lazy_rows = False               # set by LazyRows.build (stepped_by_lazy_rows)
        self._suspect = False                 # a training call saw no LazyRows (warn_plain_optimizer)

    def stepped_by_lazy_rows(self) -> None:
        """Told by LazyRows when it takes this layer's rows: a plain Keras optimizer's warning does not apply."""
        self._lazy_rows = True

    # --- making one ----------------------------------------------------------------------------
    @classmethod
    def from_vectors(cls, vectors, *, corpus=None, config=None, mask_token: str | None = None,
                     oov_token: str | None = None, oov_trainable: bool = True, keep_first_duplicate: bool = False,
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
        mask_token : a word for a padding row put first (id 0): zeros, frozen, what ``mask_zero=True``
            masks; oov_token : a word for an unknown-word row after it (id 1, or 0 without a padding row),
            starting at the mean of the vectors, trainable unless ``oov_trainable=False``. Both are
            keras.layers.StringLookup's names and order, so ``string_lookup()`` and
            ``text_vectorization()`` map text to these rows; freeze_top, freeze_list, ... still count the
            vectors' words only.
        keep_first_duplicate, allow_nan, replace_bad_utf8 : how a vectors path is read (train's options)
        Bad input (a missing file, a duplicate word, an unknown option, a dimension that differs from
        ``dim``) raises EmbedtuneError naming it, the option spelt as here (``freeze_top``). What
        ``embedtune train`` notes about the rules (list words not in the vectors, a list that holds no
        word, listed new words that have a vector) is a UserWarning each; ``strict_lists=True`` makes a
        missing list word an error.
        """
        keras_args = {key: options.pop(key) for key in KERAS_ARGUMENTS if key in options}
        for key in ("input_dim", "output_dim", "weights"):
            if key in options:
                raise project.EmbedtuneError(f"'{key}' comes from the vectors; pass dim= to check the dimension")
        reading = project.Reading(keep_first_duplicate, allow_nan, replace_bad_utf8)
        with project.python_names():
            rows = project.layer_rows(vectors, options, config, corpus, reading)
        for line in project.plan_notes(rows.plan):
            warnings.warn(line, UserWarning, stacklevel=2)
        plan, matrix = rows.plan, rows.vectors.matrix
        reserved = _reserved_rows(mask_token, oov_token, oov_trainable, matrix, plan)
        words = [w for w, _, _ in reserved] + list(plan.words)
        frozen = np.concatenate([np.array([f for _, _, f in reserved], bool), plan.frozen])
        trainable = np.flatnonzero(~frozen)
        slot_of = np.full(len(words), len(trainable), np.int32)
        slot_of[trainable] = np.arange(len(trainable), dtype=np.int32)
        parts = [np.array([v for _, v, _ in reserved], np.float32).reshape(-1, matrix.shape[1]), matrix, rows.new_start]
        parts = [part for part in parts if len(part)]
        table = np.concatenate(parts) if len(parts) > 1 else matrix   # no copy of a large table when nothing is added
        hashes = row_hashes(table, np.flatnonzero(frozen))
        initial = {"table": table, "rows": table[trainable], "slot_of": slot_of,
                   "row_ids": trainable.astype(np.int32), "words": words, "hashes": hashes, "model": rows.vectors.model}
        layer = cls(len(words), table.shape[1], len(trainable), plan.n_pretrained, frozen_digest=digest(hashes),
                    source=rows.source, source_format=rows.format, mask_token=mask_token, oov_token=oov_token,
                    _initial=initial, **keras_args)
        layer.build()   # its shapes are known: the weights take the vectors now, not on a first call
        if layer.mask_zero and mask_token is None and table[0].any():
            warnings.warn(f"mask_zero=True masks id 0, which is the vectors' word {words[0]!r} (not a padding "
                          "row): pass mask_token='<pad>' to put a padding row first", UserWarning, stacklevel=2)
        return layer

    def build(self, input_shape=None):
        if self.built:
            return
        values = self._initial or {}
        v, d, t = self.input_dim, self.output_dim, self.trainable_rows

        def start(name, default="zeros"):
            return _constant(values[name]) if name in values else default

        self.table = self.add_weight(name="table", shape=(v, d), initializer=start("table"), trainable=False)
        self.rows = None
        if t:
            self.rows = self.add_weight(name="rows", shape=(t, d), initializer=start("rows"), trainable=True,
                                        regularizer=self.embeddings_regularizer,
                                        constraint=self.embeddings_constraint)
        self.slot_of = self.add_weight(name="slot_of", shape=(v,), dtype="int32", trainable=False,
                                       initializer=start("slot_of", keras.initializers.Constant(t)))
        self.row_ids = self.add_weight(name="row_ids", shape=(t,), dtype="int32", trainable=False,
                                       initializer=start("row_ids"))
        self._initial = None   # the variables hold them now
        self.built = True
        _BUILT.add(self)

    # --- the lookup ----------------------------------------------------------------------------
    def call(self, inputs, training=None, reverse=False):
        if reverse:   # KerasHub's ReversibleEmbedding's spelling of a tied output projection
            return ops.matmul(ops.cast(inputs, self.compute_dtype),
                              ops.transpose(ops.cast(self.embeddings, self.compute_dtype)))
        if training and not self._lazy_rows and self.rows is not None:
            self._note_training()
        if isinstance(inputs, tf.RaggedTensor):   # as keras.layers.Embedding: a ragged batch of vectors
            return inputs.with_flat_values(self._vectors(inputs.flat_values))
        return self._vectors(inputs)

    def _vectors(self, inputs):
        _check_not_strings(self, inputs)
        if inputs.dtype != "int32" and inputs.dtype != "int64":
            inputs = ops.cast(inputs, "int32")
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
        if self.rows is None:   # every row frozen
            return tf.reshape(tf.gather(self.table.value, flat), shape)
        slot = tf.gather(self.slot_of.value, flat)
        at = tf.reshape(tf.where(slot < self.trainable_rows), [-1])   # the batch's trainable positions
        moved = tf.gather(local_copy(self.rows), tf.gather(slot, at))
        return tf.reshape(put_rows(self.table.value, flat, tf.cast(at, tf.int32), moved), shape)

    def _check_ids(self, ids) -> None:
        if tf.size(ids) == 0:
            return
        low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
        bad = high if high >= self.input_dim else low if low < -self.input_dim else None
        if bad is not None:
            raise project.EmbedtuneError(f"{self.name}: id {bad} is past the table ({self.input_dim:,} rows: ids 0 to "
                                         f"{self.input_dim - 1}, or -1 to -{self.input_dim} from the end)")

    @property
    def embeddings(self):
        """The whole table [V, dim] as a float32 tensor (keras.layers.Embedding's name): the frozen rows
        from ``table``, the trainable ones from ``rows`` in their place. For a tied output projection
        (``logits = h @ embeddings^T``, or ``layer(h, reverse=True)``): its gradient reaches the trainable
        rows only, as a dense [T, dim] one (every row is in a softmax over the vocabulary)."""
        if self.rows is None:
            return tf.convert_to_tensor(self.table.value)
        return tf.tensor_scatter_nd_update(self.table.value, self.row_ids.value[:, None], self.rows.value)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        if keras.backend.is_float_dtype(keras.backend.standardize_dtype(inputs.dtype)):
            return mask   # reverse=True: vectors in, the time steps' mask passes on
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return (*input_shape[:-1], self.input_dim)
        return (*input_shape, self.output_dim)

    def compute_output_spec(self, inputs, training=None, reverse=False):
        if not reverse:
            _check_not_strings(self, inputs)
        return keras.KerasTensor(self.compute_output_shape(inputs.shape, reverse), dtype=self.compute_dtype,
                                 ragged=bool(getattr(inputs, "ragged", False)) and not reverse)

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
        vocabulary lacks becomes ``oov`` (a word or an id; default: the unknown-word row, where the
        layer has one), else it is an error naming it."""
        index = self._index()
        nested = bool(tokens) and not isinstance(tokens[0], str)
        flat = [t for row in tokens for t in row] if nested else list(tokens)
        if oov is None and self.oov_token is not None:
            oov = self.reserved - 1
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
        """A keras.layers.StringLookup whose ids are this layer's rows: the padding word (``mask_token``)
        is 0, an unknown word the unknown-word row (``oov_token``); a layer without one has no OOV index
        (an unknown word is then an error when it is looked up). ``kwargs``: StringLookup's others
        (``output_mode="int"`` only); the ones that would move the ids, if given, must agree with the layer."""
        return keras.layers.StringLookup(**self._lookup_arguments("string_lookup", kwargs))

    def text_vectorization(self, **kwargs):
        """A keras.layers.TextVectorization (raw strings in, split and standardised as its arguments say)
        whose ids are this layer's rows, an unknown word the unknown-word row. TextVectorization fixes
        id 0 as padding and id 1 as unknown, so the layer needs both rows (``mask_token`` and
        ``oov_token`` given to from_vectors). ``kwargs``: TextVectorization's (``output_sequence_length``,
        ``standardize``, ``split``, ``ragged``, ...)."""
        if self.mask_token is None or self.oov_token is None:
            raise project.EmbedtuneError(f"{self.name}: text_vectorization needs a padding row and an unknown-word "
                                         "row (TextVectorization's ids 0 and 1): make the layer with "
                                         "Embedding.from_vectors(..., mask_token='<pad>', oov_token='[UNK]')")
        arguments = self._lookup_arguments("text_vectorization", kwargs)
        for key in ("mask_token", "oov_token", "num_oov_indices"):   # TextVectorization's own: "" and "[UNK]", 1
            arguments.pop(key)
        return keras.layers.TextVectorization(**arguments)

    def _lookup_arguments(self, what: str, kwargs: dict) -> dict:
        """StringLookup's vocabulary and OOV arguments that make its ids this layer's rows; a
        user's argument that would shift them is an error naming it."""
        decided = {"vocabulary": self.vocabulary[self.reserved:], "mask_token": self.mask_token,
                   "oov_token": self.oov_token if self.oov_token is not None else "[UNK]",
                   "num_oov_indices": int(self.oov_token is not None)}
        for key in LOOKUP_DECIDES:
            if key not in kwargs:
                continue
            value = kwargs.pop(key)
            if key in ("num_oov_indices", "mask_token", "oov_token") and value == decided[key]:
                continue
            if key == "num_oov_indices":
                rows = "an unknown-word row" if self.oov_token is not None else "no unknown-word row"
                raise project.EmbedtuneError(
                    f"{what}(num_oov_indices={value!r}) would shift the ids off the layer's rows: the layer has {rows} "
                    "(from_vectors' oov_token), so its lookup has num_oov_indices="
                    f"{decided['num_oov_indices']}; leave it out")
            where = " or give it to from_vectors" if key in ("mask_token", "oov_token") else ""
            raise project.EmbedtuneError(f"{what}: {key} comes from the layer (its rows are the ids); leave it out{where}")
        if kwargs.get("output_mode", "int") != "int":
            raise project.EmbedtuneError(f"{what}: output_mode {kwargs['output_mode']!r} gives no ids; the layer "
                                         "takes output_mode='int'")
        return {**decided, **kwargs}

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
        r = self.reserved   # the padding and unknown-word rows are the model's, not words of the vectors
        table, n_pre = self.table.numpy()[r:], self.n_pretrained
        row_ids = self.row_ids.numpy().astype(np.int64)
        trained = self.rows.numpy() if self.rows is not None else np.zeros((0, self.output_dim), np.float32)
        kept = row_ids >= r
        words = self.vocabulary[r:]
        out = project.PatchedVectors(words, table[:n_pre], row_ids[kept] - r, trained[kept])
        fmt = project.output_format(path, to, self.source_format)
        return save_checked(out, table[:n_pre], self.frozen[r:], os.fspath(path), fmt,
                            model=self.fasttext_model)

    def warn_plain_optimizer(self) -> None:
        # Once a layer; every row frozen: no optimizer touches the layer.
        if self.rows is not None and not self._warned_plain:
            self._warned_plain = True
            warnings.warn(PLAIN_OPTIMIZER.format(name=self.name), UserWarning, stacklevel=2)

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
                      frozen_digest=self.frozen_digest, source=self.source, source_format=self.source_format,
                      mask_token=self.mask_token, oov_token=self.oov_token,
                      # as keras.layers.StringLookup's config holds its vocabulary: clone_model and
                      # from_config keep the words, not only the shapes
                      vocabulary=self._vocabulary)
        return config

    def load_own_variables(self, store):
        super().load_own_variables(store)
        self.check_frozen()   # the frozen rows as loaded against the digest of the vectors they came from

    def load_assets(self, dir_path):
        """A .keras file saved before the config held the vocabulary keeps it as an asset."""
        path = os.path.join(dir_path, "vocabulary.json") if dir_path else None
        if self._vocabulary is None and path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self._vocabulary = json.load(f)
            self._word_index = None
def _check_not_strings(layer, inputs) -> None:
    if keras.backend.standardize_dtype(inputs.dtype) == "string":
        raise project.EmbedtuneError(f"{layer.name} takes ids, and got strings: turn them into the layer's ids with "
                                     "layer.string_lookup() or layer.text_vectorization() first")


def _reserved_rows(mask_token, oov_token, oov_trainable, matrix: np.ndarray, plan) -> list[tuple]:
    """(word, starting vector, frozen) of the rows put before the vectors' words, in StringLookup's
    order: the padding row (zeros, frozen) and the unknown-word row (the vectors' mean)."""
    out = []
    for option, token, start, frozen in (("mask_token", mask_token, None, True),
                                         ("oov_token", oov_token, "mean", not oov_trainable)):
        if token is None:
            continue
        if not isinstance(token, str) or not token:
            raise project.EmbedtuneError(f"{option} must be a non-empty string, got {token!r}")
        if token in plan.index or token in (plan.new_index or {}) or any(token == w for w, _, _ in out):
            raise project.EmbedtuneError(f"{option} {token!r} is a word of the vectors (or the other token): its row "
                                         "would be two rows; pick a word they lack")
        vector = (matrix.mean(axis=0, dtype=np.float64).astype(np.float32) if start == "mean" and len(matrix)
                  else np.zeros(matrix.shape[1], np.float32))
        out.append((token, vector, frozen))
    return out
