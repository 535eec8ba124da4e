"""The acceptance set of issue 46: embedtune.keras.Embedding in nine ways a Keras user builds a model, each
small, each ending with the frozen rows bit for bit as the vectors hold them.

Where a scenario is already a test elsewhere it is not repeated here:
- ``model.fit``: tests/test_keras_rows.py ``test_model_fit_trains_the_rows_lazily_and_the_loss_falls``;
- mixed precision and loss scaling: tests/test_keras.py ``test_mixed_float16_...``;
- ``.keras`` and ``tf.train.Checkpoint``: tests/test_keras.py ``test_a_keras_model_saved_...``,
  ``test_a_checkpoint_restores_...``; ids past the table: ``test_it_behaves_as_keras_embedding_...``;
- tied weights: tests/test_keras_layer_vocab.py ``test_the_table_is_one_tensor_and_a_tied_projection_...``.
Here: a model with padding and unknown rows saved as .keras and exported (``model.export``) and served;
a GradientTape + tf.function loop; an LSTM and a Transformer block with masks; MirroredStrategy over two
logical CPU devices; Keras's gradient accumulation; one layer shared by two inputs and tied to the output
under mixed precision; bad input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

keras = pytest.importorskip("keras")
pytestmark = pytest.mark.filterwarnings("ignore:a Keras optimizer other than embedtune.keras.LazyRows")

from embedtune import EmbedtuneError, Vectors  # noqa: E402
from embedtune.keras import Embedding, FrozenRowsCallback, LazyRows  # noqa: E402
from embedtune._tf import tf  # noqa: E402

from train_fixtures import REPO  # noqa: E402

from keras_fixtures import seeded  # noqa: E402,F401  (autouse: Keras seeded in every test)

V, DIM, FROZEN, LEN = 40, 8, 25, 6


def table() -> Vectors:
    return Vectors([f"w{i}" for i in range(V)], np.random.default_rng(7).normal(size=(V, DIM)).astype(np.float32))


def make_layer(**options) -> Embedding:
    """Padding row 0, unknown-word row 1, then w0..w39: the first 25 frozen."""
    return Embedding.from_vectors(table(), freeze_top=FROZEN, mask_token="<pad>", oov_token="[UNK]",
                                  mask_zero=True, **options)


def padded_ids(n: int, seed: int = 0) -> np.ndarray:
    """[n, LEN] ids of 1 to LEN words each, padded with 0 after them."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, LEN), np.int32)
    for row in out:
        k = rng.integers(1, LEN + 1)
        row[:k] = rng.integers(1, V + 2, k)
    return out


def labels(x: np.ndarray) -> np.ndarray:
    return (x[:, 0] % 2).astype(np.float32)


def frozen_kept(layer: Embedding) -> bool:
    """Every frozen row bit for bit as it started (the padding row's zeros, the vectors' rows)."""
    rows = layer.lookup(tf.range(layer.input_dim)).numpy()
    start = np.concatenate([np.zeros((1, DIM), np.float32), rows[1:2], table().matrix])
    frozen = layer.frozen
    return bool(np.array_equal(rows[frozen].view(np.uint32), start[frozen].view(np.uint32)))


def trained(layer: Embedding, rows_before: np.ndarray) -> bool:
    rows = layer.lookup(tf.range(layer.input_dim)).numpy()
    return bool((rows[~layer.frozen] != rows_before[~layer.frozen]).any())


def pooled_classifier(layer, blocks=(), length=LEN, head=None):
    """ids -> layer -> blocks -> masked mean -> Dense; ``blocks`` and ``head`` made once and shared by every
    model made from them (so two models of different input lengths hold the same weights)."""
    ids = keras.Input((length,), dtype="int32")
    h = layer(ids)
    for block in blocks:
        h = block(h)
    head = head or keras.layers.Dense(1, activation="sigmoid")
    return keras.Model(ids, head(keras.layers.GlobalAveragePooling1D()(h)))


