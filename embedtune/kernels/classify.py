"""classify's compiled (numba) step with any lazy optimizer and the cap: TensorFlow's step's arithmetic
(embedtune/training/optimizers.py; their constants from embedtune/optimizer_constants.py), bits that do not depend on the thread count."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, set_num_threads

# Inlines common._update, revision 2 (common.py: numba's cache).
from embedtune.kernels.common import (ADAGRAD, ADAM, FASTMATH, KERNEL_OPTIMIZERS, PARALLEL, SGD, _row,
                                      _sum_in_order, _update, adam_rate, frozen_source, kernel_threads, serial, strict)


@njit(nogil=True)
def _by_key(keys, n_keys):
    """A stable counting sort of positions by ``keys`` (keys >= n_keys dropped): (order, starts [n_keys + 1]),
    positions with key k being order[starts[k]:starts[k + 1]], in their order. Called, not inlined: integers
    only, so one compile a process serves the step's four sorts and both twins."""
    starts = np.empty(n_keys + 1, np.int64)
    for k in range(n_keys + 1):
        starts[k] = 0
    for i in range(len(keys)):
        if keys[i] < n_keys:
            starts[keys[i] + 1] += 1
    for k in range(n_keys):
        starts[k + 1] += starts[k]
    order = np.empty(starts[n_keys], np.int64)
    fill = np.empty(n_keys, np.int64)
    for k in range(n_keys):
        fill[k] = starts[k]
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
    for j in range(len(g)):
        g[j] = 0
    for i in range(len(tokens)):
        d = dsum[segment[tokens[i]]]
        for j in range(len(d)):
            g[j] += d[j]
    for j in range(len(g)):
        g[j] = weight * g[j]


@njit(inline="always")
def _logit_loss(z, t, one_vs_all, e, dz, loss):
    """``loss`` plus a line's cross-entropy of targets ``t`` over logits ``z`` (float64), and d loss / d
    logit into ``dz`` (which may be ``z``: each logit is read before its own is written). One-vs-all:
    logistic per label; else softmax, the targets summing to 1 (Classify._targets). ``e``: scratch [L]."""
    L = len(z)
    if one_vs_all:
        for k in range(L):
            v = float(z[k])
            loss += max(v, 0.0) - v * t[k] + math.log1p(math.exp(-abs(v)))
            dz[k] = np.float32(1.0 / (1.0 + math.exp(-v))) - t[k]
    else:
        top = z[0]
        for k in range(1, L):
            top = max(top, z[k])
        total = 0.0
        for k in range(L):
            e[k] = math.exp(float(z[k] - top))
            total += e[k]
        log_total = math.log(total)
        for k in range(L):
            if t[k] != 0:
                loss += t[k] * (log_total - float(z[k] - top))
            dz[k] = np.float32(e[k] / total) - t[k]
    return loss


@njit(inline="always")
def _gather(out, s, W, words, frozen, frozen_rows, n_trainable, word, weight, side, gram, gram_weight):
    """Slot ``s`` of a batch's rows into ``out``, times its weight: word slots first (``W`` of them), then
    n-gram ones."""
    if s < W:
        wt = weight[s]
        row = _row(words, frozen, frozen_rows, n_trainable, word[s])
    else:
        wt = gram_weight[s - W]
        row = side[gram[s - W]]
    if wt == 0:
        for j in range(len(out)):
            out[j] = 0
    else:
        for j in range(len(out)):
            out[j] = wt * row[j]


@njit(inline="always")
def _line(b, rows, W, slot, weight, line_tokens, line_starts, gram_slot, gram_weight, line_grams, gram_line_starts,
          side, targets, one_vs_all, total, z, e, means, dz, dsum, losses):
    """Line ``b`` of a batch: the mean of its weighted rows (``rows``, gathered) into ``means[b]``, its
    loss into ``losses[b]``, d loss / d logit into ``dz[b]`` and d loss / d (a token's row) into
    ``dsum[b]``; a line with no counted word (padding among them) is left out of the loss.
    ``total``, ``z``, ``e``: the thread's scratch."""
    dim, L = means.shape[1], dz.shape[1]
    losses[b] = 0.0
    for j in range(dim):
        total[j] = 0
        means[b, j] = 0
        dsum[b, j] = 0
    for k in range(L):
        dz[b, k] = 0
    count = np.float32(0.0)
    for i in range(line_starts[b], line_starts[b + 1]):
        s = slot[line_tokens[i]]
        wt = weight[s]
        row = rows[s]
        for j in range(dim):
            total[j] += row[j]
        count += wt
    if count <= 0:
        return
    grams = np.float32(0.0)
    for i in range(gram_line_starts[b], gram_line_starts[b + 1]):
        s = gram_slot[line_grams[i]]
        row = rows[W + s]
        for j in range(dim):
            total[j] += row[j]
        grams += gram_weight[s]
    denom = count + grams if count + grams > 1 else np.float32(1.0)
    mean = means[b]
    for j in range(dim):
        mean[j] = total[j] / denom
    for k in range(L):
        label = side[k]
        x = label[dim]
        for j in range(dim):
            x += mean[j] * label[j]
        z[k] = x
    losses[b] = _logit_loss(z, targets[b], one_vs_all, e, dz[b], 0.0)
    d = dsum[b]
    for k in range(L):
        c = dz[b, k]
        for j in range(dim):
            d[j] += c * side[k, j]
    for j in range(dim):
        d[j] = d[j] / denom


