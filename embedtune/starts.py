"""``form-context`` starts fitted on the user's own corpus: frequent pretrained words play rare ones.

A rare word's evidence is a few contexts, and a map fitted on frequent words' averages over all their
occurrences (à la carte) is the wrong map for an average over one or two; how far to trust the spelling
depends on that number too, and so does how wide a context helps. None of it is fixed here: a sample of
frequent pretrained words (the *probes*) is hidden, each keeps about n of its occurrences in nested
buckets (n = 1, 2, 4, ..., 64: embedtune.kernels.contexts), and on those the run fits

- ``per_n``: a map per bucket from the n-context averages to the probes' vectors (one per evidence level,
  as Khodak et al.'s map but for n contexts, ridge-regularised least squares);
- ``line``: each average over the whole line beside the one within the window, as the map's input, so the
  map weighs the near and the sentence-wide context (a one-line definition is all context);
- ``gate``: the spelling/context weight w(n) = n / (n + k_n), k_n chosen per bucket for the best mean
  cosine on the probes, with the probes' spelling predicted by a form model fitted without them.

The probes are drawn from the pretrained rows the spelling model is not fitted on (past its first 100k)
when the corpus has 1,000 of them, so the model loses no word; from smaller vectors, from inside, each
left out of the fit that predicts its spelling.

A new word seen in n contexts takes the bucket nearest n (in log n) and, past the last, the map fitted on
frequent words' averages over all their occurrences. Each part can be turned off (``parts``), for
benchmarks/newwords.py's measure of what each adds.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass

import numpy as np

from embedtune.contexts import (DEFAULT_FIT_MAX_WORDS, DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES, DEFAULT_FORM_K,
                            DEFAULT_MIN_CONTEXTS, DEFAULT_SIF, DEFAULT_WINDOW, InitResult, choose_method,
                            combine_form_context, context_sums, fit_alacarte, fitting_words, random_vectors,
                            release_freed_memory, sif_weights)
from embedtune.corpus import Corpus
from embedtune.form import DEFAULT_FIT_WORDS
from embedtune.vectors import Vectors

PARTS = ("per_n", "line", "gate")
# What runs by default: the fitted gate. The per-n maps and the line context, fitted as they are here, lost
# rank on benchmarks/newwords.py's protocols (least squares on one-context averages shrinks every start
# toward the words' common direction), so they stay available but off (benchmarks/README.md, newwords).
DEFAULT_PARTS = ("gate",)
DEFAULT_SLOTS = (1, 2, 4, 8, 16, 32, 64)   # occurrences a probe keeps in each bucket, about
DEFAULT_PROBES = 3000       # probe words sampled from the fitting words
PROBE_MIN_COUNT = 4         # a probe word is seen at least this often
MIN_OUTSIDE_PROBES = 1000  # probes past the spelling model's rows, or else from inside it (left out of its fit)
MIN_PROBES = 60             # a bucket with fewer probes (or fewer than 2 per feature) fits no map
RIDGE = 1e-3                # of the features' mean square, per map
GATE_GRID = np.linspace(0.0, 1.0, 41)


def choose_probes(vectors: Vectors, counts, fit_words: list[str], n: int = DEFAULT_PROBES,
                  seed: int = 1) -> list[str]:
    """Up to ``n`` fitting words seen PROBE_MIN_COUNT+ times, sampled evenly over the words (not the
    occurrences: mostly content words, as rare words are), in their fitting order."""
    pool = [w for w in fit_words if counts[w] >= PROBE_MIN_COUNT]
    if len(pool) <= n:
        return pool
    chosen = np.sort(np.random.default_rng(seed).choice(len(pool), n, replace=False))
    return [pool[i] for i in chosen]


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1)


def fit_map(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[dim, features] map A with A x ~ v, least squares with a small ridge (RIDGE times the features' mean
    square): the maps of the small buckets have fewer words than a [2 dim, dim] map has numbers to spare."""
    x = np.asarray(x, np.float64)
    gram = x.T @ x
    gram[np.diag_indices_from(gram)] += RIDGE * np.trace(gram) / len(gram)
    return np.linalg.solve(gram, x.T @ np.asarray(v, np.float64)).T


