"""The report's 2-D map: chosen words and their neighbours, before and after, on one PCA plane.

One plane for both sides (fitted on the points' BEFORE and AFTER rows together), so a word that
moved is drawn in two places of the same picture and the frozen words stay where they were. Rows
are scaled to unit length first: neighbours are by cosine. A few hundred points make a small SVD
(docs/report.md, Speed); no projection library is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedtune.compare import nearest_neighbors


@dataclass
class WordMap:
    """Points of the map.

    words : the n words drawn (the chosen ones first)
    chosen : bool [n], the words asked for (the rest are their neighbours)
    before, after : float64 [n, 2], each word's place; NaN where that side lacks the word
    explained : the share of the points' variance along each axis
    missing : chosen words neither side holds
    """

    words: list[str]
    chosen: np.ndarray
    before: np.ndarray
    after: np.ndarray
    explained: tuple[float, float]
    missing: list[str]


def word_map(before, after, chosen: list[str], k: int, exclude=None) -> WordMap | None:
    """The map of ``chosen`` (their order kept, repeats dropped) and each one's ``k`` nearest
    neighbours on either side; None when no chosen word is in either. ``exclude``: rows of AFTER
    never drawn as a neighbour."""
    chosen = list(dict.fromkeys(chosen))
    missing = [w for w in chosen if w not in before.index and w not in after.index]
    chosen = [w for w in chosen if w not in missing]
    if not chosen:
        return None
    words = dict.fromkeys(chosen)
    for side, ex in ((before, None), (after, exclude)):
        found = nearest_neighbors(side, [w for w in chosen if w in side.index], k, exclude=ex)
        for r in found.results:
            words.update(dict.fromkeys(w for w, _ in r.neighbors))
    words = list(words)
    rows_b, rows_a = _unit_rows(before, words), _unit_rows(after, words)
    both = np.concatenate([r[np.isfinite(r[:, 0])] for r in (rows_b, rows_a)])
    mean = both.mean(axis=0)
    _, s, vt = np.linalg.svd(both - mean, full_matrices=False)
    axes = vt[:2]
    if axes.shape[0] < 2:   # a single point: a flat second axis
        axes = np.vstack([axes, np.zeros((2 - axes.shape[0], axes.shape[1]))])
    variance = s ** 2
    share = variance[:2] / variance.sum() if variance.sum() > 0 else np.zeros(2)
    share = np.pad(share, (0, 2 - len(share)))
    mask = np.array([w in set(chosen) for w in words])
    return WordMap(words, mask, (rows_b - mean) @ axes.T, (rows_a - mean) @ axes.T,
                   (float(share[0]), float(share[1])), missing)


def _unit_rows(vectors, words) -> np.ndarray:
    """float64 [len(words), dim]: each word's row at unit length (NaN rows for words it lacks)."""
    out = np.full((len(words), vectors.dim), np.nan)
    present = [(i, vectors.index[w]) for i, w in enumerate(words) if w in vectors.index]
    if present:
        at, rows = map(list, zip(*present))
        m = vectors.matrix[np.array(rows)].astype(np.float64)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        out[at] = m / np.where(norms > 0, norms, 1.0)
    return out
