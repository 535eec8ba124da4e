"""The maps and the gate of the ``form-context`` start (form_context.py), fitted on the user's own corpus: frequent
pretrained words play rare ones.

A rare word's evidence is a few contexts, and a map fitted on frequent words' averages over all their
occurrences (à la carte) is the wrong map for an average over one or two; how far to trust the spelling
depends on that number too, and so does how wide a context helps. None of it is fixed here: a sample of
frequent pretrained words (the *probes*) is hidden, each keeps about n of its occurrences in nested
buckets (n = 1, 2, 4, ..., 64: embedtune.kernels.contexts), and on those the run fits

- ``per_n``: for the smallest buckets (n <= PER_N_MAX_SLOT = 2), a map per bucket from the n-context averages
  to the probes' vectors (ridge least squares), fitted on *centred* averages and vectors: it gives the
  deviation of a word from the bucket's mean, and the all-occurrence map gives that mean (the map at the
  bucket's mean average). Uncentred, a map adds the probes' own mean vector to every start, and the probes
  are not the new words: drawn from GloVe's rows past 100k it pointed every start at those rare rows'
  cluster, and one-context starts ranked worse than random (benchmarks/README.md, newwords). On the
  validation words a map at 4 contexts still won rank but lost the pair sets' Spearman, and
  past that the all-occurrence map (Khodak et al.'s) did as well or better;
- ``line``: each average over the whole line beside the one within the window, as the per-n maps' input,
  so they weigh the near and the sentence-wide context (a one-line definition is all context);
- ``gate``: the spelling/context weight w(n) = n / (n + k_n), k_n chosen per bucket for the best mean
  cosine on the probes, with the probes' spelling predicted by a form model fitted without them: a space
  whose spelling predicts its words poorly gets little of it;
- ``line_blend``: for the smallest buckets (n <= PER_N_MAX_SLOT), the context average a blend of the window's
  (weight a) and the whole line's (1 - a) through the all-occurrence map, a in BLEND_GRID and its gate's k
  chosen together on the probes: a word seen once in a one-line definition has most of its evidence past the
  window, a word seen once in a long line little (needs ``gate``);
- ``held_out``: each per-n map's ridge chosen by two-fold cross-validation over the probes, and no map where
  none beats the all-occurrence start on the held-out half (unchecked, on skip-gram vectors the maps ranked
  one-context words past chance);
- ``centre``: the two starts mixed apart from their parts along the mean of the vectors the spelling model
  fits to (combine_form_context), and the gate's cosines taken between deviations from that mean. Skip-gram
  vectors share one direction (a word's cosine with their mean is about 0.7): uncentred, a spelling start
  that is mostly that direction scores a high cosine with every word, the gate trusts it, and the mix ranks
  its word near chance. (The gate judged centred with the mix left uncentred did worse there: benchmarks/README.md.)

The probes are sampled evenly over the pretrained words the corpus shows PROBE_MIN_COUNT+ times, and
those among the spelling model's rows are left out of its fit.

A new word seen in n contexts takes the bucket nearest n (in log n) and, past the last per-n map, the map
fitted on frequent words' averages over all their occurrences. Each part can be turned off (``parts``), for
benchmarks/newwords.py's measure of what each adds (chosen there on validation words, reported on others).
"""

from __future__ import annotations

import numpy as np

from embedtune.newwords.common import fit_alacarte
from embedtune.newwords.defaults import DEFAULT_FORM_K
from embedtune.vectors import Vectors

