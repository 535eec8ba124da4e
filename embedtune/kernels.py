"""Compiled (numba) steps, on every core: plain-sgd sgns, and classify with any lazy optimizer
(``classify_step``, at the end: TensorFlow's step's arithmetic, bits that do not depend on the thread
count).

sgns: two kinds. Without --deterministic, per-pair negatives take ``sgns_hogwild``: word2vec's own
update, lock-free (Hogwild, as word2vec's and gensim's worker threads), each pair applied in place at
once; the bits follow the threads' timing (one thread: word2vec's sequential loop). It costs less CPU
a pair than the batch-synchronous kernel and recovered new words better (benchmarks/README.md,
train_speed). The negatives come from the host: drawing them inside it (word2vec's LCG over the
unigram table) did not pay (benchmarks/README.md, train_speed, "What was measured and left out").

With --deterministic (and with shared negatives) the batch-synchronous kernels, the TensorFlow fused
step's arithmetic: same semantics as ``Trainer._dense_sgd``: every gradient of a batch is taken from
the tables as they were at the batch's start, then every slice is applied, ``row -= lr * grad``, in
batch order. Frozen words (local ids >= ``n_trainable``) are read from ``frozen`` and never written;
padding pairs (weight 0) read and write nothing, as their slices are zero.

Deterministic whatever the thread count: the gradients are computed in parallel, a pair each, into
scratch arrays; the updates are applied in parallel by row (each part of the table owned by one
thread, which walks the whole batch in order), so every row gets its slices in the batch's order,
as XLA's scatter gives them; the loss is summed in pair order.

Why a kernel: in TensorFlow's best CPU step (XLA dense part and scatters, gathers outside XLA, 10
batches a call) the gathers, scatters and call overhead are most of the cost (benchmarks/README.md,
train_speed).
"""

from __future__ import annotations

import math
import os

import numpy as np

# numba's OpenMP threads wait at the end of each parallel loop (two a step). Spinning there (libgomp's
# default) made 2 threads far slower than 1 on a busy machine; they sleep instead (benchmarks/README.md,
# train_speed). Read when numba first starts its threads; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from numba import config as numba_config, njit, prange, set_num_threads  # noqa: E402  (after the wait policy)

from embedtune.optim_constants import ADAM_BETA_1, ADAM_BETA_2, EPSILON  # noqa: E402

# The gradient pass must end before the update pass starts (the updates change rows the gradients
# read): numba's loop fusion merged two such loops once (the comparison test caught it), so it is off.
PARALLEL = {"fusion": False}
# Sums may be reordered (the dot products vectorise: benchmarks/README.md, train_speed) and
# multiply-adds fused; the code is fixed at compile time, so
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


def frozen_source(matrix, frozen_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the matrix frozen rows are read from, frozen local id T + i -> its row there): the input matrix
    itself in C order; a Fortran-ordered one is read a row at a time across the whole table, so only
    the corpus's frozen rows are copied, once, in C order."""
    matrix = np.asarray(matrix)
    if matrix.flags.c_contiguous:
        return matrix, np.ascontiguousarray(frozen_rows, np.int64)
    return np.ascontiguousarray(matrix[frozen_rows], np.float32), np.arange(len(frozen_rows), dtype=np.int64)


def kernel_threads(threads: int) -> int:
    """The threads a kernel runs on: at most what numba was started with (NUMBA_NUM_THREADS)."""
    return max(1, min(threads, numba_config.NUMBA_NUM_THREADS))


class SgnsKernel:
    """The scratch arrays and the call of one trainer's compiled step (frozen rows: ``frozen_source``)."""

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, batch_size: int, negative: int, shared: bool, threads: int,
                 lockfree: bool = False):
        self.words, self.side = words, side
        # Per-pair negatives without --deterministic: sgns_hogwild, a group of batches a call.
        self.lockfree = lockfree and not shared
        self.in_use = True   # False: the trainer steps through TensorFlow instead (Trainer.fused)
        self.word_state, self.side_state = {}, {}   # plain sgd: no optimizer state
        self.distinct_rows = False   # a row repeated in a batch gets each of its slices
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable = n_trainable
        self.word_grads = np.empty((batch_size, words.shape[1]), np.float32)
        self.centers_now = np.empty((batch_size, words.shape[1]), np.float32)
        self.coefs = np.empty((batch_size, negative + 1), np.float32)
        self.owners = np.empty((batch_size, negative + 2), np.int32)
        self.losses = np.empty(batch_size, np.float64)
        self.step_fn = sgns_shared if shared else sgns_per_pair
        self.threads = kernel_threads(threads)
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



