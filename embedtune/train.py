"""The training loop: plan the rows, build split tables, run the sparse step, copy back.

Tables. Only words that occur in the corpus take part, so every table follows the
corpus vocabulary, never the size of the vectors file. Their ids ("local ids") put the
trainable words first:

    local id in [0, T)      a trainable word: a row of ``trainable`` (a tf.Variable)
    local id in [T, T + F)  a frozen word: a row of ``frozen`` (a tf.constant)

Frozen rows cannot move by construction (they are not variables), and optimizer state
exists only for trainable rows. ``trainable`` has one extra row, the sink, where the
slices of frozen words and padding go before they are dropped.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from embedtune._tf import tf

from embedtune.config import Config, learning_rate
from embedtune.corpus import Corpus, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.objectives.sgns import SkipGram
from embedtune.plan import Plan, make_plan
from embedtune.sparse import cap_rows, make_optimizer, merge_rows
from embedtune.vectors import Vectors

OBJECTIVES = {"sgns": SkipGram}
JIT = os.environ.get('EMBEDTUNE_JIT', '1') == '1'
LOSS_EVERY = 20  # steps between reading the loss back (a host sync)


@dataclass
class Progress:
    """What the loop reports to a progress callback."""

    epoch: int
    words_done: int       # raw corpus tokens processed so far, all epochs
    words_total: int
    loss: float           # mean loss per pair since the last report
    pairs: int


@dataclass
class TrainResult:
    vectors: Vectors
    plan: Plan
    stats: dict = field(default_factory=dict)


def is_lowercase_vocabulary(vectors: Vectors, sample: int = 10000) -> bool:
    """True when the vectors hold no upper-case words (GloVe): the corpus is then lower-cased."""
    return not any(w != w.lower() for w in vectors.words[:sample])


def scan_corpus(corpus: Corpus, vectors: Vectors, config: Config):
    """Count the corpus; pick new words (not in the vectors, >= min_count, most frequent first)."""
    counts, total, n_lines = corpus.count()
    if total == 0:
        raise EmbedtuneError("the corpus has no words", corpus.path)
    vocab = config.vocab
    new = [(c, w) for w, c in counts.items() if c >= vocab.min_count and w not in vectors.index]
    new.sort(key=lambda cw: (-cw[0], cw[1]))
    if vocab.max_new:
        new = new[: vocab.max_new]
    return counts, total, n_lines, [w for _, w in new]


def new_word_vectors(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """word2vec's start for a word with no vector: uniform in +-0.5/dim."""
    return ((rng.random((n, dim), dtype=np.float32) - 0.5) / dim).astype(np.float32)


