"""The context sums of one corpus pass, the floor every context start stands on: for each target word, the
pretrained vectors around its occurrences summed within the window and over the whole line
(embedtune.kernels.contexts), weighted by the context words' corpus counts (sif_weights). The start methods over
them: context_mean.py, alacarte.py, form_context.py (methods.py picks one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from embedtune.corpus import CHUNK_TOKENS, Corpus, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.newwords.defaults import DEFAULT_SIF, DEFAULT_WINDOW
from embedtune.vectors import Vectors


@dataclass
class ContextSums:
    """Summed context vectors of target words, within the window and in the whole line.

    sums : float64 array of shape = [n_targets, dim]; weighted sum of the pretrained vectors
        of every context word (within the window) of every occurrence
    mass : float64 array of shape = [n_targets]; the summed weights (context words summed,
        when every weight is 1)
    contexts : int64 array of shape = [n_targets]; occurrences with at least one
        pretrained word in their window
    line_sums, line_mass, line_contexts : the same over each occurrence's whole line
    probe_near, probe_line : [n_probes, n_buckets, dim + 2] float64 (sum, weight, occurrences) of the
        probe words' occurrences in nested buckets (embedtune.newwords.fitted), or None
    """

    sums: np.ndarray
    mass: np.ndarray
    contexts: np.ndarray
    line_sums: np.ndarray | None = None
    line_mass: np.ndarray | None = None
    line_contexts: np.ndarray | None = None
    probe_near: np.ndarray | None = None
    probe_line: np.ndarray | None = None

    def means(self, rows=slice(None)) -> np.ndarray:
        """[n_targets, dim] float64 weighted mean context vector (zero where there was no context); ``rows``
        (a slice or an index array): those targets' only, not a slice of every target's means."""
        return self.sums[rows] / np.where(self.mass[rows] > 0, self.mass[rows], 1)[:, None]

    def line_means(self, rows=slice(None)) -> np.ndarray:
        """[n_targets, dim] float64 weighted mean of the whole lines' context (zero where none); ``rows`` as
        ``means``'."""
        return self.line_sums[rows] / np.where(self.line_mass[rows] > 0, self.line_mass[rows], 1)[:, None]


def sif_weights(vectors: Vectors, counts: Counter, a: float = DEFAULT_SIF,
                rows: np.ndarray | None = None) -> np.ndarray | None:
    """[n_pretrained] float32 context weight a / (a + corpus count) of each pretrained word (None if a = 0).
    ``rows``: ``vectors.index.rows(list(counts))`` when the caller has them (context_sums takes them too).

    ``a`` is a count, not Arora et al.'s frequency: across corpus sizes the best count hardly moved where
    the best frequency did (benchmarks/README.md, newwords).
    """
    if not a:
        return None
    seen = np.zeros(len(vectors), np.float64)
    if rows is None:   # the corpus vocabulary, usually far smaller than the vectors'
        rows = vectors.index.rows(list(counts))
    found = rows >= 0
    seen[rows[found]] = np.fromiter(counts.values(), np.float64, len(rows))[found]
    return (a / (a + seen)).astype(np.float32)


