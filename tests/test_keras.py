"""embedtune.keras.Embedding against Keras 3's own optimizers (issue 37): every way the usual recipe (a
keras.layers.Embedding whose gradient slices for frozen rows are dropped) moves "frozen" rows, reproduced,
and the layer holding them bit for bit under the same optimizer; the layer in place of
keras.layers.Embedding; saving, reloading, restoring, writing the vectors; bad input.

The recipe's setting is docs/keras.md's (the measured table in /work/shared/notes): a 50 x 4 table, rows
0-39 frozen, 20 steps of 8 random ids, loss = sum of squares of the rows gathered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")
# The layer's note that a plain Keras optimizer moves untouched trainable rows: tests that use one on
# purpose; the tests of the note record it themselves.
pytestmark = pytest.mark.filterwarnings("ignore:a Keras optimizer other than embedtune.keras.LazyRows")

from click.testing import CliRunner  # noqa: E402

from embedtune import EmbedtuneError, Vectors  # noqa: E402
from embedtune.cli.main import cli  # noqa: E402
from embedtune.keras import Embedding, FrozenRowsCallback, LazyRows, check_backend  # noqa: E402
from embedtune._tf import tf  # noqa: E402

from train_fixtures import REPO  # noqa: E402

from keras_fixtures import seeded  # noqa: E402,F401  (autouse: Keras seeded in every test)


V, DIM, FROZEN, STEPS = 50, 4, 40, 20


def table() -> Vectors:
    rng = np.random.default_rng(0)
    return Vectors([f"w{i}" for i in range(V)], rng.normal(size=(V, DIM)).astype(np.float32))


def batches(steps: int = STEPS, size: int = 8, seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, size).astype(np.int32) for _ in range(steps)]


def naive_recipe(optimizer, regularizer=None) -> np.ndarray:
    """keras.layers.Embedding with the frozen rows' slices dropped from the gradient (the usual
    StackOverflow answer); returns the table after the steps."""
    layer = keras.layers.Embedding(V, DIM, embeddings_regularizer=regularizer)
    layer.build()
    layer.embeddings.assign(table().matrix)
    for ids in batches():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(ids))) + sum(layer.losses)
        grad = tape.gradient(loss, layer.embeddings)
        keep = grad.indices >= FROZEN   # an AttributeError when the gradient is dense (a regulariser)
        grad = tf.IndexedSlices(tf.boolean_mask(grad.values, keep), tf.boolean_mask(grad.indices, keep),
                                grad.dense_shape)
        optimizer.apply_gradients([(grad, layer.embeddings)])
    optimizer.finalize_variable_values([layer.embeddings])
    return layer.embeddings.numpy()


def embedtune_layer(optimizer, regularizer=None, **options) -> Embedding:
    """The same steps through embedtune's layer: the whole gradient to the optimizer, nothing masked."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, embeddings_regularizer=regularizer, **options)
    for ids in batches():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(ids))) + sum(layer.losses)
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    optimizer.finalize_variable_values(layer.trainable_variables)
    return layer


def frozen_rows_changed(rows: np.ndarray) -> int:
    before = table().matrix[:FROZEN].view(np.uint32)
    return int((rows[:FROZEN].view(np.uint32) != before).any(axis=1).sum())


def served(layer: Embedding) -> np.ndarray:
    """Every row as the layer serves it (its lookup of every id), float32."""
    return layer.lookup(tf.range(layer.input_dim)).numpy()


KERAS_MOVES_FROZEN = {
    "AdamW": lambda: keras.optimizers.AdamW(1e-2),
    "Adam(weight_decay, global_clipnorm)": lambda: keras.optimizers.Adam(1e-2, weight_decay=0.004, global_clipnorm=10),
    "SGD(weight_decay)": lambda: keras.optimizers.SGD(1e-2, weight_decay=0.01),
    "Ftrl": lambda: keras.optimizers.Ftrl(1e-2),
    "Adam(use_ema) + finalize_variable_values": lambda: keras.optimizers.Adam(1e-2, use_ema=True),
}


@pytest.mark.parametrize("name", KERAS_MOVES_FROZEN)
def test_keras_optimizers_move_masked_frozen_rows_and_not_the_layers(name):
    assert frozen_rows_changed(naive_recipe(KERAS_MOVES_FROZEN[name]())) > 0   # the recipe fails...
    layer = embedtune_layer(KERAS_MOVES_FROZEN[name]())
    rows = served(layer)
    assert frozen_rows_changed(rows) == 0                                   # ...the layer holds, bit for bit
    assert not np.array_equal(rows[FROZEN:], table().matrix[FROZEN:])       # and its trainable rows did train
    assert layer.check_frozen() == FROZEN


