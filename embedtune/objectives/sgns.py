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
from embedtune.corpus import IdChunk

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
    """SGNS over a training vocabulary of ``n_words`` ids.

    counts : int array of shape = [n_words], corpus counts of the training vocabulary
    """

    word_key = "center"   # the batch entry holding the word-table ids

    def __init__(self, counts: np.ndarray, train: TrainConfig):
        self.window = train.window
        self.negative = train.negative
        self.batch_size = train.batch_size
        self.keep = keep_probabilities(counts, train.sample)
        self.table = tf.constant(unigram_table(counts))

    # --- host side: corpus chunk -> fixed-size batches --------------------------------------
    def pairs(self, chunk: IdChunk, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
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
    def word_ids(self, batch) -> tf.Tensor:
        """Rows of the word table the batch reads: [B]."""
        return batch[self.word_key]

    def context_ids(self, batch, rng: tf.random.Generator) -> tf.Tensor:
        """Rows of the context table: [B, 1 + negative], the true context first."""
        slots = rng.uniform([tf.shape(batch["center"])[0], self.negative], 0, tf.size(self.table, tf.int32),
                            dtype=tf.int32)
        negatives = tf.gather(self.table, slots)
        return tf.concat([batch["context"][:, None], negatives], axis=1)

    def loss(self, words: tf.Tensor, contexts: tf.Tensor, batch) -> tf.Tensor:
        """Summed SGNS loss of the batch.

        words : [B, dim]; contexts : [B, 1 + negative, dim]
        """
        logits = tf.einsum("bd,bkd->bk", words, contexts)
        labels = tf.concat([tf.ones_like(logits[:, :1]), tf.zeros_like(logits[:, 1:])], axis=1)
        per_pair = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), axis=1)
        return tf.reduce_sum(per_pair * batch["weight"])
