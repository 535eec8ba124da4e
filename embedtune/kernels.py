"""Compiled (numba) steps for plain-sgd sgns, on every core.

Two kinds. Without --deterministic, per-pair negatives take ``sgns_hogwild``: word2vec's own
update, lock-free (Hogwild, as word2vec's and gensim's worker threads), each pair applied in place at
once; the bits follow the threads' timing (one thread: word2vec's sequential loop). It cost 0.54 us of
CPU a pair on one thread against 0.71 for the batch-synchronous kernel (step_profile.py, median of 3,
load 4.4-5.0), and recovered new words better (benchmarks/README.md, train_speed). Drawing the negatives inside it
(word2vec's LCG over the unigram table) did not pay: 1.8-2.0 us a pair drawn as needed, 1.08-1.12
drawn before the pair's rows against 1.02-1.30 for the host's draws (which cost 0.05 on the batch
thread), load 3.3.

With --deterministic (and with shared negatives) the batch-synchronous kernels, the TensorFlow fused
step's arithmetic: same semantics as ``Trainer._dense_sgd``: every gradient of a batch is taken from
the tables as they were at the batch's start, then every slice is applied, ``row -= lr * grad``, in
batch order. Frozen words (local ids >= ``n_trainable``) are read from ``frozen`` and never written;
padding pairs (weight 0) read and write nothing, as their slices are zero.

Deterministic whatever the thread count: the gradients are computed in parallel, a pair each, into
scratch arrays; the updates are applied in parallel by row (each part of the table owned by one
thread, which walks the whole batch in order), so every row gets its slices in the batch's order,
as XLA's scatter gives them; the loss is summed in pair order.

Why a kernel: TensorFlow's best CPU step (XLA dense part and scatters, gathers outside XLA, 10
batches a call) cost 0.88 us of CPU a pair on one thread; its gathers, scatters and call overhead
are most of it (benchmarks/README.md, train_speed).
"""

from __future__ import annotations

import math
import os

import numpy as np

# numba's OpenMP threads wait at the end of each parallel loop (two a step). Spinning there (libgomp's
# default) made 2 threads 5x slower than 1 on a busy machine (load 8 on 2 cores: 8.5 against 1.5 us a
# pair); sleeping, 2 threads cost 0.97 to 1.7. Read when numba first starts its threads; a value the
# user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from numba import config as numba_config, njit, prange, set_num_threads  # noqa: E402  (after the wait policy)

# The gradient pass must end before the update pass starts (the updates change rows the gradients
# read): numba's loop fusion merged two such loops once (the comparison test caught it), so it is off.
PARALLEL = {"fusion": False}
# Sums may be reordered (the dot products vectorise; with the loss's fewer logarithms, one thread
# 0.99 -> 0.56 us a pair, load 9 and 7) and multiply-adds fused; the code is fixed at compile time, so
# the bits still do not change from run to run. Not "fast" as a whole: NaN and infinity must stay
# visible to the divergence checks.
FASTMATH = {"reassoc", "contract"}
# Rows are given to threads in blocks of 2**ROW_BLOCK_BITS ids, so that two threads seldom write the
# same cache line (a 50-float row is 200 bytes).
ROW_BLOCK_BITS = 3


@njit(inline="always")
def _row(words, frozen, frozen_rows, n_trainable, c):
    if c < n_trainable:
        return words[c]
    return frozen[frozen_rows[c - n_trainable]]


@njit(inline="always")
def _logit_terms(x, label):
    """(e^-x as float64, sigmoid(x) - label): the exponential is reused for the loss (``_add_loss``)."""
    e = math.exp(-float(x))
    return e, 1.0 / (1.0 + e) - label


# A pair's loss is -log sigmoid(x) - sum log(1 - sigmoid(x_k)) = log(prod (1 + e^-x)) + sum x_k: one log
# a pair, the exponentials being there already. A logit below -LARGE (a row grown far) adds its
# softplus(-x) itself, and a product past 1e250 is moved into the sum, so that it cannot overflow
# (the TF step's loss stays finite there; a product of inf made runs stop as diverged).
LARGE = 30.0


@njit(inline="always")
def _add_loss(x, e, product, extra):
    """The running (product, extra) with the logit ``x`` (e = e^-x) added."""
    if x < -LARGE:
        return product, extra - float(x) + math.log1p(math.exp(float(x)))
    product *= 1.0 + e
    if product > 1e250:
        return 1.0, extra + math.log(product)
    return product, extra


@njit(inline="always")
def _dot(a, b):
    x = np.float32(0.0)
    for j in range(len(a)):
        x += a[j] * b[j]
    return x


@njit(inline="always")
def _descend(row, lr, grad):
    """row -= lr * grad, in place."""
    for j in range(len(row)):
        row[j] -= lr * grad[j]


@njit(inline="always")
def _sum_in_order(values):
    """The sum in index order (the loss's bits must not depend on the thread count)."""
    total = 0.0
    for i in range(len(values)):
        total += values[i]
    return total