def test_a_regulariser_makes_the_gradient_dense_and_the_layer_still_holds():
    with pytest.raises(AttributeError):   # the recipe reads .indices of a dense tensor
        naive_recipe(keras.optimizers.Adam(1e-2), regularizer=keras.regularizers.L2(0.1))
    layer = embedtune_layer(keras.optimizers.Adam(1e-2), regularizer=keras.regularizers.L2(0.1))
    assert frozen_rows_changed(served(layer)) == 0


def test_a_plain_keras_adam_moves_untouched_trainable_rows_and_warns_once():
    """The layer keeps frozen rows under Keras's Adam, but Adam's momentum moves trainable rows that no
    batch held: the layer says so once."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    optimizer = keras.optimizers.Adam(1e-2)
    moved_untouched = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for ids in batches():
            before = served(layer)
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(layer(ids, training=True)))
            grads = tape.gradient(loss, layer.trainable_variables)
            optimizer.apply_gradients(zip(grads, layer.trainable_variables))
            after = served(layer)
            untouched = np.setdiff1d(np.arange(FROZEN, V), ids)
            moved_untouched += int((after[untouched] != before[untouched]).any(axis=1).sum())
    assert moved_untouched > 0
    assert frozen_rows_changed(served(layer)) == 0
    assert sum("LazyRows" in str(w.message) for w in caught) == 1


def test_mixed_float16_outputs_as_kerass_layer_and_frozen_rows_hold_under_loss_scaling():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
        reference = keras.layers.Embedding(V, DIM, weights=table().matrix)
        ids = np.arange(V).reshape(5, 10)
        out = layer(ids)
        assert out.dtype == reference(ids).dtype == tf.float16 and layer.rows.dtype == "float32"
        assert np.array_equal(out.numpy(), reference(ids).numpy())
        model = keras.Sequential([keras.Input((10,), dtype="int32"), layer, keras.layers.Flatten(),
                                  keras.layers.Dense(1, dtype="float32")])
        model.compile(LazyRows(keras.optimizers.AdamW(1e-2)), "mse")   # compile wraps it: LossScaleOptimizer
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        x = np.random.default_rng(1).integers(0, V, (64, 10))
        model.fit(x, np.ones((64, 1)), epochs=2, batch_size=16, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    rows = served(layer)
    assert frozen_rows_changed(rows) == 0 and not np.array_equal(rows[FROZEN:], table().matrix[FROZEN:])


def test_it_behaves_as_keras_embedding_for_ids_masks_and_ids_past_the_table():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, mask_zero=True)
    reference = keras.layers.Embedding(V, DIM, weights=table().matrix, mask_zero=True)
    ids = np.array([[0, 3, 45, -1, -50], [49, 0, 0, 12, 41]])
    assert np.array_equal(layer(ids).numpy(), reference(ids).numpy())   # negative ids count from the end
    assert np.array_equal(layer.compute_mask(ids).numpy(), reference.compute_mask(ids).numpy())
    with pytest.raises(EmbedtuneError, match="id 50 is past the table"):
        layer(np.array([[1, 50]]))
    with pytest.raises(EmbedtuneError, match="id -51 is past the table"):
        layer(np.array([[-51]]))
    model = keras.Sequential([keras.Input((2,), dtype="int32"), layer])
    keras_model = keras.Sequential([keras.Input((2,), dtype="int32"), reference])
    for m in (model, keras_model):   # in a compiled function: TensorFlow's own error, as for Keras's layer
        with pytest.raises(tf.errors.InvalidArgumentError):
            m.predict(np.array([[1, 50]]), verbose=0)


def test_the_lookup_writes_only_its_own_gather_and_its_gradients_are_a_scatters():
    """The lookup writes the trainable rows into its own gather's output, not a copy of it: a gather of the
    same table and ids beside it in one function, and a second call, keep their own rows; the same through
    stateless_call, whose table is a tensor another gather may share; the gradients are a gather's and a
    scatter's (the table's, when watched, holds the frozen positions only)."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    layer.rows.assign(layer.rows + 1.0)
    ids = np.array([[3, 45, 45, 0], [41, 3, 49, 12]], np.int32)
    trainable = ids >= FROZEN
    expected = table().matrix[ids] + trainable[..., None]
    weights = np.arange(1, ids.size * DIM + 1, dtype=np.float32).reshape(*ids.shape, DIM)   # exact sums

    @tf.function
    def looked_up(ids):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(layer.table.value)
            first = layer(ids)
            loss = tf.reduce_sum(first * weights)
        beside = tf.gather(layer.table.value, ids)
        return first, layer(ids), beside, tape.gradient(loss, layer.rows.value), tape.gradient(loss, layer.table.value)

    first, second, beside, rows_grad, table_grad = looked_up(tf.constant(ids))
    assert np.array_equal(first.numpy(), expected) and np.array_equal(second.numpy(), expected)
    assert np.array_equal(beside.numpy(), table().matrix[ids])
    want_rows, want_table = np.zeros((V - FROZEN, DIM), np.float32), np.zeros((V, DIM), np.float32)
    for position, word in np.ndenumerate(ids):
        if word >= FROZEN:
            want_rows[word - FROZEN] += weights[position]
        else:
            want_table[word] += weights[position]
    assert np.array_equal(tf.convert_to_tensor(rows_grad).numpy(), want_rows)
    assert np.array_equal(tf.convert_to_tensor(table_grad).numpy(), want_table)

    @tf.function
    def stateless(table_value, ids):
        out, _ = layer.stateless_call([layer.rows.value], [table_value, layer.slot_of.value, layer.row_ids.value],
                                      ids)
        return out, tf.gather(table_value, ids)

    out, beside = stateless(tf.constant(table().matrix), tf.constant(ids))
    assert np.array_equal(out.numpy(), expected) and np.array_equal(beside.numpy(), table().matrix[ids])