def best_gate(context: np.ndarray, form: np.ndarray, truth: np.ndarray) -> float:
    """The context weight w in GATE_GRID whose mix w c + (1 - w) f of the unit vectors is nearest the truth
    in mean cosine (a word with no form vector left out)."""
    has_form = np.any(form != 0, axis=1)
    c, f, t = _unit(context[has_form]), _unit(form[has_form]), _unit(truth[has_form])
    if not len(c):
        return 1.0
    cc, cf, ff = np.einsum("ij,ij->i", c, c), np.einsum("ij,ij->i", c, f), np.einsum("ij,ij->i", f, f)
    ct, ft = np.einsum("ij,ij->i", c, t), np.einsum("ij,ij->i", f, t)
    w = GATE_GRID[:, None]
    norm = np.sqrt(np.maximum(w * w * cc + 2 * w * (1 - w) * cf + (1 - w) ** 2 * ff, 1e-30))
    score = ((w * ct + (1 - w) * ft) / norm).mean(axis=1)
    return float(GATE_GRID[int(np.argmax(score))])


class FittedStarts:
    """The maps and gates fitted on the probes, applied to new words by their evidence."""

    def __init__(self, slots, maps, map_all, ks, features):
        self.slots, self.maps, self.map_all, self.ks, self.features = slots, maps, map_all, ks, features

    def context(self, near: np.ndarray, line: np.ndarray, n: np.ndarray, per_n: bool) -> np.ndarray:
        """[len(n), dim] context starts: each word's bucket map (per_n), else the all-occurrence map, else
        the plain mean within the window."""
        x = self.features(near, line)
        out = near.copy()
        if self.map_all is not None:
            out = x @ self.map_all.T
        if per_n:
            bucket = self.bucket(n)
            for b, a in enumerate(self.maps):
                at = bucket == b
                if a is not None and at.any():
                    out[at] = x[at] @ a.T
        return out

    def bucket(self, n: np.ndarray) -> np.ndarray:
        """The bucket nearest each evidence n in log n; -1 past 1.5 times the last (the all-occurrence map)."""
        logs = np.log2(np.asarray(self.slots, np.float64))
        b = np.abs(np.log2(np.maximum(n, 1))[:, None] - logs[None, :]).argmin(axis=1)
        return np.where(np.asarray(n) > 1.5 * self.slots[-1], -1, b)

    def weight(self, n: np.ndarray) -> np.ndarray:
        """The context weight n / (n + k(n)), k interpolated in log n between the buckets' fitted k."""
        n = np.asarray(n, np.float64)
        k = np.interp(np.log2(np.maximum(n, 1)), np.log2(np.asarray(self.slots, np.float64)), self.ks)
        return np.where(n > 0, n / (n + k), 0.0)