@njit(inline="always")
def _label_gradient(g, k, dz, means):
    """Label ``k``'s gradient (weights, then bias) into ``g``: the sum over the batch's lines, in order."""
    dim = means.shape[1]
    for j in range(len(g)):
        g[j] = 0
    for b in range(len(dz)):
        c = dz[b, k]
        if c != 0:
            for j in range(dim):
                g[j] += c * means[b, j]
            g[dim] += c


def _for_optimizer(optimizer: int):
    """``classify_step`` for one optimizer (SGD, ADAGRAD, ADAM), a constant of the kernel: numba prunes the
    other optimizers' branches of the inlined ``_update`` before it compiles, so a run compiles only its own
    optimizer's code (as glove's ``_lock_free``); numba's cache keeps each apart."""
    @njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
    def classify_step(words, side, frozen, frozen_rows, n_trainable, n_labels, word, weight, slot, segment,
                      gram, gram_weight, gram_slot, gram_segment, targets, one_vs_all, lr, word_lr,
                      side_lr, clip_norm, word_m, word_v, side_m, side_v, parts):
        """One step of fastText's supervised model, as TensorFlow's step takes it (training/step.py) (the same
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
        the bits do not depend on the thread count. Three parallel loops a step: the rows gathered, the
        lines, the updates.
        """
        B, L, dim = targets.shape[0], n_labels, words.shape[1]
        W, G = len(word) - 1, len(gram) - 1
        has_m, has_v = int(optimizer != SGD), int(optimizer == ADAM)   # else: a one-row stand-in, never touched
        sink = side.shape[0] - 1
        line_tokens, line_starts = _by_key(segment, B)
        line_grams, gram_line_starts = _by_key(gram_segment, B)
        word_tokens, word_starts = _by_key(slot, W)
        gram_tokens, gram_starts = _by_key(gram_slot, G)
        # Each line's rows, zeroed by the line's own iteration (_line).
        means = np.empty((B, dim), np.float32)
        dz = np.empty((B, L), np.float32)
        dsum = np.empty((B, dim), np.float32)   # d loss / d (a token's row): d loss / d mean over the line's count
        losses = np.empty(B, np.float64)
        # The batch's rows, gathered once in id order (the ids are sorted: the reads walk the tables
        # forward), weighted: the lines then read them from a block that stays in cache.
        rows = np.empty((W + G, dim), np.float32)
        for p in prange(parts):
            for s in range(p * (W + G) // parts, (p + 1) * (W + G) // parts):
                _gather(rows[s], s, W, words, frozen, frozen_rows, n_trainable, word, weight, side, gram, gram_weight)
        for p in prange(parts):
            total = np.empty(dim, np.float32)
            z = np.empty(L, np.float32)
            e = np.empty(L, np.float64)
            for b in range(p * B // parts, (p + 1) * B // parts):
                _line(b, rows, W, slot, weight, line_tokens, line_starts, gram_slot, gram_weight, line_grams,
                      gram_line_starts, side, targets, one_vs_all, total, z, e, means, dz, dsum, losses)
        # Every gradient is taken: now the updates, in one parallel loop (each thread waking costs most on a
        # busy machine), of rows that no update reads: a part takes labels (each its whole gradient), then
        # trainable words of the batch (frozen ones and padding are not written), then n-gram rows, through one
        # update site: the optimizer's code inlined once, not once a kind of row (a third of the compile).
        for p in prange(parts):
            g = np.empty(dim + 1, np.float32)
            for u in range(p * (L + W + G) // parts, (p + 1) * (L + W + G) // parts):
                if u < L:
                    _label_gradient(g, u, dz, means)
                    row, m, v, rate, width = side[u], side_m[u * has_m], side_v[u * has_v], side_lr, dim + 1
                else:
                    if u < L + W:
                        s = u - L
                        c, wt = word[s], weight[s]
                        if wt == 0 or c >= n_trainable:
                            continue
                        tokens, line_of, width = word_tokens[word_starts[s]:word_starts[s + 1]], segment, dim
                        row, m, v, rate = words[c], word_m[c * has_m], word_v[c * has_v], word_lr
                    else:
                        s = u - L - W
                        r, wt = gram[s], gram_weight[s]
                        if wt == 0 or r >= sink:
                            continue
                        tokens, line_of, width = gram_tokens[gram_starts[s]:gram_starts[s + 1]], gram_segment, dim + 1
                        row, m, v, rate = side[r], side_m[r * has_m], side_v[r * has_v], side_lr
                    _row_gradient(g[:width], tokens, line_of, dsum, wt)
                _update(row, g[:width], m, v, optimizer, lr, rate, clip_norm)
        return _sum_in_order(losses)
    return classify_step


# Each optimizer's step: its parallel form, its serial twin (the parallel form's prange loops run in order, the
# same arithmetic: the same bits, tests/test_classify_kernel.py), and (--deterministic) the strict twin of each, the
# same bits on every CPU (common.FASTMATH).
OPTIMIZERS = (SGD, ADAGRAD, ADAM)
CLASSIFY_STEP = {optimizer: _for_optimizer(optimizer) for optimizer in OPTIMIZERS}
CLASSIFY_STEP_SERIAL = {optimizer: serial(CLASSIFY_STEP[optimizer]) for optimizer in OPTIMIZERS}
CLASSIFY_STEP_STRICT = {optimizer: strict(CLASSIFY_STEP[optimizer]) for optimizer in OPTIMIZERS}
CLASSIFY_STEP_SERIAL_STRICT = {optimizer: strict(CLASSIFY_STEP_SERIAL[optimizer]) for optimizer in OPTIMIZERS}
# A run that trains fewer lines than this (lines times epochs) steps through the serial twin: numba's parallel
# passes were over half the step's compile (7.8 CPU-s, of a fresh install's 15.6 s first run of the README's
# classify command: benchmarks/log/first_run.md), which so few steps' second thread does not win back.
SERIAL_LINE_EPOCHS = 100_000


class ClassifyKernel:
    """The call of one trainer's compiled classify step, with the tables and the optimizer's state as
    numpy arrays (the authoritative ones while it is in use; the trainer's variables catch up when
    read, training.step.CompiledStep.sync).

    update : training.optimizers.Update, the optimizer (sgd, adagrad, adam), its state and the cap.
    deterministic: the step without fastmath (a ``_STRICT`` twin), the same bits on every CPU. small: the serial
    twin (a run of fewer than SERIAL_LINE_EPOCHS lines)."""

    def __init__(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                 n_trainable: int, n_labels: int, one_vs_all: bool, update, threads: int,
                 deterministic: bool = False, small: bool = False):
        self.words, self.side = words, side
        self.frozen, self.frozen_rows = frozen_source(matrix, frozen_rows)
        self.n_trainable, self.n_labels, self.one_vs_all = n_trainable, n_labels, one_vs_all
        self.optimizer, self.clip_norm = KERNEL_OPTIMIZERS[update.optimizer], np.float32(update.clip_norm)
        steps = ((CLASSIFY_STEP_SERIAL_STRICT if deterministic else CLASSIFY_STEP_SERIAL) if small
                 else (CLASSIFY_STEP_STRICT if deterministic else CLASSIFY_STEP))
        self.step_fn = steps[self.optimizer]
        # The optimizer's state, by the names of its variables (CompiledStep.sync assigns them back).
        self.word_state, self.side_state = update.state("word"), update.state("side")
        self._rows = {}
        for table, state, width in (("word", self.word_state, words.shape[1]), ("side", self.side_state, side.shape[1])):
            stand_in = np.zeros((1, width), np.float32)
            self._rows[table] = (state.get("m", state.get("accumulator", stand_in)), state.get("v", stand_in))
        self.threads = kernel_threads(threads)
        self._no_grams = (np.full(1, len(side) - 1, np.int32), np.zeros(1, np.float32), np.zeros(0, np.int32),
                          np.zeros(0, np.int32))

    def run(self, batches: list[dict], lrs: list[float]) -> list[np.float32]:
        set_num_threads(self.threads)
        return [self.step(batch, np.float32(lr)) for batch, lr in zip(batches, lrs)]

    def step(self, batch: dict, lr: np.float32) -> np.float32:
        grams = (tuple(batch[k] for k in ("gram", "gram_weight", "gram_slot", "gram_segment")) if "gram" in batch
                 else self._no_grams)
        word_lr, side_lr = adam_rate(self.word_state, self.optimizer, lr), adam_rate(self.side_state, self.optimizer, lr)
        return np.float32(self.step_fn(
            self.words, self.side, self.frozen, self.frozen_rows, self.n_trainable, self.n_labels, batch["word"],
            batch["weight"], batch["slot"], batch["segment"], *grams, batch["targets"], self.one_vs_all,
            lr, word_lr, side_lr, self.clip_norm, *self._rows["word"], *self._rows["side"],
            4 * self.threads))


# The classifier-alone fit's lines are summed in this many blocks, each apart, then in block order:
# the bits do not depend on the thread count.
FIT_BLOCKS = 64


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def fit_loss_grad(X, Y, W, b, one_vs_all):
    """The classifier's cross-entropy of targets Y [n, L] over inputs X [n, dim], summed over the lines
    (float64), and its gradient [L, dim + 1] (weights, then bias; float64): the classifier-alone fit's
    (objectives/classify/model.py). Per line as the step's loss is taken (classify_step); each block of
    lines sums its gradient in float32, the blocks in float64."""
    n, dim = X.shape
    L = W.shape[0]
    losses = np.empty(FIT_BLOCKS, np.float64)
    grads = np.empty((FIT_BLOCKS, L, dim + 1), np.float32)   # each block's zeroed by its own iteration
    for p in prange(FIT_BLOCKS):
        z = np.empty(L, np.float32)
        e = np.empty(L, np.float64)
        g = grads[p]
        for k in range(L):
            for j in range(dim + 1):
                g[k, j] = 0
        loss = 0.0
        for i in range(p * n // FIT_BLOCKS, (p + 1) * n // FIT_BLOCKS):
            x, t = X[i], Y[i]
            for k in range(L):
                w = W[k]
                acc = np.float32(0.0)
                for j in range(dim):
                    acc += w[j] * x[j]
                z[k] = acc + b[k]
            loss = _logit_loss(z, t, one_vs_all, e, z, loss)   # z: d loss / d logit from here
            for k in range(L):
                c = z[k]
                gk = g[k]
                for j in range(dim):
                    gk[j] += c * x[j]
                gk[dim] += c
        losses[p] = loss
    grad = np.empty((L, dim + 1), np.float64)
    for k in range(L):
        for j in range(dim + 1):
            grad[k, j] = 0
    for p in range(FIT_BLOCKS):
        for k in range(L):
            for j in range(dim + 1):
                grad[k, j] += grads[p, k, j]
    return _sum_in_order(losses), grad


# --deterministic runs' classifier start: the same bits on every CPU (common.FASTMATH).
fit_loss_grad_strict = strict(fit_loss_grad)


@njit(parallel=PARALLEL, nogil=True, cache=True, fastmath=FASTMATH)
def classifier_scores(means, W, b):
    """[n, L] the logits ``b + W . mean`` of mean vectors [n, dim] (float32), a line per thread."""
    n, dim = means.shape
    L = W.shape[0]
    out = np.empty((n, L), np.float32)
    for i in prange(n):
        x = means[i]
        for k in range(L):
            w = W[k]
            acc = np.float32(0.0)
            for j in range(dim):
                acc += w[j] * x[j]
            out[i, k] = acc + b[k]
    return out


# Fewer lines than this are fitted and scored by the kernels' serial twins (the same arithmetic, in order; strict:
# the same bits): their parallel passes' compile (2.6 and 0.7 CPU-s) is most of what a small run would spend.
SERIAL_LINES = 20_000
fit_loss_grad_serial = serial(fit_loss_grad)
fit_loss_grad_serial_strict = strict(fit_loss_grad_serial)
classifier_scores_serial = serial(classifier_scores)


def fit_kernel(lines: int, strict_bits: bool):
    """The classifier-alone fit's kernel for ``lines`` lines (``strict_bits``: without fastmath)."""
    if lines < SERIAL_LINES:
        return fit_loss_grad_serial_strict if strict_bits else fit_loss_grad_serial
    return fit_loss_grad_strict if strict_bits else fit_loss_grad


def scores_kernel(lines: int):
    """``classifier_scores`` or, for fewer than SERIAL_LINES lines, its serial twin."""
    return classifier_scores_serial if lines < SERIAL_LINES else classifier_scores