def context_sums(vectors: Vectors, corpus: Corpus, targets: list[str], window: int = DEFAULT_WINDOW,
                 weights: np.ndarray | None = None, keep: np.ndarray | None = None, seed: int = 1,
                 progress: Callable[[int], None] | None = None, chunk_tokens: int = CHUNK_TOKENS,
                 vocabulary: Iterable[str] | None = None, probes: list[str] | None = None,
                 probe_counts: np.ndarray | None = None, probe_slots: tuple[int, ...] = (),
                 vocabulary_rows: np.ndarray | None = None, line_cap: int = 0) -> ContextSums:
    """Sum the pretrained vectors around every occurrence of each target, in one compiled pass
    (embedtune.kernels.contexts: within ``window`` and over the whole line).

    targets : words (pretrained or not) to sum contexts for; row i of the result is targets[i]
    weights : [n_pretrained] weight of each pretrained word as context (None: all 1)
    keep : [n_targets] probability that an occurrence of each target is used (None: all are);
        the contexts of "the" are many and all alike, so a sample of them does
    progress : called with the raw tokens of each chunk read
    chunk_tokens : tokens handled per step; peak memory grows with it (benchmarks/README.md, recovery)
    corpus : a Corpus, or a multi-worker run's share of its lines (distribute.WorkerShare), whose
        sums are added up over all shares (``sum_arrays``); ``keep``'s draws are hashes of each
        occurrence's line number and place (_marks), so the shares keep the occurrences one
        process keeps
    vocabulary : every distinct word of the corpus (its counts' keys; counted here when None);
        vocabulary_rows: their rows, ``vectors.index.rows(vocabulary)``, when the caller has them
    probes, probe_counts, probe_slots : pretrained words standing for rare ones (embedtune.newwords.fitted) and
        their corpus counts: an occurrence whose draw u has u * count < probe_slots[b] counts in bucket b
        and those after it, so bucket b holds about probe_slots[b] of the word's occurrences
    line_cap : lines of more tokens than this (> 0) count their window as the line's context (0: none)
    """
    from embedtune.kernels.contexts import context_pass

    if window < 1:
        raise EmbedtuneError(f"the window must be at least 1 word, got {window}")
    n_pre, dim = len(vectors), vectors.dim
    index, n_ids = _corpus_ids(vectors, corpus, targets, vocabulary, vocabulary_rows)
    target_of = np.full(n_ids, -1, np.int32)
    target_of[[index[w] for w in targets]] = np.arange(len(targets), dtype=np.int32)
    probes = list(probes or ())
    probe_of = np.full(n_ids, -1, np.int32)
    probe_count = np.zeros(n_ids, np.float64)
    if probes:
        probe_rows = [index[w] for w in probes]
        probe_of[probe_rows] = np.arange(len(probes), dtype=np.int32)
        probe_count[probe_rows] = probe_counts
    slots = np.asarray(probe_slots, np.float64)
    shape = (len(targets), len(probes), max(len(slots), 1), dim)
    # One float64 table, so that a worker adds up every share's sums, weights and contexts in one call
    # (corpus.sum_arrays: counts exact below 2**53); views of it are filled here.
    whole = np.zeros(2 * (shape[0] + shape[1] * shape[2]) * (dim + 2), np.float64)
    near, line_table, probe_near, probe_line = _table_views(whole, *shape)
    weights = np.ones(n_pre, np.float32) if weights is None else np.asarray(weights, np.float32)
    matrix = np.ascontiguousarray(vectors.matrix, np.float32)
    numbered = keep is not None or bool(probes)
    repeats = np.zeros(n_ids, np.int32)
    scratch = np.zeros((3, dim), np.float64)
    for chunk in id_chunks(corpus, index, chunk_tokens, numbered=numbered):
        target, level, probe = _marks(chunk, target_of, probe_of, probe_count, keep, slots, seed, bool(probes))
        if len(chunk.ids):
            context_pass(chunk.ids, chunk.line, target, level, probe, n_pre, window, weights, matrix, near,
                         line_table, probe_near, probe_line, repeats, scratch, line_cap)
        if progress is not None:
            progress(chunk.raw_tokens)
    # A worker's share of a multi-worker run's lines (distribute.WorkerShare): every share's table added
    # up, the same on every worker and the one-process sums up to their order; one process: its own.
    near, line_table, probe_near, probe_line = _table_views(corpus.sum_arrays([whole]), *shape)
    return ContextSums(near[:, :dim], near[:, dim], near[:, dim + 1].astype(np.int64),
                       line_table[:, :dim], line_table[:, dim], line_table[:, dim + 1].astype(np.int64),
                       probe_near if probes else None, probe_line if probes else None)