PARTS = ("per_n", "line", "gate", "centre", "line_blend", "held_out")
# The maps and the line stay off: on a second corpus and a second vector space neither won beyond its bootstrap
# interval in every cell without losing beyond it in one (issue 40's rule; benchmarks/README.md, "Issue 40").
# ``centre`` mixes the two starts apart from the pretrained vectors' mean direction, and ``gate`` weighs the spelling
# by how well it predicts the probes (held-out frequent words of the user's own vectors): on skip-gram vectors,
# whose words share one direction, the uncentred fixed mix (k = DEFAULT_FORM_K) let a spelling that predicts
# little decide the start (benchmarks/README.md, "Issue 40: the spelling half on skip-gram vectors"). On GloVe no
# figure of the test words is lost beyond its interval (one of 100 validation words' was, at its edge; same section).
# Re-judged on top of centre + gate (benchmarks/README.md, "Issue 40: one definition"): per_n, per_n + line, the
# checked maps and line_blend each lose beyond the interval in one cell or more, so they stay off.
DEFAULT_PARTS = ("centre", "gate")
DEFAULT_SLOTS = (1, 2, 4, 8, 16, 32, 64)   # occurrences a probe keeps in each bucket, about
DEFAULT_PROBES = 3000       # probe words sampled from the fitting words
PROBE_MIN_COUNT = 4         # a probe word is seen at least this often
PER_N_MAX_SLOT = 2          # buckets of up to this many contexts get their own map; past it, the all-occurrence map
MIN_PROBES = 60             # a bucket with fewer probes (or fewer than 2 per feature) fits no map
RIDGE = 1e-3                # of the features' mean square, per map
HELD_OUT_RIDGES = (1e-3, 1e-2, 1e-1, 1.0)   # held_out: a bucket map's ridge, chosen on held-out probes
GATE_GRID = np.linspace(0.0, 1.0, 41)
BLEND_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)   # line_blend: the window average's share of a few lines' context


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


