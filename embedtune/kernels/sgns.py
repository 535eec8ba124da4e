"""The compiled (numba) sgns steps for plain sgd, on every core. Two kinds. Without --deterministic, per-pair negatives take ``sgns_hogwild``: word2vec's own
update, lock-free (Hogwild, as word2vec's and gensim's worker threads), each pair applied in place at
once; the bits follow the threads' timing (one thread: word2vec's sequential loop). It costs less CPU
a pair than the batch-synchronous kernel and recovered new words better (benchmarks/README.md,
train_speed). The negatives come from the host: drawing them inside it (word2vec's LCG over the
unigram table) did not pay (benchmarks/README.md, train_speed, "What was measured and left out").

With --deterministic (and with shared negatives) the batch-synchronous kernels, the TensorFlow fused
step's arithmetic: same semantics as TensorFlow's ``dense_sgd`` (training/step.py): every gradient of a batch is taken from
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

import numpy as np
from llvmlite import ir
from numba import njit, prange, set_num_threads
from numba.core import cgutils, types
from numba.extending import intrinsic

from embedtune.kernels.common import (FASTMATH, PARALLEL, ROW_BLOCK_BITS, _add_loss, _descend, _dot, _logit_terms,
                                      _sum_in_order, frozen_source, kernel_threads, strict)



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


@njit(inline="always")
def _copy_center(words, frozen, frozen_rows, n_trainable, c, w):
    """``w`` = the center ``c``'s row as it is now: a trainable row of ``words``, or a frozen one of ``frozen``."""
    if c < n_trainable:
        for j in range(len(w)):
            w[j] = words[c, j]
    else:
        f = frozen_rows[c - n_trainable]
        for j in range(len(w)):
            w[j] = frozen[f, j]


# Only --deterministic runs take it: no fastmath, the same bits on every CPU (common.FASTMATH).
@njit(parallel=PARALLEL, nogil=True, cache=True)
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
            for k in range(k1 + 1):
                owners[b, k] = -1
            continue
        c = centers[b]
        owners[b, k1] = (c >> ROW_BLOCK_BITS) % parts if c < n_trainable else -1
        w = centers_now[b]
        _copy_center(words, frozen, frozen_rows, n_trainable, c, w)
        g = word_grads[b]
        for j in range(len(g)):
            g[j] = 0
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
        _copy_center(words, frozen, frozen_rows, n_trainable, c, w)
        g = word_grads[b]
        for j in range(len(g)):
            g[j] = 0
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
                for j in range(len(slice_)):
                    slice_[j] = 0
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


# --deterministic runs with shared negatives take it: the same bits on every CPU (common.FASTMATH).
sgns_shared_strict = strict(sgns_shared)


@njit(nogil=True, cache=True)
def window_pairs(ids, line, reach, window):
    """(centers, contexts) of a chunk's kept tokens ``ids`` [n] (``line`` [n], each token's line; ``reach``
    [n], each center's drawn window): offset by offset from 1 to ``window``, first every center i that
    sees i + offset, then every center i + offset that sees i, each in text order, never across a line.
    The same pairs in the same order as the numpy masks it replaced (objectives/sgns.py). Each slot is
    written whether or not its pair is kept and the place moves on only when it is: the kept pairs
    follow no pattern, and a branch on each cost more than the write."""
    n = len(ids)
    top = min(window, n - 1)
    count = 0
    for offset in range(1, top + 1):
        for i in range(n - offset):
            same = line[i + offset] == line[i]
            count += (same & (reach[i] >= offset)) + (same & (reach[i + offset] >= offset))
    centers = np.empty(count + 1, ids.dtype)   # + 1: the last slot written may be a dropped pair's
    contexts = np.empty(count + 1, ids.dtype)
    at = 0
    for offset in range(1, top + 1):
        for i in range(n - offset):   # center i sees i + offset
            centers[at], contexts[at] = ids[i], ids[i + offset]
            at += (line[i + offset] == line[i]) & (reach[i] >= offset)
        for i in range(n - offset):   # center i + offset sees i
            centers[at], contexts[at] = ids[i + offset], ids[i]
            at += (line[i + offset] == line[i]) & (reach[i + offset] >= offset)
    return centers[:count], contexts[:count]


