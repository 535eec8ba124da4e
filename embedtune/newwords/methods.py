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
``form-context``  Schick & Schuetze 2019's form-and-context idea: the context start and the form
                  start (embedtune.newwords.spelling: the word's spelling through character n-grams fitted to
                  the pretrained vectors) mixed by the word's evidence, with the maps (one per
                  number of contexts, over the window and the whole line) and the mix fitted on
                  frequent words of this corpus playing rare ones (embedtune.newwords.fitted).
``random``        word2vec's start, uniform in +-0.5/dim (no corpus pass).

A new word with fewer than ``min_contexts`` occurrences that have a pretrained word in
their window gets the random start.
"""


from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.newwords.contexts import (InitResult, choose_method, context_sums, fit_alacarte, fitting_words,
                                         random_vectors, sif_weights)
from embedtune.newwords.defaults import (DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES,
                                         DEFAULT_METHOD, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW, METHODS)
from embedtune.newwords.fitted import form_context_vectors
from embedtune.vectors import Vectors


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
    fit = fitting_words(vectors, counts, fit_min_count, fit_max_words) if method == "alacarte" else []
    method, note = choose_method(method, vectors, counts, fit_min_count, found=len(fit) if fit else None)
    stats["method"] = method
    if note:
        stats["method_note"] = note
    if method != "alacarte":
        fit = []
    keep = None
    if fit:
        # Every occurrence of a new word counts; a fitting word's context mean needs only a sample.
        fit_counts = np.array([counts[w] for w in fit], np.float64)
        keep = np.concatenate([np.ones(n_new), np.minimum(1.0, fit_occurrences / fit_counts)])
    rows = vectors.index.rows(list(counts))   # the corpus's words: for the weights and the pass, looked up once
    found = context_sums(vectors, corpus, list(new_words) + fit, window, sif_weights(vectors, counts, sif, rows), keep,
                         seed, progress, vocabulary=counts, vocabulary_rows=rows)
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

