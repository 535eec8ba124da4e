"""LazyRows takes its rule from the Keras optimizer it wraps (issue 46, items 1 and 2).

The reference is Keras itself: a plain Keras optimizer on a dense variable holding just the trainable
rows, with every row in every batch (then lazy = dense), next to an extra variable both runs share (so
that global_clipnorm, use_ema and the wrapped optimizer's own step are in it). Rows no batch holds keep
their bits; what cannot be made lazy is refused at construction; tf.distribute's replicas sum their
row gradients (2 logical CPU devices, in a child process: they must be set before TensorFlow starts).
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

from embedtune import EmbedtuneError, Vectors  # noqa: E402
from embedtune.keras import Embedding, LazyRows  # noqa: E402
from embedtune._tf import tf  # noqa: E402

from keras_fixtures import seeded  # noqa: E402,F401  (autouse: Keras seeded in every test)

V, DIM, FROZEN, STEPS = 24, 4, 12, 6
WEIGHTS = np.arange(1.0, DIM + 1.0, dtype=np.float32)
O = keras.optimizers
SCHEDULE = O.schedules.ExponentialDecay(0.05, decay_steps=2, decay_rate=0.5)


def table() -> Vectors:
    rng = np.random.default_rng(11)
    return Vectors([f"w{i}" for i in range(V)], rng.normal(size=(V, DIM)).astype(np.float32))


def batches(every_row: bool, seed: int = 5) -> list[np.ndarray]:
    """Ids with repeats and frozen ones; with ``every_row`` each batch holds every trainable id, else the
    trainable ids 20-23 are in none."""
    rng = np.random.default_rng(seed)
    high = V if every_row else 20
    out = []
    for _ in range(STEPS):
        extra = rng.integers(0, high, 8)
        out.append(np.concatenate([np.arange(FROZEN, V), extra]) if every_row else extra)
    return [b.astype(np.int32) for b in out]


def loss_of(rows, bias):
    target = tf.cast(tf.range(DIM), tf.float32) / DIM
    return tf.reduce_sum(tf.square(rows + bias - target) * WEIGHTS) + tf.reduce_sum(rows[:3] ** 3)


def lazy_run(make_optimizer, ids_list, scaled: float | None = None):
    """LazyRows(optimizer) on the layer's rows and a bias; returns (layer, bias, optimizer)."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    bias = keras.Variable(np.full(DIM, 0.1, np.float32), name="bias")
    optimizer = LazyRows(make_optimizer())
    variables = [layer.rows, bias]
    for ids in ids_list:
        with tf.GradientTape() as tape:
            loss = loss_of(layer(ids), bias)
            if scaled:
                loss = optimizer.scale_loss(loss)
        optimizer.apply(tape.gradient(loss, variables), variables)
    return layer, bias, optimizer


