"""The ``context-mean`` start: each new word at the weighted mean of the pretrained vectors around its occurrences
(x_w; a context word seen n times in the corpus weighs a / (a + n), Arora et al. 2017's smooth inverse frequency
with a = ``sif`` counted in occurrences, so that "the" and "of" do not drown the words that say something).

Also what alacarte.py and form_context.py fall back to where the corpus is too small to fit their map
(common.choose_method).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from embedtune.corpus import Corpus
from embedtune.newwords.common import InitResult, all_random, from_contexts
from embedtune.newwords.contexts import weighted_sums
from embedtune.newwords.defaults import DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW
from embedtune.vectors import Vectors


def context_mean_vectors(vectors: Vectors, corpus: Corpus, new_words: list[str], window: int = DEFAULT_WINDOW,
                         min_contexts: int = DEFAULT_MIN_CONTEXTS, counts: Counter | None = None,
                         sif: float = DEFAULT_SIF, seed: int = 1, progress: Callable[[int], None] | None = None,
                         note: str | None = None) -> InitResult:
    """``context-mean`` starts for ``new_words`` (words not in ``vectors``): methods.initial_vectors's arguments;
    ``note``: why this method and not the one asked for (alacarte.py's fallback), kept in the stats."""
    began = time.perf_counter()
    stats = {"method": "context-mean", "window": window, "min_contexts": min_contexts, "sif": sif}
    if note:
        stats["method_note"] = note
    if not new_words:
        return all_random(vectors, new_words, stats, seed, began)
    if counts is None:
        counts = corpus.count()[0]
    found = weighted_sums(vectors, corpus, list(new_words), counts, window, sif, None, seed, progress)
    return from_contexts(vectors, found.means(), found.contexts, min_contexts, stats, seed, began)
