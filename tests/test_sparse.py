"""Sparse updates: merge repeated ids, cap each merged row, lazy optimizers that touch only the batch's rows."""

from __future__ import annotations

import numpy as np
import pytest

from embedtune._tf import tf
from embedtune.training.optimizers import SGD, Adagrad, Adam, cap_rows, merge_rows

from train_fixtures import bits

OPTIMIZERS = [SGD, Adagrad, Adam]


def slices(ids, values) -> tf.IndexedSlices:
    values = np.asarray(values, np.float32)
    return tf.IndexedSlices(tf.constant(values), tf.constant(ids, tf.int32), tf.constant([100, values.shape[1]]))


def merged_reference(ids, values) -> dict[int, np.ndarray]:
    """{row: sum of its slices}, by numpy."""
    out = {}
    for i, v in zip(ids, np.asarray(values, np.float64)):
        out[int(i)] = out.get(int(i), 0) + v
    return out


def as_dict(rows, values) -> dict[int, np.ndarray]:
    return {int(r): v for r, v in zip(rows.numpy(), values.numpy())}


def state_of(opt) -> dict[str, np.ndarray]:
    """The optimizer's per-row state and the table, as numpy (scalars such as Adam's step left out)."""
    out = {"table": opt.table.numpy()}
    for name, var in opt.variables().items():
        if var.shape.rank == 2:
            out[name] = var.numpy()
    return out


# ---------------------------------------------------------------------------------------------
# merge_rows


def test_merge_rows_sums_repeated_ids_like_numpy():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 12, size=200)
    values = rng.integers(-8, 9, size=(200, 5))  # small integers: every sum is exact in float32
    rows, merged = merge_rows(slices(ids, values))
    assert sorted(rows.numpy().tolist()) == sorted(set(ids.tolist()))
    got, want = as_dict(rows, merged), merged_reference(ids, values)
    for row in want:
        np.testing.assert_array_equal(got[row], want[row])


def test_merge_rows_drops_the_slices_of_the_sink_and_beyond_before_merging():
    ids = [3, 12, 3, 9, 7, 10]
    values = np.arange(18, dtype=np.float32).reshape(6, 3)
    rows, merged = merge_rows(slices(ids, values), sink=10)
    want = merged_reference([3, 3, 9, 7], values[[0, 2, 3, 4]])
    got = as_dict(rows, merged)
    assert got.keys() == want.keys()
    for row in want:
        np.testing.assert_array_equal(got[row], want[row])


def test_merge_rows_of_nothing_kept_is_empty():
    rows, merged = merge_rows(slices([5, 6], np.ones((2, 4))), sink=5)
    assert rows.shape == (0,) and merged.shape == (0, 4)


# ---------------------------------------------------------------------------------------------
# cap_rows, and why merging comes first


def test_cap_rows_scales_each_row_down_to_the_cap_like_numpy():
    rng = np.random.default_rng(1)
    values = (rng.standard_normal((300, 6)) * rng.uniform(0.02, 0.6, size=(300, 1))).astype(np.float32)
    capped = cap_rows(tf.constant(values), 0.75).numpy()
    norms = np.linalg.norm(values.astype(np.float64), axis=1, keepdims=True)
    want = values * np.minimum(1.0, 0.75 / norms)
    np.testing.assert_allclose(capped, want, rtol=2e-6)
    assert np.linalg.norm(capped.astype(np.float64), axis=1).max() <= 0.75 * (1 + 1e-6)
    assert (norms > 0.75).sum() > 50 and (norms < 0.75).sum() > 50  # both kinds of row were tried


@pytest.mark.parametrize("clip_norm", [1.0, 0.3])
def test_cap_rows_leaves_rows_within_the_cap_untouched(clip_norm):
    values = np.random.default_rng(2).standard_normal((500, 8)).astype(np.float32) * 0.02
    assert np.linalg.norm(values, axis=1).max() < clip_norm
    np.testing.assert_array_equal(bits(cap_rows(tf.constant(values), clip_norm).numpy()), bits(values))


def test_a_cap_of_zero_means_no_cap():
    values = np.full((3, 4), 100.0, np.float32)
    np.testing.assert_array_equal(cap_rows(tf.constant(values), 0.0).numpy(), values)


