"""Skip-gram with negative sampling (word2vec's SGNS), as an objective.

An objective says which rows a batch gathers and how the loss follows from them; the
trainer owns the tables, freezing, merging, capping and applying.

Pairs are made in bulk with numpy, one corpus chunk at a time: frequent-word
subsampling (word2vec's formula), a dynamic window (each center draws its reach from
1..window, so near words count more), windows never crossing a line. Negatives are
drawn inside the step from a unigram^0.75 table over the training vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from embedtune._tf import tf

from embedtune.config import TrainConfig
from embedtune.corpus import IdChunk, id_chunks
from embedtune.objectives.rows import LocalRows

UNIGRAM_POWER = 0.75


def keep_probabilities(counts: np.ndarray, sample: float) -> np.ndarray:
    """word2vec's subsampling: P(keep) = (sqrt(f / t) + 1) * t / f, f = count, t = sample * total."""
    if not sample:
        return np.ones(len(counts))
    threshold = sample * counts.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (np.sqrt(counts / threshold) + 1) * threshold / counts
    return np.where(counts > 0, np.minimum(p, 1.0), 0.0)


def unigram_table(counts: np.ndarray) -> np.ndarray:
    """Row ids repeated in proportion to count^0.75 (word2vec's negative-sampling table).

    Its size follows the training vocabulary (100 slots a word, 1e5..1e7), not the table of vectors.
    """
    weights = counts.astype(np.float64) ** UNIGRAM_POWER
    size = int(np.clip(100 * np.count_nonzero(counts), 1e5, 1e7))
    slots = np.floor(np.cumsum(weights) / weights.sum() * size).astype(np.int64)
    repeats = np.diff(np.concatenate([[0], slots]))
    return np.repeat(np.arange(len(counts), dtype=np.int32), repeats)


class SkipGram:
    """SGNS over the local rows of a run; its own table (the side table) holds context vectors."""

    word_keys = ("center",)   # the batch entries holding word-table ids

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus=None):
        self.rows = rows
        self.window = train.window
        self.negative = train.negative
        self.batch_size = train.batch_size
        self.context_init = train.context_init
        self.side_fixed_from = None   # every context row trains (frozen words' too: they are internal)
        self.keep = keep_probabilities(rows.counts, train.sample)
        self.table = tf.constant(unigram_table(rows.counts))
        # Word slices a trainable row gets in an epoch (expected): one per pair it centers, and a
        # kept occurrence centers about window + 1 pairs (a reach of 1..window on each side).
        self.slices = (rows.counts * self.keep * (self.window + 1))[:rows.n_trainable]

    # --- host side: corpus chunk -> fixed-size batches --------------------------------------
    def side_start(self) -> np.ndarray:
        """[n_local + 1, dim] context vectors: zeros (word2vec), or the words' own vectors; the
        last row is the sink."""
        n, dim = self.rows.n_local, self.rows.dim
        if self.context_init == "word":
            return np.concatenate([self.rows.vectors(np.arange(n)), np.zeros((1, dim), np.float32)])
        return np.zeros((n + 1, dim), np.float32)

    def chunks(self, corpus, local_index) -> Iterator[IdChunk]:
        return id_chunks(corpus, local_index)

    def units(self, chunk: IdChunk, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(centers, contexts) int32 arrays for one chunk, shuffled."""
        ids, line = chunk.ids, chunk.line
        if len(ids):
            kept = rng.random(len(ids)) < self.keep[ids]
            ids, line = ids[kept], line[kept]
        reach = rng.integers(1, self.window + 1, size=len(ids), dtype=np.int32)
        centers, contexts = [], []
        for offset in range(1, min(self.window, len(ids) - 1) + 1):
            same_line = line[offset:] == line[:-offset]
            ahead = same_line & (reach[:-offset] >= offset)   # center i sees i + offset
            behind = same_line & (reach[offset:] >= offset)   # center i + offset sees i
            centers += [ids[:-offset][ahead], ids[offset:][behind]]
            contexts += [ids[offset:][ahead], ids[:-offset][behind]]
        if not centers:
            return np.empty(0, np.int32), np.empty(0, np.int32)
        centers, contexts = np.concatenate(centers), np.concatenate(contexts)
        order = rng.permutation(len(centers))
        return centers[order], contexts[order]

    def batches(self, centers: np.ndarray, contexts: np.ndarray) -> Iterator[dict]:
        """Fixed-size batches (one traced step shape); the last is padded with weight 0."""
        size = self.batch_size
        for start in range(0, len(centers), size):
            c, o = centers[start:start + size], contexts[start:start + size]
            n = len(c)
            weight = np.ones(size, np.float32)
            if n < size:
                pad = size - n
                c = np.concatenate([c, np.zeros(pad, np.int32)])
                o = np.concatenate([o, np.zeros(pad, np.int32)])
                weight[n:] = 0
            yield {"center": c, "context": o, "weight": weight, "pairs": n}

    # --- device side: inside the step ------------------------------------------------------------
    def side_ids(self, batch, rng: tf.random.Generator) -> tf.Tensor:
        """Rows of the context table: [B, 1 + negative], the true context first."""
        slots = rng.uniform([tf.shape(batch["center"])[0], self.negative], 0, tf.size(self.table, tf.int32),
                            dtype=tf.int32)
        negatives = tf.gather(self.table, slots)
        return tf.concat([batch["context"][:, None], negatives], axis=1)

    def loss(self, words: list[tf.Tensor], contexts: tf.Tensor, batch) -> tf.Tensor:
        """Summed SGNS loss of the batch.

        words : [centers [B, dim]]; contexts : [B, 1 + negative, dim]
        """
        logits = tf.einsum("bd,bkd->bk", words[0], contexts)
        labels = tf.concat([tf.ones_like(logits[:, :1]), tf.zeros_like(logits[:, 1:])], axis=1)
        per_pair = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), axis=1)
        return tf.reduce_sum(per_pair * batch["weight"])
