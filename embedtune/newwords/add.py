"""The new-word pipeline: count the corpus, choose the new words, start each from its contexts and spelling.

``embedtune init`` is this call and its output; ``train`` makes the same call for the words its plan chose
(embedtune.plan.rows.plan_rows, before the freeze plan is shown), so both start new words one way.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError, counted
from embedtune.plan.choose import Chosen, choose_new_words
from embedtune.newwords.common import InitResult
from embedtune.newwords.defaults import (DEFAULT_FIT_MIN_COUNT, DEFAULT_METHOD, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF,
                                         DEFAULT_WINDOW)
from embedtune.newwords.methods import initial_vectors
from embedtune.vectors import Vectors

# progress: called with the corpus's words when a context pass is to run; gives a context manager whose
# value is called with the raw tokens of each chunk read (the command's progress bar)
Progress = Callable[[int], contextlib.AbstractContextManager]


@dataclass(frozen=True)
class NewWordSettings:
    """How new words are chosen (``min_count``, ``max_new``, the ``new_words`` file) and how they start
    (``--init`` and the options of `embedtune init`; train takes its method, window and seed from its config)."""

    method: str = DEFAULT_METHOD
    window: int = DEFAULT_WINDOW
    min_contexts: int = DEFAULT_MIN_CONTEXTS
    sif: float = DEFAULT_SIF
    fit_min_count: int = DEFAULT_FIT_MIN_COUNT
    seed: int = 1
    min_count: int | None = None
    max_new: int = 0
    new_words: str | None = None


@dataclass
class NewWords:
    """New words chosen and started.

    chosen : the words and what the list's user is told (embedtune.plan.choose.Chosen)
    start : their starting vectors (InitResult: [len(chosen.words), dim] float32 and how they were made)
    corpus_words, corpus_lines : the corpus's totals (None when the caller counted it: train)
    """

    settings: NewWordSettings
    chosen: Chosen
    start: InitResult
    corpus_words: int | None = None
    corpus_lines: int | None = None

    def appended_to(self, vectors: Vectors) -> Vectors:
        """``vectors``' rows as they are, then the new words' starts (with a fastText model's subwords, kept for
        writing the model back)."""
        words = vectors.words.appended(self.chosen.words) if hasattr(vectors.words, "appended") \
            else vectors.words + self.chosen.words
        return Vectors(words, np.vstack([vectors.matrix, self.start.matrix]), model=vectors.model)

    def summary(self, vectors: Vectors) -> dict:
        """init's summary (``--json``), after its files: the corpus, the words and how they started."""
        c, r = self.chosen, self.start
        return {"corpus_words": self.corpus_words, "corpus_lines": self.corpus_lines, "pretrained": len(vectors),
                "new": len(c.words), "min_count": c.min_count, "from_context": r.n_from_context,
                "too_few_contexts": r.n_too_few, **c.report, **r.stats}

    def report(self) -> list[str]:
        """What to tell the person who ran init, a line each: how many words were added and how they started."""
        s, c, r = self.settings, self.chosen, self.start
        n = len(c.words)
        chosen = (f"listed in {s.new_words}" + (f" or seen {c.min_count}+ times" if c.min_count else "")
                  if c.listed is not None else f"seen {c.min_count}+ times")
        lines = [f"Added {counted(n, 'new word')} {chosen} in {counted(self.corpus_words, 'corpus word')}: "
                 f"{self.started()}; {r.stats['seconds']:.1f} s"]
        if "method_note" in r.stats:
            lines.append(f"Note: {r.stats['method_note']}")
        return lines

    def started(self) -> str:
        """How the words started, in a clause: from their contexts, spelling, or at random."""
        s, r, n = self.settings, self.start, len(self.chosen.words)
        fitted = f", map fitted on {counted(r.stats['fit_words'], 'word')}" if "fit_words" in r.stats else ""
        if s.method == "random":
            return ("it starts" if n == 1 else f"all {n:,} start") + " random (--init random)"
        if s.method == "form-context":
            return (f"{r.n_from_context:,} start from their contexts and spelling (form-context, window {s.window}"
                    f"{fitted}, " + ("spelling from the fastText model's subwords" if r.stats.get("form") == "fasttext-subwords"
                                   else f"spelling fitted on {r.stats.get('form_fit_words', 0):,} words")
                    + (f", mix fitted on {r.stats['probe_words']:,} corpus words playing rare ones"
                       if r.stats.get("probe_words") else "") + "), "
                    f"{r.stats.get('from_form_only', 0):,} had fewer than {counted(s.min_contexts, 'context')} and "
                    f"start from their spelling alone, {r.n_too_few:,} start random")
        return (f"{r.n_from_context:,} start from their contexts ({s.method}, window {s.window}{fitted}), "
                f"{r.n_too_few:,} had fewer than {counted(s.min_contexts, 'context')} and start random")


def add_new_words(vectors: Vectors, corpus: Corpus, settings: NewWordSettings = NewWordSettings(), *,
                  counts: Counter | None = None, words: list[str] | None = None, progress: Progress | None = None,
                  note: Callable[[str], None] | None = None) -> NewWords:
    """Choose the new words of ``corpus`` (words missing from ``vectors``) and start each one.

    counts : the corpus's counts when the caller has them (train's, over every worker); counted here
        (an empty corpus is an error) when None
    words : the new words when the caller chose them (train's plan); chosen here by ``settings`` when None,
        the list lower-cased as ``corpus`` is, and its notes told to ``note``
    progress : see ``Progress``; None: no progress is shown
    Raises EmbedtuneError for an empty corpus, a bad list or a bad setting.
    """
    total = n_lines = None
    if counts is None:
        counts, total, n_lines = corpus.count()
        if total == 0:
            raise EmbedtuneError("the corpus has no words", corpus.path)
    if words is None:
        chosen = choose_new_words(vectors, counts, settings.min_count, settings.max_new, settings.new_words,
                                  corpus.lowercase)
        for text in chosen.notes if note is not None else ():
            note(text)
    else:
        chosen = Chosen(list(words), settings.min_count)
    shown = progress is not None and settings.method != "random" and chosen.words
    with progress(total) if shown else contextlib.nullcontext() as update:
        start = initial_vectors(vectors, corpus, chosen.words, settings.method, window=settings.window,
                                min_contexts=settings.min_contexts, counts=counts, sif=settings.sif,
                                fit_min_count=settings.fit_min_count, seed=settings.seed, progress=update)
    return NewWords(settings, chosen, start, total, n_lines)
