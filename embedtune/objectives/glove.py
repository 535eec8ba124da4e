"""GloVe's weighted least squares on co-occurrence counts, as an objective.

    loss = 1/2 * sum over counted pairs (j, k) of  f(X_jk) * (a * w_j . w_k + b_j + b_k - log X_jk)^2
    f(x) = min(1, (x / x_max)^0.75)

X_jk sums 1/distance over every pair of positions on one line at most ``window`` apart with
words {j, k} (GloVe's counting, stored once per unordered pair). A GloVe file ships only word
vectors, so the model's other parts are estimated before training: the context side is the
word side scaled by one number ``a`` (GloVe's released vectors are word + context, the two
nearly alike), and ``a`` and a bias per word are fitted by weighted least squares on the
pairs of pretrained words at their starting vectors. Frozen words keep their fitted bias;
trainable words train theirs (the objective's own table, one column wide).

Only pairs with a trainable word are batched: the others give no gradient to anything that
trains. Counting is one streaming pass: each chunk's pairs are summed with scipy.sparse and
merged into the running counts, so memory follows the number of distinct pairs, never the
vocabulary squared.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from embedtune._tf import lazy as tf
from embedtune.corpus import IdChunk, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.keys import FLOAT32_MAX, OwnKeys, Range, key
from embedtune.objectives.base import Modes, Objective
from embedtune.objectives.rows import LocalRows
from embedtune.schema import TrainConfig

POWER = 0.75
FIT_ROUNDS = 15          # alternating rounds of the (a, biases) fit; the weighted error settles by 10
FIT_BLOCK = 1 << 20      # pairs per block when taking dot products (bounds the [block, dim] gathers)
# Host bytes per counted pair at the peak: the COO counts (float64 + 2 int32), their int32 ids,
# float64 log-counts and weights, the float32 copies batched and an int64 order (the dry run's estimate).
BYTES_PER_PAIR = 64


def cooccurrence(chunks: Iterable[IdChunk], n_words: int, window: int) -> tuple[scipy.sparse.coo_matrix, int]:
    """Counts X[j, k] (j <= k) of ids on one line within ``window`` of each other, weighted 1/distance.

    chunks : id chunks of the corpus (ids in [0, n_words); words outside them already dropped)
    Returns (X as COO with rows <= cols and no duplicates, raw tokens read).
    """
    total = scipy.sparse.csr_matrix((n_words, n_words), dtype=np.float64)
    pending, pending_size, raw = [], 0, 0
    for chunk in chunks:
        raw += chunk.raw_tokens
        ids, line = chunk.ids, chunk.line
        rows, cols, weights = [], [], []
        for distance in range(1, min(window, len(ids) - 1) + 1):
            same_line = line[distance:] == line[:-distance]
            left, right = ids[:-distance][same_line], ids[distance:][same_line]
            rows.append(np.minimum(left, right))
            cols.append(np.maximum(left, right))
            weights.append(np.full(len(left), 1.0 / distance))
        if not rows:
            continue
        rows, cols, weights = np.concatenate(rows), np.concatenate(cols), np.concatenate(weights)
        pending.append(scipy.sparse.coo_matrix((weights, (rows, cols)), shape=(n_words, n_words)).tocsr())
        pending_size += pending[-1].nnz
        if pending_size > max(total.nnz, 1 << 22):   # merge when the parts outgrow the total
            total = _add(total, pending)
            pending, pending_size = [], 0
    total = _add(total, pending)
    return total.tocoo(), raw


def count_pairs(corpus, local_index: dict, n_words: int, window: int) -> tuple[scipy.sparse.coo_matrix, int]:
    """``cooccurrence`` over the corpus's lines (corpus.HeldLines). A worker's share of a multi-worker
    run (distribute.WorkerShare) counts its own lines, and the shares' counts are summed on every worker
    (``combine``): the whole corpus's counts, as one process makes them up to the order of float64 sums."""
    counts, raw = cooccurrence(id_chunks(corpus, local_index), n_words, window)
    return corpus.combine((counts, raw), lambda figure: cells_bytes(*figure), lambda parts: sum_pairs(parts, n_words))


def cells_bytes(counts: scipy.sparse.coo_matrix, raw: int) -> bytes:
    """[cells, raw tokens] (int64), rows and cols (int32), counts (float64): what a worker sends."""
    return b"".join([np.array([counts.nnz, raw], "<i8").tobytes(), counts.row.astype("<i4").tobytes(),
                     counts.col.astype("<i4").tobytes(), counts.data.astype("<f8").tobytes()])


