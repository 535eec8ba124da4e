"""The lazy optimizers: sparse, capped updates of a table of rows. Their constants are
embedtune/optimizer_constants.py's, which the compiled steps (embedtune/kernels/) read too.

The gradient of a table arrives as a ``tf.IndexedSlices`` touching only the rows a
batch gathered. ``apply`` merges repeated ids (so each row gets one update, the same
whatever the order: ``scatter_sub`` with duplicate ids is not deterministic), caps each
merged row's L2 norm, and updates only those rows, together with only those rows of
the optimizer state. Nothing here reads or writes a whole table, so a step costs the
same at 10k rows as at 1M.

Why not Keras optimizers: Keras 3 Adam, Adagrad, RMSprop and momentum SGD update their
state densely (a step's cost grows with the vocabulary: benchmarks/README.md, train_speed) and move rows
that got no gradient; their results also differ when a row repeats in a batch unless
repeats are merged first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedtune._tf import lazy as tf
# Keras's defaults, shared with the compiled steps (embedtune/kernels/) through a leaf module
from embedtune.optimizer_constants import ADAGRAD_INITIAL_ACCUMULATOR, ADAM_BETA_1, ADAM_BETA_2, EPSILON


def merge_rows(grad: tf.IndexedSlices, sink: int | None = None, counts: bool = False,
               distinct: bool = False) -> tuple[tf.Tensor, ...]:
    """Sum the slices of each row. Returns (unique row ids [u], merged values [u, dim]), and with
    ``counts`` also the number of slices merged into each row ([u] float32).

    grad : slices with indices [n] and values [n, dim]
    sink : slices pointing at this row id (or beyond) are dropped first: the trainer
        routes frozen rows and padding there.
    distinct : the indices below ``sink`` are known to be distinct (an objective whose batches
        are already merged: classify), so only the sink's slices are dropped; tf.unique and the
        sum were half of classify's step (benchmarks/README.md, classify)
    """
    indices, values = grad.indices, grad.values
    if sink is not None:
        keep = indices < sink
        indices, values = tf.boolean_mask(indices, keep), tf.boolean_mask(values, keep)
    if distinct:
        return (indices, values, tf.ones_like(indices, dtype=tf.float32)) if counts else (indices, values)
    rows, segment = tf.unique(indices)
    merged = tf.math.unsorted_segment_sum(values, segment, num_segments=tf.size(rows))
    if counts:
        ones = tf.ones_like(segment, dtype=tf.float32)
        return rows, merged, tf.math.unsorted_segment_sum(ones, segment, num_segments=tf.size(rows))
    return rows, merged


def cap_rows(values: tf.Tensor, clip_norm: float) -> tf.Tensor:
    """Scale each row down to L2 norm <= clip_norm; rows already within are left bit-identical."""
    if not clip_norm:
        return values
    norms = tf.norm(values, axis=1, keepdims=True)
    return tf.where(norms > clip_norm, values * (clip_norm / norms), values)


class LazyOptimizer:
    """Base of the sparse optimizers: state only for the rows a batch touches.

    state : the variables ``variables()`` returns, by name, made by the caller from ``initial_state``
        (embedtune.keras.LazyRows: a Keras optimizer's own variables, which it saves); None: made here.
    """

    name = ""

    def __init__(self, table: tf.Variable, state: dict | None = None):
        self.table = table

    def variables(self) -> dict[str, tf.Variable]:
        """State to checkpoint, by name."""
        return {}

    @staticmethod
    def initial_state(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """In numpy, the values ``variables()`` start from for a float32 table of ``shape``, by the same
        names in the same order: a compiled step's own state, made without TensorFlow."""
        return {}

    def apply(self, rows: tf.Tensor, grads: tf.Tensor, lr: tf.Tensor) -> tf.Tensor:
        """Update ``rows`` by their merged ``grads``. Returns the step size each value of the rows
        just took (broadcastable to [u, dim]): lr for sgd, lr / (sqrt(accumulator) + eps) for
        adagrad, the bias-corrected lr / (sqrt(v) + eps) for adam. A regulariser applied as a
        proximal step after the update uses it, so that it weighs the same as the loss did."""
        raise NotImplementedError


class SGD(LazyOptimizer):
    name = "sgd"

    def apply(self, rows, grads, lr):
        self.table.scatter_sub(tf.IndexedSlices(lr * grads, rows))
        return lr


class Adagrad(LazyOptimizer):
    name = "adagrad"

    def __init__(self, table, initial_accumulator=ADAGRAD_INITIAL_ACCUMULATOR, epsilon=EPSILON, state=None):
        super().__init__(table)
        self.epsilon = epsilon
        self.accumulator = state["accumulator"] if state else tf.Variable(
            tf.fill(tf.shape(table), tf.constant(initial_accumulator, table.dtype)), trainable=False,
            name=f"{table.name.split(':')[0]}_adagrad")

    def variables(self):
        return {"accumulator": self.accumulator}

    @staticmethod
    def initial_state(shape):
        return {"accumulator": np.full(shape, np.float32(ADAGRAD_INITIAL_ACCUMULATOR), np.float32)}

    def apply(self, rows, grads, lr):
        acc = tf.gather(self.accumulator, rows) + tf.square(grads)
        self.accumulator.scatter_update(tf.IndexedSlices(acc, rows))
        step = lr / (tf.sqrt(acc) + self.epsilon)
        self.table.scatter_sub(tf.IndexedSlices(step * grads, rows))
        return step


class Adam(LazyOptimizer):
    """Lazy Adam: moments and update only for the batch's rows; bias correction by global step."""

    name = "adam"

    def __init__(self, table, beta_1=ADAM_BETA_1, beta_2=ADAM_BETA_2, epsilon=EPSILON, state=None):
        super().__init__(table)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        if state:
            self.m, self.v, self.iterations = state["m"], state["v"], state["iterations"]
            return
        base = table.name.split(":")[0]
        self.m = tf.Variable(tf.zeros_like(table), trainable=False, name=f"{base}_adam_m")
        self.v = tf.Variable(tf.zeros_like(table), trainable=False, name=f"{base}_adam_v")
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name=f"{base}_adam_t")

    def variables(self):
        return {"m": self.m, "v": self.v, "iterations": self.iterations}

    @staticmethod
    def initial_state(shape):
        return {"m": np.zeros(shape, np.float32), "v": np.zeros(shape, np.float32),
                "iterations": np.zeros((), np.int64)}

    def apply(self, rows, grads, lr):
        t = tf.cast(self.iterations.assign_add(1), grads.dtype)
        m = self.beta_1 * tf.gather(self.m, rows) + (1 - self.beta_1) * grads
        v = self.beta_2 * tf.gather(self.v, rows) + (1 - self.beta_2) * tf.square(grads)
        self.m.scatter_update(tf.IndexedSlices(m, rows))
        self.v.scatter_update(tf.IndexedSlices(v, rows))
        step = lr * tf.sqrt(1 - self.beta_2**t) / (1 - self.beta_1**t) / (tf.sqrt(v) + self.epsilon)
        self.table.scatter_sub(tf.IndexedSlices(step * m, rows))
        return step


OPTIMIZERS = {cls.name: cls for cls in (SGD, Adagrad, Adam)}


def make_optimizer(name: str, table: tf.Variable, state: dict | None = None) -> LazyOptimizer:
    return OPTIMIZERS[name](table, state=state)


@dataclass
class Update:
    """How the trainer updates its two tables, for an objective's compiled step (Objective.compiled_step)."""

    optimizer: str
    clip_norm: float
    shapes: dict[str, tuple[int, ...]]   # "word", "side": the tables' shapes

    def state(self, table: str) -> dict[str, np.ndarray]:
        """``table``'s optimizer state as it starts, in numpy, by its variables' names: the compiled step's
        own, the values TensorFlow's variables start from (``initial_state``), so that a run without
        checkpoints or TensorBoard never makes them (nor imports TensorFlow)."""
        return OPTIMIZERS[self.optimizer].initial_state(self.shapes[table])
