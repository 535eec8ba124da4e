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
trains. Counting is one streaming, compiled pass (kernels/cooccur.py): each block of lines' pairs are
summed row by row and merged into the running counts, so memory follows the block and the number of
distinct pairs, never the vocabulary squared.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from embedtune._tf import lazy as tf
from embedtune.config.keys import FLOAT32_MAX, OwnKeys, Range, key
from embedtune.config.schema import TrainConfig
from embedtune.cores import local_cores
from embedtune.corpus import IdChunk, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.objectives.base import Modes, Objective
from embedtune.objectives.rows import LocalRows
from embedtune.phases import phase

POWER = 0.75
FIT_ROUNDS = 15          # alternating rounds of the (a, biases) fit; the weighted error settles by 10
# Host bytes per counted pair at the peak: the COO counts (float64 + 2 int32), their int32 ids,
# float64 log-counts and weights, the float32 copies batched and an int64 order (the dry run's estimate).
BYTES_PER_PAIR = 64


def cooccurrence(chunks: Iterable[IdChunk], n_words: int, window: int, threads: int = 0,
                 advance=lambda tokens: None) -> tuple[scipy.sparse.coo_matrix, int]:
    """Counts X[j, k] (j <= k) of ids on one line within ``window`` of each other, weighted 1/distance.

    chunks : id chunks of the corpus (ids in [0, n_words); words outside them already dropped)
    threads : the compiled count's (kernels/cooccur.py; 0: every core)
    advance : called with each chunk's kept tokens as it is read (progress)
    Returns (X as COO with rows <= cols, sorted by row then col, no duplicates; raw tokens read).
    """
    import scipy.sparse

    from embedtune.kernels import cooccur

    raw = 0

    def blocks():
        nonlocal raw
        ids, lines, pairs = [], [], 0
        for chunk in chunks:
            advance(len(chunk.ids))
            raw += chunk.raw_tokens
            # Lines numbered apart across the block's chunks (each chunk numbers its own from 0).
            lines.append(chunk.line + (int(lines[-1][-1]) + 1 if lines and len(lines[-1]) else 0))
            ids.append(chunk.ids)
            pairs += len(chunk.ids) * window
            if pairs >= cooccur.BLOCK_PAIRS:
                yield np.concatenate(ids), np.concatenate(lines)
                ids, lines, pairs = [], [], 0
        if ids:
            yield np.concatenate(ids), np.concatenate(lines)

    indptr, cols, values = cooccur.count(blocks(), n_words, window, threads or local_cores())
    rows = np.repeat(np.arange(n_words, dtype=np.int32), np.diff(indptr))
    return scipy.sparse.coo_matrix((values, (rows, cols)), shape=(n_words, n_words)), raw


def count_pairs(corpus, local_index: dict, n_words: int, window: int, threads: int = 0,
                total_tokens: int = 0) -> tuple[scipy.sparse.coo_matrix, int]:
    """``cooccurrence`` over the corpus's lines (corpus.HeldLines). A worker's share of a multi-worker
    run (distribute.WorkerShare) counts its own lines, and the shares' counts are summed on every worker
    (``combine``): the whole corpus's counts, as one process makes them up to the order of float64 sums.
    ``total_tokens``: the kept tokens the pass reads, for its progress (a set-up phase)."""
    with phase("glove: counting pairs", total_tokens) as advance:
        counts, raw = cooccurrence(id_chunks(corpus, local_index), n_words, window, threads, advance)
    return corpus.combine((counts, raw), lambda figure: cells_bytes(*figure), lambda parts: sum_pairs(parts, n_words))


def cells_bytes(counts: scipy.sparse.coo_matrix, raw: int) -> bytes:
    """[cells, raw tokens] (int64), rows and cols (int32), counts (float64): what a worker sends."""
    return b"".join([np.array([counts.nnz, raw], "<i8").tobytes(), counts.row.astype("<i4").tobytes(),
                     counts.col.astype("<i4").tobytes(), counts.data.astype("<f8").tobytes()])


def sum_pairs(parts: list[bytes], n_words: int) -> tuple[scipy.sparse.coo_matrix, int]:
    """The sum of several shares' ``cells_bytes``: counts as ``cooccurrence`` returns them, raw tokens."""
    import scipy.sparse

    total, raw = scipy.sparse.csr_matrix((n_words, n_words), dtype=np.float64), 0
    for data in parts:
        nnz, tokens = (int(x) for x in np.frombuffer(data, "<i8", 2))
        rows = np.frombuffer(data, "<i4", nnz, 16)
        cols = np.frombuffer(data, "<i4", nnz, 16 + 4 * nnz)
        values = np.frombuffer(data, "<f8", nnz, 16 + 8 * nnz)
        total = total + scipy.sparse.coo_matrix((values, (rows, cols)), shape=(n_words, n_words)).tocsr()
        raw += tokens
    return total.tocoo(), raw


def weights(counts: np.ndarray, x_max: float) -> np.ndarray:
    """GloVe's f(x) = min(1, (x / x_max)^0.75)."""
    return np.minimum(1.0, (counts / x_max) ** POWER)