@intrinsic
def _prefetch(typingctx, table, row, column):
    """A hint to the CPU to fetch ``table[row, column]``'s cache line ahead of its use (LLVM's
    ``llvm.prefetch``, for a write: the line is read and then written); it changes no value."""
    def codegen(context, builder, signature, args):
        _emit_prefetch(context, builder, signature.args[0], args[0], args[1:], signature.args[1:], write=True)
        return context.get_dummy_value()

    return types.void(table, row, column), codegen


def _emit_prefetch(context, builder, array_type, array_value, index_values, index_types, write):
    """LLVM's ``llvm.prefetch`` of an array element's address: for a write (the line read, then written) or a
    read, the highest locality (kept in every cache level), the data cache."""
    array = context.make_array(array_type)(context, builder, array_value)
    index = [context.cast(builder, value, kind, types.intp) for value, kind in zip(index_values, index_types)]
    pointer = cgutils.get_item_pointer(context, builder, array_type, array, index, wraparound=False)
    if getattr(pointer.type, "is_opaque", False):   # LLVM's opaque pointers (llvmlite >= 0.45)
        name = "llvm.prefetch.p0"
    else:
        pointer, name = builder.bitcast(pointer, ir.IntType(8).as_pointer()), "llvm.prefetch.p0i8"
    i32 = ir.IntType(32)
    prefetch = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
        ir.VoidType(), [pointer.type, i32, i32, i32]), name)
    builder.call(prefetch, [pointer, ir.Constant(i32, 1 if write else 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])


@intrinsic
def _prefetch_slot(typingctx, array, index):
    """A hint to the CPU to fetch ``array[index]``'s cache line (one-dimensional ``array``) ahead of a read."""
    def codegen(context, builder, signature, args):
        _emit_prefetch(context, builder, signature.args[0], args[0], args[1:], signature.args[1:], write=False)
        return context.get_dummy_value()

    return types.void(array, index), codegen


@njit(inline="always")
def _prefetch_row(table, row):
    """Every cache line of ``table[row]`` asked for (a 50-float row spans 4 or 5 lines of 64 bytes)."""
    dim = table.shape[1]
    for j in range(0, dim, 16):
        _prefetch(table, row, j)
    _prefetch(table, row, dim - 1)


@njit(inline="always")
def _prefetch_pair(words, side, frozen, frozen_rows, n_trainable, center, context, negatives):
    """The rows a pair will read and write: its center's, its context's and its negatives'."""
    if center < n_trainable:
        _prefetch_row(words, center)
    else:
        _prefetch_row(frozen, frozen_rows[center - n_trainable])
    _prefetch_row(side, context)
    for k in range(len(negatives)):
        _prefetch_row(side, negatives[k])


# splitmix64's increment: the lock-free kernel's n-th draw of a batch is splitmix64's mix of the batch's
# seed + n times it (integer arithmetic wrapping modulo 2**64).
GAMMA = 0x9E3779B97F4A7C15


def seed_mix(seed: int) -> np.uint64:
    """A batch's draws' first term (``sgns_hogwild``'s ``seed_mixes``): its seed times GAMMA, modulo 2**64."""
    return np.uint64(seed * GAMMA % (1 << 64))


@njit(inline="always")
def _negative_slots(mix, place, negative, table_size, slots):
    """The unigram table's slots of the negatives of the pair at ``place`` in its batch, into ``slots``:
    splitmix64 of the batch's ``mix`` and the draw's number in the batch, its top 32 bits scaled to the
    table (a multiply and a shift, not a division). The same draws whichever thread makes them, and in
    whichever group of batches: they follow the batch alone."""
    base = mix + np.uint64(place * negative) * np.uint64(GAMMA)
    for k in range(negative):
        z = base + np.uint64(k + 1) * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        slots[k] = np.int64(((z >> np.uint64(32)) * table_size) >> np.uint64(32))


@njit(nogil=True, cache=True)
def lockfree_negatives(table, mix, size, negative):
    """[size, negative] int32: the negatives ``sgns_hogwild`` draws for a batch of ``size`` pairs whose seed
    mix is ``mix`` (what a batch-synchronous step would need to take the same ones)."""
    slots = np.empty(negative, np.int64)
    out = np.empty((size, negative), np.int32)
    table_size = np.uint64(len(table))
    for place in range(size):
        _negative_slots(mix, place, negative, table_size, slots)
        for k in range(negative):
            out[place, k] = table[slots[k]]
    return out


@njit(inline="always")
def _pair_step(words, side, n_trainable, c, w, rows, logits, grad, wt, lr):
    """One pair's sgd step in place, ``sgns_hogwild``'s (see there): the center's copy ``w`` scored against the
    context and negative rows ``rows`` of ``side`` first, then each of those rows updated, then the center (a
    trainable one); -> the pair's weighted loss. ``logits`` and ``grad`` are scratch."""
    k1, dim = len(rows), len(w)
    for k in range(k1):
        r = rows[k]
        x = np.float32(0.0)
        for j in range(dim):
            x += w[j] * side[r, j]
        logits[k] = x
    for j in range(dim):
        grad[j] = 0
    product, extra = 1.0, 0.0   # the loss: _add_loss
    for k in range(k1):
        r, x = rows[k], logits[k]
        for p in range(k):
            if rows[p] == r:   # updated by this pair already: scored as it is now
                x = np.float32(0.0)
                for j in range(dim):
                    x += w[j] * side[r, j]
                break
        e, d = _logit_terms(x, 1.0 if k == 0 else 0.0)
        product, extra = _add_loss(x, e, product, extra)
        if k:
            extra += float(x)
        d = np.float32(wt * d)
        for j in range(dim):
            grad[j] += d * side[r, j]
            side[r, j] -= lr * (d * w[j])
    if c < n_trainable:
        for j in range(dim):
            words[c, j] -= lr * grad[j]
    return wt * (math.log(product) + extra)


@njit(parallel=True, nogil=True, cache=True, fastmath=FASTMATH)
def sgns_hogwild(words, side, frozen, frozen_rows, n_trainable, centers, contexts, table, seed_mixes, negative,
                 weight, lrs, batch_size, losses):
    """sgd steps of word2vec's sgns with per-pair negatives, lock-free (Hogwild, as word2vec's and
    gensim's worker threads): each thread takes a contiguous block of the pairs and applies each pair
    at once, in place, from the rows as they are then (score the 1 + K context rows against the center,
    update the context rows, then the center), with no scratch and no second pass.

    centers, contexts [N], weight [N]: several batches of ``batch_size`` pairs one after another (a group,
    one parallel region); lrs [N / batch_size], each batch's rate; seed_mixes [N / batch_size] uint64,
    each batch's ``seed_mix``. The ``negative`` negatives of each pair are drawn here, from ``table`` (the
    unigram table, side ids), as ``lockfree_negatives`` draws them. losses [threads, N / batch_size]
    float64: each thread's summed loss of each batch (written). The threads read and write shared rows
    without locks, so a row can lose or see half of a concurrent update, as in word2vec; the bits follow
    the thread timing. With one thread it is word2vec's sequential loop over the pairs in order. Frozen
    centers (local ids >= n_trainable) are read from ``frozen`` and never written; padding (weight 0)
    reads and writes nothing.

    What keeps the CPU busy rather than waiting (benchmarks/log/train_speed.md, issue 48): the rows lie at
    random places of the tables, so the next pair's 1 + 1 + K rows are prefetched while this pair is
    computed, and its negatives' table slots the pair before (a pipeline: slots two pairs ahead, rows one
    ahead); the 1 + K dot products are taken first, one after another with no update between them, so
    that they overlap (a row that comes again in the same pair, a negative drawn twice, is scored again
    after its first update, as the sequential loop scores it); the rows are read through two-dimensional
    indexing and a copy of the center rather than through row views, which measured slower; a pair's
    batch and place in it are counted along, not divided out. The negatives are drawn here rather than
    on the batch thread, where their draw and table gather cost more CPU than here (the same log).
    """
    size, k1 = len(centers), negative + 1
    threads, dim = losses.shape[0], words.shape[1]
    table_size = np.uint64(len(table))
    for t in prange(threads):
        grad = np.empty(dim, np.float32)
        w = np.empty(dim, np.float32)   # the center as it is at its pair's start
        rows = np.empty(k1, np.int64)
        logits = np.empty(k1, np.float32)
        slots = np.empty((4, negative), np.int64)   # pair b's table slots in row b % 4, drawn at b - 2
        negs = np.empty((4, negative), np.int64)    # pair b's negatives in row b % 4, read at b - 1
        for q in range(losses.shape[1]):
            losses[t, q] = 0.0
        start, end = t * size // threads, (t + 1) * size // threads
        if start >= end:
            continue
        # The pair two ahead: its batch and place in it.
        q2, place2 = start // batch_size, start % batch_size
        for ahead in range(min(2, end - start)):
            _negative_slots(seed_mixes[q2], place2, negative, table_size, slots[(start + ahead) % 4])
            place2 += 1
            if place2 == batch_size:
                q2, place2 = q2 + 1, 0
        for k in range(negative):
            negs[start % 4, k] = table[slots[start % 4, k]]
        q, place = start // batch_size, start % batch_size
        for b in range(start, end):
            if b + 2 < end:
                ahead = slots[(b + 2) % 4]
                _negative_slots(seed_mixes[q2], place2, negative, table_size, ahead)
                for k in range(negative):
                    _prefetch_slot(table, ahead[k])
                place2 += 1
                if place2 == batch_size:
                    q2, place2 = q2 + 1, 0
            if b + 1 < end:
                following = negs[(b + 1) % 4]
                for k in range(negative):
                    following[k] = table[slots[(b + 1) % 4, k]]
                _prefetch_pair(words, side, frozen, frozen_rows, n_trainable, centers[b + 1], contexts[b + 1],
                               following)
            wt = weight[b]
            if wt != 0:
                lr = lrs[q]
                c = centers[b]
                _copy_center(words, frozen, frozen_rows, n_trainable, c, w)
                rows[0] = contexts[b]
                for k in range(negative):
                    rows[k + 1] = negs[b % 4, k]
                losses[t, q] += _pair_step(words, side, n_trainable, c, w, rows, logits, grad, wt, lr)
            place += 1
            if place == batch_size:
                q, place = q + 1, 0


class SgnsKernel:
    """The scratch arrays and the call of one trainer's compiled step (frozen rows: ``frozen_source``)."""

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, batch_size: int, negative: int, shared: bool, threads: int,
                 lockfree: bool = False, table: np.ndarray | None = None):
        self.words, self.side = words, side
        # Per-pair negatives without --deterministic: sgns_hogwild, a group of batches a call, each batch's
        # negatives drawn in it from ``table`` (the unigram table) and the batch's "seed".
        self.lockfree = lockfree and not shared
        if self.lockfree and table is None:
            raise ValueError("the lock-free kernel draws its negatives: it needs the unigram table")
        self.table, self.negative = table, negative
        self.word_state, self.side_state = {}, {}   # plain sgd: no optimizer state
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable = n_trainable
        self.word_grads = np.empty((batch_size, words.shape[1]), np.float32)
        self.centers_now = np.empty((batch_size, words.shape[1]), np.float32)
        self.coefs = np.empty((batch_size, negative + 1), np.float32)
        self.owners = np.empty((batch_size, negative + 2), np.int32)
        self.losses = np.empty(batch_size, np.float64)
        self.step_fn = (sgns_shared_strict if not lockfree else sgns_shared) if shared else sgns_per_pair
        self.threads = kernel_threads(threads)
        # A part per thread: each walks every slice of the batch to find its own.
        self.parts = self.threads

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        """Steps over ``batches`` (the objective's numpy batches) at ``lrs``, in order; their summed
        losses. Lock-free: the whole group in one call, its pairs split among the threads."""
        if not self.lockfree:
            return [self.step(batch, lr) for batch, lr in zip(batches, lrs)]
        set_num_threads(self.threads)
        centers, contexts, weight = (np.concatenate([b[key] for b in batches]) for key in ("center", "context", "weight"))
        seeds = np.array([b["seed"] for b in batches], np.uint64)
        losses = np.empty((self.threads, len(batches)), np.float64)
        sgns_hogwild(self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, centers, contexts,
                     self.table, seeds, self.negative, weight, np.asarray(lrs, np.float32), len(batches[0]["center"]),
                     losses)
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