def dense_run(make_optimizer, ids_list, scaled: float | None = None):
    """The same steps by the plain Keras optimizer on a dense variable of the trainable rows."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    rows = keras.Variable(layer.rows.numpy(), name="rows")
    bias = keras.Variable(np.full(DIM, 0.1, np.float32), name="bias")
    slot_of, frozen = layer.slot_of.numpy(), tf.constant(table().matrix)
    optimizer = make_optimizer()
    for ids in ids_list:
        slots = tf.constant(slot_of[ids])
        trainable = (slots < layer.trainable_rows)[:, None]
        with tf.GradientTape() as tape:
            gathered = tf.where(trainable, tf.gather(rows, tf.minimum(slots, layer.trainable_rows - 1)),
                                tf.gather(frozen, ids))
            loss = loss_of(gathered, bias)
            if scaled:
                loss = optimizer.scale_loss(loss)
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, [rows, bias])]
        optimizer.apply(grads, [rows, bias])
    return rows, bias, optimizer


CASES = {
    "SGD": lambda: O.SGD(0.05),
    "SGD(momentum)": lambda: O.SGD(0.05, momentum=0.9),
    "SGD(nesterov)": lambda: O.SGD(0.05, momentum=0.8, nesterov=True),
    "Adagrad": lambda: O.Adagrad(0.1, initial_accumulator_value=0.2, epsilon=1e-5),
    "Adam": lambda: O.Adam(0.05, beta_1=0.8, beta_2=0.95, epsilon=1e-4),
    "Adam(amsgrad)": lambda: O.Adam(0.05, amsgrad=True),
    "Adam(schedule)": lambda: O.Adam(SCHEDULE),
    "AdamW": lambda: O.AdamW(0.05, weight_decay=0.3),
    "RMSprop": lambda: O.RMSprop(0.01),
    "RMSprop(momentum, centered)": lambda: O.RMSprop(0.01, rho=0.8, momentum=0.5, centered=True),
    "Adamax": lambda: O.Adamax(0.05),
    "Nadam": lambda: O.Nadam(0.05),
    "Lion": lambda: O.Lion(0.01, beta_1=0.8),
    "Adadelta": lambda: O.Adadelta(1.0, rho=0.9),
    "SGD(weight_decay)": lambda: O.SGD(0.05, weight_decay=0.5),
    "Adam(clipnorm)": lambda: O.Adam(0.05, clipnorm=0.5),
    "Adam(clipvalue)": lambda: O.Adam(0.05, clipvalue=0.3),
    "Adam(global_clipnorm)": lambda: O.Adam(0.05, global_clipnorm=1.0),
    "Adam(gradient_accumulation_steps)": lambda: O.Adam(0.05, gradient_accumulation_steps=3),
    "AdamW(use_ema)": lambda: O.AdamW(0.05, use_ema=True, ema_momentum=0.5),
    "SGD(use_ema, overwrite)": lambda: O.SGD(0.05, momentum=0.5, use_ema=True, ema_momentum=0.6,
                                             ema_overwrite_frequency=2),
    "Adam(loss_scale_factor)": lambda: O.Adam(0.05, loss_scale_factor=64.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rows_step_as_the_wrapped_keras_optimizer_steps_a_dense_variable(case):
    make = CASES[case]
    scaled = make().loss_scale_factor
    layer, bias, lazy = lazy_run(make, batches(every_row=True), scaled)
    rows, dense_bias, dense = dense_run(make, batches(every_row=True), scaled)
    if make().use_ema:
        lazy.finalize_variable_values([layer.rows, bias])
        dense.finalize_variable_values([rows, dense_bias])
    start = layer.table.numpy()[layer.row_ids.numpy()]
    assert not np.allclose(rows.numpy(), start)   # the reference moved
    np.testing.assert_allclose(layer.rows.numpy(), rows.numpy(), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(bias.numpy(), dense_bias.numpy(), rtol=2e-5, atol=2e-6)
    assert int(lazy.iterations) == int(dense.iterations)


@pytest.mark.parametrize("case", ["SGD(momentum)", "Adam", "AdamW", "RMSprop(momentum, centered)", "Nadam",
                                  "Adam(gradient_accumulation_steps)", "AdamW(use_ema)", "SGD(use_ema, overwrite)"])
def test_rows_no_batch_holds_keep_their_bits_and_do_not_decay(case):
    layer, bias, lazy = lazy_run(CASES[case], batches(every_row=False))
    if CASES[case]().use_ema:
        lazy.finalize_variable_values([layer.rows, bias])
    served, start = layer.lookup(tf.range(V)).numpy(), table().matrix
    assert np.array_equal(served[20:].view(np.uint32), start[20:].view(np.uint32))   # trainable, never held
    assert np.array_equal(served[:FROZEN].view(np.uint32), start[:FROZEN].view(np.uint32))
    assert not np.array_equal(served[FROZEN:20], start[FROZEN:20])


def test_gradient_accumulation_steps_the_rows_once_per_k_micro_batches():
    layer, bias, lazy = lazy_run(lambda: O.SGD(0.05, gradient_accumulation_steps=3), batches(True)[:2])
    start = table().matrix[FROZEN:]
    assert np.array_equal(layer.rows.numpy(), start) and np.allclose(bias.numpy(), 0.1)   # 2 of 3: nothing moved


@pytest.mark.parametrize("optimizer", [O.Ftrl(), O.Lamb(), O.Adafactor(), O.Muon()], ids=lambda o: type(o).__name__)
def test_an_optimizer_with_no_lazy_form_is_refused_naming_those_with_one(optimizer):
    with pytest.raises(EmbedtuneError, match=f"{type(optimizer).__name__} has no lazy form.*Adam, AdamW.*rows="):
        LazyRows(optimizer)
    assert LazyRows(optimizer, rows="adam").get_config()["rows_take"]["rule"] == "embedtune adam"


@pytest.mark.parametrize("arguments, message", [
    ({"optimizer": None}, "optimizer is None"),
    ({"weight_decay": float("nan")}, "weight_decay must be a finite number, got nan"),
    ({"learning_rate": -1.0}, "learning_rate must be positive, got -1.0"),
    ({"learning_rate": float("inf")}, "learning_rate must be a finite number, got inf"),
    ({"clip_norm": True}, "clip_norm must be a number, got True"),
    ({"optimizer": O.LossScaleOptimizer(O.Adam())}, r"LossScaleOptimizer\(LazyRows\(optimizer\)\)"),
    ({"optimizer": O.Adam(global_clipnorm=1.0, gradient_accumulation_steps=2)},
     "global_clipnorm with gradient_accumulation_steps"),
    ({"optimizer": "no-such-optimizer"}, "'no-such-optimizer' is not a Keras optimizer"),
])
def test_bad_arguments_are_refused_at_construction_in_one_line(arguments, message):
    arguments = {"optimizer": "adam", **arguments}
    with pytest.raises(EmbedtuneError, match=message) as raised:
        LazyRows(**arguments)
    assert "\n" not in str(raised.value)


def test_get_config_shows_what_the_rows_take_and_round_trips():
    optimizer = LazyRows(O.SGD(0.5, momentum=0.9, nesterov=True, weight_decay=0.01, clipnorm=2.0, use_ema=True))
    taken = optimizer.get_config()["rows_take"]
    assert taken["rule"] == "SGD" and taken["learning_rate"] == 0.5 and taken["momentum"] == 0.9
    assert taken["nesterov"] and taken["weight_decay"] == 0.01 and taken["clipnorm"] == 2.0 and taken["use_ema"]
    again = LazyRows.from_config(optimizer.get_config())
    assert again.get_config() == optimizer.get_config()
    scheduled = LazyRows(O.Adam(SCHEDULE), learning_rate=O.schedules.ExponentialDecay(0.1, 10, 0.9))
    assert scheduled.get_config()["rows_take"]["learning_rate"]["class_name"] == "ExponentialDecay"
    assert LazyRows.from_config(scheduled.get_config()).get_config() == scheduled.get_config()
    own = LazyRows("sgd", rows="adagrad", learning_rate=0.2, clip_norm=1.0, weight_decay=0.1, decay_to="start")
    assert LazyRows.from_config(own.get_config()).get_config() == own.get_config()


def test_a_model_with_lazy_rows_saves_and_loads_with_its_state(tmp_path):
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    model = keras.Sequential([keras.Input((5,), dtype="int32"), layer, keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1)])
    model.compile(LazyRows(O.AdamW(0.01, use_ema=True)), "mse")
    x = np.random.default_rng(2).integers(0, V, (16, 5))
    model.fit(x, np.ones((16, 1)), epochs=1, batch_size=8, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_every_row_frozen_trains_under_a_plain_adamw_with_ema():
    """The layer's rows are [0, dim]: no trainable weight (Keras's EMA of an empty matrix was a BiasAdd error)."""
    layer = Embedding.from_vectors(table(), freeze_pretrained=True)
    model = keras.Sequential([keras.Input((5,), dtype="int32"), layer, keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(1)])
    for optimizer in (O.AdamW(use_ema=True), LazyRows(O.AdamW(use_ema=True))):
        model.compile(optimizer, "mse")
        history = model.fit(np.random.default_rng(2).integers(0, V, (16, 5)), np.ones((16, 1)), epochs=2,
                            verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    assert layer.check_frozen() == V


MIRRORED = textwrap.dedent("""
    import json, sys
    import numpy as np
    from embedtune._tf import tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from embedtune import Vectors
    from embedtune.keras import Embedding, LazyRows

    rng = np.random.default_rng(11)
    vectors = Vectors([f"w{i}" for i in range(40)], rng.normal(size=(40, 4)).astype(np.float32))
    x = np.random.default_rng(2).integers(0, 40, (32, 6))
    y = np.random.default_rng(3).normal(size=(32, 1)).astype(np.float32)

    def run(strategy, optimizer):
        with strategy.scope():
            keras.utils.set_random_seed(1)
            layer = Embedding.from_vectors(vectors, freeze_top=20)
            model = keras.Sequential([keras.Input((6,), dtype="int32"), layer,
                                      keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)])
            model.compile(optimizer(), "mse")
        model.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0)
        copies = [v.numpy().tolist() for v in getattr(layer.rows.value, "values", [layer.rows.value])]
        return {"rows": layer.rows.numpy().tolist(), "copies": copies,
                "start": vectors.matrix[20:].tolist(), "frozen": layer.check_frozen()}

    out = {}
    for name, optimizer in (("adam", lambda: LazyRows(keras.optimizers.Adam(0.05))),
                            ("sgd", lambda: LazyRows(keras.optimizers.SGD(0.5, momentum=0.9, nesterov=True,
                                                                          weight_decay=0.1, use_ema=True,
                                                                          ema_momentum=0.5))),
                            ("own adam", lambda: LazyRows(keras.optimizers.SGD(0.5), rows="adam", learning_rate=0.05))):
        out[name] = [run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), optimizer),
                     run(tf.distribute.OneDeviceStrategy("/cpu:0"), optimizer)]
    out["refused"] = []
    for strategy, optimizer in ((tf.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"]),
                                 lambda: LazyRows(keras.optimizers.Adam())),
                                (tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
                                 lambda: LazyRows(keras.optimizers.Adam(gradient_accumulation_steps=2)))):
        try:
            run(strategy, optimizer)
            out["refused"].append(None)
        except Exception as e:
            out["refused"].append(str(e))
    print(json.dumps(out))