def test_saved_as_keras_and_exported_it_serves_the_same_and_keeps_its_tokens(tmp_path):
    layer = make_layer()
    model = pooled_classifier(layer)
    model.compile(LazyRows(keras.optimizers.Adam(1e-2)), "binary_crossentropy")
    x = padded_ids(32)
    model.fit(x, labels(x), epochs=2, batch_size=8, verbose=0, callbacks=[FrozenRowsCallback()])
    expected = model.predict(x, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    again = loaded.layers[1]
    assert again.vocabulary == layer.vocabulary and again.oov_token == "[UNK]" and again.ids(["zz"]).tolist() == [1]
    assert np.array_equal(loaded.predict(x, verbose=0), expected) and frozen_kept(again)
    model.export(tmp_path / "served", verbose=False)   # a SavedModel: what TF Serving loads
    served = tf.saved_model.load(str(tmp_path / "served"))
    assert np.allclose(served.serve(tf.constant(x)).numpy(), expected, atol=1e-6)


def test_a_gradient_tape_loop_in_a_tf_function_trains_and_keeps_the_frozen_rows():
    """keras-io's "training loop from scratch": one tf.function step, the tape over the forward pass."""
    layer = make_layer()
    model = pooled_classifier(layer)
    optimizer = LazyRows(keras.optimizers.Adam(1e-2))
    loss_fn = keras.losses.BinaryCrossentropy()
    before = layer.lookup(tf.range(layer.input_dim)).numpy()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x = padded_ids(32)
    y = labels(x)
    losses = [float(step(tf.constant(x[i:i + 8]), tf.constant(y[i:i + 8]))) for _ in range(6) for i in (0, 8, 16, 24)]
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert frozen_kept(layer) and trained(layer, before)


def test_an_lstm_and_a_transformer_block_take_the_mask_and_ignore_the_padding():
    """With mask_zero, three words padded to six give what the three words alone give: the mask reached
    the LSTM (masked steps skipped), the attention (masked keys) and the pooling."""
    class Transformer:
        def __init__(self):
            self.attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
            self.add, self.norm = keras.layers.Add(), keras.layers.LayerNormalization()

        def __call__(self, h):
            return self.norm(self.add([h, self.attention(h, h)]))

    words = np.array([[5, 9, 30]], np.int32)
    padded = np.pad(words, ((0, 0), (0, LEN - 3)))
    for block in (keras.layers.LSTM(4, return_sequences=True), Transformer()):
        layer, head = make_layer(), keras.layers.Dense(1, activation="sigmoid")
        model = pooled_classifier(layer, [block], head=head)
        model.compile(LazyRows(keras.optimizers.Adam(1e-2)), "binary_crossentropy")
        before = layer.lookup(tf.range(layer.input_dim)).numpy()
        x = padded_ids(16, seed=1)
        model.fit(x, labels(x), epochs=1, batch_size=8, verbose=0)
        assert frozen_kept(layer) and trained(layer, before)
        alone = pooled_classifier(layer, [block], length=3, head=head)(words).numpy()
        assert np.allclose(model(padded).numpy(), alone, atol=1e-5)
        as_words = np.where(padded == 0, 2, padded)   # the padding read as a word instead: it counts
        assert not np.allclose(model(as_words).numpy(), alone, atol=1e-5)


MIRRORED = textwrap.dedent("""
    import json, sys
    import numpy as np
    from embedtune._tf import tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from embedtune import Vectors
    from embedtune.keras import Embedding, FrozenRowsCallback
    keras.utils.set_random_seed(1)
    vectors = Vectors([f"w{i}" for i in range(40)], np.random.default_rng(7).normal(size=(40, 8)).astype(np.float32))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        layer = Embedding.from_vectors(vectors, freeze_top=25, mask_token="<pad>", mask_zero=True)
        model = keras.Sequential([keras.Input((6,), dtype="int32"), layer, keras.layers.GlobalAveragePooling1D(),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(keras.optimizers.Adam(1e-2), "binary_crossentropy")
    x = np.random.default_rng(0).integers(0, 41, (64, 6)).astype(np.int32)
    check = FrozenRowsCallback()
    model.fit(x, (x[:, 0] % 2).astype(np.float32), epochs=2, batch_size=16, verbose=0, callbacks=[check])
    rows = layer.lookup(tf.range(41)).numpy()
    replicas = [v.numpy() for v in strategy.experimental_local_results(layer.rows)]
    start = np.concatenate([np.zeros((1, 8), np.float32), vectors.matrix])
    json.dump({"replicas": strategy.num_replicas_in_sync, "checked": check.checked,
               "frozen_same": bool(np.array_equal(rows[:26].view(np.uint32), start[:26].view(np.uint32))),
               "trained": bool((rows[26:] != start[26:]).any()),
               "replicas_agree": all(np.array_equal(r, replicas[0]) for r in replicas)}, sys.stdout)
""")


def test_mirrored_strategy_on_two_devices_trains_and_keeps_the_frozen_rows():
    """The layer under MirroredStrategy with a Keras optimizer (LazyRows' own replica handling is
    tests/test_keras_rows.py's): built in the scope, fit, the replicas' rows equal, frozen rows kept."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", MIRRORED], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result == {"replicas": 2, "checked": [26, 26], "frozen_same": True, "trained": True,
                      "replicas_agree": True}


def test_kerass_gradient_accumulation_steps_the_rows_every_kth_batch_and_keeps_the_frozen_rows():
    layer = make_layer()
    model = pooled_classifier(layer)
    model.compile(keras.optimizers.SGD(0.5, gradient_accumulation_steps=2), "binary_crossentropy")
    x = padded_ids(8)
    seen = [layer.lookup(tf.range(layer.input_dim)).numpy()]
    for i in (0, 4):
        model.train_on_batch(x[i:i + 4], labels(x)[i:i + 4])
        seen.append(layer.lookup(tf.range(layer.input_dim)).numpy())
    assert np.array_equal(seen[1], seen[0])   # the first of two batches: accumulated, nothing moves
    assert trained(layer, seen[1]) and frozen_kept(layer)


def test_one_layer_shared_by_two_inputs_and_tied_to_the_output_under_mixed_precision():
    """A dual encoder (both sides through one layer) whose head scores every word through the same table
    (``reverse=True``), in mixed_float16: one table, gradients from all three uses, frozen rows kept."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = make_layer()
        left, right = keras.Input((LEN,), dtype="int32"), keras.Input((LEN,), dtype="int32")
        pool = keras.layers.GlobalAveragePooling1D()
        joined = keras.layers.Dense(DIM)(keras.layers.Concatenate()([pool(layer(left)), pool(layer(right))]))
        logits = keras.layers.Activation("linear", dtype="float32")(layer(joined, reverse=True))
        model = keras.Model([left, right], logits)
        assert model.output_shape == (None, V + 2) and logits.dtype == "float32"
        assert sum(isinstance(x, Embedding) for x in model.layers) == 1
        model.compile(LazyRows(keras.optimizers.Adam(1e-2)),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        before = layer.lookup(tf.range(layer.input_dim)).numpy()
        a, b = padded_ids(16, seed=2), padded_ids(16, seed=3)
        model.fit([a, b], a[:, 0], epochs=2, batch_size=8, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert frozen_kept(layer) and trained(layer, before)


def test_bad_input_is_one_clear_error():
    layer = make_layer()
    with pytest.raises(EmbedtuneError, match=r"takes ids, and got strings: .*string_lookup\(\)"):
        layer(tf.constant([["w1", "w2"]]))
    with pytest.raises(EmbedtuneError, match=r"takes ids, and got strings"):
        layer(keras.Input((2,), dtype="string"))   # caught when the model is built, not at fit
    with pytest.raises(EmbedtuneError, match=r"id 42 is past the table \(42 rows"):
        layer(np.array([[1, 42]]))
    with pytest.raises(EmbedtuneError, match=r"^mask_token must be a non-empty string, got ''"):
        Embedding.from_vectors(table(), mask_token="")