def fit_starts(sums, fit_rows: np.ndarray, n_new: int, vectors: Vectors, probe_rows: np.ndarray,
               probe_form: np.ndarray, slots, parts) -> tuple[FittedStarts, dict]:
    """Fit the maps and the gate on the sums of one pass (new words first, then the fitting words)."""
    dim = vectors.dim
    if "line" in parts:
        def features(near, line):
            return np.hstack([near, line])
    else:
        def features(near, line):
            return near
    near_all, line_all = sums.means(), sums.line_means()
    map_all = None
    if len(fit_rows):
        usable = sums.contexts[n_new:] > 0
        x = features(near_all[n_new:][usable], line_all[n_new:][usable])
        v = vectors.matrix[fit_rows[usable]]
        map_all = fit_alacarte(x, v) if "line" not in parts else fit_map(x, v)
    maps, ks, used, seen = [], [], [], []
    probe_v = np.asarray(vectors.matrix[probe_rows], np.float64) if len(probe_rows) else np.zeros((0, dim))
    for b in range(len(slots)):
        if sums.probe_near is None:
            maps.append(None)
            used.append(0)
            seen.append(0.0)
            continue
        near_b, line_b = sums.probe_near[:, b], sums.probe_line[:, b]
        ok = (near_b[:, dim + 1] > 0) & (line_b[:, dim + 1] > 0)
        x = features(near_b[ok, :dim] / near_b[ok, dim:dim + 1], line_b[ok, :dim] / line_b[ok, dim:dim + 1])
        enough = ok.sum() >= max(MIN_PROBES, 2 * x.shape[1])
        maps.append(fit_map(x, probe_v[ok]) if enough and "per_n" in parts else None)
        used.append(int(ok.sum()))
        # the bucket's place: the geometric mean of its probes' contexts (a probe seen less often than the
        # bucket's size gives all it has)
        seen.append(float(np.exp(np.log(line_b[ok, dim + 1]).mean())) if ok.any() else float(slots[b]))
    model = FittedStarts(tuple(seen), maps, map_all, np.full(len(slots), DEFAULT_FORM_K), features)
    if "gate" in parts and sums.probe_near is not None:
        ks = []
        for b in range(len(slots)):
            near_b, line_b = sums.probe_near[:, b], sums.probe_line[:, b]
            ok = (near_b[:, dim + 1] > 0) & (line_b[:, dim + 1] > 0)
            if ok.sum() < MIN_PROBES:
                ks.append(ks[-1] if ks else DEFAULT_FORM_K)
                continue
            context = model.context(near_b[ok, :dim] / near_b[ok, dim:dim + 1], line_b[ok, :dim] / line_b[ok, dim:dim + 1],
                                    np.full(ok.sum(), seen[b]), "per_n" in parts)
            w = best_gate(context, probe_form[ok], probe_v[ok])
            ks.append(seen[b] * (1 - w) / max(w, 1e-3))   # w = n / (n + k) at the bucket's place
        model.ks = np.asarray(ks, np.float64)
    stats = {"start_parts": list(parts), "probe_words": int(len(probe_rows)), "probe_slots": list(slots),
             "probes_per_bucket": used, "contexts_per_bucket": [round(s, 2) for s in seen],
             "maps_per_bucket": [a is not None for a in maps], "form_k_per_bucket": [round(float(k), 3) for k in model.ks]}
    return model, stats


@dataclass
class Evidence:
    """What one corpus pass and the spelling fit gave: the input of ``finish`` (which fits and mixes)."""

    sums: object            # embedtune.contexts.ContextSums: new words, then the fitting words; probes
    form: np.ndarray        # [n_new + n_probes, dim] float32 spelling starts (the probes' from a fit without them)
    n_new: int
    fit_rows: np.ndarray    # rows of the fitting words in the vectors
    probe_rows: np.ndarray
    stats: dict


