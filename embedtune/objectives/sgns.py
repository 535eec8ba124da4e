"""Skip-gram with negative sampling (word2vec's SGNS), as an objective.

An objective says which rows a batch gathers and how the loss follows from them; the
trainer owns the tables, freezing, merging, capping and applying.

Pairs are made in bulk with numpy, one corpus chunk at a time: frequent-word
subsampling (word2vec's formula), a dynamic window (each center draws its reach from
1..window, so near words count more), windows never crossing a line. Negatives are
drawn on the host with the batches (numpy, ahead of the step, from a generator seeded by the chunk's
random state, so that a resumed run draws the same) from a unigram^0.75 table over the training
vocabulary: cheaper on the batch thread than TensorFlow's stateful generator and table gather on the
step's thread (benchmarks/README.md, train_speed). The lock-free kernel draws its own from the same table,
seeded by each batch's seed from that generator (kernels.sgns.sgns_hogwild). Either per pair
(word2vec's own, the default) or shared by a group of pairs (Ji et al. 2016, "Parallelizing
Word2Vec in Shared and Distributed Memory", and BlazingText's batch skip-gram).

Shared negatives: the K negatives of a group of SHARED_GROUP pairs are scored against all its
centers with one matmul, so the context table gets B + K * B / SHARED_GROUP slices a step instead of
B * (1 + K); every (center, negative) term of word2vec's loss is still there, only drawn once for
the group. It halved the CPU of the batch-synchronous step, but costs as much as per-pair's lock-free
kernel and lowers the recovery benchmark's R@10 (benchmarks/README.md, train_speed), so it is an
option, not the default.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune._tf import lazy as tf
from embedtune.config.keys import OwnKeys, Range, key
from embedtune.config.schema import TrainConfig
from embedtune.corpus import CHUNK_TOKENS, IdChunk, id_chunks
from embedtune.objectives.base import Modes, Objective
from embedtune.objectives.rows import LocalRows

UNIGRAM_POWER = 0.75
NEGATIVES = ("shared", "per-pair")
# The corpus as ids is kept after the first epoch, for the next ones, up to this many tokens
# (8 bytes each: ids and line numbers); a larger corpus is read and encoded again each epoch.
CACHE_TOKENS = 1 << 26
# Host bytes per pair of a chunk: int32 centers and contexts, shuffled in place (units), and those of the chunk
# before, which its last batches still read while the next one's are made (the dry run's estimate).
BYTES_PER_PAIR = 16
SHARED_GROUP = 16   # pairs sharing one draw of negatives (see benchmarks/README.md, train_speed)


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


@dataclass(frozen=True)
class SkipGramKeys(OwnKeys):
    """sgns's own keys of [train]."""

    negative: int = key(5, range=Range(1, 100), help="Negative samples per pair.")
    negatives: str = key("per-pair", choices=NEGATIVES,
                         help="Negatives drawn for each pair (word2vec's) or shared by a group of 16 pairs (half the "
                              "CPU; lower quality on the recovery benchmark).")
    sample: float = key(1e-3, range=Range(0, 1, zero="off"), help="Subsampling threshold for frequent words (0 = off).")
    # zeros: lower loss (benchmarks/README.md, recovery)
    context_init: str = key("zeros", choices=("zeros", "word"), option=False,
                            help="Start of the context table: zeros (word2vec) | word.")