def _corpus_ids(vectors: Vectors, corpus: Corpus, targets: list[str], vocabulary: Iterable[str] | None,
                vocabulary_rows: np.ndarray | None) -> tuple[dict[str, int], int]:
    """The pass's ids (word -> id) and their number: pretrained words keep their row; targets without a
    vector follow them. Only the words the corpus holds need one (every token is looked up, in a dict:
    WordIndex is slower per word), so the dict holds those, not a copy of all the vectors' words
    (benchmarks/README.md, memory)."""
    if vocabulary is None:
        vocabulary = corpus.count()[0]
    vocabulary = list(vocabulary)
    if vocabulary_rows is None:
        vocabulary_rows = vectors.index.rows(vocabulary)
    index = {w: r for w, r in zip(vocabulary, vocabulary_rows.tolist()) if r >= 0}
    extra = [w for w in dict.fromkeys(targets) if w not in index and w not in vectors.index]
    index.update((w, len(vectors) + i) for i, w in enumerate(extra))
    for w in targets:   # a target that is not in the corpus keeps its row, as the vectors give it
        if w not in index:
            index[w] = vectors.index[w]
    return index, len(vectors) + len(extra)


def _table_views(whole: np.ndarray, n_targets: int, n_probes: int, n_buckets: int, dim: int):
    """The views of context_sums' one table: [n_targets, dim + 2] within the window and in the line, then
    [n_probes, n_buckets, dim + 2] of the probes, the same two (columns: sum, weight, occurrences)."""
    table = 2 * n_targets * (dim + 2)
    near = whole[:table // 2].reshape(n_targets, dim + 2)
    line_table = whole[table // 2:table].reshape(n_targets, dim + 2)
    probes = whole[table:].reshape(2, n_probes, n_buckets, dim + 2)
    return near, line_table, probes[0], probes[1]


def _marks(chunk, target_of: np.ndarray, probe_of: np.ndarray, probe_count: np.ndarray, keep: np.ndarray | None,
           slots: np.ndarray, seed: int, probed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[n] int32 each of a chunk's tokens: its target row (-1: none, or not sampled), its first probe bucket
    (-1: none) and its probe row (-1: none), as embedtune.kernels.contexts.context_pass takes them.

    An occurrence's draw is a hash of (seed, its line's number, its place in the line), not the next number of
    a stream: a worker reading its share of the lines keeps the occurrences one process keeps, so the summed
    shares are one process's sums (splitmix64's mix of the three: kernels.contexts._draw). Compiled, one pass
    over the tokens: made with numpy (tests/test_newwords.py keeps that version, the reference), a chunk's dozen
    whole-chunk arrays cost two thirds of the context pass's own time (benchmarks/log/glove_job.md)."""
    from embedtune.kernels.contexts import occurrence_marks

    sampled = keep is not None
    numbers = chunk.numbers if sampled or probed else None   # the chunk is numbered (context_sums)
    marks = tuple(np.empty(len(chunk.ids), np.int32) for _ in range(3))
    occurrence_marks(chunk.ids, chunk.line, np.zeros(0, np.int64) if numbers is None else numbers,
                     target_of, probe_of, probe_count,
                     np.asarray(keep, np.float64) if sampled else np.zeros(0, np.float64),
                     slots, _seed_mix(seed), _seed_mix(seed + 7919), sampled, probed, *marks)
    return marks


def _seed_mix(seed: int) -> np.uint64:
    """The draws' first term: the seed times splitmix64's constant, modulo 2**64."""
    return np.uint64(seed * 0x9E3779B97F4A7C15 % (1 << 64))


def weighted_sums(vectors: Vectors, corpus: Corpus, targets: list[str], counts: Counter, window: int, sif: float,
                  keep: np.ndarray | None, seed: int, progress: Callable[[int], None] | None) -> ContextSums:
    """context_sums of ``targets`` with every context word weighed by its corpus count (sif_weights); the
    corpus's words (``counts``' keys) are looked up in the vectors once, for the weights and the pass."""
    rows = vectors.index.rows(list(counts))
    return context_sums(vectors, corpus, targets, window, sif_weights(vectors, counts, sif, rows), keep, seed, progress,
                        vocabulary=counts, vocabulary_rows=rows)
