"""A word's vector from its spelling: hashed character n-grams fitted to pretrained vectors.

A word w is wrapped as ``<w>``; its pieces are every substring of ``<w>`` of ``MIN_N`` to
``MAX_N`` characters (fastText's subwords, repeats kept) plus ``<w>`` itself when it is longer
than ``MAX_N`` (shorter, it is already one of the substrings). A piece goes to bucket
crc32(utf-8 bytes) mod ``buckets``; the word's form vector is the mean of its pieces' bucket
vectors. The bucket vectors E are the ridge solution

    min_E  sum_w |mean of E over w's pieces - v_w|^2 + ridge |E|^2

over pretrained words w, so a new word gets what its pieces meant in words spelt like it
(``threatens`` from ``threaten``, ``insurgency`` from ``insurgent``). Only the buckets some
fitting word uses can be non-zero in the solution, so only those are stored and solved for.

crc32 (zlib: one C call per piece) rather than fastText's FNV-1a, which here would be a Python
loop over bytes; the bucket vectors are not meant to be read by fastText.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

MIN_N, MAX_N = 3, 6             # fastText's defaults
DEFAULT_BUCKETS = 2 ** 21       # 100k GloVe words use 0.48M of them; 2^18 scored the same (50k words)
DEFAULT_FIT_WORDS = 100_000     # the first rows of the vectors file (the most frequent, in GloVe/word2vec)
DEFAULT_RIDGE = 0.1             # lambda
DEFAULT_ITERATIONS = 5          # CG rounds: 3, 5 and 10 gave the same R@10 on the rare validation words


def pieces(word: str, min_n: int = MIN_N, max_n: int = MAX_N) -> list[str]:
    """The character n-grams of ``<word>`` (n = min_n..max_n, repeats kept), then ``<word>`` if longer than max_n."""
    wrapped = f"<{word}>"
    out = [wrapped[i:i + n] for n in range(min_n, max_n + 1) for i in range(len(wrapped) - n + 1)]
    if len(wrapped) > max_n:
        out.append(wrapped)
    return out


def piece_buckets(word: str, buckets: int) -> list[int]:
    """The bucket of each of ``pieces(word)``, in order."""
    if word.isascii():
        # One encode per word: an ASCII piece's bytes are the slice of the word's bytes (1.6x faster).
        wrapped = f"<{word}>".encode("ascii")
        ids = [zlib.crc32(wrapped[i:i + n]) % buckets
               for n in range(MIN_N, MAX_N + 1) for i in range(len(wrapped) - n + 1)]
        if len(wrapped) > MAX_N:
            ids.append(zlib.crc32(wrapped) % buckets)
        return ids
    return [zlib.crc32(p.encode("utf-8")) % buckets for p in pieces(word)]


def piece_matrix(words: list[str], buckets: int) -> scipy.sparse.csr_matrix:
    """[len(words), buckets] float32 CSR: row i holds 1/len(pieces) at each piece of words[i]
    (a piece seen twice, or two pieces in one bucket, add up)."""
    indptr = [0]
    cols: list[int] = []
    vals: list[float] = []
    for word in words:
        ids = piece_buckets(word, buckets)
        cols += ids
        vals += [1.0 / len(ids)] * len(ids)
        indptr.append(len(cols))
    m = scipy.sparse.csr_matrix((np.array(vals, np.float32), np.array(cols, np.int32), np.array(indptr, np.int32)),
                                shape=(len(words), buckets))
    m.sum_duplicates()
    return m


@dataclass
class FormModel:
    """Bucket vectors fitted to pretrained vectors.

    used : int64 array of shape = [n_used], sorted; the buckets some fitting word touches
    table : float32 array of shape = [n_used, dim]; their vectors (every other bucket is zero)
    """

    buckets: int
    used: np.ndarray
    table: np.ndarray
    stats: dict = field(default_factory=dict)

    def predict(self, words: list[str]) -> np.ndarray:
        """[len(words), dim] float32 form vectors (zero for a word none of whose pieces was seen)."""
        m = piece_matrix(words, self.buckets).tocoo()
        slot = np.searchsorted(self.used, m.col)
        slot = np.minimum(slot, len(self.used) - 1)
        seen = self.used[slot] == m.col
        local = scipy.sparse.csr_matrix((m.data[seen], (m.row[seen], slot[seen])),
                                        shape=(len(words), len(self.used)))
        return np.asarray(local @ self.table, np.float32)


COLUMN_BLOCK = 32   # columns solved together by fit_form's conjugate gradient


def _conjugate_gradient(m, mt, inv, ridge: float, target: np.ndarray, iterations: int):
    """Solve (M^T M + ridge I) X = M^T target, Jacobi-preconditioned (``inv``) and started from the
    preconditioned right-hand side, ``iterations`` rounds. Returns (X, |residual|^2, |M^T target|^2)."""
    b = mt @ target                                                      # [n_used, columns]

    def apply(x):
        y = mt @ (m @ x)
        y += ridge * x
        return y

    x = inv * b
    r = b - apply(x)
    z = inv * r
    p = z.copy()
    rz = np.einsum("ij,ij->j", r, z, dtype=np.float64)
    for _ in range(iterations):
        ap = apply(p)
        alpha = rz / np.maximum(np.einsum("ij,ij->j", p, ap, dtype=np.float64), 1e-30)
        x += alpha.astype(np.float32) * p
        r -= alpha.astype(np.float32) * ap
        z = inv * r
        rz_new = np.einsum("ij,ij->j", r, z, dtype=np.float64)
        p = z + (rz_new / np.maximum(rz, 1e-30)).astype(np.float32) * p
        rz = rz_new
    return x, float(np.einsum("ij,ij->", r, r, dtype=np.float64)), float(np.einsum("ij,ij->", b, b, dtype=np.float64))


def fit_form(vectors: Vectors, fit_words: int = DEFAULT_FIT_WORDS, buckets: int = DEFAULT_BUCKETS,
             ridge: float = DEFAULT_RIDGE, iterations: int = DEFAULT_ITERATIONS) -> FormModel:
    """Fit bucket vectors to the first ``fit_words`` rows of ``vectors`` (all rows when 0).

    The first rows, not a sample of all: on the recovery benchmark's rare validation words, 100k
    rows spread over GloVe's 400k gave R@10 0.30 (with the context start) against 0.38 for the
    first 100k; near relatives of a word (``threaten`` for ``threatens``) must be in the fit.

    The normal equations (M^T M + ridge I) E = M^T V, M = ``piece_matrix``, are solved by
    conjugate gradient, all dim columns at once (one sparse product per round for all of
    them), preconditioned by the diagonal of M^T M + ridge I and started from its solution
    (each bucket's weighted mean of the vectors of the words that use it, shrunk): common
    pieces (``<th``, ``ing>``) sit in thousands of words, rare ones in one, and without the
    diagonal scaling CG spends its rounds on that spread.
    """
    if buckets < 1 or ridge <= 0 or iterations < 0:
        raise EmbedtuneError(f"form model: buckets must be >= 1 (got {buckets}), ridge > 0 (got {ridge}), "
                             f"iterations >= 0 (got {iterations})")
    began = time.perf_counter()
    n = len(vectors) if not fit_words else min(fit_words, len(vectors))
    words = vectors.words[:n]
    target = np.asarray(vectors.matrix[:n], np.float32)
    full = piece_matrix(words, buckets)
    hashed = time.perf_counter() - began
    # Columns renumbered to the used buckets only.
    used, column = np.unique(full.indices, return_inverse=True)
    m = scipy.sparse.csr_matrix((full.data, column.astype(np.int32), full.indptr), shape=(n, len(used)))
    mt = m.T.tocsr()
    diag = np.bincount(column, weights=np.square(full.data, dtype=np.float64), minlength=len(used)) + ridge
    inv = (1.0 / diag).astype(np.float32)[:, None]
    # CG runs on a block of columns at a time: the columns are independent problems sharing the
    # matrix, and its five [n_used, columns] work arrays would otherwise take 6 x n_used x dim x 4
    # bytes (3.5 GB for 100k words at 300 dimensions; 0.4 GB with blocks of COLUMN_BLOCK).
    x = np.empty((len(used), target.shape[1]), np.float32)
    rr = bb = 0.0
    for first in range(0, target.shape[1], COLUMN_BLOCK):
        cols = slice(first, first + COLUMN_BLOCK)
        x[:, cols], r_sq, b_sq = _conjugate_gradient(m, mt, inv, ridge, np.ascontiguousarray(target[:, cols]),
                                                     iterations)
        rr += r_sq
        bb += b_sq
    residual = float(np.sqrt(rr / max(bb, 1e-30)))
    stats = {"form_fit_words": n, "form_buckets": buckets, "form_used_buckets": int(len(used)),
             "form_ridge": ridge, "form_iterations": iterations, "form_relative_residual": round(residual, 6),
             "form_hash_seconds": round(hashed, 3), "form_seconds": round(time.perf_counter() - began, 3)}
    return FormModel(buckets, used.astype(np.int64), x, stats)