def sum_pairs(parts: list[bytes], n_words: int) -> tuple[scipy.sparse.coo_matrix, int]:
    """The sum of several shares' ``cells_bytes``: counts as ``cooccurrence`` returns them, raw tokens."""
    total, raw = scipy.sparse.csr_matrix((n_words, n_words), dtype=np.float64), 0
    for data in parts:
        nnz, tokens = (int(x) for x in np.frombuffer(data, "<i8", 2))
        rows = np.frombuffer(data, "<i4", nnz, 16)
        cols = np.frombuffer(data, "<i4", nnz, 16 + 4 * nnz)
        values = np.frombuffer(data, "<f8", nnz, 16 + 8 * nnz)
        total = total + scipy.sparse.coo_matrix((values, (rows, cols)), shape=(n_words, n_words)).tocsr()
        raw += tokens
    return total.tocoo(), raw


def _add(total, parts):
    for part in parts:
        total = total + part
    return total


def weights(counts: np.ndarray, x_max: float) -> np.ndarray:
    """GloVe's f(x) = min(1, (x / x_max)^0.75)."""
    return np.minimum(1.0, (counts / x_max) ** POWER)


def dots(vectors, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """w_rows . w_cols for each pair, block by block; vectors(ids) -> [n, dim] rows."""
    out = np.empty(len(rows), np.float64)
    for start in range(0, len(rows), FIT_BLOCK):
        r, c = rows[start:start + FIT_BLOCK], cols[start:start + FIT_BLOCK]
        out[start:start + FIT_BLOCK] = np.einsum("nd,nd->n", vectors(r), vectors(c), dtype=np.float64)
    return out


def fit_scale_and_biases(rows, cols, target, weight, products, n_words, rounds=FIT_ROUNDS):
    """Weighted least squares of target ~ a * products + b[rows] + b[cols].

    Alternates: ``a`` in closed form given the biases, then every bias in closed form given
    ``a`` and the other biases (a damped Jacobi round). Words without pairs get bias 0.
    Returns (a, b [n_words]).
    """
    b = np.zeros(n_words)
    a = 0.0
    mass = np.bincount(rows, weight, n_words) + np.bincount(cols, weight, n_words)
    denominator = float(np.sum(weight * products * products))
    for _ in range(rounds):
        a = float(np.sum(weight * products * (target - b[rows] - b[cols]))) / denominator if denominator else 0.0
        rest = target - a * products
        total = np.bincount(rows, weight * (rest - b[cols]), n_words) + np.bincount(cols, weight * (rest - b[rows]), n_words)
        b = 0.5 * b + 0.5 * np.divide(total, mass, out=np.zeros(n_words), where=mass > 0)
    return a, b


@dataclass
class EntriesChunk:
    """One epoch of glove: every batched pair once (the counts were made from the whole corpus)."""

    raw_tokens: int


@dataclass(frozen=True)
class GloVeKeys(OwnKeys):
    """glove's own keys of [train]."""

    # GloVe's own default is 100; 2 was best on held-out words (benchmarks/README.md, recovery)
    x_max: float = key(2.0, range=Range(0, FLOAT32_MAX, low_open=True),
                       help="A co-occurrence count x weighs min(1, (x / X_MAX)^0.75).")


class GloVe(Objective):
    """The GloVe objective over the local rows of a run (trainable ids first, then frozen ones)."""

    name = "glove"
    help = "GloVe's least squares on co-occurrence counts"
    for_formats = ("glove",)   # --objective auto: GloVe's objective made such vectors
    modes = Modes(parameter_servers=True)
    keys = (GloVeKeys,)
    # The anchor (with x_max 2 and adagrad at 0.1) was chosen on the recovery benchmark's validation
    # words (benchmarks/recovery.py --sweep-train): the best on 5.1M tokens, all alike on 1.5M
    # (benchmarks/README.md, recovery).
    defaults = {"window": 10, "optimizer": "adagrad", "anchor": 8.0, "epochs": 5}
    # Adagrad at 0.1 (same benchmark); sgd at 0.01-0.1 and adam at 0.001-0.03 did worse there
    # (benchmarks/README.md, recovery).
    learning_rates = {"adagrad": 0.1}
    settings = ("window", "x_max")

    @classmethod
    def memory(cls, train, dim, n_local, corpus_words, corpus_lines):
        """A bias a local word; at most every pair of distinct local words, and at most window pairs
        per corpus word, BYTES_PER_PAIR each."""
        pairs = min(n_local * (n_local + 1) // 2, corpus_words * train.window)
        return (n_local + 1) * 4, pairs * BYTES_PER_PAIR
    word_keys = ("row", "col")   # both ends of a pair read the word table

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus):
        self.batch_size = train.batch_size
        n, t = rows.n_local, rows.n_trainable
        counts, self.raw_tokens = count_pairs(corpus, rows.local_index, n, train.window)
        j, k = counts.row.astype(np.int32), counts.col.astype(np.int32)
        target = np.log(counts.data)
        f = weights(counts.data, train.keys_of(GloVeKeys).x_max)

        # The fit: pairs of pretrained words, at their starting vectors.
        fit = rows.is_pretrained[j] & rows.is_pretrained[k]
        products = dots(rows.vectors, j[fit], k[fit])
        self.scale, bias = fit_scale_and_biases(j[fit], k[fit], target[fit], f[fit], products, n)
        self.fit_pairs = int(fit.sum())   # a scale of 0 (no such pair) fails ``check``

        # Batched: pairs with a trainable end. A new word's bias starts at its least-squares value
        # against its pretrained partners, given its starting vector.
        use = (j < t) | (k < t)
        self.row, self.col = j[use], k[use]
        self.target, self.weight = target[use].astype(np.float32), f[use].astype(np.float32)
        new = ~rows.is_pretrained
        if new.any():
            products = dots(rows.vectors, self.row, self.col)
            rest = self.weight * (self.target - self.scale * products)
            total = np.zeros(n)
            mass = np.zeros(n)
            for one, other in ((self.row, self.col), (self.col, self.row)):
                solo = new[one] & ~new[other]
                total += np.bincount(one[solo], rest[solo] - self.weight[solo] * bias[other[solo]], n)
                mass += np.bincount(one[solo], self.weight[solo], n)
            bias[new] = np.divide(total, mass, out=np.zeros(n), where=mass > 0)[new]
        self.bias = bias
        # Word slices a trainable row gets in an epoch: the anchor's per-epoch weight is spread over them.
        self.slices = (np.bincount(self.row, minlength=n) + np.bincount(self.col, minlength=n))[:t]
        self.side_fixed_from = t   # frozen words keep their fitted bias
        self._scale = tf.constant(self.scale, tf.float32)

    def check(self, corpus) -> None:
        if not self.scale:
            raise EmbedtuneError(
                "--objective glove: no two words of the vectors file occur within the window of each other in "
                "the corpus (or their vectors are zero), so the model cannot be fitted to the vectors; "
                "use --objective sgns", corpus.path)

    def summary(self) -> dict:
        """The fitted context scale ``a`` and the pretrained pairs it was fitted on."""
        return {"glove_scale": round(float(self.scale), 6), "glove_fit_pairs": self.fit_pairs}

    # --- host side -----------------------------------------------------------------------------
    def padding_batch(self) -> dict:
        """One entry (the first), weighing nothing."""
        return self.emptied(self.batches(np.zeros(1, np.int32)))

    def side_start(self) -> np.ndarray:
        """[n_local + 1, 1] the biases (the last row is the sink)."""
        return np.concatenate([self.bias, [0.0]]).astype(np.float32)[:, None]

    def chunks(self, corpus, local_index) -> Iterator[EntriesChunk]:
        yield EntriesChunk(self.raw_tokens)

    def units(self, chunk: EntriesChunk, rng: np.random.Generator) -> tuple[np.ndarray]:
        return (rng.permutation(len(self.row)).astype(np.int64),)

    def batches(self, order: np.ndarray) -> Iterator[dict]:
        size = self.batch_size
        for start in range(0, len(order), size):
            pick = order[start:start + size]
            n = len(pick)
            pad = size - n
            batch = {"row": self.row[pick], "col": self.col[pick], "target": self.target[pick],
                     "f": self.weight[pick], "weight": np.ones(size, np.float32)}
            if pad:
                for name in ("row", "col", "target", "f"):
                    batch[name] = np.concatenate([batch[name], np.zeros(pad, batch[name].dtype)])
                batch["weight"][n:] = 0
            batch["pairs"] = n
            yield batch

    # --- device side ---------------------------------------------------------------------------
    def side_ids(self, batch, rng: tf.random.Generator, real: tf.Tensor, sink: int) -> tf.Tensor:
        """[B, 2] bias rows of both ends; padding (``real`` False) reads ``sink``."""
        return tf.where(real[:, None], tf.stack([batch["row"], batch["col"]], axis=1), sink)

    def loss(self, words: list[tf.Tensor], side: tf.Tensor, batch) -> tf.Tensor:
        """words : [row vectors [B, dim], col vectors [B, dim]]; side : [B, 2, 1] their biases."""
        predicted = self._scale * tf.reduce_sum(words[0] * words[1], axis=1) + side[:, 0, 0] + side[:, 1, 0]
        error = predicted - batch["target"]
        return 0.5 * tf.reduce_sum(batch["f"] * batch["weight"] * error * error)