class Trainer:
    """Holds the split tables and the step for one training run."""

    def __init__(self, matrix: np.ndarray, plan: Plan, counts: dict, config: Config):
        t = config.train
        self.config = config
        self.plan = plan
        self.rng = np.random.default_rng(t.seed)
        self.tf_rng = tf.random.Generator.from_seed(t.seed)

        n_pre = plan.n_pretrained
        row_counts = np.array([counts.get(w, 0) for w in plan.words], dtype=np.int64)
        in_corpus = row_counts > 0
        # Local ids: trainable words of the corpus first, then frozen ones.
        trainable_rows = np.flatnonzero(in_corpus & ~plan.frozen)
        frozen_rows = np.flatnonzero(in_corpus & plan.frozen)
        if len(trainable_rows) == 0:
            raise EmbedtuneError(
                "nothing to train: every word of the corpus is frozen (check the freeze rules)")
        self.rows = np.concatenate([trainable_rows, frozen_rows])   # local id -> plan row
        self.n_trainable = len(trainable_rows)
        self.local_index = {plan.words[r]: i for i, r in enumerate(self.rows)}
        local_counts = row_counts[self.rows]

        dim = matrix.shape[1]
        start = np.empty((self.n_trainable + 1, dim), np.float32)   # + sink row
        pre = trainable_rows < n_pre
        start[:self.n_trainable][pre] = matrix[trainable_rows[pre]]
        start[:self.n_trainable][~pre] = new_word_vectors(int((~pre).sum()), dim, self.rng)
        start[-1] = 0
        self.start = start[:-1].copy()
        self.trainable = tf.Variable(start, name="trainable_words")
        frozen = matrix[frozen_rows[frozen_rows < n_pre]] if len(frozen_rows) else np.zeros((1, dim), np.float32)
        self.frozen = tf.constant(frozen)
        self.n_frozen = len(frozen)

        n_local = len(self.rows)
        if t.context_init == "word":
            context = np.concatenate([start[:-1], frozen[: len(frozen_rows)], np.zeros((1, dim), np.float32)])
        else:
            context = np.zeros((n_local + 1, dim), np.float32)
        self.context = tf.Variable(context, name="context")
        self.dim = dim
        self.context_rows = n_local   # the context table's sink row
        # Static shapes: reading a variable's shape in the step would copy the table.
        self.trainable_shape = tf.constant([self.n_trainable + 1, dim], tf.int64)
        self.context_shape = tf.constant([n_local + 1, dim], tf.int64)

        self.objective = OBJECTIVES[t.objective](local_counts, t)
        self.word_opt = make_optimizer(t.optimizer, self.trainable)
        self.context_opt = make_optimizer(t.optimizer, self.context)
        self.clip_norm = float(t.clip_norm)
        self.gradients = tf.function(self._gradients, jit_compile=JIT)
        self.step = tf.function(self._step)

    def _gather_words(self, ids):
        """Rows for local ids: trainable ones from the variable, frozen ones from the constant."""
        t = self.n_trainable
        is_trainable = ids < t
        ids = tf.minimum(ids, t + self.n_frozen - 1)   # padding reads any frozen row; its weight is 0
        from_var = tf.gather(self.trainable, tf.where(is_trainable, ids, t))
        from_const = tf.gather(self.frozen, tf.where(is_trainable, 0, ids - t))
        return tf.where(is_trainable[:, None], from_var, from_const)

    def _gradients(self, batch):
        """Loss and per-slice gradients: the dense part of the step (XLA-compiled).

        Returns loss, word slices (ids [B], grads [B, dim]), context slices (ids [m], grads [m, dim]).
        Frozen words and padding get the sink id of their table.
        """
        obj = self.objective
        real = batch["weight"] > 0
        word_ids = tf.where(real, obj.word_ids(batch), self.n_trainable + self.n_frozen)
        context_ids = obj.context_ids(batch, self.tf_rng)
        context_ids = tf.where(real[:, None], context_ids, self.context_rows)
        # Gather outside the tape and differentiate with respect to the gathered rows: the
        # gradient of a gather from a variable carries dense_shape = tf.shape(variable), a
        # read that copies the whole table once it has had a sparse update.
        words = self._gather_words(word_ids)
        contexts = tf.gather(self.context, context_ids)
        with tf.GradientTape() as tape:
            tape.watch([words, contexts])
            loss = obj.loss(words, contexts, batch)
        word_grads, context_grads = tape.gradient(loss, [words, contexts])
        word_ids = tf.minimum(word_ids, self.n_trainable)   # frozen -> the sink row
        return (loss, word_ids, word_grads,
                tf.reshape(context_ids, [-1]), tf.reshape(context_grads, [-1, self.dim]))

    def _step(self, batch, lr):
        loss, word_ids, word_grads, context_ids, context_grads = self.gradients(batch)
        word_grad = tf.IndexedSlices(word_grads, word_ids, self.trainable_shape)
        context_grad = tf.IndexedSlices(context_grads, context_ids, self.context_shape)
        rows, grads = merge_rows(word_grad, sink=self.n_trainable)   # drops frozen rows and padding
        self.word_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        rows, grads = merge_rows(context_grad, sink=self.context_rows)
        self.context_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        return loss

    def trained_matrix(self) -> np.ndarray:
        """[T, dim] the trainable rows now."""
        return self.trainable.numpy()[: self.n_trainable]