def test_a_keras_model_saved_and_loaded_keeps_its_rows_vocabulary_and_optimizer(tmp_path):
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, mask_zero=True)
    model = keras.Sequential([keras.Input((8,), dtype="int32"), layer, keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1)])
    model.compile(LazyRows("adam", rows="adagrad", clip_norm=1.0), "mse")
    x = np.stack(batches(16))
    model.fit(x, np.ones((16, 1)), epochs=1, batch_size=4, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    again = loaded.layers[0]
    assert isinstance(again, Embedding) and again.vocabulary == layer.vocabulary and again.mask_zero
    assert np.array_equal(served(again), served(layer)) and again.check_frozen() == FROZEN
    assert [v.numpy().tobytes() for v in loaded.optimizer.variables] == \
           [v.numpy().tobytes() for v in model.optimizer.variables]
    assert loaded.optimizer.get_config() == model.optimizer.get_config()


def test_a_checkpoint_restores_rows_and_optimizer_state(tmp_path):
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    optimizer = LazyRows(keras.optimizers.SGD(0.1), rows="adam", learning_rate=1e-2)

    def step(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(ids)))
        optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)

    first, later = batches()[:5], batches()[5:10]
    for ids in first:
        step(ids)
    checkpoint = tf.train.Checkpoint(layer=layer, optimizer=optimizer)
    path = checkpoint.save(tmp_path / "ckpt")
    for ids in later:
        step(ids)
    expected = served(layer)
    checkpoint.restore(path).assert_consumed()
    for ids in later:
        step(ids)
    assert np.array_equal(served(layer), expected)   # the Adam moments came back too
    assert frozen_rows_changed(expected) == 0


def test_the_frozen_rows_callback_proves_each_epoch_and_catches_a_change():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    model = keras.Sequential([keras.Input((8,), dtype="int32"), layer, keras.layers.Flatten(), keras.layers.Dense(1)])
    model.compile(LazyRows(keras.optimizers.AdamW(1e-2), weight_decay=0.1), "mse")
    check = FrozenRowsCallback()
    x = np.stack(batches(16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # LazyRows: no warning about a plain optimizer
        model.fit(x, np.ones((16, 1)), epochs=2, batch_size=4, verbose=0, callbacks=[check])
    assert check.checked == [FROZEN] * 2
    layer.table.assign(layer.table.numpy() + np.eye(V, DIM, dtype=np.float32))   # what no optimizer can do
    with pytest.raises(EmbedtuneError, match="4 frozen rows changed"):
        model.fit(x, np.ones((16, 1)), epochs=1, batch_size=4, verbose=0, callbacks=[check])


class Wrapped(keras.layers.Layer):
    """A user's own layer holding an embedtune Embedding, out of reach of Keras's public ``model.layers``."""

    def __init__(self, inner, **kwargs):
        super().__init__(**kwargs)
        self.inner = inner

    def call(self, ids):
        return self.inner(ids)


def test_the_callback_finds_layers_at_any_depth_and_keras_variables_carry_nothing_of_ours():
    """Issue 47.7: the callback lists the model's Embedding layers through its public ``variables``, not
    Keras's private ``_flatten_layers``; LazyRows finds a rows variable's layer in embedtune's own list, no
    attribute written onto Keras's variable."""
    first = Embedding.from_vectors(table(), freeze_top=FROZEN)
    second = Embedding.from_vectors(table(), freeze_top=FROZEN - 10)
    inner = keras.Sequential([keras.Input((8,), dtype="int32"), second])
    ids = keras.Input((8,), dtype="int32")
    merged = keras.layers.Concatenate()([Wrapped(first)(ids), inner(ids)])
    model = keras.Model(ids, keras.layers.Dense(1)(keras.layers.Flatten()(merged)))
    model.compile(LazyRows(keras.optimizers.Adam(1e-2)), "mse")
    check = FrozenRowsCallback()
    x = np.stack(batches(16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # both layers stepped by LazyRows: it found each one's rows
        model.fit(x, np.ones((16, 1)), epochs=1, batch_size=4, verbose=0, callbacks=[check])
    assert check.checked == [FROZEN + FROZEN - 10]
    for layer in (first, second):
        assert [name for name in vars(layer.rows) if "embedtune" in name] == []
        assert layer.rows is not None and not np.array_equal(layer.rows.numpy(), table().matrix[layer.row_ids.numpy()])


def test_tokens_become_the_layers_ids_and_string_lookup_agrees():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    assert layer.ids(["w3", "w49"]).tolist() == [3, 49]
    assert layer.ids([["w1", "zzz"]], oov="w0").tolist() == [[1, 0]]
    with pytest.raises(EmbedtuneError, match="'zzz' .* not in the vocabulary"):
        layer.ids(["zzz"])
    lookup = layer.string_lookup()
    assert lookup(tf.constant(["w7", "w0", "w45"])).numpy().tolist() == [7, 0, 45]
    assert np.array_equal(layer.lookup(np.array([[7, 45]])).numpy(), table().matrix[[[7, 45]]])   # numpy ids too


def test_save_vectors_writes_the_table_and_diff_check_frozen_agrees(tmp_path):
    """From a file with a TOML config and a corpus for a new word's start; written back through the
    project's writers with the frozen read-back; `embedtune diff --config` agrees."""
    source = tmp_path / "in.txt"
    source.write_text("".join(f"w{i} " + " ".join(f"{x:.6f}" for x in row) + "\n"
                              for i, row in enumerate(table().matrix)), encoding="utf-8")
    (tmp_path / "new.txt").write_text("zeta\n", encoding="utf-8")
    config = tmp_path / "rows.toml"
    config.write_text(f'[vocab]\nfreeze_top = {FROZEN}\nnew_words = "{tmp_path / "new.txt"}"\n', encoding="utf-8")
    corpus = [" ".join(f"w{i}" for i in range(j, j + 6)) + " zeta" for j in range(40)]
    layer = Embedding.from_vectors(source, config=config, corpus=corpus, init="context-mean")
    assert layer.vocabulary[-1] == "zeta" and layer.input_dim == V + 1 and layer.trainable_rows == V - FROZEN + 1
    optimizer = LazyRows("sgd", rows="sgd", learning_rate=0.1)
    for ids in batches():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(np.append(ids, V))))
        optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)
    out = tmp_path / "out.txt"
    written = layer.save_vectors(out)
    assert written.checked == FROZEN and written.worst == 0.0
    lines = out.read_text(encoding="utf-8").splitlines()
    # GloVe's format, as the input's (detected: no header); the new word after the pretrained ones
    assert len(lines) == V + 1 and lines[0].startswith("w0 ") and lines[-1].startswith("zeta ")
    result = CliRunner().invoke(cli, ["-q", "diff", "--config", str(config), str(source), str(out), "--json"])
    assert result.exit_code == 0, result.output
    frozen_words = tmp_path / "frozen.txt"
    frozen_words.write_text("".join(w + "\n" for w, f in zip(layer.vocabulary, layer.frozen) if f), encoding="utf-8")
    result = CliRunner().invoke(cli, ["-q", "diff", "--check-frozen", str(frozen_words), str(source), str(out)])
    assert result.exit_code == 0, result.output
    changed = out.read_text(encoding="utf-8").replace(lines[1], "w0 " + " ".join(["0.5"] * DIM), 1)
    out.write_text(changed, encoding="utf-8")   # a frozen row changed: diff says so, as the layer's check would
    assert CliRunner().invoke(cli, ["-q", "diff", "--config", str(config), str(source), str(out)]).exit_code == 1
    assert CliRunner().invoke(cli, ["-q", "diff", "--check-frozen", str(frozen_words), str(source),
                                    str(out)]).exit_code == 1


@pytest.mark.parametrize("options, message", [
    ({"dim": 300}, "the vectors have 4 dimensions, but dim says 300"),
    ({"freeze_topp": 3}, "unknown option 'freeze_topp' .*did you mean freeze_top"),
    ({"epochs": 3}, "option 'epochs' of `embedtune train` has no use in a layer"),
    ({"output_dim": 4}, "'output_dim' comes from the vectors"),
    # named as a Python caller wrote it (issue 45: the command line's flag was named before)
    ({"freeze_top": -1}, "^freeze_top must be 0 \\(off\\) or positive, got -1"),
    ({"freeze_pattern": "a{4294967296}"}, r"^freeze_pattern 'a\{4294967296\}' is not a valid regular expression"),
    ({"new_words": "words.txt"}, "no such word-list file"),
])
def test_bad_options_are_one_error_naming_them(options, message):
    with pytest.raises(EmbedtuneError, match=message):
        Embedding.from_vectors(table(), **options)


def test_a_vectors_file_with_a_repeated_word_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "dup.txt"
    path.write_text("a 1 2\nb 3 4\na 5 6\n", encoding="utf-8")
    with pytest.raises(EmbedtuneError, match=r"dup.txt line 3: .*'a'"):
        Embedding.from_vectors(path)


def test_another_keras_backend_is_an_error_naming_tensorflow(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")   # Keras running on another backend
    with pytest.raises(EmbedtuneError, match="needs Keras's TensorFlow backend.*'jax'.*KERAS_BACKEND=tensorflow"):
        check_backend()
    # asked for before Keras is imported (neither jax nor torch need be installed): the same one line
    code = "import embedtune.keras"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KERAS_BACKEND": "torch"})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "embedtune.errors.EmbedtuneError: embedtune.keras needs Keras's TensorFlow backend, and Keras runs on "
        "'torch' here: set KERAS_BACKEND=tensorflow before Keras is imported")


def test_the_shipped_sample_loads_with_freeze_rules():
    layer = Embedding.from_vectors(REPO / "data" / "sample" / "glove.6B.50d.20k.txt", freeze_top=19000,
                                   train_pattern="^[a-z]+$")
    assert layer.input_dim == 20000 and layer.output_dim == 50
    assert 0 < layer.trainable_rows < 1000 and not layer.frozen[19500:].all()


def test_fit_with_a_plain_optimizer_warns_once_and_with_lazy_rows_not_at_all():
    x, y = np.stack(batches(8)), np.ones((8, 1))
    for optimizer, expected in ((keras.optimizers.Adam(1e-2), 1), (LazyRows(keras.optimizers.Adam(1e-2)), 0)):
        layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
        model = keras.Sequential([keras.Input((8,), dtype="int32"), layer, keras.layers.Flatten(),
                                  keras.layers.Dense(1)])
        model.compile(optimizer, "mse")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(x, y, epochs=1, batch_size=4, verbose=0, callbacks=[FrozenRowsCallback()])
            layer.check_frozen()
        assert sum("LazyRows" in str(w.message) for w in caught) == expected


def test_the_readme_example_runs(tmp_path, monkeypatch):
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Your own Keras model\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)   # it writes tuned.txt where it runs
    exec(compile(code.replace("data/sample/", f"{REPO}/data/sample/"), "README.md", "exec"), {"__name__": "__main__"})
    assert len((tmp_path / "tuned.txt").read_text(encoding="utf-8").splitlines()) == 20000