""")


def test_mirrored_strategy_sums_the_replicas_row_gradients_as_one_device():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", MIRRORED], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("adam", "sgd", "own adam"):
        mirrored, one = out[name]
        rows, start = np.array(mirrored["rows"]), np.array(mirrored["start"])
        assert len(mirrored["copies"]) == 2 and mirrored["copies"][0] == mirrored["copies"][1]   # replicas agree
        moved = np.abs(np.array(one["rows"]) - start).max()
        assert moved > 0.05
        # the whole batch's gradient, its halves summed: float32 rounding (1.5e-8 seen), far below the moves.
        # (Keras's clipnorm is not in it: Keras clips each replica's Dense gradient before the sum.)
        np.testing.assert_allclose(rows, one["rows"], rtol=1e-5, atol=1e-6)
        assert mirrored["frozen"] == one["frozen"] == 20
    assert "LazyRows cannot step rows under CentralStorageStrategy" in out["refused"][0]
    assert "gradient_accumulation_steps under a strategy with replicas" in out["refused"][1]


def test_with_rows_given_the_wrapped_optimizers_decay_still_reaches_the_rows_held():
    """rows="sgd" (embedtune's own rule) and SGD(weight_decay=0.5): with a zero loss a step is the decay
    alone, lr * decay on the rows the batch holds, none on the others."""
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    optimizer = LazyRows(O.SGD(0.1, weight_decay=0.5), rows="sgd", learning_rate=0.1)
    ids = np.array([13, 15, 15, 2])
    with tf.GradientTape() as tape:
        loss = 0.0 * tf.reduce_sum(layer(ids))
    optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)
    after, start = layer.lookup(tf.range(V)).numpy(), table().matrix
    w = start[[13, 15]]
    assert np.array_equal(after[[13, 15]], w - w * (np.float32(0.1) * np.float32(0.5)))
    others = np.setdiff1d(np.arange(V), [13, 15])
    assert np.array_equal(after[others].view(np.uint32), start[others].view(np.uint32))
