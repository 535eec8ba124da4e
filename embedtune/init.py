"""Starting vectors for new words, from the pretrained vectors of the words around them.

One streaming pass over the corpus sums, for each target word, the pretrained vectors of
the words within ``window`` of each of its occurrences (windows never cross a line; only
pretrained words count as context). A context word seen n times in the corpus weighs
a / (a + n) (Arora et al. 2017's smooth inverse frequency, with a = ``sif`` counted in
occurrences), so that "the" and "of" do not drown the words that say something. Memory is
the sums, [n_targets, dim], whatever the corpus length. From the sums:

``context-mean``  the weighted mean context vector x_w of each new word.
``alacarte``      Khodak et al. 2018, "A La Carte Embedding": a linear map A, fitted by
                  least squares so that A x_w ~ v_w over pretrained words frequent in the
                  corpus, gives each new word A x_w. Averaging contexts leaves mostly the
                  directions shared by all words; A learns to undo that.
``form-context``  Schick & Schuetze 2019's form-and-context idea: the unit à la carte start
                  and the unit form start (embedtune.form: the word's spelling through
                  character n-grams fitted to the pretrained vectors), weighted n / (n + k)
                  and k / (n + k) for a word with n contexts, then scaled to the same mix of
                  the two starts' lengths. A rare word leans on its spelling, a frequent one
                  on its contexts; a word with too few contexts starts from its spelling.
``random``        word2vec's start, uniform in +-0.5/dim (no corpus pass).

A new word with fewer than ``min_contexts`` occurrences that have a pretrained word in
their window gets the random start.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from embedtune.corpus import CHUNK_TOKENS, Corpus, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

METHODS = ("alacarte", "context-mean", "form-context", "random")
DEFAULT_METHOD = "form-context"   # the best test R@10 after training on the recovery benchmark, rare and
                                  # frequent words (benchmarks/README.md, recovery)
DEFAULT_WINDOW = 5          # words on each side
DEFAULT_MIN_CONTEXTS = 1    # fewer contexts than this: random start (even 1 context beats random)
DEFAULT_SIF = 30.0          # a context word seen n times weighs a / (a + n); 0 = every word weighs 1
DEFAULT_FIT_MIN_COUNT = 20  # a pretrained word fits the map A when seen this often
DEFAULT_FIT_MAX_WORDS = 50_000  # the most frequent such words; bounds the sums' memory
DEFAULT_FIT_OCCURRENCES = 1000  # occurrences sampled per fitting word: as good as all, and faster
DEFAULT_FORM_K = 10.0       # form-context: the contexts weigh n / (n + k); best of 5/10/20/40 on the rare
                            # validation words (benchmarks/recovery.py --rare), as in the rare-words note


@dataclass
class ContextSums:
    """Summed context vectors of target words.

    sums : float64 array of shape = [n_targets, dim]; weighted sum of the pretrained vectors
        of every context word of every occurrence
    mass : float64 array of shape = [n_targets]; the summed weights (context words summed,
        when every weight is 1)
    contexts : int64 array of shape = [n_targets]; occurrences with at least one
        pretrained word in their window
    """

    sums: np.ndarray
    mass: np.ndarray
    contexts: np.ndarray

    def means(self) -> np.ndarray:
        """[n_targets, dim] float64 weighted mean context vector (zero where there was no context)."""
        return self.sums / np.where(self.mass > 0, self.mass, 1)[:, None]


@dataclass
class InitResult:
    """Starting vectors of new words.

    matrix : float32 array of shape = [n_new, dim], row i for ``new_words[i]``
    contexts : int64 array of shape = [n_new]; occurrences with a pretrained word nearby
        (the evidence behind each start; zeros for ``random``)
    n_from_context : rows started from their contexts
    n_too_few : rows that had fewer than ``min_contexts`` contexts and start random (form-context:
        nor a character n-gram seen in the pretrained words)
    stats : method, window, fit words, seconds, ...
    """

    matrix: np.ndarray
    contexts: np.ndarray
    n_from_context: int
    n_too_few: int
    stats: dict = field(default_factory=dict)


def random_vectors(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """word2vec's start for a word with no vector: [n, dim] float32 uniform in +-0.5/dim."""
    return ((rng.random((n, dim), dtype=np.float32) - 0.5) / dim).astype(np.float32)


def is_lowercase_vocabulary(vectors: Vectors, sample: int = 10000) -> bool:
    """True when the vectors hold no upper-case words (GloVe): the corpus is then lower-cased."""
    return not any(w != w.lower() for w in vectors.words[:sample])


def pick_new_words(counts: Counter, vectors: Vectors, min_count: int, max_new: int = 0) -> list[str]:
    """Corpus words not in ``vectors`` seen at least ``min_count`` times, most frequent first."""
    new = [(c, w) for w, c in counts.items() if c >= min_count and w not in vectors.index]
    new.sort(key=lambda cw: (-cw[0], cw[1]))
    if max_new:
        new = new[:max_new]
    return [w for _, w in new]


def sif_weights(vectors: Vectors, counts: Counter, a: float = DEFAULT_SIF) -> np.ndarray | None:
    """[n_pretrained] float32 context weight a / (a + corpus count) of each pretrained word (None if a = 0).

    ``a`` is a count, not Arora et al.'s frequency: on corpora of 0.38M and 1.5M tokens the best
    frequency moved tenfold, the best count (30-40) hardly (benchmarks/recovery.py).
    """
    if not a:
        return None
    seen = np.zeros(len(vectors), np.float64)
    words = list(counts)   # the corpus vocabulary, usually far smaller than the vectors'
    rows = vectors.index.rows(words)
    found = rows >= 0
    seen[rows[found]] = np.fromiter(counts.values(), np.float64, len(words))[found]
    return (a / (a + seen)).astype(np.float32)


def context_sums(vectors: Vectors, corpus: Corpus, targets: list[str], window: int = DEFAULT_WINDOW,
                 weights: np.ndarray | None = None, keep: np.ndarray | None = None, seed: int = 1,
                 progress: Callable[[int], None] | None = None, chunk_tokens: int = CHUNK_TOKENS,
                 vocabulary: Iterable[str] | None = None) -> ContextSums:
    """Sum the pretrained vectors around every occurrence of each target, in one pass.

    targets : words (pretrained or not) to sum contexts for; row i of the result is targets[i]
    weights : [n_pretrained] weight of each pretrained word as context (None: all 1)
    keep : [n_targets] probability that an occurrence of each target is used (None: all are);
        the contexts of "the" are many and all alike, so a sample of them does
    progress : called with the raw tokens of each chunk read
    chunk_tokens : tokens handled per vectorised step; peak memory grows with it
        (benchmarks/README.md, recovery)
    corpus : a Corpus, or a multi-worker run's share of its lines (distribute.WorkerShare), whose
        sums are added up over all shares (``sum_arrays``); ``keep``'s draws are hashes of each
        occurrence's line number and place (occurrence_uniform), so the shares keep the occurrences one
        process keeps
    vocabulary : every distinct word of the corpus (its counts' keys; counted here when None)
    """
    if window < 1:
        raise EmbedtuneError(f"the window must be at least 1 word, got {window}")
    n_pre, dim = len(vectors), vectors.dim
    # Ids: pretrained words keep their row; targets without a vector follow them. Only the words
    # the corpus holds need one (every token is looked up, in a dict: WordIndex is slower per word),
    # so the dict holds those, not a copy of all the vectors' words (benchmarks/README.md, memory).
    if vocabulary is None:
        vocabulary = corpus.count()[0]
    vocabulary = list(vocabulary)
    index = {w: r for w, r in zip(vocabulary, vectors.index.rows(vocabulary).tolist()) if r >= 0}
    extra = [w for w in dict.fromkeys(targets) if w not in index and w not in vectors.index]
    index.update((w, n_pre + i) for i, w in enumerate(extra))
    for w in targets:   # a target that is not in the corpus keeps its row, as the vectors give it
        if w not in index:
            index[w] = vectors.index[w]
    target_of = np.full(n_pre + len(extra), -1, np.int32)
    target_of[[index[w] for w in targets]] = np.arange(len(targets), dtype=np.int32)

    n_targets = len(targets)
    # One float64 table, so that a worker adds up every share's sums, weights and contexts in one call
    # (corpus.sum_arrays: counts exact below 2**53); views of it are filled here.
    whole = np.zeros((n_targets, dim + 2), np.float64)
    sums, mass, contexts = whole[:, :dim], whole[:, dim], whole[:, dim + 1]
    for chunk in id_chunks(corpus, index, chunk_tokens, numbered=keep is not None):
        ids, line = chunk.ids, chunk.line
        target = target_of[ids]
        if keep is not None:
            # An occurrence's draw is a hash of (seed, its line's number, its place in the line), not the
            # next number of a stream: a worker reading its share of the lines keeps the occurrences one
            # process keeps, so the summed shares are one process's sums.
            at = np.flatnonzero(target >= 0)
            first = np.flatnonzero(np.concatenate([[True], line[1:] != line[:-1]]))   # each line's first id
            draws = occurrence_uniform(seed, chunk.numbers[line[at]], at - first[line[at]])
            target[at[draws >= keep[target[at]]]] = -1
        rows, cols, has_context = _context_pairs(ids, line, target, n_pre, window)
        if len(rows):
            # Pairs as a sparse [targets, pretrained] matrix times the vectors: far faster than
            # np.add.at, and the [pairs, dim] gather is never built; COO (duplicates left in) rather
            # than building CSR, faster too (benchmarks/README.md, recovery). float32 products per
            # chunk (relative error ~1e-6) are summed in float64 across chunks.
            pair_weights = np.ones(len(rows), np.float32) if weights is None else weights[cols]
            pairs = scipy.sparse.coo_matrix((pair_weights, (rows, cols)), shape=(n_targets, n_pre))
            sums += pairs @ vectors.matrix
            mass += np.bincount(rows, weights=pair_weights, minlength=n_targets)
        contexts += np.bincount(target[has_context], minlength=n_targets)
        if progress is not None:
            progress(chunk.raw_tokens)
    # A worker's share of a multi-worker run's lines (distribute.WorkerShare): every share's table added
    # up, the same on every worker and the one-process sums up to their order; one process: its own.
    whole = corpus.sum_arrays([whole])
    return ContextSums(whole[:, :dim], whole[:, dim], whole[:, dim + 1].astype(np.int64))


def occurrence_uniform(seed: int, line: np.ndarray, place: np.ndarray) -> np.ndarray:
    """[n] float64 draws in [0, 1), one for each (line number, place in the line) of a corpus: splitmix64's
    mix of the three (the same draw for an occurrence whoever reads it, and in whatever order)."""
    z = (np.uint64(seed * 0x9E3779B97F4A7C15 % (1 << 64))
         + line.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03) + place.astype(np.uint64))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)   # uint64 arrays wrap, as the mix needs
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _context_pairs(ids, line, target, n_pre, window):
    """(target rows, pretrained context ids, occurrence mask) for one chunk.

    target : [n] the target row of each position, -1 where it is not a target (or not sampled)
    The mask is True at target positions with at least one pretrained word in the window.
    """
    is_pretrained = ids < n_pre
    has_context = np.zeros(len(ids), bool)
    rows, cols = [], []
    for offset in range(1, min(window, len(ids) - 1) + 1):
        same_line = line[offset:] == line[:-offset]
        # the target at i sees the word at i + offset, and the target at i + offset sees i
        ahead = same_line & (target[:-offset] >= 0) & is_pretrained[offset:]
        behind = same_line & (target[offset:] >= 0) & is_pretrained[:-offset]
        rows += [target[:-offset][ahead], target[offset:][behind]]
        cols += [ids[offset:][ahead], ids[:-offset][behind]]
        has_context[:-offset] |= ahead
        has_context[offset:] |= behind
    if not rows:
        return np.empty(0, np.int32), np.empty(0, np.int32), has_context
    return np.concatenate(rows), np.concatenate(cols), has_context


def fit_alacarte(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The map A minimising sum_w |A x_w - v_w|^2 (no ridge: on GloVe any ridge made it worse).

    x : [n, dim] context means of the fitting words; v : [n, dim] their vectors.
    Returns A as a [dim, dim] float64 array; a new word starts at ``A @ x``.
    """
    x = np.asarray(x, np.float64)
    v = np.asarray(v, np.float64)
    # The normal equations: a [dim, dim] solve instead of an SVD of [n, dim], which is slow where
    # OpenBLAS runs more threads than cores; the answers agree to 1e-9 on GloVe.
    try:
        return np.linalg.solve(x.T @ x, x.T @ v).T
    except np.linalg.LinAlgError:   # fewer independent fitting words than dimensions
        return np.linalg.lstsq(x, v, rcond=None)[0].T


def fitting_words(vectors: Vectors, counts: Counter, min_count: int = DEFAULT_FIT_MIN_COUNT,
                  max_words: int = DEFAULT_FIT_MAX_WORDS) -> list[str]:
    """Pretrained words seen at least ``min_count`` times, most frequent first, at most ``max_words``."""
    words = [(c, w) for w, c in counts.items() if c >= min_count and w in vectors.index]
    words.sort(key=lambda cw: (-cw[0], cw[1]))
    return [w for _, w in words[:max_words]]


def choose_method(method: str, vectors: Vectors, counts: Counter,
                  fit_min_count: int = DEFAULT_FIT_MIN_COUNT) -> tuple[str, str | None]:
    """The method new words start by, and why it is not the one asked for (None when it is).

    The one rule of `embedtune init` and `embedtune train`: alacarte needs at least ``dim``
    pretrained words seen ``fit_min_count`` times to fit its [dim, dim] map; with fewer (a small
    corpus) new words start from the plain context mean instead, which needs no fit. Falling
    back rather than failing: a small corpus is a normal input, and context-mean is the next
    best start measured on the recovery benchmark; the summaries say it happened.
    """
    if method not in ("alacarte", "form-context"):
        return method, None
    found = len(fitting_words(vectors, counts, fit_min_count, vectors.dim))
    if found >= vectors.dim:
        return method, None
    why = (f"alacarte needs {vectors.dim} pretrained words seen {fit_min_count}+ times in the "
           f"corpus to fit its {vectors.dim}x{vectors.dim} map, found {found}; ")
    if method == "form-context":   # its context side falls back; the spelling side needs no corpus
        return method, why + "the context side of form-context is the plain context mean (context-mean) instead"
    return "context-mean", why + "new words start from their plain context mean (context-mean) instead"


def initial_vectors(vectors: Vectors, corpus: Corpus, new_words: list[str], method: str = DEFAULT_METHOD,
                    window: int = DEFAULT_WINDOW, min_contexts: int = DEFAULT_MIN_CONTEXTS,
                    counts: Counter | None = None, sif: float = DEFAULT_SIF,
                    fit_min_count: int = DEFAULT_FIT_MIN_COUNT, fit_max_words: int = DEFAULT_FIT_MAX_WORDS,
                    fit_occurrences: int = DEFAULT_FIT_OCCURRENCES, seed: int = 1,
                    progress: Callable[[int], None] | None = None) -> InitResult:
    """Starting vectors for ``new_words`` (words not in ``vectors``) by ``method``.

    counts : corpus word counts (from ``corpus.count()``), for the context weights and the
        words that fit alacarte's map; counted here (one more pass) when not given.
    Returns an InitResult whose matrix is [len(new_words), vectors.dim] float32; its stats say
    the method used ("method") and, when it is not the one asked for, why ("method_note"):
    see choose_method.
    """
    if method not in METHODS:
        raise EmbedtuneError(f"unknown init method {method!r} (expected one of {', '.join(METHODS)})")
    if min_contexts < 1:
        raise EmbedtuneError(f"min_contexts must be at least 1, got {min_contexts}")
    if method == "form-context":
        return form_context_vectors(vectors, corpus, new_words, window=window, min_contexts=min_contexts,
                                    counts=counts, sif=sif, fit_min_count=fit_min_count, fit_max_words=fit_max_words,
                                    fit_occurrences=fit_occurrences, seed=seed, progress=progress)
    known = [w for w in new_words if w in vectors.index]
    if known:
        raise EmbedtuneError(f"{len(known)} of the new words already have a vector (e.g. {known[0]!r})")
    began = time.perf_counter()
    n_new, dim = len(new_words), vectors.dim
    rng = np.random.default_rng(seed)
    matrix = random_vectors(n_new, dim, rng)
    stats = {"method": method, "window": window, "min_contexts": min_contexts, "sif": sif}
    if method == "random" or n_new == 0:
        stats["seconds"] = round(time.perf_counter() - began, 3)
        return InitResult(matrix, np.zeros(n_new, np.int64), 0, 0, stats)

    if counts is None:
        counts = corpus.count()[0]
    method, note = choose_method(method, vectors, counts, fit_min_count)
    stats["method"] = method
    if note:
        stats["method_note"] = note
    fit = []
    if method == "alacarte":
        fit = fitting_words(vectors, counts, fit_min_count, fit_max_words)
    keep = None
    if fit:
        # Every occurrence of a new word counts; a fitting word's context mean needs only a sample.
        fit_counts = np.array([counts[w] for w in fit], np.float64)
        keep = np.concatenate([np.ones(n_new), np.minimum(1.0, fit_occurrences / fit_counts)])
    found = context_sums(vectors, corpus, list(new_words) + fit, window, sif_weights(vectors, counts, sif), keep,
                         seed, progress, vocabulary=counts)
    means = found.means()
    start = means[:n_new]
    if method == "alacarte":
        fit_rows = np.array([vectors.index[w] for w in fit])
        fit_means, fit_vectors = means[n_new:], vectors.matrix[fit_rows]
        # A word whose every neighbour lacks a vector has no context mean to fit on.
        usable = found.contexts[n_new:] > 0
        a = fit_alacarte(fit_means[usable], fit_vectors[usable])
        start = start @ a.T
        stats.update(fit_words=int(usable.sum()), fit_min_count=fit_min_count)
    contexts = found.contexts[:n_new]
    enough = contexts >= min_contexts
    matrix[enough] = start[enough]
    n_from_context = int(enough.sum())
    stats["seconds"] = round(time.perf_counter() - began, 3)
    return InitResult(matrix, contexts, n_from_context, n_new - n_from_context, stats)


def release_freed_memory() -> None:
    """Hand freed heap pages back to the system (glibc's malloc_trim; nothing elsewhere).

    The spelling model's fit frees its work arrays, but those under glibc's mmap threshold (which
    rises to 32 MB as large arrays are freed) stay resident in the heap's free lists until trimmed
    (benchmarks/README.md, memory). Left there, they add to the peak of the training that follows.
    """
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):   # not glibc
        pass


def combine_form_context(form: np.ndarray, context: np.ndarray, evidence: np.ndarray,
                         k: float = DEFAULT_FORM_K) -> np.ndarray:
    """[n, dim] float32 starts mixing each word's form and context vectors by its evidence.

    form, context : [n, dim] the two starts; evidence : [n] the contexts n behind each context
    start (0 where it is not to be used). The unit vectors are weighted n / (n + k) (context)
    and k / (n + k) (form) and the sum is scaled to the same mix of the two lengths: cosines
    decide the direction (the note's measure), and training with an anchor needs a length of
    the pretrained vectors' kind. A zero form vector (no piece of the word was seen) leaves
    the context start as it is.
    """
    form = np.asarray(form, np.float64)
    context = np.asarray(context, np.float64)
    n = np.asarray(evidence, np.float64)
    form_len = np.linalg.norm(form, axis=1)
    context_len = np.linalg.norm(context, axis=1)
    w = np.where(form_len > 0, n / (n + k), 1.0)
    w = np.where(context_len > 0, w, 0.0)
    mixed = (w / np.where(context_len > 0, context_len, 1))[:, None] * context \
        + ((1 - w) / np.where(form_len > 0, form_len, 1))[:, None] * form
    length = w * context_len + (1 - w) * form_len
    mixed_len = np.linalg.norm(mixed, axis=1)
    return (mixed * (length / np.where(mixed_len > 0, mixed_len, 1))[:, None]).astype(np.float32)


def form_context_vectors(vectors: Vectors, corpus: Corpus, new_words: list[str], k: float = DEFAULT_FORM_K,
                         form_options: dict | None = None, **context_options) -> InitResult:
    """``form-context`` starts: the context start (alacarte, or context-mean when the corpus has too
    few frequent pretrained words to fit its map) mixed with the form start by ``combine_form_context``.

    form_options : keyword arguments of ``embedtune.form.fit_form`` (fit_words, buckets, ridge, iterations)
    context_options : those of ``initial_vectors`` (window, min_contexts, counts, sif, seed, ...)
    A word with fewer than min_contexts contexts starts from its form alone.
    """
    from embedtune.form import fit_form

    began = time.perf_counter()
    if context_options.get("counts") is None:
        context_options["counts"] = corpus.count()[0]
    fit_min_count = context_options.get("fit_min_count", DEFAULT_FIT_MIN_COUNT)
    _, note = choose_method("form-context", vectors, context_options["counts"], fit_min_count)
    side = "alacarte" if note is None else "context-mean"   # one rule with alacarte's (choose_method)
    if not new_words:
        found = initial_vectors(vectors, corpus, new_words, side, **context_options)
        found.stats.update(method="form-context", context_side=side, **({"method_note": note} if note else {}))
        return found
    # The form fit needs no corpus, so it runs in a second thread during the corpus pass (both spend
    # most of their time in numpy/scipy, which let go of the GIL, and the fit's hashing is numpy
    # too); the result does not depend on the overlap. The fit's CPU is hidden by a free second core,
    # not on a busy machine (benchmarks/README.md, recovery).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fitting = pool.submit(fit_form, vectors, words=list(new_words), **(form_options or {}))
        found = initial_vectors(vectors, corpus, new_words, side, **context_options)
        model = fitting.result()
    form, form_stats = model.predict(list(new_words)), model.stats
    del model, fitting   # the future holds the model too
    release_freed_memory()
    min_contexts = context_options.get("min_contexts", DEFAULT_MIN_CONTEXTS)
    evidence = np.where(found.contexts >= min_contexts, found.contexts, 0)
    matrix = combine_form_context(form, np.where((evidence > 0)[:, None], found.matrix, 0), evidence, k)
    # Neither a context nor a seen piece: the random start initial_vectors gave.
    none = (evidence == 0) & ~np.any(form != 0, axis=1)
    matrix[none] = found.matrix[none]
    stats = {**found.stats, **form_stats, "method": "form-context", "context_side": side, "form_k": k,
             "from_form_only": int(((evidence == 0) & ~none).sum()),
             "seconds": round(time.perf_counter() - began, 3)}
    if note:
        stats["method_note"] = note
    return InitResult(matrix, found.contexts, found.n_from_context, int(none.sum()), stats)
