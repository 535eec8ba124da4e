"""Starting vectors for new words (``--init``): the one call that picks a start method, a file each.

``form-context``  the default (defaults.DEFAULT_METHOD, the best test R@10 after training on the recovery
                  benchmark, rare and frequent words): Schick & Schuetze 2019's form-and-context idea, the
                  context start and the form start (the word's spelling, embedtune.newwords.spelling) mixed by the
                  word's evidence, with maps and the mix fitted on frequent words of this corpus playing rare ones
                  (form_context.py, its fitted parts in fitted.py).
``alacarte``      Khodak et al. 2018: the context mean through a linear map fitted on frequent pretrained words
                  (alacarte.py).
``context-mean``  the weighted mean context vector x_w of each new word (context_mean.py).
``random``        word2vec's start, uniform in +-0.5/dim (no corpus pass).

Every context start stands on one streaming pass over the corpus (contexts.py) that sums, for each target word, the
pretrained vectors of the words within ``window`` of each of its occurrences (windows never cross a line; only
pretrained words count as context), a context word seen n times weighing a / (a + n) (Arora et al. 2017's smooth
inverse frequency, with a = ``sif`` counted in occurrences). Memory is the sums, [n_targets, dim], whatever the
corpus length. A new word with fewer than ``min_contexts`` occurrences that have a pretrained word in their window
gets the random start (form-context: its spelling's start where it has one).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.newwords.alacarte import alacarte_vectors
from embedtune.newwords.common import InitResult, all_random
from embedtune.newwords.context_mean import context_mean_vectors
from embedtune.newwords.defaults import (DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES,
                                         DEFAULT_METHOD, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW, METHODS)
from embedtune.newwords.form_context import form_context_vectors
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
    see common.choose_method.
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
    if method == "alacarte":
        return alacarte_vectors(vectors, corpus, new_words, window, min_contexts, counts, sif, fit_min_count,
                                fit_max_words, fit_occurrences, seed, progress)
    if method == "context-mean":
        return context_mean_vectors(vectors, corpus, new_words, window, min_contexts, counts, sif, seed, progress)
    stats = {"method": method, "window": window, "min_contexts": min_contexts, "sif": sif}
    return all_random(vectors, new_words, stats, seed, time.perf_counter())
