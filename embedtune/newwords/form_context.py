"""The ``form-context`` start, the default (defaults.DEFAULT_METHOD): Schick & Schuetze 2019's form-and-context
idea. Each new word's context start (its context mean through à la carte's map, or the plain mean where the corpus
is too small to fit one: common.choose_method) and its form start (its spelling, through character n-grams fitted to
the pretrained vectors: spelling.py, or a fastText model's subwords) are mixed by the word's evidence.

One word's walk: ``gather`` makes one corpus pass (contexts.context_sums: the new words, the words that fit the
map, the probe words) with the spelling model fitted beside it; ``finish`` fits the maps and the gate on the probes
(fitted.py) and mixes each word's two starts (``combine_form_context``); a word with neither a context nor a seen
piece of its spelling starts random.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass

import numpy as np

from embedtune.corpus import Corpus
from embedtune.memory import release_freed_memory
from embedtune.newwords.common import InitResult, choose_method, fitting_words, random_vectors
from embedtune.newwords.contexts import context_sums, sif_weights
from embedtune.newwords.defaults import (DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES,
                                         DEFAULT_FORM_K, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW)
from embedtune.newwords.fitted import (DEFAULT_PARTS, DEFAULT_PROBES, DEFAULT_SLOTS, PROBE_MIN_COUNT, choose_probes,
                                       fit_starts)
from embedtune.newwords.spelling import DEFAULT_FIT_WORDS
from embedtune.vectors import Vectors


def combine_form_context(form: np.ndarray, context: np.ndarray, evidence: np.ndarray,
                         k: float = DEFAULT_FORM_K, weight: np.ndarray | None = None,
                         centre: np.ndarray | None = None) -> np.ndarray:
    """[n, dim] float32 starts mixing each word's form and context vectors by its evidence.

    form, context : [n, dim] the two starts; evidence : [n] the contexts n behind each context
    start (0 where it is not to be used). The unit vectors are weighted w = n / (n + k) (context;
    or ``weight``, [n], when given: the fitted gate of embedtune.newwords.fitted) and 1 - w (form), and the
    sum is scaled to the same mix of the two lengths: cosines decide the direction, and training
    with an anchor needs a length of the pretrained vectors' kind. A zero form vector (no piece of
    the word was seen) leaves the context start as it is.
    centre : [dim] the pretrained vectors' mean: when given, each start's part along it is taken out, the rest
        mixed as above, and the parts along it added back, weighed w and 1 - w. Skip-gram vectors share one
        direction (a word's cosine with their mean is about 0.7), and both starts carry it: mixed as they
        are, it swamps what each says about the word (benchmarks/README.md, "Issue 40: the spelling half on
        skip-gram vectors"). Along it the two are mixed as they are, not reset to the mean: a start
        shrunk toward zero (as a ridge fit's) keeps its own share of the shared direction.
    """
    form = np.asarray(form, np.float64)
    context = np.asarray(context, np.float64)
    n = np.asarray(evidence, np.float64)
    has_form = np.any(form != 0, axis=1)
    has_context = np.any(context != 0, axis=1)
    along_form = along_context = 0.0
    if centre is not None:
        axis = np.asarray(centre, np.float64)
        axis = axis / max(float(np.linalg.norm(axis)), 1e-30)
        along_form, along_context = form @ axis, context @ axis
        form = form - along_form[:, None] * axis
        context = context - along_context[:, None] * axis
    form_len = np.linalg.norm(form, axis=1)
    context_len = np.linalg.norm(context, axis=1)
    w = n / (n + k) if weight is None else np.asarray(weight, np.float64)
    w = np.where(has_form, w, 1.0)
    w = np.where(has_context, w, 0.0)
    mixed = (w / np.where(context_len > 0, context_len, 1))[:, None] * context \
        + ((1 - w) / np.where(form_len > 0, form_len, 1))[:, None] * form
    length = w * context_len + (1 - w) * form_len
    mixed_len = np.linalg.norm(mixed, axis=1)
    out = mixed * (length / np.where(mixed_len > 0, mixed_len, 1))[:, None]
    if centre is not None:
        out += (w * along_context + (1 - w) * along_form)[:, None] * axis
    return out.astype(np.float32)


MEAN_BLOCK = 8192   # rows column_mean turns into float64 at a time


def column_mean(matrix: np.ndarray) -> np.ndarray:
    """[dim] float64 mean of the rows of ``matrix`` ([n, dim], n >= 1), the bits of
    ``np.asarray(matrix, np.float64).mean(axis=0)`` without its float64 copy of the whole matrix (1M x 300:
    the first 100,000 rows made 240 MB, the start's peak after the spelling fit): numpy sums a C-ordered
    matrix down its rows one row after another, so each block is summed with the running sum as its first row.
    A matrix of one column, or not C-ordered, numpy sums along memory (pairwise), so it is copied as before.
    """
    n, dim = matrix.shape
    if dim < 2 or not matrix.flags.c_contiguous:
        return np.asarray(matrix, np.float64).mean(axis=0)
    block = np.empty((min(n, MEAN_BLOCK) + 1, dim), np.float64)
    total = None
    for start in range(0, n, MEAN_BLOCK):
        rows = matrix[start:start + MEAN_BLOCK]
        if total is None:   # the first row starts the sum as numpy's does (0.0 + -0.0 would lose the sign)
            block[:len(rows)] = rows
            total = block[:len(rows)].sum(axis=0)
        else:
            block[0] = total
            block[1:len(rows) + 1] = rows
            total = block[:len(rows) + 1].sum(axis=0)
    return total / n


@dataclass
class Evidence:
    """What one corpus pass and the spelling fit gave: the input of ``finish`` (which fits and mixes)."""

    sums: object            # embedtune.newwords.contexts.ContextSums: new words, then the fitting words; probes
    form: np.ndarray        # [n_new + n_probes, dim] float32 spelling starts (the probes' from a fit without them)
    n_new: int
    fit_rows: np.ndarray    # rows of the fitting words in the vectors
    probe_rows: np.ndarray
    stats: dict
    centre: np.ndarray      # [dim] the mean of the rows the spelling model fits to (the frequent words)


def gather(vectors: Vectors, corpus: Corpus, new_words: list[str], probes: int = DEFAULT_PROBES,
           slots=DEFAULT_SLOTS, form_options: dict | None = None, window: int = DEFAULT_WINDOW, counts=None,
           sif: float = DEFAULT_SIF, fit_min_count: int = DEFAULT_FIT_MIN_COUNT,
           fit_max_words: int = DEFAULT_FIT_MAX_WORDS, fit_occurrences: int = DEFAULT_FIT_OCCURRENCES,
           seed: int = 1, progress=None, line_cap: int = 0) -> Evidence:
    """The corpus pass (new words, fitting words, ``probes`` probe words) and, in a second thread beside
    it, the spelling model's fit (without the probes). ``line_cap``: context_sums's (lines longer than it give
    their window as their line's context)."""
    from embedtune.newwords.spelling import form_model_for

    if counts is None:
        counts = corpus.count()[0]
    rows = vectors.index.rows_of_keys(counts)   # the corpus's words: for the choice, the weights and the pass
    # The pretrained words the corpus shows PROBE_MIN_COUNT+ times, most frequent first: the probes'
    # candidates, and their head (fit_min_count+ times) the words that fit the all-occurrence map.
    candidates = fitting_words(vectors, counts, min(PROBE_MIN_COUNT, fit_min_count), fit_max_words, rows)
    fit = [w for w in candidates if counts[w] >= fit_min_count]
    _, note = choose_method("form-context", vectors, counts, fit_min_count, found=len(fit))
    n_new = len(new_words)
    stats = {"method": "form-context", "context_side": "alacarte" if note is None else "context-mean",
             "window": window, "sif": sif}
    if note:
        stats["method_note"] = note
        fit = []
    # Probes sampled evenly over the candidates; those among the spelling model's rows are left out of its
    # fit (their spelling is predicted as a new word's: from other words).
    probe_words = choose_probes(vectors, counts, [w for w in candidates if counts[w] >= PROBE_MIN_COUNT],
                                probes, seed) if probes else []
    probe_rows = vectors.index.rows(probe_words) if probe_words else np.zeros(0, np.int64)
    fit_n = (form_options or {}).get("fit_words", DEFAULT_FIT_WORDS) or len(vectors)
    left_out = probe_rows[probe_rows < fit_n]
    keep = None
    if fit:   # every occurrence of a new word counts; a fitting word's context mean needs only a sample
        fit_counts = np.array([counts[w] for w in fit], np.float64)
        keep = np.concatenate([np.ones(n_new), np.minimum(1.0, fit_occurrences / fit_counts)])
    # The form fit needs no corpus, so it runs in a second thread during the corpus pass (the pass is a
    # nogil kernel, the fit numpy/scipy); the result does not depend on the overlap.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fitting = pool.submit(form_model_for, vectors, words=list(new_words) + probe_words, exclude=left_out,
                              **(form_options or {}))
        sums = context_sums(vectors, corpus, list(new_words) + fit, window, sif_weights(vectors, counts, sif, rows),
                            keep, seed, progress, vocabulary=counts, vocabulary_rows=rows, probes=probe_words,
                            probe_counts=np.array([counts[w] for w in probe_words], np.float64), probe_slots=slots,
                            line_cap=line_cap)
        model = fitting.result()
    form = model.predict(list(new_words) + probe_words)
    stats.update(model.stats)
    del model, fitting   # the future holds the model too
    release_freed_memory()
    fit_rows = vectors.index.rows(fit) if fit else np.zeros(0, np.int64)
    if len(fit_rows):
        stats.update(fit_words=int((sums.contexts[n_new:] > 0).sum()), fit_min_count=fit_min_count)
    centre = column_mean(vectors.matrix[:fit_n]) if len(vectors) else np.zeros(vectors.dim)
    return Evidence(sums, form, n_new, fit_rows, probe_rows, stats, centre)


def finish(evidence: Evidence, vectors: Vectors, parts=DEFAULT_PARTS, slots=DEFAULT_SLOTS,
           min_contexts: int = DEFAULT_MIN_CONTEXTS, seed: int = 1) -> InitResult:
    """Fit the maps and the gate (``parts``) on the probes and mix each new word's two starts."""
    e, n_new, dim = evidence, evidence.n_new, vectors.dim
    centre = e.centre if "centre" in parts else None
    starts, fit_stats = fit_starts(e.sums, e.fit_rows, n_new, vectors, e.probe_rows, e.form[n_new:], slots, parts,
                                   centre)
    n = e.sums.line_contexts[:n_new] if "line" in parts else e.sums.contexts[:n_new]
    evidence_n = np.where(n >= min_contexts, n, 0)
    new = slice(n_new)
    context = starts.context(e.sums.means(new), e.sums.line_means(new), evidence_n, "per_n" in parts)
    context = np.where((evidence_n > 0)[:, None], context, 0)
    weight = starts.weight(evidence_n) if "gate" in parts else evidence_n / (evidence_n + DEFAULT_FORM_K)
    matrix = combine_form_context(e.form[:n_new], context, evidence_n, weight=weight,
                                  centre=centre)
    # Neither a context nor a seen piece: word2vec's random start.
    none = (evidence_n == 0) & ~np.any(e.form[:n_new] != 0, axis=1)
    matrix[none] = random_vectors(int(none.sum()), dim, np.random.default_rng(seed))
    stats = {**e.stats, **fit_stats, "min_contexts": min_contexts,
             "form_k": None if "gate" in parts else DEFAULT_FORM_K,
             "from_form_only": int(((evidence_n == 0) & ~none).sum())}
    return InitResult(matrix, n.astype(np.int64), int((evidence_n > 0).sum()), int(none.sum()), stats)


def form_context_vectors(vectors: Vectors, corpus: Corpus, new_words: list[str], parts=DEFAULT_PARTS,
                         form_options: dict | None = None, probes: int = DEFAULT_PROBES, slots=DEFAULT_SLOTS,
                         window: int = DEFAULT_WINDOW, min_contexts: int = DEFAULT_MIN_CONTEXTS, counts=None,
                         sif: float = DEFAULT_SIF, fit_min_count: int = DEFAULT_FIT_MIN_COUNT,
                         fit_max_words: int = DEFAULT_FIT_MAX_WORDS, fit_occurrences: int = DEFAULT_FIT_OCCURRENCES,
                         seed: int = 1, progress=None) -> InitResult:
    """``form-context`` starts for ``new_words``: contexts and spelling, mixed by their evidence, with the
    maps and the gate fitted on probes of this corpus (module docstring); ``parts`` = () is the fixed mix of
    before (the all-occurrence map, the window only, k = DEFAULT_FORM_K)."""
    began = time.perf_counter()
    if not new_words:
        counts = corpus.count()[0] if counts is None else counts
        _, note = choose_method("form-context", vectors, counts, fit_min_count)
        stats = {"method": "form-context", "context_side": "alacarte" if note is None else "context-mean",
                 "window": window, "min_contexts": min_contexts, "sif": sif, "seconds": 0.0,
                 **({"method_note": note} if note else {})}
        return InitResult(np.zeros((0, vectors.dim), np.float32), np.zeros(0, np.int64), 0, 0, stats)
    fitted = bool({"per_n", "gate"} & set(parts))
    found = gather(vectors, corpus, new_words, probes if fitted else 0, slots, form_options, window, counts, sif,
                   fit_min_count, fit_max_words, fit_occurrences, seed, progress)
    result = finish(found, vectors, parts, slots, min_contexts, seed)
    result.stats["seconds"] = round(time.perf_counter() - began, 3)
    return result
