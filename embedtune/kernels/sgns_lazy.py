"""sgns's compiled (numba) step with a lazy optimizer (adam, adagrad) or the per-row cap: TensorFlow's step's
arithmetic (training/step.py ``TensorFlowStep._step``, training/optimizers.py), so that such a run neither
imports TensorFlow nor holds its working set (issue 48: the 1M x 300 Adam job). Plain sgd without a cap
takes kernels/sgns.py's kernels instead.

One step is TensorFlow's on one batch. Every pair's gradients are taken from the tables as they were at the
batch's start (the center against its context and negatives, as ``sgns_per_pair``). Then each table's slices
are merged by row, each row's in the order of TensorFlow's slices (per-pair negatives: a pair's context, then
its negatives, pair by pair; shared negatives: the B contexts, then each group's negatives, a negative's
slice the sum over its group's pairs): frozen centers and padding give no word slice, padding pairs no
context slice (and, per pair, no negative slices), as TensorFlow routes them to the sinks it drops. Each
distinct row is then capped and updated once by the optimizer with its state (``common._update``: adam's
moments with the bias correction by each table's own step count, adagrad's accumulator), a row the batch
touched even where its merged gradient is zero, as TensorFlow's lazy optimizers do. Rows no batch touched
keep their bits and their state; frozen rows are never written and have no state (the word table and its
state hold the trainable rows only).

The bits do not depend on the thread count: the pairs' gradients are a pair per iteration, each row's merge
runs in slice order, each row is written by one thread. --deterministic runs take the strict twin (no
fastmath: the same bits on every x86-64 CPU, common.FASTMATH).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, set_num_threads

# Inlines common._update, revision 2 (common.py: numba's cache).
from embedtune.kernels.common import (ADAM, FASTMATH, KERNEL_OPTIMIZERS, PARALLEL, SGD, _sum_in_order, _update,
                                      adam_rate, frozen_source, kernel_threads, strict)
from embedtune.kernels.sgns import _copy_center, _score


@njit(inline="always")
def _pair_gradients(b, words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight, group,
                    centers_now, word_grads, coefs, losses):
    """Pair ``b``'s loss into ``losses[b]``, its center's row as it is into ``centers_now[b]``, its center's
    gradient into ``word_grads[b]`` and each of its 1 + K side rows' coefficient (d loss / d logit, weighted)
    into ``coefs[b]``: that row's gradient is the coefficient times the center. Padding: coefficients 0."""
    wt = weight[b]
    losses[b] = 0.0
    if not wt > 0:
        for k in range(coefs.shape[1]):
            coefs[b, k] = 0
        return
    w = centers_now[b]
    _copy_center(words, frozen, frozen_rows, n_trainable, centers[b], w)
    g = word_grads[b]
    for j in range(len(g)):
        g[j] = 0
    product, extra = 1.0, 0.0   # the loss: common._add_loss
    for k in range(coefs.shape[1]):
        r = contexts[b] if k == 0 else negatives[b // group, k - 1]
        coefs[b, k], product, extra = _score(w, side[r], g, k, wt, product, extra)
    losses[b] = wt * (math.log(product) + extra)


@njit(inline="always")
def _side_slice(s, size, k1, shared):
    """(pair, k, group) of side slice ``s``: per pair, pair s // (1 + K)'s k-th row (0: its context); shared,
    the B contexts (k 0), then group q's negative k - 1 (pair -1)."""
    if not shared:
        return s // k1, s % k1, 0
    if s < size:
        return s, 0, 0
    q, k = divmod(s - size, k1 - 1)
    return -1, k + 1, q


@njit(nogil=True)
def _by_row(keys, slot):
    """Slices grouped by row: keys [n], each slice's row (-1: none) -> (the distinct rows [u] in the order
    first seen, starts [u + 1], order: slice numbers, row by row, each row's in slice order). ``slot``
    [table rows] int32, -1 everywhere, is scratch: left -1. Called, not inlined: integers only, so one compile
    a process serves both tables and both twins."""
    n = len(keys)
    rows = np.empty(n, np.int64)
    starts = np.empty(n + 1, np.int64)
    for s in range(n + 1):
        starts[s] = 0
    u = 0
    for s in range(n):
        r = keys[s]
        if r >= 0:
            if slot[r] < 0:
                slot[r] = u
                rows[u] = r
                u += 1
            starts[slot[r] + 1] += 1
    for i in range(u):
        starts[i + 1] += starts[i]
    order = np.empty(starts[u], np.int64)
    fill = np.empty(u, np.int64)
    for i in range(u):
        fill[i] = starts[i]
    for s in range(n):
        r = keys[s]
        if r >= 0:
            order[fill[slot[r]]] = s
            fill[slot[r]] += 1
    for i in range(u):
        slot[rows[i]] = -1
    return rows[:u], starts[:u + 1], order


@njit(inline="always")
def _side_gradient(g, part, slices, size, k1, shared, group, weight, coefs, centers_now):
    """A side row's merged gradient into ``g``: its ``slices`` summed in order, a slice being its pair's
    coefficient times the pair's center (a shared negative's: that summed over its group first, into
    ``part``)."""
    for j in range(len(g)):
        g[j] = 0
    for i in range(len(slices)):
        b, k, q = _side_slice(slices[i], size, k1, shared)
        if b >= 0:
            d, w = coefs[b, k], centers_now[b]
            for j in range(len(g)):
                g[j] += d * w[j]
            continue
        for j in range(len(part)):
            part[j] = 0
        for p in range(q * group, (q + 1) * group):
            if weight[p] > 0:
                d, w = coefs[p, k], centers_now[p]
                for j in range(len(part)):
                    part[j] += d * w[j]
        for j in range(len(g)):
            g[j] += part[j]


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def sgns_lazy_step(words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight, shared,
                   optimizer, lr, word_lr, side_lr, clip_norm, word_m, word_v, side_m, side_v, word_slot, side_slot,
                   centers_now, word_grads, coefs, losses, parts):
    """One step of word2vec's sgns with a lazy optimizer, as TensorFlow's step takes it; returns the batch's
    summed loss.

    words : [T + 1, dim] float32 trainable rows (the sink last, never written); frozen local id T + i is read
    from frozen[frozen_rows[i]]. side : [n_local + 1, dim] float32 context vectors (the sink last).
    centers, contexts : [B] int32 local ids; negatives : side ids, [B, K] per pair, [B / G, K] shared by
    groups of G pairs (``shared``); weight : [B] float32 (0: padding). optimizer : SGD, ADAGRAD, ADAM;
    word_lr, side_lr : adam's bias-corrected rates of each table's step; clip_norm : the cap (0: none).
    word_m, word_v, side_m, side_v : the optimizer's state (adagrad: m the accumulator; a state it has not: a
    one-row stand-in, never touched). word_slot [T + 1], side_slot [n_local + 1] int32, -1 everywhere (left
    so); centers_now, word_grads [B, dim], coefs [B, 1 + K] float32, losses [B] float64: scratch. parts : how
    many parts the pairs and rows are split into (any number gives the same bits).
    """
    size, kneg, dim = len(centers), negatives.shape[1], words.shape[1]
    k1, group = kneg + 1, size // negatives.shape[0]
    has_m, has_v = int(optimizer != SGD), int(optimizer == ADAM)
    for p in prange(parts):
        for b in range(p * size // parts, (p + 1) * size // parts):
            _pair_gradients(b, words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight,
                            group, centers_now, word_grads, coefs, losses)
    # Each slice's row, in TensorFlow's order of the slices (-1: dropped, as TensorFlow drops its sinks').
    word_keys = np.empty(size, np.int64)
    for b in range(size):
        word_keys[b] = centers[b] if weight[b] > 0 and centers[b] < n_trainable else -1
    side_keys = np.empty(size + len(negatives) * kneg if shared else size * k1, np.int64)
    for s in range(len(side_keys)):
        b, k, q = _side_slice(s, size, k1, shared)
        if b < 0:
            side_keys[s] = negatives[q, k - 1]
        elif not weight[b] > 0:
            side_keys[s] = -1
        else:
            side_keys[s] = contexts[b] if k == 0 else negatives[b // group, k - 1]
    word_rows, word_starts, word_order = _by_row(word_keys, word_slot)
    side_rows, side_starts, side_order = _by_row(side_keys, side_slot)
    # Every gradient is taken: each distinct row's merged update, the rows apart, so the parts write apart.
    n_words, n_side = len(word_rows), len(side_rows)
    for p in prange(parts):
        g = np.empty(dim, np.float32)
        part = np.empty(dim, np.float32)
        for u in range(p * n_words // parts, (p + 1) * n_words // parts):
            c = word_rows[u]
            for j in range(dim):
                g[j] = 0
            for i in range(word_starts[u], word_starts[u + 1]):
                grad = word_grads[word_order[i]]
                for j in range(dim):
                    g[j] += grad[j]
            _update(words[c], g, word_m[c * has_m], word_v[c * has_v], optimizer, lr, word_lr, clip_norm)
        for u in range(p * n_side // parts, (p + 1) * n_side // parts):
            r = side_rows[u]
            _side_gradient(g, part, side_order[side_starts[u]:side_starts[u + 1]], size, k1, shared, group, weight,
                           coefs, centers_now)
            _update(side[r], g, side_m[r * has_m], side_v[r * has_v], optimizer, lr, side_lr, clip_norm)
    return _sum_in_order(losses)


# --deterministic runs take it: the same bits on every CPU (common.FASTMATH).
sgns_lazy_step_strict = strict(sgns_lazy_step)


class SgnsLazyKernel:
    """The call of one trainer's compiled sgns step with a lazy optimizer, with the tables and the optimizer's
    state as numpy arrays (the authoritative ones while it is in use; the trainer's variables catch up when
    read, training.step.CompiledStep.sync, and a checkpoint holds them).

    update : training.optimizers.Update, the optimizer (sgd, adagrad, adam), its state and the cap.
    shared : negatives shared by groups of pairs (``batches``' [B / G, K]). deterministic : the strict twin."""

    lockfree = False   # batch-synchronous: the objective draws each batch's negatives and shuffles the pairs

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, batch_size: int, negative: int, shared: bool, update, threads: int,
                 deterministic: bool = True):
        self.words, self.side = words, side
        self.step_fn = sgns_lazy_step_strict if deterministic else sgns_lazy_step
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable, self.shared = n_trainable, shared
        self.optimizer, self.clip_norm = KERNEL_OPTIMIZERS[update.optimizer], np.float32(update.clip_norm)
        # The optimizer's state, by the names of its variables (CompiledStep.sync assigns them back): the word
        # table's for its T + 1 rows, the side table's for its own.
        self.word_state, self.side_state = update.state("word"), update.state("side")
        self._rows = {}
        for table, state in (("word", self.word_state), ("side", self.side_state)):
            stand_in = np.zeros((1, words.shape[1]), np.float32)
            self._rows[table] = (state.get("m", state.get("accumulator", stand_in)), state.get("v", stand_in))
        self._slots = (np.full(len(words), -1, np.int32), np.full(len(side), -1, np.int32))
        dim = words.shape[1]
        self.centers_now = np.empty((batch_size, dim), np.float32)
        self.word_grads = np.empty((batch_size, dim), np.float32)
        self.coefs = np.empty((batch_size, negative + 1), np.float32)
        self.losses = np.empty(batch_size, np.float64)
        self.threads = kernel_threads(threads)

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        """Steps over ``batches`` (the objective's numpy batches) at ``lrs``, in order; their summed losses."""
        set_num_threads(self.threads)
        return [self.step(batch, np.float32(lr)) for batch, lr in zip(batches, lrs)]

    def step(self, batch: dict, lr: np.float32) -> np.float32:
        """One step over ``batch`` at ``lr``; its summed loss."""
        size = len(batch["center"])
        word_lr = adam_rate(self.word_state, self.optimizer, lr)
        side_lr = adam_rate(self.side_state, self.optimizer, lr)
        return np.float32(self.step_fn(
            self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, batch["center"], batch["context"],
            batch["negatives"], batch["weight"], self.shared, self.optimizer, lr, word_lr, side_lr, self.clip_norm,
            *self._rows["word"], *self._rows["side"], *self._slots, self.centers_now[:size], self.word_grads[:size],
            self.coefs[:size], self.losses[:size], 4 * self.threads))