def test_a_row_repeated_in_a_batch_is_capped_once_as_a_whole():
    # Row 5 occurs twice with norm 0.8 each (sum 1.6); row 2 once with norm 2.
    ids = [5, 2, 5]
    values = np.array([[0.8, 0, 0], [0, 2.0, 0], [0.8, 0, 0]], np.float32)
    rows, merged = merge_rows(slices(ids, values))
    got = as_dict(rows, cap_rows(merged, 1.0))
    np.testing.assert_allclose(got[5], [1.0, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(got[2], [0, 1.0, 0], rtol=1e-6)
    # Capping the unmerged slices caps each occurrence: row 5 would still get 1.6.
    per_occurrence = tf.clip_by_norm(tf.constant(values), 1.0, axes=[1])
    rows_u, merged_u = merge_rows(tf.IndexedSlices(per_occurrence, tf.constant(ids)))
    np.testing.assert_allclose(as_dict(rows_u, merged_u)[5], [1.6, 0, 0], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# lazy optimizers


def fresh(opt_class, n=10, dim=4, seed=3):
    table = tf.Variable(np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32))
    return opt_class(table)


def apply_slices(opt, ids, values, lr=0.1):
    rows, merged = merge_rows(slices(ids, values))
    opt.apply(rows, merged, tf.constant(lr, tf.float32))


@pytest.mark.parametrize("opt_class", OPTIMIZERS)
def test_rows_absent_from_the_batch_keep_their_values_and_their_state(opt_class):
    opt = fresh(opt_class)
    rng = np.random.default_rng(4)
    apply_slices(opt, [2, 5], rng.standard_normal((2, 4)))
    before = state_of(opt)
    apply_slices(opt, [5, 7, 5], rng.standard_normal((3, 4)))  # row 2 now absent, row 7 new
    after = state_of(opt)
    untouched = [r for r in range(10) if r not in (5, 7)]
    for name in before:
        np.testing.assert_array_equal(bits(after[name][untouched]), bits(before[name][untouched]), err_msg=name)
        assert not np.array_equal(after[name][[5, 7]], before[name][[5, 7]]), f"{name}: batch rows did not move"


@pytest.mark.parametrize("opt_class", OPTIMIZERS)
def test_the_order_of_repeated_ids_does_not_change_the_result(opt_class):
    ids = np.array([3, 1, 3, 8, 1, 0])
    values = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    order = np.array([4, 2, 5, 0, 3, 1])
    a, b = fresh(opt_class), fresh(opt_class)
    for _ in range(3):
        apply_slices(a, ids, values)
        apply_slices(b, ids[order], values[order])
    for name, value in state_of(a).items():
        np.testing.assert_array_equal(bits(value), bits(state_of(b)[name]), err_msg=name)


def keras_optimizer(name, lr):
    import keras

    if name == "adam":
        return keras.optimizers.Adam(learning_rate=lr, epsilon=1e-7)
    if name == "adagrad":
        return keras.optimizers.Adagrad(learning_rate=lr, initial_accumulator_value=0.1, epsilon=1e-7)
    return keras.optimizers.SGD(learning_rate=lr)


@pytest.mark.parametrize("opt_class", OPTIMIZERS)
def test_with_every_row_in_every_batch_the_lazy_optimizer_equals_keras_dense_one(opt_class):
    rng = np.random.default_rng(6)
    start = rng.standard_normal((6, 4)).astype(np.float32)
    ours = opt_class(tf.Variable(start))
    dense = tf.Variable(start)
    reference = keras_optimizer(opt_class.name, 0.05)
    for _ in range(4):
        ids = np.concatenate([rng.permutation(6), rng.integers(0, 6, 4)])  # every row, some twice
        values = rng.standard_normal((10, 4)).astype(np.float32)
        apply_slices(ours, ids, values, lr=0.05)
        grad = np.zeros((6, 4), np.float32)
        np.add.at(grad, ids, values)
        reference.apply_gradients([(tf.constant(grad), dense)])
    np.testing.assert_allclose(ours.table.numpy(), dense.numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_adam_corrects_bias_by_the_global_step_like_this_numpy_reference():
    b1, b2, eps, lr = 0.9, 0.999, 1e-7, 0.01
    rng = np.random.default_rng(7)
    start = rng.standard_normal((5, 3))
    opt = Adam(tf.Variable(start.astype(np.float32)))
    table, m, v = start.copy(), np.zeros((5, 3)), np.zeros((5, 3))
    for t, ids in enumerate([[0, 1], [1, 2], [4], [0, 4, 4]], start=1):
        values = rng.standard_normal((len(ids), 3))
        apply_slices(opt, ids, values, lr=lr)
        rows, grads = np.unique(ids), np.zeros((len(np.unique(ids)), 3))
        np.add.at(grads, np.searchsorted(rows, ids), values)
        m[rows] = b1 * m[rows] + (1 - b1) * grads
        v[rows] = b2 * v[rows] + (1 - b2) * grads**2
        table[rows] -= lr * np.sqrt(1 - b2**t) / (1 - b1**t) * m[rows] / (np.sqrt(v[rows]) + eps)
    np.testing.assert_allclose(opt.table.numpy(), table, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(opt.m.numpy(), m, rtol=1e-5, atol=1e-7)
    assert int(opt.iterations.numpy()) == 4
