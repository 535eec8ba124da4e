"""embedtune.keras.LazyRows: the project's own sparse step on a Keras model's rows (issue 37).

Against embedtune's step written out from training/optimizers.py (merge_rows, cap_rows, the lazy
optimizer's apply) on the same batches: the same bits. Rows no batch holds keep their bits; decay
touches only the batch's rows; every other variable is stepped by the user's optimizer as it would be
alone; model.fit, a tf.function loop and bad arguments.
"""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")
# The layer's note that a plain Keras optimizer moves untouched trainable rows: tests that use one on
# purpose; the tests of the note record it themselves.
pytestmark = pytest.mark.filterwarnings("ignore:a Keras optimizer other than embedtune.keras.LazyRows")

from embedtune import EmbedtuneError, Vectors  # noqa: E402
from embedtune.keras import Embedding, LazyRows  # noqa: E402
from embedtune.training.optimizers import OPTIMIZERS, cap_rows, merge_rows  # noqa: E402
from embedtune._tf import tf  # noqa: E402

from keras_fixtures import seeded  # noqa: E402,F401  (autouse: Keras seeded in every test)


V, DIM, FROZEN = 60, 5, 30
TARGET = np.linspace(-1, 1, DIM, dtype=np.float32)


def table() -> Vectors:
    rng = np.random.default_rng(11)
    return Vectors([f"w{i}" for i in range(V)], rng.normal(size=(V, DIM)).astype(np.float32))


def batches(steps: int = 12, size: int = 10, seed: int = 5) -> list[np.ndarray]:
    """Ids with repeats, frozen and trainable ones mixed; trainable ids 50-59 never appear."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 50, size).astype(np.int32) for _ in range(steps)]


def loss_of(rows):
    return tf.reduce_sum(tf.square(rows - TARGET) * tf.range(1.0, DIM + 1.0))


def lazy_rows_run(rows: str, clip_norm: float = 0.0, lr: float = 0.05, **options) -> Embedding:
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    optimizer = LazyRows("sgd", rows=rows, learning_rate=lr, clip_norm=clip_norm, **options)
    for ids in batches():
        with tf.GradientTape() as tape:
            loss = loss_of(layer(ids))
        optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)
    return layer


def project_step_run(rows: str, clip_norm: float = 0.0, lr: float = 0.05) -> np.ndarray:
    """embedtune train's step (training/step.py's _step) on a plain variable of the same trainable rows and
    its sink: gradient by gathered row, slices on local ids, merged, capped, the lazy optimizer's apply."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    slot_of, sink = layer.slot_of.numpy(), layer.trainable_rows
    variable = tf.Variable(np.concatenate([layer.rows.numpy(), np.zeros((1, DIM), np.float32)]))   # + the sink
    optimizer = OPTIMIZERS[rows](variable)
    frozen = tf.constant(table().matrix)
    for ids in batches():
        slots = tf.constant(slot_of[ids])
        gathered = tf.where((slots < sink)[:, None], tf.gather(variable, slots), tf.gather(frozen, ids))
        with tf.GradientTape() as tape:
            tape.watch(gathered)
            loss = loss_of(gathered)
        grads = tape.gradient(loss, gathered) * tf.cast(slots < sink, tf.float32)[:, None]
        merged_rows, merged = merge_rows(tf.IndexedSlices(grads, slots), sink=sink)
        optimizer.apply(merged_rows, cap_rows(merged, clip_norm), tf.constant(lr, tf.float32))
    return variable.numpy()


@pytest.mark.parametrize("rows", ["sgd", "adagrad", "adam"])
@pytest.mark.parametrize("clip_norm", [0.0, 0.5])
def test_lazy_rows_is_the_projects_own_step_bit_for_bit(rows, clip_norm):
    layer = lazy_rows_run(rows, clip_norm)
    expected = project_step_run(rows, clip_norm)
    trained = layer.rows.numpy()
    assert np.array_equal(trained.view(np.uint32), expected[:-1].view(np.uint32))
    assert not np.array_equal(trained, layer.table.numpy()[layer.row_ids.numpy()])


@pytest.mark.parametrize("rows", ["sgd", "adagrad", "adam"])
def test_rows_no_batch_holds_keep_their_bits_even_with_decay(rows):
    layer = lazy_rows_run(rows, weight_decay=0.5)
    served = layer.lookup(tf.range(V)).numpy()
    start = table().matrix
    assert np.array_equal(served[50:].view(np.uint32), start[50:].view(np.uint32))   # trainable, never in a batch
    assert np.array_equal(served[:FROZEN].view(np.uint32), start[:FROZEN].view(np.uint32))
    held = np.unique(np.concatenate(batches()))
    assert (served[held[held >= FROZEN]] != start[held[held >= FROZEN]]).any(axis=1).all()