# --- classify -------------------------------------------------------------------------------------
# The optimizers the classify kernel applies (sparse.py's lazy ones, the same arithmetic).
SGD, ADAGRAD, ADAM = 0, 1, 2
KERNEL_OPTIMIZERS = {"sgd": SGD, "adagrad": ADAGRAD, "adam": ADAM}


@njit(inline="always")
def _by_key(keys, n_keys):
    """A stable counting sort of positions by ``keys`` (keys >= n_keys dropped): (order, starts [n_keys + 1]),
    positions with key k being order[starts[k]:starts[k + 1]], in their order."""
    starts = np.zeros(n_keys + 1, np.int64)
    for i in range(len(keys)):
        if keys[i] < n_keys:
            starts[keys[i] + 1] += 1
    for k in range(n_keys):
        starts[k + 1] += starts[k]
    order = np.empty(starts[n_keys], np.int64)
    fill = starts[:n_keys].copy()
    for i in range(len(keys)):
        k = keys[i]
        if k < n_keys:
            order[fill[k]] = i
            fill[k] += 1
    return order, starts


@njit(inline="always")
def _row_gradient(g, tokens, segment, dsum, weight):
    """A row's gradient into ``g``: the sum over its ``tokens`` (in batch order) of their line's d loss /
    d token (``dsum`` [B, dim]), times the row's weight; g's columns past dim (an n-gram row's unused
    one) zero."""
    g[:] = 0
    for i in range(len(tokens)):
        d = dsum[segment[tokens[i]]]
        for j in range(len(d)):
            g[j] += d[j]
    for j in range(len(g)):
        g[j] = weight * g[j]