@njit(inline="always")
def _score(w, v, g, k, wt, product, extra):
    """One (center, context or negative k > 0) term of a pair: its coefficient (weighted sigmoid(x) -
    label), added into the center's gradient ``g``; the running loss (``_add_loss``) with it."""
    x = _dot(w, v)
    e, d = _logit_terms(x, 1.0 if k == 0 else 0.0)
    product, extra = _add_loss(x, e, product, extra)
    if k:
        extra += float(x)
    d = np.float32(wt * d)
    for j in range(len(g)):
        g[j] += d * v[j]
    return d, product, extra


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def sgns_per_pair(words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight, lr,
                  centers_now, word_grads, coefs, owners, losses, parts):
    """One sgd step of word2vec's sgns with per-pair negatives; returns the batch's summed loss.

    words : [T + 1, dim] float32, trainable rows (updated in place; the last is the sink, untouched)
    side : [n_local + 1, dim] float32, context vectors (updated in place)
    frozen : [*, dim] float32, read-only; frozen_rows : [F] int64, local id T + i -> row frozen_rows[i]
    centers, contexts : [B] int32 local ids; negatives : [B, K] int32 side ids; weight : [B] float32
    centers_now, word_grads [B, dim], coefs [B, 1 + K] float32, owners [B, 2 + K] int32 (the part each
    slice's row falls in, -1: none) and losses [B] float64 : scratch
    parts : how many row parts the updates are split into (any number gives the same bits)
    """
    size, k1 = len(centers), negatives.shape[1] + 1
    for b in prange(size):
        wt = weight[b]
        losses[b] = 0.0
        if wt == 0:
            owners[b, :] = -1
            continue
        c = centers[b]
        owners[b, k1] = (c >> ROW_BLOCK_BITS) % parts if c < n_trainable else -1
        w = centers_now[b]
        w[:] = _row(words, frozen, frozen_rows, n_trainable, centers[b])
        g = word_grads[b]
        g[:] = 0
        product, extra = 1.0, 0.0   # the loss: _add_loss
        for k in range(k1):
            r = contexts[b] if k == 0 else negatives[b, k - 1]
            owners[b, k] = (r >> ROW_BLOCK_BITS) % parts
            coefs[b, k], product, extra = _score(w, side[r], g, k, wt, product, extra)
        losses[b] = wt * (math.log(product) + extra)
    # Every update from the batch's gradients and the centers as they were (centers_now): one pass,
    # a part of each table per thread, in batch order.
    for p in prange(parts):
        for b in range(size):
            for k in range(k1):
                if owners[b, k] == p:
                    r = contexts[b] if k == 0 else negatives[b, k - 1]
                    d = coefs[b, k]
                    w = centers_now[b]
                    v = side[r]
                    for j in range(len(v)):
                        v[j] -= lr * (d * w[j])
            if owners[b, k1] == p:
                _descend(words[centers[b]], lr, word_grads[b])
    return _sum_in_order(losses)


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def sgns_shared(words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight, lr,
                centers_now, word_grads, coefs, owners, losses, parts):
    """One sgd step of sgns with negatives shared by groups of pairs; returns the summed loss.

    As ``sgns_per_pair``, but negatives : [B / G, K], the K negatives of each group of G consecutive
    pairs. The side slices come in the step's order: the B true contexts, then each group's
    negatives, each negative's slice the sum over its group's pairs.
    """
    size = len(centers)
    groups, kneg = negatives.shape
    group = size // groups
    for b in prange(size):
        wt = weight[b]
        losses[b] = 0.0
        if wt == 0:
            for k in range(kneg + 1):
                coefs[b, k] = 0
            owners[b, 0] = owners[b, 1] = -1
            continue
        c, r = centers[b], contexts[b]
        owners[b, 0] = (r >> ROW_BLOCK_BITS) % parts
        owners[b, 1] = (c >> ROW_BLOCK_BITS) % parts if c < n_trainable else -1
        w = centers_now[b]
        w[:] = _row(words, frozen, frozen_rows, n_trainable, centers[b])
        g = word_grads[b]
        g[:] = 0
        product, extra = 1.0, 0.0
        for k in range(kneg + 1):
            r = contexts[b] if k == 0 else negatives[b // group, k - 1]
            coefs[b, k], product, extra = _score(w, side[r], g, k, wt, product, extra)
        losses[b] = wt * (math.log(product) + extra)
    for p in prange(parts):
        slice_ = np.empty(words.shape[1], np.float32)
        for b in range(size):
            if owners[b, 0] == p:
                r = contexts[b]
                d = coefs[b, 0]
                w = centers_now[b]
                v = side[r]
                for j in range(len(v)):
                    v[j] -= lr * (d * w[j])
        for q in range(groups):
            for k in range(kneg):
                r = negatives[q, k]
                if (r >> ROW_BLOCK_BITS) % parts != p:
                    continue
                slice_[:] = 0
                for b in range(q * group, (q + 1) * group):
                    if weight[b] != 0:
                        d = coefs[b, k + 1]
                        w = centers_now[b]
                        for j in range(len(slice_)):
                            slice_[j] += d * w[j]
                _descend(side[r], lr, slice_)
        for b in range(size):
            if owners[b, 1] == p:
                _descend(words[centers[b]], lr, word_grads[b])
    return _sum_in_order(losses)


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def sgns_hogwild(words, side, frozen, frozen_rows, n_trainable, centers, contexts, negatives, weight, lrs,
                 batch_size, losses):
    """sgd steps of word2vec's sgns with per-pair negatives, lock-free (Hogwild, as word2vec's and
    gensim's worker threads): each thread takes a contiguous block of the pairs and applies each pair
    at once, in place, from the rows as they are then (score the 1 + K context rows against the center,
    update the context rows, then the center), with no scratch and no second pass.

    centers, contexts [N], negatives [N, K], weight [N]: several batches of ``batch_size`` pairs one
    after another (a group, one parallel region); lrs [N / batch_size], each batch's. losses
    [threads, N / batch_size] float64: each thread's summed loss of each batch (written). The threads
    read and write shared rows without locks, so a row can lose or see half of a concurrent update,
    as in word2vec; the bits follow the thread timing. With one thread it is word2vec's sequential
    loop over the pairs in order. Frozen centers (local ids >= n_trainable) are read from ``frozen``
    and never written; padding (weight 0) reads and writes nothing.
    """
    size, k1 = len(centers), negatives.shape[1] + 1
    threads = losses.shape[0]
    for t in prange(threads):
        grad = np.empty(words.shape[1], np.float32)
        losses[t, :] = 0.0
        for b in range(t * size // threads, (t + 1) * size // threads):
            wt = weight[b]
            if wt == 0:
                continue
            lr = lrs[b // batch_size]
            c = centers[b]
            w = _row(words, frozen, frozen_rows, n_trainable, c)
            grad[:] = 0
            product, extra = 1.0, 0.0
            for k in range(k1):
                v = side[contexts[b] if k == 0 else negatives[b, k - 1]]
                d, product, extra = _score(w, v, grad, k, wt, product, extra)
                for j in range(len(v)):
                    v[j] -= lr * (d * w[j])
            if c < n_trainable:
                _descend(w, lr, grad)
            losses[t, b // batch_size] += wt * (math.log(product) + extra)


class SgnsKernel:
    """The scratch arrays and the call of one trainer's compiled step.

    frozen : the matrix frozen rows are read from (C order: a Fortran-ordered one is read a row at a
    time across the whole table, so only the corpus's frozen rows are copied, once, in C order).
    """

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, batch_size: int, negative: int, shared: bool, threads: int,
                 lockfree: bool = False):
        self.words, self.side = words, side
        # Per-pair negatives without --deterministic: sgns_hogwild, a group of batches a call.
        self.lockfree = lockfree and not shared
        self.in_use = True   # False: the trainer steps through TensorFlow instead (Trainer.fused)
        matrix = np.asarray(matrix)
        if matrix.flags.c_contiguous:
            self.frozen, self.frozen_rows = matrix, np.ascontiguousarray(frozen_rows, np.int64)
        else:
            self.frozen = np.ascontiguousarray(matrix[frozen_rows], np.float32)
            self.frozen_rows = np.arange(len(frozen_rows), dtype=np.int64)
        self.n_trainable = n_trainable
        self.word_grads = np.empty((batch_size, words.shape[1]), np.float32)
        self.centers_now = np.empty((batch_size, words.shape[1]), np.float32)
        self.coefs = np.empty((batch_size, negative + 1), np.float32)
        self.owners = np.empty((batch_size, negative + 2), np.int32)
        self.losses = np.empty(batch_size, np.float64)
        self.step_fn = sgns_shared if shared else sgns_per_pair
        # At most what numba was started with (NUMBA_NUM_THREADS).
        self.threads = max(1, min(threads, numba_config.NUMBA_NUM_THREADS))
        # A part per thread: each walks every slice of the batch to find its own.
        self.parts = self.threads

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        """Steps over ``batches`` (the objective's numpy batches) at ``lrs``, in order; their summed
        losses. Lock-free: the whole group in one call, its pairs split among the threads."""
        if not self.lockfree:
            return [self.step(batch, lr) for batch, lr in zip(batches, lrs)]
        set_num_threads(self.threads)
        centers, contexts, negatives, weight = (np.concatenate([b[key] for b in batches])
                                                for key in ("center", "context", "negatives", "weight"))
        losses = np.empty((self.threads, len(batches)), np.float64)
        sgns_hogwild(self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, centers, contexts,
                     negatives, weight, np.asarray(lrs, np.float32), len(batches[0]["center"]), losses)
        return [np.float32(loss) for loss in losses.sum(axis=0)]

    def step(self, batch: dict, lr: float) -> np.float32:
        """One step over ``batch`` (the objective's numpy batch) at ``lr``; the summed loss."""
        set_num_threads(self.threads)
        size = len(batch["center"])
        return np.float32(self.step_fn(
            self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable,
            batch["center"], batch["context"], batch["negatives"], batch["weight"], np.float32(lr),
            self.centers_now[:size], self.word_grads[:size], self.coefs[:size], self.owners[:size],
            self.losses[:size], self.parts))