def train(vectors: Vectors, corpus: Corpus, config: Config,
          progress: Callable[[Progress], None] | None = None,
          on_plan: Callable[[Plan], None] | None = None) -> TrainResult:
    """Continue training ``vectors`` on ``corpus``; rows frozen by the config stay bit-identical.

    Returns the vectors with new words appended after the pretrained ones.
    """
    t = config.train
    if t.dim is not None and t.dim != vectors.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, but --dim says {t.dim}",
                             config.vectors)
    began = time.perf_counter()
    counts, total_words, n_lines, new_words = scan_corpus(corpus, vectors, config)
    plan = make_plan(vectors, new_words, config.vocab)
    if on_plan is not None:
        on_plan(plan)
    trainer = Trainer(vectors.matrix, plan, counts, config)
    lr0 = learning_rate(t)
    words_total = total_words * t.epochs
    words_done = 0
    loss_history = []          # mean loss per pair, one entry per LOSS_EVERY steps
    pending_loss, pending_pairs, steps, pairs_total = [], 0, 0, 0
    train_began = time.perf_counter()

    for epoch in range(1, t.epochs + 1):
        for chunk in id_chunks(corpus, trainer.local_index):
            centers, contexts = trainer.objective.pairs(chunk, trainer.rng)
            chunk_pairs, chunk_pairs_done = max(len(centers), 1), 0
            chunk_start = words_done
            for batch in trainer.objective.batches(centers, contexts):
                # Linear decay by corpus position, as word2vec does.
                lr = lr0 * max(1.0 - words_done / words_total, t.min_lr_fraction)
                pending_loss.append(trainer.step(_tensors(batch), tf.constant(lr, tf.float32)))
                pending_pairs += batch["pairs"]
                chunk_pairs_done += batch["pairs"]
                words_done = chunk_start + chunk.raw_tokens * chunk_pairs_done // chunk_pairs
                steps += 1
                if steps % LOSS_EVERY == 0:
                    _flush(pending_loss, pending_pairs, loss_history, progress, epoch, words_done, words_total)
                    pairs_total += pending_pairs
                    pending_loss, pending_pairs = [], 0
            words_done = chunk_start + chunk.raw_tokens
    pairs_total += pending_pairs
    _flush(pending_loss, pending_pairs, loss_history, progress, t.epochs, words_done, words_total)
    train_seconds = time.perf_counter() - train_began

    matrix = np.empty((len(plan.words), vectors.dim), np.float32)
    matrix[: plan.n_pretrained] = vectors.matrix
    # Rows that never occurred keep their start: pretrained values, or word2vec's random start.
    n_new = plan.n_new
    if n_new:
        matrix[plan.n_pretrained:] = new_word_vectors(n_new, vectors.dim, np.random.default_rng(t.seed + 1))
    trained_rows = trainer.rows[: trainer.n_trainable]
    matrix[trained_rows] = trainer.trained_matrix()
    out = Vectors(plan.words, matrix)

    stats = {
        **plan.summary(),
        "epochs": t.epochs,
        "corpus_words": total_words,
        "corpus_lines": n_lines,
        "trained_rows": int(trainer.n_trainable),
        "steps": steps,
        "pairs": pairs_total,
        "words_per_second": round(words_done / train_seconds) if train_seconds > 0 else None,
        "train_seconds": round(train_seconds, 3),
        "total_seconds": round(time.perf_counter() - began, 3),
        "loss_first": loss_history[0] if loss_history else None,
        "loss_last": loss_history[-1] if loss_history else None,
        "loss_history": loss_history,
        "max_frozen_change": max_frozen_change(vectors.matrix, matrix, plan.frozen),
    }
    return TrainResult(out, plan, stats)


def _tensors(batch):
    return {k: tf.constant(v) for k, v in batch.items() if k != "pairs"}


def _flush(pending_loss, pending_pairs, history, progress, epoch, words_done, words_total):
    if not pending_loss:
        return
    total = float(tf.add_n(pending_loss))
    mean = total / max(pending_pairs, 1)
    history.append(mean)
    if progress is not None:
        progress(Progress(epoch, words_done, words_total, mean, pending_pairs))


def max_frozen_change(before: np.ndarray, after: np.ndarray, frozen: np.ndarray) -> float:
    """Largest absolute change on a frozen row (must be 0.0); NaN-safe, bit-level."""
    rows = np.flatnonzero(frozen[: len(before)])
    if len(rows) == 0:
        return 0.0
    old, new = before[rows], after[rows]
    if np.array_equal(old.view(np.uint32), new.view(np.uint32)):
        return 0.0
    diff = np.abs(old.astype(np.float64) - new.astype(np.float64))
    return float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf
