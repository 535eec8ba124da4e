"""What the start methods share: the result's shape, word2vec's random start, the words that fit a map from
context means to vectors (fitting_words, fit_alacarte), the one rule of when that map can be fitted (choose_method),
and the last step of a context start (from_contexts: a word with too few contexts starts random).

The methods themselves, a file each over these: context_mean.py, alacarte.py, form_context.py (its fitted maps and
gate in fitted.py); methods.py picks one.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from embedtune.newwords.defaults import DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT
from embedtune.vectors import Vectors


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


def all_random(vectors: Vectors, new_words: list[str], stats: dict, seed: int, began: float) -> InitResult:
    """Every new word at word2vec's random start (``--init random``, or no new words to start); ``stats`` as
    given, with the seconds since ``began``."""
    matrix = random_vectors(len(new_words), vectors.dim, np.random.default_rng(seed))
    stats["seconds"] = round(time.perf_counter() - began, 3)
    return InitResult(matrix, np.zeros(len(new_words), np.int64), 0, 0, stats)


def from_contexts(vectors: Vectors, start: np.ndarray, contexts: np.ndarray, min_contexts: int, stats: dict,
                  seed: int, began: float) -> InitResult:
    """The starts of a context method: ``start`` ([n_new, dim]) for each word with ``min_contexts`` or more
    ``contexts`` ([n_new]), word2vec's random start (drawn from ``seed``) for the others."""
    matrix = random_vectors(len(contexts), vectors.dim, np.random.default_rng(seed))
    enough = contexts >= min_contexts
    matrix[enough] = start[enough]
    n_from_context = int(enough.sum())
    stats["seconds"] = round(time.perf_counter() - began, 3)
    return InitResult(matrix, contexts, n_from_context, len(contexts) - n_from_context, stats)


def fit_alacarte(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The map A minimising sum_w |A x_w - v_w|^2 (no ridge: on GloVe any ridge made it worse).

    x : [n, dim] context means of the fitting words; v : [n, dim] their vectors.
    Returns A as a [dim, dim] float64 array; a new word starts at ``A @ x``.
    """
    x = np.asarray(x, np.float64)
    v = np.asarray(v, np.float64)
    # The normal equations: a [dim, dim] solve instead of an SVD of [n, dim], which is slow where
    # OpenBLAS runs more threads than cores; the answers agree (benchmarks/README.md, recovery).
    try:
        return np.linalg.solve(x.T @ x, x.T @ v).T
    except np.linalg.LinAlgError:   # fewer independent fitting words than dimensions
        return np.linalg.lstsq(x, v, rcond=None)[0].T


def fitting_words(vectors: Vectors, counts: Counter, min_count: int = DEFAULT_FIT_MIN_COUNT,
                  max_words: int = DEFAULT_FIT_MAX_WORDS, rows: np.ndarray | None = None) -> list[str]:
    """Pretrained words seen at least ``min_count`` times, most frequent first, at most ``max_words``.
    ``rows``: ``vectors.index.rows(list(counts))`` when the caller has them (then no word is looked up here)."""
    if rows is None:
        words = [(c, w) for w, c in counts.items() if c >= min_count and w in vectors.index]
    else:
        words = [(c, w) for (w, c), r in zip(counts.items(), rows.tolist()) if c >= min_count and r >= 0]
    words.sort(key=lambda cw: (-cw[0], cw[1]))
    return [w for _, w in words[:max_words]]


def choose_method(method: str, vectors: Vectors, counts: Counter,
                  fit_min_count: int = DEFAULT_FIT_MIN_COUNT, found: int | None = None) -> tuple[str, str | None]:
    """The method new words start by, and why it is not the one asked for (None when it is).

    The one rule of `embedtune init` and `embedtune train`: alacarte needs at least ``dim``
    pretrained words seen ``fit_min_count`` times to fit its [dim, dim] map; with fewer (a small
    corpus) new words start from the plain context mean instead, which needs no fit. Falling
    back rather than failing: a small corpus is a normal input, and context-mean is the next
    best start measured on the recovery benchmark; the summaries say it happened.
    """
    if method not in ("alacarte", "form-context"):
        return method, None
    if found is None:   # ``found``: the fitting words' number, when the caller has them already
        found = len(fitting_words(vectors, counts, fit_min_count, vectors.dim))
    found = min(found, vectors.dim)
    if found >= vectors.dim:
        return method, None
    why = (f"alacarte needs {vectors.dim} pretrained words seen {fit_min_count}+ times in the "
           f"corpus to fit its {vectors.dim}x{vectors.dim} map, found {found}; ")
    if method == "form-context":   # its context side falls back; the spelling side needs no corpus
        return method, why + "the context side of form-context is the plain context mean (context-mean) instead"
    return "context-mean", why + "new words start from their plain context mean (context-mean) instead"