def fit_map(x: np.ndarray, v: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """[dim, features] map A with A x ~ v, least squares with a small ridge (``ridge`` times the features' mean
    square): the maps of the small buckets have fewer words than a [2 dim, dim] map has numbers to spare."""
    x = np.asarray(x, np.float64)
    gram = x.T @ x
    gram[np.diag_indices_from(gram)] += ridge * np.trace(gram) / len(gram)
    return np.linalg.solve(gram, x.T @ np.asarray(v, np.float64)).T


def checked_map(model, x: np.ndarray, near: np.ndarray, truth: np.ndarray, form: np.ndarray,
                centre: np.ndarray | None) -> tuple[float | None, float, float]:
    """(ridge or None, held-out score of the map, of the all-occurrence start): a bucket map's ridge chosen in
    HELD_OUT_RIDGES by two-fold cross-validation over the probes (each half's map scored on the other half by
    best_gate's mean cosine of the mix at its best w), and None when no ridge beats the all-occurrence start on
    the held-out halves. In-sample, a [dim, 2 dim] map on a few thousand one-context averages looks better than
    it is: on skip-gram vectors the unchecked map ranked one-context words past chance (benchmarks/README.md,
    "Issue 40: one definition")."""
    half = np.arange(len(x)) % 2 == 0
    base_score, scores = 0.0, np.zeros(len(HELD_OUT_RIDGES))
    for fit, out in ((half, ~half), (~half, half)):
        base = gate_scores(model.base(near[out]), form[out], truth[out], centre)
        base_score += 0.0 if base is None else float(base.max()) / 2
        mean_x, mean_v = x[fit].mean(axis=0), truth[fit].mean(axis=0)
        at_mean = model.base(mean_x[None, :near.shape[1]])[0]
        for i, ridge in enumerate(HELD_OUT_RIDGES):
            a = fit_map(x[fit] - mean_x, truth[fit] - mean_v, ridge)
            got = gate_scores((x[out] - mean_x) @ a.T + at_mean, form[out], truth[out], centre)
            scores[i] += -np.inf if got is None else float(got.max()) / 2
    best = int(np.argmax(scores))
    return (HELD_OUT_RIDGES[best] if scores[best] > base_score else None), float(scores[best]), base_score


def best_gate(context: np.ndarray, form: np.ndarray, truth: np.ndarray, centre: np.ndarray | None = None) -> float:
    """The context weight w in GATE_GRID whose start (combine_form_context's mix, ``centre`` as it takes it) is
    nearest the truth in mean cosine (a word with no form vector left out); with ``centre``, the cosine of the
    start's and the truth's deviations from it: what tells a word from the others, not the direction every
    word of the space shares. In closed form over the grid (per word a few dot products), not a mix per w."""
    scores = gate_scores(context, form, truth, centre)
    return 1.0 if scores is None else float(GATE_GRID[int(np.argmax(scores))])


def gate_scores(context: np.ndarray, form: np.ndarray, truth: np.ndarray,
                centre: np.ndarray | None = None) -> np.ndarray | None:
    """[len(GATE_GRID)] best_gate's mean cosine at each w (None without a word that has a form vector)."""
    has_form = np.any(form != 0, axis=1)
    c, f = np.asarray(context[has_form], np.float64), np.asarray(form[has_form], np.float64)
    t = np.asarray(truth[has_form], np.float64)
    if not len(c):
        return None
    w = GATE_GRID[:, None]
    if centre is None:
        c, f, t = _unit(c), _unit(f), _unit(t)
        cc, cf, ff = np.einsum("ij,ij->i", c, c), np.einsum("ij,ij->i", c, f), np.einsum("ij,ij->i", f, f)
        ct, ft = np.einsum("ij,ij->i", c, t), np.einsum("ij,ij->i", f, t)
        norm = np.sqrt(np.maximum(w * w * cc + 2 * w * (1 - w) * cf + (1 - w) ** 2 * ff, 1e-30))
        return ((w * ct + (1 - w) * ft) / norm).mean(axis=1)
    # combine_form_context with a centre: the parts off the mean's axis u mixed as unit vectors m and scaled to
    # length L, the parts along it (a_c, a_f) mixed linearly; the start minus the centre is then
    # (L / |m|) m + beta u with beta = w a_c + (1 - w) a_f - |centre|, m orthogonal to u.
    centre = np.asarray(centre, np.float64)
    size = max(float(np.linalg.norm(centre)), 1e-30)
    u = centre / size
    a_c, a_f = c @ u, f @ u
    c, f = c - a_c[:, None] * u, f - a_f[:, None] * u
    len_c, len_f = np.linalg.norm(c, axis=1), np.linalg.norm(f, axis=1)
    c, f = c / np.maximum(len_c, 1e-30)[:, None], f / np.maximum(len_f, 1e-30)[:, None]
    d = t - centre
    d_norm = np.maximum(np.linalg.norm(d, axis=1), 1e-30)
    cf, cd, fd, ud = (np.einsum("ij,ij->i", c, f), np.einsum("ij,ij->i", c, d), np.einsum("ij,ij->i", f, d),
                      d @ u)
    m_len = np.sqrt(np.maximum(w * w + 2 * w * (1 - w) * cf + (1 - w) ** 2, 1e-30))
    length = w * len_c + (1 - w) * len_f
    beta = w * a_c + (1 - w) * a_f - size
    dot = length / m_len * (w * cd + (1 - w) * fd) + beta * ud
    return (dot / np.sqrt(np.maximum(length * length + beta * beta, 1e-30)) / d_norm).mean(axis=1)


class FittedStarts:
    """The maps and gates fitted on the probes, applied to new words by their evidence.

    maps[b] : None (the all-occurrence start) or (A, mean_x, mean_start): a bucket's start is
        (x - mean_x) @ A.T + mean_start, its centred map's deviation added to the all-occurrence start at
        the bucket's mean average."""

    def __init__(self, slots, maps, map_all, ks, features):
        self.slots, self.maps, self.map_all, self.ks, self.features = slots, maps, map_all, ks, features
        self.map_ks = [None] * len(maps)   # the gate's k of each bucket's own map or blend, where it has one
        self.blends = [None] * len(maps)   # line_blend: a bucket's window weight a, the line's 1 - a

    def base(self, near: np.ndarray) -> np.ndarray:
        """The all-occurrence start of window averages: à la carte's map, or the plain mean without one."""
        return near @ self.map_all.T if self.map_all is not None else np.array(near, np.float64)

    def context(self, near: np.ndarray, line: np.ndarray, n: np.ndarray, per_n: bool) -> np.ndarray:
        """[len(n), dim] context starts: each word's bucket map (per_n) where it has one, its bucket's blend of the
        window and the line (line_blend) where it has one, else the base."""
        out = self.base(near)
        bucket = self.bucket(n)
        for b, a in enumerate(self.blends):
            at = bucket == b
            if a is not None and at.any():
                out[at] = self.base(a * near[at] + (1 - a) * line[at])
        if per_n and any(m is not None for m in self.maps):
            x = self.features(near, line)
            for b, m in enumerate(self.maps):
                at = bucket == b
                if m is not None and at.any():
                    a, mean_x, mean_start = m
                    out[at] = (x[at] - mean_x) @ a.T + mean_start
        return out

    def bucket(self, n: np.ndarray) -> np.ndarray:
        """The bucket nearest each evidence n in log n; -1 past 1.5 times the last (the all-occurrence map)."""
        logs = np.log2(np.asarray(self.slots, np.float64))
        b = np.abs(np.log2(np.maximum(n, 1))[:, None] - logs[None, :]).argmin(axis=1)
        return np.where(np.asarray(n) > 1.5 * self.slots[-1], -1, b)

    def weight(self, n: np.ndarray) -> np.ndarray:
        """The context weight n / (n + k(n)): k interpolated in log n between the buckets' k fitted for the
        all-occurrence start, or a bucket map's (or blend's) own k for the words it starts (a better start
        earns a smaller k, which must not spill over to the words beside the bucket that lack one)."""
        n = np.asarray(n, np.float64)
        k = np.interp(np.log2(np.maximum(n, 1)), np.log2(np.asarray(self.slots, np.float64)), self.ks)
        if any(map_k is not None for map_k in self.map_ks):
            bucket = self.bucket(n)
            for b, map_k in enumerate(self.map_ks):
                if map_k is not None:
                    k = np.where(bucket == b, map_k, k)
        return np.where(n > 0, n / (n + k), 0.0)


def best_blend(model: FittedStarts, near: np.ndarray, line: np.ndarray, form: np.ndarray, truth: np.ndarray,
               centre: np.ndarray | None) -> tuple[float, float]:
    """(a, w): the window's weight a in BLEND_GRID (the whole line's 1 - a) of the context average, and the gate's
    w with it, whose mix is nearest the probes' vectors in mean cosine (best_gate's, at its best w)."""
    best = (-np.inf, 1.0, 1.0)
    for a in BLEND_GRID:
        scores = gate_scores(model.base(a * near + (1 - a) * line), form, truth, centre)
        if scores is not None and scores.max() > best[0]:
            best = (float(scores.max()), float(a), float(GATE_GRID[int(np.argmax(scores))]))
    return best[1], best[2]


def _bucket_means(sums, b: int, dim: int):
    """(usable probes, their features, their geometric mean of contexts) of bucket ``b``."""
    near_b, line_b = sums.probe_near[:, b], sums.probe_line[:, b]
    ok = (near_b[:, dim + 1] > 0) & (line_b[:, dim + 1] > 0)
    near, line = near_b[ok, :dim] / near_b[ok, dim:dim + 1], line_b[ok, :dim] / line_b[ok, dim:dim + 1]
    # the bucket's place: the geometric mean of its probes' contexts (a probe seen less often than the
    # bucket's size gives all it has)
    seen = float(np.exp(np.log(line_b[ok, dim + 1]).mean())) if ok.any() else None
    return ok, near, line, seen


def fit_starts(sums, fit_rows: np.ndarray, n_new: int, vectors: Vectors, probe_rows: np.ndarray,
               probe_form: np.ndarray, slots, parts, centre: np.ndarray | None = None) -> tuple[FittedStarts, dict]:
    """Fit the maps and the gate on the sums of one pass (new words first, then the fitting words)."""
    dim = vectors.dim
    if "line" in parts:
        def features(near, line):
            return np.hstack([near, line])
    else:
        def features(near, line):
            return near
    map_all = None
    if len(fit_rows):
        usable = sums.contexts[n_new:] > 0
        map_all = fit_alacarte(sums.means(n_new + np.flatnonzero(usable)), vectors.matrix[fit_rows[usable]])
    model = FittedStarts(tuple(float(s) for s in slots), [None] * len(slots), map_all,
                         np.full(len(slots), DEFAULT_FORM_K), features)
    probe_v = np.asarray(vectors.matrix[probe_rows], np.float64) if len(probe_rows) else np.zeros((0, dim))
    used, seen, buckets, checks = [], [], [], []
    for b in range(len(slots) if sums.probe_near is not None else 0):
        ok, near, line, place = _bucket_means(sums, b, dim)
        buckets.append((ok, near))   # the line's means made again where the gate needs them (a map or a blend):
                                     # every bucket's held at once took 42 MB at 300 dimensions
        used.append(int(ok.sum()))
        seen.append(place if place is not None else float(slots[b]))
        x = features(near, line)
        if "per_n" in parts and slots[b] <= PER_N_MAX_SLOT and ok.sum() >= max(MIN_PROBES, 2 * x.shape[1]):
            ridge = RIDGE
            if "held_out" in parts:
                ridge, map_score, base_score = checked_map(model, x, near, probe_v[ok], probe_form[ok], centre)
                checks.append([b, ridge, round(map_score, 4), round(base_score, 4)])
            if ridge is not None:
                mean_x, mean_v = x.mean(axis=0), probe_v[ok].mean(axis=0)
                model.maps[b] = (fit_map(x - mean_x, probe_v[ok] - mean_v, ridge), mean_x,
                                 model.base(mean_x[None, :dim])[0])
    if seen:
        model.slots = tuple(seen)
    if "gate" in parts and buckets:
        ks = []
        for b, (ok, near) in enumerate(buckets):
            if ok.sum() < MIN_PROBES:
                ks.append(ks[-1] if ks else DEFAULT_FORM_K)
                continue
            truth, form, place = probe_v[ok], probe_form[ok], seen[b]
            w = best_gate(model.base(near), form, truth, centre)
            ks.append(place * (1 - w) / max(w, 1e-3))   # w = n / (n + k) at the bucket's place
            if model.maps[b] is not None:
                line = _bucket_means(sums, b, dim)[2]
                w = best_gate(model.context(near, line, np.full(ok.sum(), place), True), form, truth, centre)
                model.map_ks[b] = place * (1 - w) / max(w, 1e-3)
            elif "line_blend" in parts and slots[b] <= PER_N_MAX_SLOT:
                a, w = best_blend(model, near, _bucket_means(sums, b, dim)[2], form, truth, centre)
                if a < 1:
                    model.blends[b], model.map_ks[b] = a, place * (1 - w) / max(w, 1e-3)
        model.ks = np.asarray(ks, np.float64)
    stats = {"start_parts": list(parts), "probe_words": int(len(probe_rows)), "probe_slots": list(slots),
             "probes_per_bucket": used, "contexts_per_bucket": [round(s, 2) for s in seen],
             "maps_per_bucket": [m is not None for m in model.maps],
             "form_k_per_bucket": [round(float(k), 3) for k in model.ks],
             "map_form_k_per_bucket": [None if k is None else round(float(k), 3) for k in model.map_ks],
             "window_blend_per_bucket": list(model.blends)}
    if checks:   # [bucket, ridge chosen (None: no map), the map's held-out score, the all-occurrence start's]
        stats["held_out_maps"] = checks
    return model, stats