@pytest.mark.parametrize("decay_to", ["zero", "start"])
def test_decay_moves_only_the_batchs_rows_toward_zero_or_their_start(decay_to):
    """With a zero loss, a step is the decay alone: w - (w - target) * lr * decay for the rows held."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    with tf.GradientTape() as tape:   # move the rows off their start first, so that "start" is not a no-op
        loss = loss_of(layer(np.arange(FROZEN, V)))
    LazyRows("sgd", rows="sgd", learning_rate=0.1).apply(tape.gradient(loss, layer.trainable_variables),
                                                         layer.trainable_variables)
    before = layer.lookup(tf.range(V)).numpy()
    optimizer = LazyRows("sgd", rows="sgd", learning_rate=0.1, weight_decay=0.5, decay_to=decay_to)
    ids = np.array([31, 33, 33, 2])
    with tf.GradientTape() as tape:
        loss = 0.0 * tf.reduce_sum(layer(ids))
    optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)
    after = layer.lookup(tf.range(V)).numpy()
    target = table().matrix[[31, 33]] if decay_to == "start" else np.float32(0.0)
    w = before[[31, 33]]
    expected = w - (w - target) * (np.float32(0.1) * np.float32(0.5))   # float32 throughout, as the step
    assert np.array_equal(after[[31, 33]].view(np.uint32), expected.view(np.uint32))
    assert not np.array_equal(after[[31, 33]], w)
    others = np.setdiff1d(np.arange(V), [31, 33])
    assert np.array_equal(after[others].view(np.uint32), before[others].view(np.uint32))


def _classifier(layer, seed=1):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((10,), dtype="int32"), layer, keras.layers.GlobalAveragePooling1D(),
                             keras.layers.Dense(3, activation="softmax")])


def test_every_other_variable_gets_the_users_optimizer_as_it_would_alone():
    """With every row frozen, the rows see no step, and the classifier's Dense layer must end as plain
    Keras Adam leaves it, bit for bit."""
    x = np.random.default_rng(2).integers(0, V, (48, 10))
    y = np.random.default_rng(3).integers(0, 3, 48)
    weights = []
    for optimizer in (keras.optimizers.Adam(1e-2), LazyRows(keras.optimizers.Adam(1e-2))):
        model = _classifier(Embedding.from_vectors(table(), freeze_pretrained=True))
        model.compile(optimizer, "sparse_categorical_crossentropy")
        model.fit(x, y, epochs=2, batch_size=12, shuffle=False, verbose=0)
        weights.append([w.numpy() for w in model.layers[-1].weights])
    assert all(np.array_equal(a, b) for a, b in zip(*weights))


def test_model_fit_trains_the_rows_lazily_and_the_loss_falls():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    model = _classifier(layer)
    model.compile(LazyRows(keras.optimizers.Adam(1e-2), learning_rate=0.05, clip_norm=5.0),
                  "sparse_categorical_crossentropy")
    x = np.random.default_rng(2).integers(0, 50, (96, 10))   # ids 50-59 never appear
    y = (x[:, 0] % 3).astype(np.int64)
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    served, start = layer.lookup(tf.range(V)).numpy(), table().matrix
    assert np.array_equal(served[50:], start[50:]) and np.array_equal(served[:FROZEN], start[:FROZEN])
    assert not np.array_equal(served[FROZEN:50], start[FROZEN:50])


def test_a_tf_function_loop_with_a_regulariser_steps_every_trainable_row():
    """A regulariser's gradient is dense: every trainable row is in it, so every one steps; frozen rows
    stay."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, embeddings_regularizer=keras.regularizers.L2(0.01))
    optimizer = LazyRows("sgd", rows="adagrad")
    optimizer.build(layer.trainable_variables)

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            loss = loss_of(layer(ids)) + tf.add_n(layer.losses)
        optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)

    for ids in batches(4):
        step(tf.constant(ids))
    served, start = layer.lookup(tf.range(V)).numpy(), table().matrix
    assert (served[FROZEN:] != start[FROZEN:]).any(axis=1).all()
    assert np.array_equal(served[:FROZEN], start[:FROZEN])


@pytest.mark.parametrize("arguments, message", [
    ({"rows": "rmsprop"}, "rows 'rmsprop' is not one of sgd, adagrad, adam"),
    ({"decay_to": "mean"}, "decay_to 'mean' is not one of zero, start"),
    ({"clip_norm": -1}, "clip_norm must be 0 or positive, got -1"),
    ({"use_ema": True}, "LazyRows takes no use_ema"),
])
def test_bad_arguments_are_one_error_naming_them(arguments, message):
    with pytest.raises(EmbedtuneError, match=message):
        LazyRows("adam", **arguments)