@njit(inline="always")
def _update(row, g, m, v, optimizer, lr, adam_lr, clip_norm):
    """One row's lazy update by its merged gradient ``g`` (capped first), as sparse.py's optimizers:
    sgd row -= lr g; adagrad (m: the accumulator) m += g^2, row -= lr / (sqrt(m) + eps) g; adam m, v
    moments, row -= adam_lr / (sqrt(v) + eps) m (adam_lr: lr with the bias correction). float32
    throughout, so that the loops vectorise."""
    if clip_norm > 0:
        norm = np.float32(0.0)
        for j in range(len(g)):
            norm += g[j] * g[j]
        norm = np.sqrt(norm)
        if norm > clip_norm:
            scale = clip_norm / norm
            for j in range(len(g)):
                g[j] = g[j] * scale
    eps = np.float32(EPSILON)
    if optimizer == SGD:
        for j in range(len(row)):
            row[j] -= lr * g[j]
    elif optimizer == ADAGRAD:
        for j in range(len(row)):
            a = m[j] + g[j] * g[j]
            m[j] = a
            row[j] -= lr / (np.sqrt(a) + eps) * g[j]
    else:
        b1, b2 = np.float32(ADAM_BETA_1), np.float32(ADAM_BETA_2)
        c1, c2 = np.float32(1) - b1, np.float32(1) - b2
        for j in range(len(row)):
            mj = b1 * m[j] + c1 * g[j]
            vj = b2 * v[j] + c2 * (g[j] * g[j])
            m[j] = mj
            v[j] = vj
            row[j] -= adam_lr / (np.sqrt(vj) + eps) * mj


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def classify_step(words, side, frozen, frozen_rows, n_trainable, n_labels, word, weight, slot, segment,
                  gram, gram_weight, gram_slot, gram_segment, targets, one_vs_all, optimizer, lr, word_lr,
                  side_lr, clip_norm, word_m, word_v, side_m, side_v, parts):
    """One step of fastText's supervised model, as Trainer._step takes it through TensorFlow (the same
    batch, the same loss, its gradients from the tables as they were at the batch's start, each
    distinct row updated once by the lazy optimizer); returns the batch's summed loss.

    words : [T + 1, dim] trainable rows (the last: the sink, never written); frozen local id T + i is
    read from frozen[frozen_rows[i]]. side : [L + G + 1, dim + 1] the classifier (weights, bias), then
    the n-gram rows (their last column unused), then the sink. The batch: classify's ("word", "weight",
    "slot", "segment", "targets"; "gram", "gram_weight", "gram_slot", "gram_segment" with n-grams, else
    empty). word_m, word_v, side_m, side_v: the optimizer's state (adagrad: m the accumulator; a state
    the optimizer has not: a one-row stand-in, never touched); word_lr, side_lr: adam's bias-corrected rates for each table's step. parts: how many
    parts the lines and rows are split into, each with its scratch (any number gives the same bits).

    The lines' means and scores run a line per thread; the classifier's gradient a label per thread;
    the word and n-gram rows' gradients a row per thread, each the sum over its tokens in batch order:
    the bits do not depend on the thread count.
    """
    B, L, dim = targets.shape[0], n_labels, words.shape[1]
    W, G = len(word) - 1, len(gram) - 1
    has_m, has_v = int(optimizer != SGD), int(optimizer == ADAM)   # else: a one-row stand-in, never touched
    sink = side.shape[0] - 1
    line_tokens, line_starts = _by_key(segment, B)
    line_grams, gram_line_starts = _by_key(gram_segment, B)
    word_tokens, word_starts = _by_key(slot, W)
    gram_tokens, gram_starts = _by_key(gram_slot, G)
    means = np.zeros((B, dim), np.float32)
    dz = np.zeros((B, L), np.float32)
    dsum = np.zeros((B, dim), np.float32)   # d loss / d (a token's row): d loss / d mean over the line's count
    losses = np.zeros(B, np.float64)
    # The batch's rows, gathered once in id order (the ids are sorted: the reads walk the tables
    # forward), weighted: the lines then read them from a block that stays in cache.
    rows = np.empty((W + G, dim), np.float32)
    for p in prange(parts):
        for s in range(p * (W + G) // parts, (p + 1) * (W + G) // parts):
            out = rows[s]
            if s < W:
                wt = weight[s]
                row = _row(words, frozen, frozen_rows, n_trainable, word[s])
            else:
                wt = gram_weight[s - W]
                row = side[gram[s - W]]
            if wt == 0:
                out[:] = 0
            else:
                for j in range(dim):
                    out[j] = wt * row[j]
    for p in prange(parts):
        total = np.empty(dim, np.float32)
        z = np.empty(L, np.float32)
        e = np.empty(L, np.float64)
        for b in range(p * B // parts, (p + 1) * B // parts):
            total[:] = 0
            count = np.float32(0.0)
            for i in range(line_starts[b], line_starts[b + 1]):
                s = slot[line_tokens[i]]
                wt = weight[s]
                row = rows[s]
                for j in range(dim):
                    total[j] += row[j]
                count += wt
            if count <= 0:   # no counted word: out of the loss (padding lines among them)
                continue
            grams = np.float32(0.0)
            for i in range(gram_line_starts[b], gram_line_starts[b + 1]):
                s = gram_slot[line_grams[i]]
                row = rows[W + s]
                for j in range(dim):
                    total[j] += row[j]
                grams += gram_weight[s]
            denom = max(count + grams, np.float32(1.0))
            mean = means[b]
            for j in range(dim):
                mean[j] = total[j] / denom
            for k in range(L):
                label = side[k]
                x = label[dim]
                for j in range(dim):
                    x += mean[j] * label[j]
                z[k] = x
            t = targets[b]
            loss = 0.0
            if one_vs_all:
                for k in range(L):
                    x = float(z[k])
                    loss += max(x, 0.0) - x * t[k] + math.log1p(math.exp(-abs(x)))
                    dz[b, k] = np.float32(1.0 / (1.0 + math.exp(-x))) - t[k]
            else:
                top = z[0]
                for k in range(1, L):
                    top = max(top, z[k])
                total_e = 0.0
                for k in range(L):
                    e[k] = math.exp(float(z[k] - top))
                    total_e += e[k]
                log_total = math.log(total_e)
                for k in range(L):   # the targets sum to 1 (Classify._targets): softmax - targets
                    if t[k] != 0:
                        loss += t[k] * (log_total - float(z[k] - top))
                    dz[b, k] = np.float32(e[k] / total_e) - t[k]
            losses[b] = loss
            d = dsum[b]
            for k in range(L):
                c = dz[b, k]
                for j in range(dim):
                    d[j] += c * side[k, j]
            for j in range(dim):
                d[j] = d[j] / denom
    # Every gradient is taken: now the updates. The classifier, a label per thread ...
    for k in prange(L):
        g = np.zeros(dim + 1, np.float32)
        for b in range(B):
            c = dz[b, k]
            if c != 0:
                for j in range(dim):
                    g[j] += c * means[b, j]
                g[dim] += c
        _update(side[k], g, side_m[k * has_m], side_v[k * has_v], optimizer, lr, side_lr, clip_norm)
    # ... each trainable word of the batch (frozen ones and padding are not written) ...
    for p in prange(parts):
        g = np.empty(dim, np.float32)
        for s in range(p * W // parts, (p + 1) * W // parts):
            c = word[s]
            if weight[s] == 0 or c >= n_trainable:
                continue
            _row_gradient(g, word_tokens[word_starts[s]:word_starts[s + 1]], segment, dsum, weight[s])
            _update(words[c], g, word_m[c * has_m], word_v[c * has_v], optimizer, lr, word_lr, clip_norm)
    # ... and each n-gram row of the batch.
    for p in prange(parts):
        g = np.empty(dim + 1, np.float32)
        for s in range(p * G // parts, (p + 1) * G // parts):
            r = gram[s]
            if gram_weight[s] == 0 or r >= sink:
                continue
            _row_gradient(g, gram_tokens[gram_starts[s]:gram_starts[s + 1]], gram_segment, dsum, gram_weight[s])
            _update(side[r], g, side_m[r * has_m], side_v[r * has_v], optimizer, lr, side_lr, clip_norm)
    return _sum_in_order(losses)


class ClassifyKernel:
    """The call of one trainer's compiled classify step, with the tables and the optimizer's state as
    numpy arrays (the authoritative ones while it is in use; the trainer's variables catch up when
    read, Trainer._sync).

    update : sparse.Update, the optimizer (sgd, adagrad, adam), its state and the cap."""

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, n_labels: int, one_vs_all: bool, update, threads: int):
        self.words, self.side = words, side
        self.in_use = True
        self.distinct_rows = True   # each of a batch's rows is updated once: the batch must not repeat one
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable, self.n_labels, self.one_vs_all = n_trainable, n_labels, one_vs_all
        self.optimizer, self.clip_norm = KERNEL_OPTIMIZERS[update.optimizer], np.float32(update.clip_norm)
        # The optimizer's state, by the names of its variables (Trainer._sync assigns them back).
        self.word_state, self.side_state = update.state("word"), update.state("side")
        self._rows = {}
        for table, state, width in (("word", self.word_state, words.shape[1]), ("side", self.side_state, side.shape[1])):
            stand_in = np.zeros((1, width), np.float32)
            self._rows[table] = (state.get("m", state.get("accumulator", stand_in)), state.get("v", stand_in))
        self.threads = kernel_threads(threads)
        self._no_grams = (np.full(1, len(side) - 1, np.int32), np.zeros(1, np.float32), np.zeros(0, np.int32),
                          np.zeros(0, np.int32))

    def _adam_lr(self, state: dict, lr: np.float32) -> np.float32:
        """adam: the step's iteration counted, and lr with its bias correction (sparse.Adam.apply)."""
        if self.optimizer != ADAM:
            return lr
        state["iterations"][...] += 1
        t = np.float32(state["iterations"])
        return np.float32(lr * np.sqrt(np.float32(1) - np.float32(ADAM_BETA_2) ** t)
                          / (np.float32(1) - np.float32(ADAM_BETA_1) ** t))

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        set_num_threads(self.threads)
        return [self.step(batch, np.float32(lr)) for batch, lr in zip(batches, lrs)]

    def step(self, batch: dict, lr: np.float32) -> np.float32:
        grams = (tuple(batch[k] for k in ("gram", "gram_weight", "gram_slot", "gram_segment")) if "gram" in batch
                 else self._no_grams)
        word_lr, side_lr = self._adam_lr(self.word_state, lr), self._adam_lr(self.side_state, lr)
        return np.float32(classify_step(
            self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, self.n_labels, batch["word"],
            batch["weight"], batch["slot"], batch["segment"], *grams, batch["targets"], self.one_vs_all,
            self.optimizer, lr, word_lr, side_lr, self.clip_norm, *self._rows["word"], *self._rows["side"],
            4 * self.threads))
