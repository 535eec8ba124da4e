"""GloVe's compiled (numba) steps, with any lazy optimizer (adagrad by default), the per-row cap and the
anchor's proximal pull: the arithmetic of TensorFlow's step (training/step.py, training/optimizers.py,
whose constants the shared ``_update`` reads). Two kinds, as sgns's kernels.

With --deterministic, ``glove_step``: TensorFlow's step on one batch. Every pair's error is taken from
the tables as they were at the batch's start; each distinct trainable row then gets its slices summed in
batch order (the row ends, then the col ends), capped, one optimizer update and the anchor's pull
(``anchor * slices in the batch / slices in an epoch`` times the step size just taken, as a proximal
step toward its start); the biases likewise (no anchor). The bits do not depend on the thread count.

Without it, ``glove_hogwild``: GloVe's own per-pair AdaGrad loop (Pennington et al.'s glove.c), lock-free
on every thread as sgns_hogwild: each thread takes a contiguous block of the pairs and applies each pair
at once, in place (both ends' gradients from the rows as they are then, each capped, the optimizer's
update, the anchor's pull of ``anchor / slices in an epoch`` a slice, the biases). One thread: the
sequential loop over the pairs in order.

Frozen words (local ids >= ``n_trainable``) are read from ``frozen`` and never written, nor are their
biases (the side table's rows from ``n_trainable`` on are fixed: GloVe.side_fixed_from); padding
(weight 0) reads and writes nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, set_num_threads
from numba.extending import intrinsic

from embedtune._adapters.numba_private import without_reference_count
# Inlines common._update, revision 2 (common.py: numba's cache), and numba_private.without_reference_count.
from embedtune.kernels.common import (ADAGRAD, ADAM, EPSILON, FASTMATH, KERNEL_OPTIMIZERS, PARALLEL, SGD, _dot,
                                      _row, _sort, _sum_in_order, _update, adam_rate, frozen_source, kernel_threads,
                                      on_threads)


@njit(inline="always")
def _pull(row, start, m, v, optimizer, lr, adam_lr, weight):
    """The anchor's proximal step after an update: row = (row + p start) / (1 + p), p = the step size
    the optimizer just took (per value; m, v its state after the update) times ``weight``."""
    eps = np.float32(EPSILON)
    one = np.float32(1)
    for j in range(len(row)):
        if optimizer == SGD:
            step = lr
        elif optimizer == ADAGRAD:
            step = lr / (np.sqrt(m[j]) + eps)
        else:
            step = adam_lr / (np.sqrt(v[j]) + eps)
        p = step * weight
        row[j] = (row[j] + p * start[j]) / (one + p)


@njit(inline="always")
def _pair_error(words, side, frozen, frozen_rows, n_trainable, scale, j, k, target):
    """(w_j, w_k, scale * w_j . w_k + b_j + b_k - target) of one pair, from the tables as they are."""
    wj = _row(words, frozen, frozen_rows, n_trainable, j)
    wk = _row(words, frozen, frozen_rows, n_trainable, k)
    x = scale * _dot(wj, wk) + side[j, 0] + side[k, 0]
    return wj, wk, x - target


@njit(inline="always")
def _end(words, side, r, g, gb, c, optimizer, lr, word_lr, side_lr, clip_norm, anchor, start, slices, word_m, word_v,
         side_m, side_v, has_m, has_v):
    """One trainable end ``r`` of a pair, in place: its word slice ``g`` (capped, the optimizer, the
    anchor's pull of one slice) and its bias's slice ``c`` (``gb``: scratch)."""
    gb[0] = c
    for t in range(2):   # the word row, then the bias, through one inlined update (half its compile)
        if t == 0:
            row, grad, m, v, rate = words[r], g, word_m[r * has_m], word_v[r * has_v], word_lr
        else:
            row, grad, m, v, rate = side[r], gb, side_m[r * has_m], side_v[r * has_v], side_lr
        _update(row, grad, m, v, optimizer, lr, rate, clip_norm)
        if t == 0 and anchor > 0:
            _pull(words[r], start[r], word_m[r * has_m], word_v[r * has_v], optimizer, lr, word_lr,
                  anchor / slices[r])


# Only --deterministic runs take it: no fastmath, the same bits on every CPU (common.FASTMATH).
@njit(parallel=PARALLEL, nogil=True, cache=True)
def glove_step(words, side, frozen, frozen_rows, n_trainable, scale, row, col, target, f, weight, optimizer, lr,
               word_lr, side_lr, clip_norm, anchor, start, slices, word_m, word_v, side_m, side_v, grads, coefs,
               losses, parts):
    """One batch-synchronous step of GloVe's loss 1/2 sum f (scale w_j . w_k + b_j + b_k - log X)^2;
    returns the batch's summed loss.

    words : [T + 1, dim] trainable rows (updated in place; the sink last, never written); frozen local id
    T + i is read from frozen[frozen_rows[i]]. side : [n_local + 1, 1] the biases (rows >= T fixed).
    row, col [B] int32 local ids; target, f, weight [B] float32 (weight 0: padding). optimizer: SGD,
    ADAGRAD, ADAM; word_lr, side_lr: adam's bias-corrected rates. anchor > 0: start [T + 1, dim] the rows'
    starts, slices [T] float32 a row's slices in an epoch (at least 1). word_m, word_v, side_m, side_v: the
    optimizer's state (a state it has not: a one-row stand-in, never touched). grads [2B, dim], coefs
    [B], losses [B] float64: scratch. parts: how many parts the pairs and rows are split into.
    """
    size = len(row)
    has_m, has_v = int(optimizer != SGD), int(optimizer == ADAM)
    # Each pair's error and its two word slices (d loss / d w_j, then d loss / d w_k), from the tables as
    # they are at the batch's start.
    for p in prange(parts):
        for b in range(p * size // parts, (p + 1) * size // parts):
            losses[b] = 0.0
            coefs[b] = 0
            if weight[b] == 0:
                continue
            wj, wk, error = _pair_error(words, side, frozen, frozen_rows, n_trainable, scale, row[b], col[b],
                                        target[b])
            c = f[b] * weight[b] * error
            losses[b] = 0.5 * float(c) * float(error)
            coefs[b] = c
            gj, gk = grads[b], grads[size + b]
            for d in range(len(gj)):
                gj[d] = c * scale * wk[d]
                gk[d] = c * scale * wj[d]
    # The trainable slices sorted by row, each row's in batch order (row ends first): slice s of row r is
    # the key r * 2B + s.
    keys = np.empty(2 * size, np.int64)
    n = 0
    for s in range(2 * size):
        b = s % size
        r = row[b] if s < size else col[b]
        if weight[b] != 0 and r < n_trainable:
            keys[n] = np.int64(r) * (2 * size) + s
            n += 1
    keys = keys[:n]
    _sort(keys)   # distinct keys: the order np.sort gives, at a fraction of its compile (common._sort)
    starts = np.empty(n + 1, np.int64)
    rows = 0
    for i in range(n):
        if i == 0 or keys[i] // (2 * size) != keys[i - 1] // (2 * size):
            starts[rows] = i
            rows += 1
    starts[rows] = n
    # Each distinct row's update from its merged slices: the rows are apart, so the parts write apart.
    for p in prange(parts):
        g = np.empty(words.shape[1], np.float32)
        gb = np.empty(1, np.float32)
        for u in range(p * rows // parts, (p + 1) * rows // parts):
            r = keys[starts[u]] // (2 * size)
            g[:] = 0
            gb[0] = 0
            for i in range(starts[u], starts[u + 1]):
                s = keys[i] % (2 * size)
                slice_ = grads[s]
                for d in range(len(g)):
                    g[d] += slice_[d]
                gb[0] += coefs[s % size]
            _update(words[r], g, word_m[r * has_m], word_v[r * has_v], optimizer, lr, word_lr, clip_norm)
            if anchor > 0:
                count = np.float32(starts[u + 1] - starts[u])
                _pull(words[r], start[r], word_m[r * has_m], word_v[r * has_v], optimizer, lr, word_lr,
                      anchor * count / slices[r])
            _update(side[r], gb, side_m[r * has_m], side_v[r * has_v], optimizer, lr, side_lr, clip_norm)
    return _sum_in_order(losses)


@intrinsic
def _borrowed(typingctx, array):
    """``array`` itself without its reference count (its meminfo null), for a kernel's arguments, which the
    caller keeps alive until the kernel returns: numba counts a reference to the array at every view taken of
    it and every array passed to an inlined helper, an atomic add on the one counter all threads share, about
    40 a pair in ``glove_hogwild``. That was why the lock-free loop ran 2-3x slower as a plain kernel on
    Python threads than as a ``prange`` body, whose arrays numba's parallel lowering passes the same way,
    without their counts (benchmarks/log/first_run.md). Never returned nor stored beyond the call."""
    def codegen(context, builder, signature, args):
        return without_reference_count(context, builder, array, args[0])
    return array(array), codegen


def _lock_free(optimizer: int):
    """``glove_hogwild`` for one optimizer (SGD, ADAGRAD, ADAM), a constant of the kernel: numba prunes the
    other optimizers' branches of the inlined ``_update`` and ``_pull`` (four call sites) before it compiles,
    so a run compiles only its own optimizer's code. numba's cache keeps each apart (it keys a closure's
    machine code by the values it closes over). A plain ``nogil`` kernel that one thread calls for its own
    block, on Python threads (``GloveKernel.run``): numba's parallel passes were over half its compile, the
    largest of a cold run's (benchmarks/log/first_run.md). ``error_model="numpy"`` as a ``prange`` body has
    it: a division's zero check would keep the optimizers' loops from vectorising."""
    @njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")
    def glove_hogwild(words, side, frozen, frozen_rows, n_trainable, scale, row, col, target, f, weight, lrs,
                      word_lrs, side_lrs, batch_size, clip_norm, anchor, start, slices, word_m, word_v,
                      side_m, side_v, losses, t):
        """Thread ``t``'s share of GloVe's per-pair steps, lock-free (as glove.c's threads): of ``threads``
        (losses' rows) each takes a contiguous block of the pairs and applies each at once, in place, from the
        rows as they are then; every thread calls this for its own ``t`` at the same time.

        row, col, target, f, weight [N]: several batches of ``batch_size`` pairs one after another (a group);
        lrs, word_lrs, side_lrs [N / batch_size], each batch's. losses [threads, N / batch_size] float64:
        each thread's summed loss of each batch (its own row written). Tables, state and the anchor's as
        ``glove_step``. The threads read and write shared rows without locks, so a row can lose or see half
        of a concurrent update, as in glove.c; the bits follow the thread timing.
        """
        words, side, frozen, frozen_rows = _borrowed(words), _borrowed(side), _borrowed(frozen), _borrowed(frozen_rows)
        row, col, target, f, weight = _borrowed(row), _borrowed(col), _borrowed(target), _borrowed(f), _borrowed(weight)
        start, slices, losses = _borrowed(start), _borrowed(slices), _borrowed(losses)
        word_m, word_v, side_m, side_v = _borrowed(word_m), _borrowed(word_v), _borrowed(side_m), _borrowed(side_v)
        size, dim = len(row), words.shape[1]
        threads = losses.shape[0]
        has_m, has_v = int(optimizer != SGD), int(optimizer == ADAM)
        gj = np.empty(dim, np.float32)
        gk = np.empty(dim, np.float32)
        gb = np.empty(1, np.float32)
        for i in range(losses.shape[1]):
            losses[t, i] = 0.0
        for b in range(t * size // threads, (t + 1) * size // threads):
            if weight[b] == 0:
                continue
            batch = b // batch_size
            lr, word_lr, side_lr = lrs[batch], word_lrs[batch], side_lrs[batch]
            j, k = row[b], col[b]
            wj, wk, error = _pair_error(words, side, frozen, frozen_rows, n_trainable, scale, j, k, target[b])
            c = f[b] * weight[b] * error
            losses[t, batch] += 0.5 * float(c) * float(error)
            for d in range(dim):
                gj[d] = c * scale * wk[d]
                gk[d] = c * scale * wj[d]
            for e in range(2):   # the pair's ends, j then k, through one inlined site (half the compile)
                r, g = (j, gj) if e == 0 else (k, gk)
                if r < n_trainable:
                    _end(words, side, r, g, gb, c, optimizer, lr, word_lr, side_lr, clip_norm, anchor, start, slices,
                         word_m, word_v, side_m, side_v, has_m, has_v)
    return glove_hogwild


GLOVE_HOGWILD = {optimizer: _lock_free(optimizer) for optimizer in (SGD, ADAGRAD, ADAM)}


class GloveKernel:
    """The call of one trainer's compiled glove step, with the tables and the optimizer's state as numpy
    arrays (the authoritative ones while it is in use; the trainer's variables catch up when read,
    training.step.CompiledStep.sync).

    update : training.optimizers.Update, the optimizer, its state and the cap. anchor: the anchor's weight
    (0: none); slices [T]: a row's slices in an epoch. lockfree: ``glove_hogwild``, a group of batches a
    call (else ``glove_step``, a batch a call)."""

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, scale: float, update, anchor: float, slices: np.ndarray, batch_size: int,
                 threads: int, lockfree: bool):
        self.words, self.side = words, side
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable = n_trainable
        self.scale = np.float32(scale)
        self.optimizer, self.clip_norm = KERNEL_OPTIMIZERS[update.optimizer], np.float32(update.clip_norm)
        self.word_state, self.side_state = update.state("word"), update.state("side")
        self._rows = {}
        for table, state, width in (("word", self.word_state, words.shape[1]), ("side", self.side_state, 1)):
            stand_in = np.zeros((1, width), np.float32)
            self._rows[table] = (state.get("m", state.get("accumulator", stand_in)), state.get("v", stand_in))
        self.anchor = np.float32(anchor)
        # The anchor pulls toward where the rows started: ``words`` is stepped in place, so a copy is kept.
        self.start = words.copy() if anchor else np.zeros((1, words.shape[1]), np.float32)
        self.slices = (np.maximum(slices, 1.0).astype(np.float32) if anchor else np.ones(1, np.float32))
        self.threads = kernel_threads(threads)
        self.lockfree = lockfree
        self.grads = np.empty((2 * batch_size, words.shape[1]), np.float32)
        self.coefs = np.empty(batch_size, np.float32)
        self.losses = np.empty(batch_size, np.float64)

    def _tables(self):
        return (self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, self.scale)

    def _anchor(self):
        return (self.anchor, self.start, self.slices, *self._rows["word"], *self._rows["side"])

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        """Steps over ``batches`` (the objective's numpy batches) at ``lrs``, in order; their summed
        losses. Lock-free: the whole group in one call a thread, its pairs split among the threads."""
        if not self.lockfree:
            set_num_threads(self.threads)
            return [self.step(batch, np.float32(lr)) for batch, lr in zip(batches, lrs)]
        lrs = np.asarray(lrs, np.float32)
        rates = [[adam_rate(state, self.optimizer, lr) for lr in lrs] for state in (self.word_state, self.side_state)]
        arrays = [np.concatenate([b[key] for b in batches]) for key in ("row", "col", "target", "f", "weight")]
        losses = np.empty((self.threads, len(batches)), np.float64)
        args = (*self._tables(), *arrays, lrs, np.asarray(rates[0], np.float32), np.asarray(rates[1], np.float32),
                len(batches[0]["row"]), self.clip_norm, *self._anchor(), losses)
        on_threads(GLOVE_HOGWILD[self.optimizer], [(*args, t) for t in range(self.threads)], self.threads)
        return [np.float32(loss) for loss in losses.sum(axis=0)]

    def step(self, batch: dict, lr: np.float32) -> np.float32:
        """One batch-synchronous step over ``batch`` at ``lr``; its summed loss."""
        size = len(batch["row"])
        word_lr, side_lr = adam_rate(self.word_state, self.optimizer, lr), adam_rate(self.side_state, self.optimizer, lr)
        return np.float32(glove_step(
            *self._tables(), batch["row"], batch["col"], batch["target"], batch["f"], batch["weight"],
            self.optimizer, lr, word_lr, side_lr, self.clip_norm, *self._anchor()[:3], *self._rows["word"],
            *self._rows["side"], self.grads[:2 * size], self.coefs[:size], self.losses[:size], self.threads))