def gather(vectors: Vectors, corpus: Corpus, new_words: list[str], probes: int = DEFAULT_PROBES,
           slots=DEFAULT_SLOTS, form_options: dict | None = None, window: int = DEFAULT_WINDOW, counts=None,
           sif: float = DEFAULT_SIF, fit_min_count: int = DEFAULT_FIT_MIN_COUNT,
           fit_max_words: int = DEFAULT_FIT_MAX_WORDS, fit_occurrences: int = DEFAULT_FIT_OCCURRENCES,
           seed: int = 1, progress=None) -> Evidence:
    """The corpus pass (new words, fitting words, ``probes`` probe words) and, in a second thread beside
    it, the spelling model's fit (without the probes)."""
    from embedtune.form import fit_form

    if counts is None:
        counts = corpus.count()[0]
    _, note = choose_method("form-context", vectors, counts, fit_min_count)
    n_new = len(new_words)
    stats = {"method": "form-context", "context_side": "alacarte" if note is None else "context-mean",
             "window": window, "sif": sif}
    if note:
        stats["method_note"] = note
    fit = fitting_words(vectors, counts, fit_min_count, fit_max_words) if note is None else []
    # Probes from the rows the spelling model is not fitted on (past its first fit_words) when the corpus
    # has enough of them: the model then keeps every word it is fitted on, a new word's relatives
    # (``threaten`` for ``threatens``) included. Otherwise (small vectors) probes from inside, left out.
    candidates = fitting_words(vectors, counts, PROBE_MIN_COUNT, fit_max_words) if probes else []
    fit_n = (form_options or {}).get("fit_words", DEFAULT_FIT_WORDS) or len(vectors)
    outside = [w for w, r in zip(candidates, vectors.index.rows(candidates).tolist()) if r >= fit_n] \
        if candidates else []
    inside = len(outside) < min(probes, MIN_OUTSIDE_PROBES)
    probe_words = choose_probes(vectors, counts, candidates if inside else outside, probes, seed) if probes else []
    probe_rows = vectors.index.rows(probe_words) if probe_words else np.zeros(0, np.int64)
    left_out = probe_rows if inside else np.zeros(0, np.int64)
    keep = None
    if fit:   # every occurrence of a new word counts; a fitting word's context mean needs only a sample
        fit_counts = np.array([counts[w] for w in fit], np.float64)
        keep = np.concatenate([np.ones(n_new), np.minimum(1.0, fit_occurrences / fit_counts)])
    # The form fit needs no corpus, so it runs in a second thread during the corpus pass (the pass is a
    # nogil kernel, the fit numpy/scipy); the result does not depend on the overlap.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fitting = pool.submit(fit_form, vectors, words=list(new_words) + probe_words, exclude=left_out,
                              **(form_options or {}))
        rows = vectors.index.rows(list(counts))   # the corpus's words: for the weights and the pass, looked up once
        sums = context_sums(vectors, corpus, list(new_words) + fit, window, sif_weights(vectors, counts, sif, rows),
                            keep, seed, progress, vocabulary=counts, vocabulary_rows=rows, probes=probe_words,
                            probe_counts=np.array([counts[w] for w in probe_words], np.float64), probe_slots=slots)
        model = fitting.result()
    form = model.predict(list(new_words) + probe_words)
    stats.update(model.stats)
    del model, fitting   # the future holds the model too
    release_freed_memory()
    fit_rows = vectors.index.rows(fit) if fit else np.zeros(0, np.int64)
    if len(fit_rows):
        stats.update(fit_words=int((sums.contexts[n_new:] > 0).sum()), fit_min_count=fit_min_count)
    return Evidence(sums, form, n_new, fit_rows, probe_rows, stats)


def finish(evidence: Evidence, vectors: Vectors, parts=DEFAULT_PARTS, slots=DEFAULT_SLOTS,
           min_contexts: int = DEFAULT_MIN_CONTEXTS, seed: int = 1) -> InitResult:
    """Fit the maps and the gate (``parts``) on the probes and mix each new word's two starts."""
    e, n_new, dim = evidence, evidence.n_new, vectors.dim
    starts, fit_stats = fit_starts(e.sums, e.fit_rows, n_new, vectors, e.probe_rows, e.form[n_new:], slots, parts)
    n = e.sums.line_contexts[:n_new] if "line" in parts else e.sums.contexts[:n_new]
    evidence_n = np.where(n >= min_contexts, n, 0)
    context = starts.context(e.sums.means()[:n_new], e.sums.line_means()[:n_new], evidence_n, "per_n" in parts)
    context = np.where((evidence_n > 0)[:, None], context, 0)
    weight = starts.weight(evidence_n) if "gate" in parts else evidence_n / (evidence_n + DEFAULT_FORM_K)
    matrix = combine_form_context(e.form[:n_new], context, evidence_n, weight=weight)
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