class SkipGram(Objective):
    """SGNS over the local rows of a run; its own table (the side table) holds context vectors."""

    name = "sgns"
    help = "skip-gram, word2vec's"
    auto_default = True   # --objective auto, for vectors no other objective made
    modes = Modes(parameter_servers=True)
    keys = (SkipGramKeys,)
    defaults = {"window": 5, "optimizer": "sgd", "anchor": 0.0, "epochs": 5}   # word2vec's
    settings = ("window", "negative", "sample", "context_init")
    word_keys = ("center",)   # the batch entries holding word-table ids
    reads_lines = True
    joins_batches = True

    @classmethod
    def memory(cls, train: TrainConfig, dim, n_local, corpus_words, corpus_lines, units=None):
        """Context vectors a local word; one chunk's pairs: a kept word centers window + 1 pairs on
        average (reach 1..window each side), BYTES_PER_PAIR each."""
        return (n_local + 1) * dim * 4, min(CHUNK_TOKENS, corpus_words) * (train.window + 1) * BYTES_PER_PAIR

    @classmethod
    def init_window(cls, train: TrainConfig) -> int:
        """New words start from the contexts they are trained on: the training window."""
        return train.window

    @classmethod
    def no_pairs_hint(cls, train: TrainConfig) -> str:
        sample = train.keys_of(SkipGramKeys).sample
        return f" once frequent words are subsampled; try --sample 0 (it was {sample:g})" if sample else ""

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus=None):
        own = train.keys_of(SkipGramKeys)
        self.rows = rows
        self.window = train.window
        self.negative = own.negative
        self.shared = own.negatives == "shared"
        # Shared negatives need whole groups: the batch is padded to a multiple of the group.
        self.group = min(SHARED_GROUP, train.batch_size)
        self.batch_size = -(-train.batch_size // self.group) * self.group if self.shared else train.batch_size
        self.context_init = own.context_init
        self.epochs = train.epochs
        self._cached: list[IdChunk] | None = None
        self.kernel = None   # the compiled step, if the run's step is it (compiled_step)
        self.side_fixed_from = None   # every context row trains (frozen words' too: they are internal)
        self.keep = keep_probabilities(rows.counts, own.sample)
        self.table = unigram_table(rows.counts)
        # Word slices a trainable row gets in an epoch (expected): one per pair it centers, and a
        # kept occurrence centers about window + 1 pairs (a reach of 1..window on each side).
        self.slices = (rows.counts * self.keep * (self.window + 1))[:rows.n_trainable]

    @classmethod
    def compiles(cls, train) -> bool:
        """Any optimizer, with or without the cap; not with an anchor (its proximal step is TensorFlow's alone)."""
        return not train.anchor

    @classmethod
    def why_not_compiled(cls, train) -> str | None:
        return "--anchor" if train.anchor else None

    def compiled_step(self, words, side, matrix, frozen_rows, n_trainable, threads, deterministic=True, update=None):
        """The numba kernel: plain sgd (no cap), embedtune/kernels/sgns.py's, per-pair or shared negatives, as
        configured; per-pair without ``deterministic``: lock-free (Hogwild), as word2vec's threads. Adagrad, adam
        or a cap: embedtune/kernels/sgns_lazy.py's, the TensorFlow step's arithmetic (merged rows, lazy state)."""
        if update is not None and (update.optimizer != "sgd" or update.clip_norm):
            from embedtune.kernels.sgns_lazy import SgnsLazyKernel

            self.kernel = SgnsLazyKernel(words, side, matrix, frozen_rows, n_trainable, self.batch_size,
                                         self.negative, self.shared, update, threads, deterministic)
            return self.kernel
        from embedtune.kernels.sgns import SgnsKernel

        self.kernel = SgnsKernel(words, side, matrix, frozen_rows, n_trainable, self.batch_size, self.negative,
                                 self.shared, threads, lockfree=not deterministic, table=self.table)
        return self.kernel

    # --- several workers --------------------------------------------------------------------------
    @classmethod
    def batch_unit(cls, train: TrainConfig) -> tuple[int, str]:
        """Shared negatives: whole groups in each worker's part of the batch."""
        return (SHARED_GROUP, "--negatives shared") if train.keys_of(SkipGramKeys).negatives == "shared" else (1, "")

    def padding_batch(self) -> dict:
        """One pair of local id 0 (and its negatives), weighing nothing."""
        return self.emptied(self.batches(np.zeros(1, np.int32), np.zeros(1, np.int32)))

    @property
    def lockfree(self) -> bool:
        """Whether the run's step is the lock-free kernel (which also draws its own negatives)."""
        return self.kernel is not None and self.kernel.lockfree

    @property
    def pairs_in_order(self) -> bool:
        """The lock-free kernel takes the pairs as made (word2vec does not shuffle either); a
        batch-synchronous step (TensorFlow's, the deterministic kernel) needs them shuffled, or a batch
        would hold one stretch of text at one offset."""
        return self.lockfree

    # --- host side: corpus chunk -> fixed-size batches --------------------------------------
    def side_start(self) -> np.ndarray:
        """[n_local + 1, dim] context vectors: zeros (word2vec), or the words' own vectors; the
        last row is the sink."""
        n, dim = self.rows.n_local, self.rows.dim
        if self.context_init == "word":
            return np.concatenate([self.rows.vectors(np.arange(n)), np.zeros((1, dim), np.float32)])
        return np.zeros((n + 1, dim), np.float32)

    def chunks(self, corpus, local_index) -> Iterator[IdChunk]:
        if self._cached is not None:
            yield from self._cached
            return
        kept, tokens = [], 0
        for chunk in id_chunks(corpus, local_index):
            tokens += len(chunk.ids)
            if kept is not None and self.epochs > 1 and tokens <= CACHE_TOKENS:
                kept.append(chunk)
            else:
                kept = None
            yield chunk
        if kept is not None and self.epochs > 1:
            self._cached = kept

    def units(self, chunk: IdChunk, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
        """(centers, contexts) int32 arrays for one chunk, shuffled (in order for the lock-free
        kernel: offset by offset, ``pairs_in_order``), and the seed of its negatives."""
        ids, line = chunk.ids, chunk.line
        if len(ids):
            kept = rng.random(len(ids)) < self.keep[ids]
            ids, line = ids[kept], line[kept]
        from embedtune.kernels.sgns import window_pairs

        reach = rng.integers(1, self.window + 1, size=len(ids), dtype=np.int32)
        centers, contexts = window_pairs(ids, line, reach, self.window)
        seed = int(rng.integers(1 << 63))
        if self.pairs_in_order:
            # The shuffle was most of the pairs' cost; recovery held without it (benchmarks/README.md,
            # train_speed).
            return centers, contexts, seed
        # Shuffled in place, each by the same draws: rng.permutation(n) is rng.shuffle(np.arange(n)), so these are
        # the pairs centers[order], contexts[order] of before, without the order (int64) and the two copies beside
        # the chunk's pairs (16 bytes a pair; a 1M-token chunk makes about 3.6M pairs).
        state = rng.bit_generator.state
        rng.shuffle(centers)
        rng.bit_generator.state = state
        rng.shuffle(contexts)
        return centers, contexts, seed

    def batches(self, centers: np.ndarray, contexts: np.ndarray, seed: int = 0) -> Iterator[dict]:
        """Fixed-size batches (one traced step shape); the last is padded with weight 0. Each carries
        its negatives (per pair [B, negative], shared [B / group, negative]), drawn per batch so
        that their memory follows the batch, not the chunk; for the lock-free kernel, which draws them
        itself (kernels.sgns.sgns_hogwild: less CPU than drawing them here), the seed of its draws instead."""
        from embedtune.kernels.sgns import seed_mix

        size = self.batch_size
        draws = size // self.group if self.shared else size
        rng = np.random.default_rng(seed)
        for start in range(0, len(centers), size):
            if self.lockfree:
                negatives = {"seed": seed_mix(int(rng.integers(1 << 63)))}
            else:
                negatives = {"negatives": self.table[rng.integers(0, len(self.table), (draws, self.negative))]}
            c, o = centers[start:start + size], contexts[start:start + size]
            n = len(c)
            weight = np.ones(size, np.float32)
            if n < size:
                pad = size - n
                c = np.concatenate([c, np.zeros(pad, np.int32)])
                o = np.concatenate([o, np.zeros(pad, np.int32)])
                weight[n:] = 0
            yield {"center": c, "context": o, **negatives, "weight": weight, "pairs": n}

    # --- device side: inside the step ------------------------------------------------------------
    def side_ids(self, batch, rng: tf.random.Generator, real: tf.Tensor, sink: int) -> tf.Tensor:
        """Rows of the context table; padding pairs (``real`` False) read ``sink``.

        per-pair: [B, 1 + negative], the true context first; shared: [B + B / group * negative],
        the B true contexts, then each group's negatives. ``rng`` is not used: the batches carry
        their negatives.
        """
        negatives = batch["negatives"]
        if self.shared:
            return tf.concat([tf.where(real, batch["context"], sink), tf.reshape(negatives, [-1])], axis=0)
        return tf.where(real[:, None], tf.concat([batch["context"][:, None], negatives], axis=1), sink)

    def loss(self, words: list[tf.Tensor], contexts: tf.Tensor, batch) -> tf.Tensor:
        """Summed SGNS loss of the batch.

        words : [centers [B, dim]]; contexts : per-pair [B, 1 + negative, dim], shared
        [B + B / group * negative, dim] (as side_ids)
        """
        if self.shared:
            centers, size = words[0], self.batch_size
            groups = size // self.group
            positive = tf.reduce_sum(centers * contexts[:size], axis=1)
            negatives = tf.reshape(contexts[size:], [groups, self.negative, -1])
            negative = tf.reshape(tf.matmul(tf.reshape(centers, [groups, self.group, -1]), negatives,
                                            transpose_b=True), [size, self.negative])
            # -log sigmoid(x) = softplus(-x); -log(1 - sigmoid(x)) = softplus(x)
            per_pair = tf.nn.softplus(-positive) + tf.reduce_sum(tf.nn.softplus(negative), axis=1)
            return tf.reduce_sum(per_pair * batch["weight"])
        logits = tf.einsum("bd,bkd->bk", words[0], contexts)
        labels = tf.concat([tf.ones_like(logits[:, :1]), tf.zeros_like(logits[:, 1:])], axis=1)
        per_pair = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), axis=1)
        return tf.reduce_sum(per_pair * batch["weight"])
