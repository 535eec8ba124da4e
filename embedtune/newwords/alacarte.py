"""The ``alacarte`` start, Khodak et al. 2018's "A La Carte Embedding": a linear map A, fitted by least squares so
that A x_w ~ v_w over pretrained words frequent in the corpus (x_w: a word's context mean, as context_mean.py's),
gives each new word A x_w. Averaging contexts leaves mostly the directions shared by all words; A learns to undo
that. With too few such words to fit A (common.choose_method), the new words start from their plain context mean.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from embedtune.corpus import Corpus
from embedtune.newwords.common import InitResult, all_random, choose_method, fit_alacarte, fitting_words, from_contexts
from embedtune.newwords.context_mean import context_mean_vectors
from embedtune.newwords.contexts import weighted_sums
from embedtune.newwords.defaults import (DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES,
                                         DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW)
from embedtune.vectors import Vectors


def alacarte_vectors(vectors: Vectors, corpus: Corpus, new_words: list[str], window: int = DEFAULT_WINDOW,
                     min_contexts: int = DEFAULT_MIN_CONTEXTS, counts: Counter | None = None, sif: float = DEFAULT_SIF,
                     fit_min_count: int = DEFAULT_FIT_MIN_COUNT, fit_max_words: int = DEFAULT_FIT_MAX_WORDS,
                     fit_occurrences: int = DEFAULT_FIT_OCCURRENCES, seed: int = 1,
                     progress: Callable[[int], None] | None = None) -> InitResult:
    """``alacarte`` starts for ``new_words`` (words not in ``vectors``): methods.initial_vectors's arguments."""
    began = time.perf_counter()
    stats = {"method": "alacarte", "window": window, "min_contexts": min_contexts, "sif": sif}
    if not new_words:
        return all_random(vectors, new_words, stats, seed, began)
    if counts is None:
        counts = corpus.count()[0]
    fit = fitting_words(vectors, counts, fit_min_count, fit_max_words)
    method, note = choose_method("alacarte", vectors, counts, fit_min_count, found=len(fit) if fit else None)
    if method != "alacarte":
        return context_mean_vectors(vectors, corpus, new_words, window, min_contexts, counts, sif, seed, progress,
                                    note=note)
    n_new = len(new_words)
    # Every occurrence of a new word counts; a fitting word's context mean needs only a sample.
    fit_counts = np.array([counts[w] for w in fit], np.float64)
    keep = np.concatenate([np.ones(n_new), np.minimum(1.0, fit_occurrences / fit_counts)])
    found = weighted_sums(vectors, corpus, list(new_words) + fit, counts, window, sif, keep, seed, progress)
    means = found.means()
    fit_rows = np.array([vectors.index[w] for w in fit])
    fit_means, fit_vectors = means[n_new:], vectors.matrix[fit_rows]
    # A word whose every neighbour lacks a vector has no context mean to fit on.
    usable = found.contexts[n_new:] > 0
    a = fit_alacarte(fit_means[usable], fit_vectors[usable])
    stats.update(fit_words=int(usable.sum()), fit_min_count=fit_min_count)
    return from_contexts(vectors, means[:n_new] @ a.T, found.contexts[:n_new], min_contexts, stats, seed, began)
