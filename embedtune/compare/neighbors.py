"""Nearest neighbours of words by cosine, in blocks of matrix products."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors


# Query words scored per matrix product in nearest_neighbors: 256 x 400k float32 scores is 400 MiB.
QUERY_CHUNK = 256


@dataclass
class WordNeighbors:
    word: str
    neighbors: list[tuple[str, float]]  # (word, cosine), most similar first

    def to_dict(self) -> dict:
        return {"word": self.word, "neighbors": [{"word": w, "cosine": c} for w, c in self.neighbors]}


@dataclass
class Neighbors:
    k: int
    results: list[WordNeighbors]
    unknown: list[str]  # asked-for words the vectors do not have

    def to_dict(self) -> dict:
        return {"k": self.k, "results": [r.to_dict() for r in self.results], "unknown": self.unknown}


def nearest_neighbors(vectors: Vectors, words, k: int = 10, exclude: np.ndarray | None = None) -> Neighbors:
    """The ``k`` words with the highest cosine to each of ``words``, over the whole vocabulary.

    exclude : int rows never given as a neighbour (the report: new words, for their nearest
        pretrained ones)

    A word is not its own neighbour. Norms are computed once; each block of query words is
    one (queries x dim) @ (dim x n) product and an argpartition, so the cost is a few
    matrix products whatever the vocabulary size.
    """
    if k < 1:
        raise EmbedtuneError(f"k must be at least 1, got {k}")
    words = list(words)
    known = [w for w in words if w in vectors.index]
    unknown = [w for w in words if w not in vectors.index]
    n = len(vectors.words)
    k_eff = min(k, n - 1)
    results = []
    if not known or k_eff < 1:
        return Neighbors(k, [WordNeighbors(w, []) for w in known], unknown)
    matrix = vectors.matrix
    # einsum, unlike linalg.norm, makes no n x dim temporary of squares.
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    # Zero rows score 0 against everything instead of dividing by zero.
    norms[norms == 0] = 1.0
    for start in range(0, len(known), QUERY_CHUNK):
        block = known[start : start + QUERY_CHUNK]
        rows = np.array([vectors.index[w] for w in block], dtype=np.int64)
        queries = matrix[rows] / norms[rows, None]
        scores = queries @ matrix.T  # [len(block), n]
        scores /= norms
        scores[np.arange(len(block)), rows] = -np.inf
        if exclude is not None:
            scores[:, exclude] = -np.inf
        if k_eff < n - 1:
            # The k largest land in the last k places; partitioning `scores` itself, not
            # `-scores`, saves a copy of the whole block.
            top = np.argpartition(scores, n - k_eff, axis=1)[:, n - k_eff :]
        else:
            top = np.tile(np.arange(n), (len(block), 1))
        for word, row_scores, cand in zip(block, scores, top):
            cand = cand[np.isfinite(row_scores[cand])]
            cand = cand[np.argsort(-row_scores[cand], kind="stable")][:k_eff]
            results.append(WordNeighbors(word, [(vectors.words[j], float(row_scores[j])) for j in cand]))
    return Neighbors(k, results, unknown)