def dots(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """[n] float64: table[rows] . table[cols] for each pair (table: [n_words, dim] float32 rows)."""
    from embedtune.kernels.cooccur import pair_dots

    return pair_dots(table, rows, cols)


def fit_scale_and_biases(rows, cols, target, weight, products, n_words, rounds=FIT_ROUNDS, pick=None):
    """Weighted least squares of target ~ a * products + b[rows] + b[cols], over the pairs where ``pick`` is
    True (None: every pair).

    Alternates: ``a`` in closed form given the biases, then every bias in closed form given
    ``a`` and the other biases (a damped Jacobi round). Words without pairs get bias 0.
    Returns (a, b [n_words]). Compiled (kernels/cooccur.py, fit_rounds).
    """
    from embedtune.kernels.cooccur import fit_rounds

    pick = np.ones(len(rows), np.bool_) if pick is None else np.asarray(pick, np.bool_)
    b = np.zeros(n_words)
    a = fit_rounds(np.asarray(rows), np.asarray(cols), np.asarray(target, np.float64), np.asarray(weight, np.float64),
                   np.asarray(products, np.float64), pick, n_words, rounds, b, np.zeros((4, n_words)))
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
    joins_batches = True

    @classmethod
    def memory(cls, train, dim, n_local, corpus_words, corpus_lines, units=None):
        """A bias a local word; the distinct pairs ``units`` (set_up_units) or, uncounted, at most every
        pair of distinct local words and at most window pairs per corpus word, BYTES_PER_PAIR each."""
        pairs = units if units is not None else min(n_local * (n_local + 1) // 2, corpus_words * train.window)
        return (n_local + 1) * 4, pairs * BYTES_PER_PAIR

    @classmethod
    def set_up_units(cls, train, corpus, run) -> int:
        """The distinct pairs of the run's local words, counted as training counts them (the compiled
        count: seconds for ten million words), local ids in the trainer's order."""
        in_corpus = run.plan.row_counts(run.counts) > 0
        rows = np.concatenate([np.flatnonzero(in_corpus & ~run.plan.frozen), np.flatnonzero(in_corpus & run.plan.frozen)])
        local_index = {run.plan.words[r]: i for i, r in enumerate(rows)}
        counts, _ = count_pairs(corpus, local_index, len(rows), train.window, train.threads)
        return int(counts.nnz)

    word_keys = ("row", "col")   # both ends of a pair read the word table

    def __init__(self, rows: LocalRows, train: TrainConfig, corpus):
        self.batch_size = train.batch_size
        self.anchor = train.anchor
        n, t = rows.n_local, rows.n_trainable
        counts, self.raw_tokens = count_pairs(corpus, rows.local_index, n, train.window, train.threads,
                                              int(rows.counts.sum()))
        j, k = counts.row.astype(np.int32, copy=False), counts.col.astype(np.int32, copy=False)
        # One core would wait through what follows (numpy's element-wise passes and the fit's kernel hold one
        # thread each, and release the GIL): the log and the fit go to a second thread, the weights and the
        # batched pairs are made on this one meanwhile. Each number is computed as it was, so the bits are too.
        # The fit reads the pretrained pairs in place and every pair's product is taken once (the fit's and the
        # batched ones' are mostly the same pairs): no more is held at once than when the fit took copies.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            logs = pool.submit(np.log, counts.data)
            f = weights(counts.data, train.keys_of(GloVeKeys).x_max)
            target = logs.result()
            del counts

            # The fit: pairs of pretrained words, at their starting vectors.
            table = rows.vectors(np.arange(n))   # [n_local, dim]: every local row's start, gathered once
            products = dots(table, j, k)
            fit = rows.is_pretrained[j] & rows.is_pretrained[k]
            fitting = pool.submit(fit_scale_and_biases, j, k, target, f, products, n, pick=fit)
            self.fit_pairs = int(fit.sum())   # a scale of 0 (no such pair) fails ``check``

            # Batched: pairs with a trainable end.
            use = (j < t) | (k < t)
            self.row, self.col = j[use], k[use]
            self.target, self.weight = target[use].astype(np.float32), f[use].astype(np.float32)
            new = ~rows.is_pretrained
            batched = products[use] if new.any() else None
            del use
            # Word slices a trainable row gets in an epoch: the anchor's per-epoch weight is spread over them.
            self.slices = (np.bincount(self.row, minlength=n) + np.bincount(self.col, minlength=n))[:t]
            self.scale, bias = fitting.result()
        del j, k, target, f, products, fit
        # A new word's bias starts at its least-squares value against its pretrained partners, given its
        # starting vector (kernels/cooccur.py).
        if batched is not None:
            from embedtune.kernels.cooccur import new_word_biases

            bias = new_word_biases(self.row, self.col, self.weight, self.target, batched, self.scale, bias, new)
        self.bias = bias
        self.side_fixed_from = t   # frozen words keep their fitted bias

    @classmethod
    def compiles(cls, train) -> bool:
        """Every optimizer, the cap and the anchor: the compiled step has them all."""
        return True

    def compiled_step(self, words, side, matrix, frozen_rows, n_trainable, threads, deterministic=True, update=None):
        """The numba step (embedtune/kernels/glove.py): TensorFlow's step's arithmetic with
        ``deterministic``, else glove.c's per-pair loop, lock-free on ``threads`` threads."""
        from embedtune.kernels.glove import GloveKernel

        return GloveKernel(words, side, matrix, frozen_rows, n_trainable, self.scale, update, self.anchor,
                           self.slices, self.batch_size, threads, lockfree=not deterministic)

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
        predicted = np.float32(self.scale) * tf.reduce_sum(words[0] * words[1], axis=1) + side[:, 0, 0] + side[:, 1, 0]
        error = predicted - batch["target"]
        return 0.5 * tf.reduce_sum(batch["f"] * batch["weight"] * error * error)
