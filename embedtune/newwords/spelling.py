"""A word's vector from its spelling: hashed character n-grams fitted to pretrained vectors.

A word w is wrapped as ``<w>``; its pieces are every substring of ``<w>`` of ``MIN_N`` to
``MAX_N`` characters (fastText's subwords, repeats kept) plus ``<w>`` itself when it is longer
than ``MAX_N`` (shorter, it is already one of the substrings). A piece goes to bucket
its 32-bit FNV-1a hash (fastText's) mod ``buckets``; the word's form vector is the mean of
its pieces' bucket vectors. The bucket vectors E are the ridge solution

    min_E  sum_w |mean of E over w's pieces - v_w|^2 + ridge |E|^2

over pretrained words w, so a new word gets what its pieces meant in words spelt like it
(``threatens`` from ``threaten``, ``insurgency`` from ``insurgent``). Only the buckets some
fitting word uses can be non-zero in the solution, so only those are solved for, and only those
of the words asked about (``fit_form(words=...)``) are kept.

The hash runs over code points, so it equals fastText's (over UTF-8 bytes) for ASCII pieces only;
the bucket vectors are not meant to be read by fastText.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

MIN_N, MAX_N = 3, 6             # fastText's defaults
DEFAULT_BUCKETS = 2 ** 21       # only those some fitting word uses are stored (benchmarks/README.md, recovery)
DEFAULT_FIT_WORDS = 100_000     # the first rows of the vectors file (the most frequent, in GloVe/word2vec)
DEFAULT_RIDGE = 0.1             # lambda
DEFAULT_ITERATIONS = 3          # CG rounds from zero: more gave no better starts (benchmarks/README.md, recovery)


def pieces(word: str, min_n: int = MIN_N, max_n: int = MAX_N) -> list[str]:
    """The character n-grams of ``<word>`` (n = min_n..max_n, repeats kept), then ``<word>`` if longer than max_n."""
    wrapped = f"<{word}>"
    out = [wrapped[i:i + n] for n in range(min_n, max_n + 1) for i in range(len(wrapped) - n + 1)]
    if len(wrapped) > max_n:
        out.append(wrapped)
    return out


FNV_OFFSET, FNV_PRIME = 2166136261, 16777619   # 32-bit FNV-1a, fastText's subword hash


def piece_matrix(words: list[str], buckets: int) -> scipy.sparse.csr_matrix:
    """[len(words), buckets] float32 CSR: row i holds 1/len(pieces) at the bucket
    FNV-1a(piece) % buckets of each of ``pieces(words[i])`` (a piece seen twice, or two
    pieces in one bucket, add up).

    Hashed in numpy, all words at once: the code points of every ``<word>`` in one array, and
    each n-gram length hashed for all its pieces in n vectorised FNV rounds: far cheaper than a
    Python loop of zlib.crc32 per piece, which also held the GIL the corpus pass runs under
    (benchmarks/README.md, recovery, "The fit rebuilt for time").
    """
    wrapped = "".join(f"<{w}>" for w in words)
    codes = np.frombuffer(wrapped.encode("utf-32-le", "surrogatepass"), np.uint32)
    length = np.fromiter((len(w) + 2 for w in words), np.int64, len(words))
    start = np.cumsum(length) - length
    rows_of, hashes = [], []
    for n in range(MIN_N, MAX_N + 1):
        count = np.maximum(length - n + 1, 0)
        rows = np.repeat(np.arange(len(words)), count)
        # position of each piece: its word's start plus its offset in the word
        at = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count) + start[rows]
        rows_of.append(rows)
        hashes.append(_fnv(codes, at, np.full(len(rows), n)))
    whole = np.flatnonzero(length > MAX_N)
    rows_of.append(whole)
    hashes.append(_fnv(codes, start[whole], length[whole]))
    rows = np.concatenate(rows_of)
    pieces_per_word = np.bincount(rows, minlength=len(words))
    m = scipy.sparse.csr_matrix(((1.0 / pieces_per_word[rows]).astype(np.float32),
                                 (rows, (np.concatenate(hashes) % buckets).astype(np.int32))),
                                shape=(len(words), buckets))
    m.sum_duplicates()
    return m


def _fnv(codes: np.ndarray, at: np.ndarray, n: np.ndarray) -> np.ndarray:
    """[len(at)] uint32 FNV-1a of codes[at[i]:at[i] + n[i]] for each i."""
    h = np.full(len(at), FNV_OFFSET, np.uint32)
    live = None     # all pieces, until the shortest is done
    for k in range(int(n.max(initial=0))):
        if live is None and k >= n.min():
            live = np.arange(len(at))
        if live is None:
            h = (h ^ codes[at + k]) * np.uint32(FNV_PRIME)
        else:
            live = live[n[live] > k]
            h[live] = (h[live] ^ codes[at[live] + k]) * np.uint32(FNV_PRIME)
    return h


@dataclass
class FormModel:
    """Bucket vectors fitted to pretrained vectors, or, where fitted for given words, those words' form vectors.

    used : int64 array of shape = [n_used], sorted; the buckets solved for and kept (some fitting word uses
        each; fitted for given words, those of the words)
    table : float32 array of shape = [n_used, dim]; their vectors (every other bucket is zero); None where
        fitted for given words
    asked : the words it was fitted for, each with its row of ``vectors`` (None: any word can be asked)
    vectors : float32 array of shape = [len(asked), dim]; their form vectors, made a block of columns at a
        time as the fit solves them, so that the table of their buckets is never held whole beside the fit's
        work arrays (1M x 300: 67 MB; benchmarks/log/memory_sizes.md)
    """

    buckets: int
    used: np.ndarray
    table: np.ndarray | None
    stats: dict = field(default_factory=dict)
    asked: dict[str, int] | None = None
    vectors: np.ndarray | None = None

    def predict(self, words: list[str]) -> np.ndarray:
        """[len(words), dim] float32 form vectors (zero for a word none of whose pieces was seen); a model
        fitted for given words predicts those only (a row's bits depend on its word alone)."""
        if self.asked is not None:
            missing = [w for w in words if w not in self.asked]
            if missing:
                raise ValueError(f"the form model was fitted for other words than {missing[:3]}")
            return self.vectors[[self.asked[w] for w in words]]
        if not len(self.used):   # none of the words' pieces is a pretrained word's
            return np.zeros((len(words), self.table.shape[1]), np.float32)
        return np.asarray(bucket_rows(piece_matrix(words, self.buckets), self.used) @ self.table, np.float32)


def bucket_rows(pieces: scipy.sparse.csr_matrix, used: np.ndarray) -> scipy.sparse.csr_matrix:
    """``pieces`` ([n, buckets], piece_matrix's) with its columns renumbered to rows of the sorted ``used``
    (non-empty), the pieces of other buckets dropped: [n, len(used)], times a table of the used buckets' vectors
    the form vectors."""
    m = pieces.tocoo()
    slot = np.searchsorted(used, m.col)
    slot = np.minimum(slot, len(used) - 1)
    seen = used[slot] == m.col
    return scipy.sparse.csr_matrix((m.data[seen], (m.row[seen], slot[seen])), shape=(pieces.shape[0], len(used)))


COLUMN_BLOCK = 32         # the most columns fit_form's conjugate gradient solves together
NARROW_BLOCK = 16         # the fewest, where WORK_BYTES would want fewer (8 made the fit slower)
WORK_BYTES = 128 * 2**20  # its four work arrays (used buckets x block float32) are kept under this when
                          # NARROW_BLOCK allows: 1M x 300's 478k buckets held 245 MB at 32 beside the context pass


def block_width(n_used: int) -> int:
    """The widest block of columns fit_form solves together over ``n_used`` buckets (WORK_BYTES)."""
    return max(NARROW_BLOCK, min(COLUMN_BLOCK, WORK_BYTES // (16 * max(n_used, 1))))


def column_blocks(dim: int, width: int = COLUMN_BLOCK) -> list[slice]:
    """The blocks of columns fit_form solves together: at most ``width`` (>= NARROW_BLOCK) wide, cut evenly.

    A column's bits do not depend on the block it is solved in (the sparse products and the column sums take
    each column alone), except in a block of one column: numpy then sums it as a vector (pairwise). Blocks of
    32 columns, as the fit was cut before, left one alone where dim % 32 == 1; it is left alone here too, and no
    other is, so the starts keep their bits.
    """
    alone = dim % 32 == 1
    body = dim - 1 if alone else dim
    n = -(-body // width)
    blocks = [slice(body * b // n, body * (b + 1) // n) for b in range(n)]
    return blocks + [slice(body, dim)] if alone else blocks


def _conjugate_gradient(m, mt, inv, ridge: float, target: np.ndarray, iterations: int, keep: np.ndarray):
    """Solve (M^T M + ridge I) X = M^T target by conjugate gradient from X = 0, preconditioned by
    ``inv`` (Jacobi), ``iterations`` rounds of one product with M and one with M^T each.

    keep : the rows of X to return; the others are never formed, as the rounds run on the
        residual and the search direction alone.
    Returns (X[keep], |residual|^2, |M^T target|^2).

    A round's element-wise steps are compiled (embedtune/kernels/spelling.py: three passes over the work
    arrays where numpy made seven, the same bits); ``_numpy_round`` is the same round in numpy, the tests'
    reference.
    """
    from embedtune.kernels.spelling import add_ridge, next_direction, step_residual

    r = mt @ target                                                      # [n_used, columns]
    b_sq = float(np.einsum("ij,ij->", r, r, dtype=np.float64))
    x = np.zeros((len(keep), r.shape[1]), np.float32)
    z = inv * r
    p = z.copy()
    # float32 dot products (faster than float64 sums; benchmarks/README.md, recovery): they only size
    # the steps; the residual reported is summed in float64.
    rz = np.einsum("ij,ij->j", r, z)
    ridge = np.float32(ridge)
    for _ in range(iterations):
        ap = mt @ (m @ p)
        add_ridge(ap, p, ridge)
        alpha = rz / np.maximum(np.einsum("ij,ij->j", p, ap), 1e-30)
        x += alpha * p[keep]
        step_residual(r, ap, alpha, inv, z)
        del ap                                # before the next round's product is made
        rz_new = np.einsum("ij,ij->j", r, z)
        next_direction(p, rz_new / np.maximum(rz, 1e-30), z)
        rz = rz_new
    return x, float(np.einsum("ij,ij->", r, r, dtype=np.float64)), b_sq


def _numpy_round(m, mt, ridge, p, r, z, x, rz, inv, keep):
    """One round of ``_conjugate_gradient`` in numpy (its element-wise steps as numpy makes them), in place on
    ``p``, ``r``, ``z`` and ``x``; returns the new rz. The compiled round's reference (tests/test_form.py)."""
    ap = mt @ (m @ p)
    ap += np.multiply(p, ridge, out=z)
    alpha = rz / np.maximum(np.einsum("ij,ij->j", p, ap), 1e-30)
    x += alpha * p[keep]
    ap *= alpha
    r -= ap
    np.multiply(inv, r, out=z)
    rz_new = np.einsum("ij,ij->j", r, z)
    p *= rz_new / np.maximum(rz, 1e-30)
    p += z
    return rz_new


def _used_columns(full: scipy.sparse.csr_matrix, buckets: int):
    """(M, used, slot): ``full`` ([n, buckets], piece_matrix's) with its columns renumbered to the used buckets
    only, in the order the rows first use them; the used buckets, sorted; each bucket's column (-1: unused).
    A word's pieces and the frequent words' pieces then sit together in the work arrays, which the sparse
    products read row by row (faster than bucket order, which scatters them; benchmarks/README.md, recovery)."""
    first = np.full(buckets, len(full.indices), np.int64)
    np.minimum.at(first, full.indices, np.arange(len(full.indices)))
    used = np.flatnonzero(first < len(full.indices))
    # The buckets in the order of their first uses: each first use is its own place in full.indices, so marking
    # them and reading the buckets there in order gives that order without sorting the places.
    is_first = np.zeros(len(full.indices), np.bool_)
    is_first[first[used]] = True
    slot = np.full(buckets, -1, np.int64)
    slot[full.indices[np.flatnonzero(is_first)]] = np.arange(len(used))
    column = slot[full.indices].astype(np.int32)
    m = scipy.sparse.csr_matrix((full.data, column, full.indptr), shape=(full.shape[0], len(used)))
    return m, used, slot


def _rows_without(n: int, exclude) -> np.ndarray:
    """``np.setdiff1d(np.arange(n), exclude)`` (int64, sorted; rows of ``exclude`` outside [0, n) ignored), by a
    mask: no sort of either side."""
    kept = np.ones(n, np.bool_)
    exclude = np.asarray(exclude)
    kept[exclude[(exclude >= 0) & (exclude < n)]] = False
    return np.flatnonzero(kept)


def _distinct(values: np.ndarray, size: int) -> np.ndarray:
    """``np.unique(values)`` of non-negative ints below ``size``, by a mask: no sort."""
    seen = np.zeros(size, np.bool_)
    seen[values] = True
    return np.flatnonzero(seen)


def fit_form(vectors: Vectors, fit_words: int = DEFAULT_FIT_WORDS, buckets: int = DEFAULT_BUCKETS,
             ridge: float = DEFAULT_RIDGE, iterations: int = DEFAULT_ITERATIONS,
             words: list[str] | None = None, exclude: np.ndarray | None = None) -> FormModel:
    """Fit bucket vectors to the first ``fit_words`` rows of ``vectors`` (all rows when 0).

    words : the words the model is for (``predict``); when given, only the buckets they use are
        solved for, so the full [n_used, dim] table is never built (benchmarks/README.md, newwords), and the
        model keeps the words' form vectors, not even their buckets' table (``FormModel.vectors``).
    exclude : rows left out of the fit (the probe words of embedtune.newwords.fitted, whose spelling must be
        predicted as a new word's is: from other words)

    The first rows, not a sample of all: on the recovery benchmark's rare validation words a sample
    spread over GloVe's rows recovered fewer words than the first rows (benchmarks/README.md,
    recovery); near relatives of a word (``threaten`` for ``threatens``) must be in the fit.

    The normal equations (M^T M + ridge I) E = M^T V, M = ``piece_matrix``, are solved by
    conjugate gradient from E = 0, a block of columns at a time (one sparse product per round
    for all of them), preconditioned by the diagonal of M^T M + ridge I: common pieces (``<th``,
    ``ing>``) sit in thousands of words, rare ones in one, and without the diagonal scaling CG
    spends its rounds on that spread. Its first round gives each bucket a multiple of the
    weighted mean of the vectors of the words that use it, shrunk.
    """
    if buckets < 1 or ridge <= 0 or iterations < 0:
        raise EmbedtuneError(f"form model: buckets must be >= 1 (got {buckets}), ridge > 0 (got {ridge}), "
                             f"iterations >= 0 (got {iterations})")
    began = time.perf_counter()
    n = len(vectors) if not fit_words else min(fit_words, len(vectors))
    rows = slice(0, n)   # the fitting rows; their vectors are read a block of columns at a time (targets)
    if exclude is not None and len(exclude):
        rows = _rows_without(n, exclude)
        full = piece_matrix([vectors.words[i] for i in rows.tolist()], buckets)
        n = len(rows)
    else:
        full = piece_matrix(vectors.words[:n], buckets)
    hashed = time.perf_counter() - began
    m, used, slot = _used_columns(full, buckets)
    del full
    mt = m.T   # CSC, M's own arrays (no 20 MB copy at 1M x 300); each bucket summed in row order: the same bits
    diag = np.bincount(m.indices, weights=np.square(m.data, dtype=np.float64), minlength=len(used)) + ridge
    inv = (1.0 / diag).astype(np.float32)[:, None]
    del diag
    asked = local = None
    if words is not None:   # the buckets of ``words`` that some fitting word uses
        asked = piece_matrix(list(words), buckets)
        buckets_of_words = _distinct(asked.indices, buckets)
        used = buckets_of_words[slot[buckets_of_words] >= 0]
        local = bucket_rows(asked, used) if len(used) else None
    keep = slot[used]       # model rows (sorted buckets) -> work array rows
    del slot                # [buckets] int64 (16 MB at 2**21): not held beside the work arrays
    # CG runs on a block of columns at a time: the columns are independent problems sharing the
    # matrix, and its work arrays would otherwise take 5 x n_used x dim x 4 bytes (benchmarks/README.md,
    # newwords).
    # Fitted for given words, each block of the table is turned into the words' form vectors (predict's
    # product, a column's bits not depending on the others) and dropped.
    x = np.empty((len(used), vectors.dim), np.float32) if words is None else None
    form = None if words is None else np.zeros((asked.shape[0], vectors.dim), np.float32)
    rr = bb = 0.0
    for cols in column_blocks(vectors.dim, block_width(len(inv))):
        # the targets of these columns only: no copy of the fitting rows' whole vectors
        target = np.ascontiguousarray(vectors.matrix[rows, cols], np.float32)
        solved, r_sq, b_sq = _conjugate_gradient(m, mt, inv, ridge, target, iterations, keep)
        del target
        if x is not None:
            x[:, cols] = solved
        elif local is not None:
            form[:, cols] = np.asarray(local @ solved, np.float32)
        del solved
        rr += r_sq
        bb += b_sq
    residual = float(np.sqrt(rr / max(bb, 1e-30)))
    stats = {"form_fit_words": n, "form_buckets": buckets, "form_used_buckets": int(m.shape[1]),
             "form_ridge": ridge, "form_iterations": iterations, "form_relative_residual": round(residual, 6),
             "form_hash_seconds": round(hashed, 3), "form_seconds": round(time.perf_counter() - began, 3)}
    if words is None:
        return FormModel(buckets, used.astype(np.int64), x, stats)
    order = {}
    for i, w in enumerate(words):
        order.setdefault(w, i)
    return FormModel(buckets, used.astype(np.int64), None, stats, order, form)


class SubwordForm:
    """A fastText model's own spelling start, in place of the fitted model: the vector fastText gives a word
    it lacks (its n-gram rows averaged, embedtune.formats.subwords), zero for a word with no n-gram.
    The probe words get theirs the same way, without their own rows: as a new word's."""

    def __init__(self, model):
        self.model = model
        self.stats = {"form": "fasttext-subwords", "form_minn": model.minn, "form_maxn": model.maxn,
                      "form_buckets": model.bucket}

    def predict(self, words: list[str]) -> np.ndarray:
        return self.model.oov_vectors(list(words))


def form_model_for(vectors: Vectors, **fit_options):
    """The spelling start for new words of ``vectors``: a fastText model's subwords when they came from one,
    else the form model fitted to them (``fit_form``)."""
    model = vectors.model
    if model is not None and model.maxn > 0 and model.bucket > 0:
        return SubwordForm(model)
    return fit_form(vectors, **fit_options)
