"""GloVe's set-up, compiled (numba): the co-occurrence count, the pairs' dot products and the fit of the
scale and biases (objectives/glove.py says what each computes; its numpy reference is tests/test_glove.py's).

The count takes the kept ids a block of lines at a time: every pair of positions on one line at most
``window`` apart is put in its row's bucket (the smaller id's; a counting sort), then each row's partners
are summed (weight 1/distance, float64, in corpus order) and sorted, a row per thread. A block's counts are
merged into the running total row by row. Memory follows the block's pairs (4 bytes each, 8 past 2^24
words) and the distinct pairs, never the vocabulary squared.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange, set_num_threads

from embedtune.kernels.common import PARALLEL, _sort, kernel_threads, on_threads, serial

# Pairs (positions at most window apart) of one block; the bucket costs 4 bytes a pair (8 past 2^24 words).
# Smaller blocks cost more merges; each block is also a step of the count's progress bar.
BLOCK_PAIRS = 1 << 24
# A row whose partners fill more than 1 in SCAN_SPAN of the ids between its first and its last reads its sums
# off the dense array in column order instead of sorting its columns: the frequent words' rows, where the
# sort took a third of count_block's CPU on Zipf-distributed ids (benchmarks/log/glove_job.md). The same
# columns in the same order with the same sums either way: the bits do not change.
SCAN_SPAN = 16
# A bucketed pair's distance takes the low bits of its packed number (config: a window of at most 100).
DISTANCE_BITS = 7
DISTANCE_MASK = (1 << DISTANCE_BITS) - 1


@njit(nogil=True, cache=True)
def _bucket_pass(ids, line, window, lo, hi, slots, partners):
    """_buckets' pass over positions [lo, hi): with ``partners`` empty, each row's pairs counted into ``slots``
    [n_words]; else each pair packed into its row's next slot, ``slots`` (the run's next slot of each row)
    moved on. One kernel for both passes: one compile."""
    n = len(ids)
    fill = len(partners) > 0
    for i in range(lo, hi):
        a = ids[i]
        for d in range(1, window + 1):
            if i + d >= n or line[i + d] != line[i]:
                break
            b = ids[i + d]
            r = min(a, b)
            if fill:
                partners[slots[r]] = (max(a, b) << DISTANCE_BITS) | d
            slots[r] += 1


def _buckets(ids, line, n_words, window, runs, like, threads=1):
    """(starts [n_words + 1], partners): the partners of row r (the pairs whose smaller id is r) are
    partners[starts[r]:starts[r + 1]], in corpus order, each packed as (its id << DISTANCE_BITS) | distance in
    an array of ``like``'s type (``packed_like``).

    A counting sort over ``runs`` runs of positions at once (on ``threads`` threads: a row count each, as large
    as count_block's per-thread sums): each run counts its pairs per row, then fills its own slots of each row,
    after the earlier runs' (a pair belongs to its first position's run), so every row's partners are in
    corpus order whatever ``runs`` is. One run had a core do this while the others waited
    (benchmarks/log/glove_job.md). Id and distance in one number: one scattered write a pair, not two (the
    fill's writes land all over the block's buckets: benchmarks/log/glove_job.md)."""
    n = len(ids)
    cuts = [p * n // runs for p in range(runs + 1)]
    per_run = np.zeros((runs, n_words), np.int64)
    counting = np.empty(0, like.dtype)
    on_threads(_bucket_pass, [(ids, line, window, cuts[p], cuts[p + 1], per_run[p], counting)
                              for p in range(runs)], threads)
    starts = np.zeros(n_words + 1, np.int64)
    np.cumsum(per_run.sum(axis=0), out=starts[1:])
    at = starts[:-1].copy()   # each run's first slot of each row: the row's start, then the earlier runs'
    for p in range(runs):     # (a row's worth of memory at a time, not another runs x n_words)
        size = per_run[p].copy()
        per_run[p] = at
        at += size
    partners = np.empty(starts[n_words], like.dtype)
    on_threads(_bucket_pass, [(ids, line, window, cuts[p], cuts[p + 1], per_run[p], partners)
                              for p in range(runs)], threads)
    return starts, partners


def packed_like(n_words: int) -> np.ndarray:
    """An empty array of the type _buckets packs a pair's partner and distance in: int32 while every id fits
    (4 bytes a pair), else int64."""
    return np.zeros(0, np.int32 if n_words << DISTANCE_BITS <= 2**31 else np.int64)


def count_block(ids, line, n_words, window, parts, threads=None):
    """The counts of one block of kept ids as CSR (indptr [n_words + 1] int64, cols int32 sorted within each
    row, values float64): X[j, k] (j <= k) sums 1/distance over the pairs of positions on one line at most
    ``window`` apart with ids {j, k}. ``line``: equal values, the same line. The rows are summed in ``parts`` runs
    of about equal work on ``threads`` threads (None: numba's count, as set_num_threads left it); the bits depend
    on neither (each row is summed in corpus order)."""
    return _count_block(ids, line, n_words, window, parts, get_num_threads() if threads is None else threads)


def _count_block(ids, line, n_words, window, parts, threads):
    starts, partners = _buckets(ids, line, n_words, window, max(1, parts // 4), packed_like(n_words), threads)
    bounds = _even_parts(starts, parts)
    sizes = np.zeros(n_words, np.int64)
    # Each part's scratch made by numpy on its thread (_row_sizes, _row_sums: an allocation inside a kernel compiles
    # numba's implementation of it in every cold process: benchmarks/log/first_run.md).
    on_threads(lambda *args: _row_sizes(*args, np.full(n_words, -1, np.int32)),
               [(starts, partners, n_words, bounds[p], bounds[p + 1], sizes) for p in range(parts)], threads)
    indptr = np.zeros(n_words + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    cols = np.empty(indptr[n_words], np.int32)
    values = np.empty(indptr[n_words], np.float64)
    on_threads(lambda *args: _row_sums(*args, np.zeros(n_words, np.float64)),
               [(starts, partners, n_words, bounds[p], bounds[p + 1], indptr, cols, values) for p in range(parts)],
               threads)
    return indptr, cols, values


@njit(nogil=True, cache=True)
def _row_sizes(starts, partners, n_words, lo, hi, sizes, seen):
    """count_block's first pass over rows [lo, hi): each row's distinct partners, into ``sizes``. seen: [n_words]
    int32 -1s, scratch: the last row each partner was seen in (nothing to clear after a row)."""
    for r in range(lo, hi):
        m = 0
        for e in range(starts[r], starts[r + 1]):
            c = partners[e] >> DISTANCE_BITS
            if seen[c] != r:
                seen[c] = r
                m += 1
        sizes[r] = m


@njit(nogil=True, cache=True)
def _row_sums(starts, partners, n_words, lo, hi, indptr, cols, values, acc):
    """count_block's second pass over rows [lo, hi): each row's partners summed in corpus order, its columns
    sorted, into its slots of ``cols`` and ``values``. acc: [n_words] float64 zeros, scratch: a partner seen, its
    weight so far (> 0)."""
    for r in range(lo, hi):
        o, m, top = indptr[r], 0, r   # a row's partners are r or larger
        for e in range(starts[r], starts[r + 1]):
            c = partners[e] >> DISTANCE_BITS
            if acc[c] == 0:
                cols[o + m] = c
                m += 1
                top = max(top, c)
            acc[c] += 1.0 / (partners[e] & DISTANCE_MASK)
        if top - r < SCAN_SPAN * m:   # a dense row: its sums read off in column order, no sort needed
            q = 0
            for c in range(r, top + 1):
                if acc[c] != 0:
                    cols[o + q] = c
                    values[o + q] = acc[c]
                    acc[c] = 0
                    q += 1
        else:
            row_cols = cols[o:o + m]
            _sort(row_cols)
            for q in range(m):
                c = row_cols[q]
                values[o + q] = acc[c]
                acc[c] = 0


def _even_parts(starts, parts):
    """[parts + 1] row bounds cutting rows 0..n (``starts``: [n + 1] cumulative work, such as partners) into
    ``parts`` runs of about equal work. Rows cut at equal counts gave the first of 8 parts about three quarters
    of the main job's pairs (the frequent words have the small ids, and a pair sits in its smaller id's row):
    one thread did most of the count while the others waited (benchmarks/log/glove_job.md)."""
    n = len(starts) - 1
    first, total = int(starts[0]), int(starts[n] - starts[0])
    bounds = np.empty(parts + 1, np.int64)
    bounds[0], bounds[parts] = 0, n
    for p in range(1, parts):
        r = int(np.searchsorted(starts, first + total * p // parts, side="left"))
        bounds[p] = min(max(r, bounds[p - 1]), n)
    return bounds


def merge_rows(a_ptr, a_cols, a_values, b_ptr, b_cols, b_values, parts=1, threads=None):
    """The sum of two CSR counts (cols sorted within rows), as CSR (a's value first in each sum). Rows are
    merged in ``parts`` runs of about equal cells on ``threads`` threads (None: numba's count); the bits depend
    on neither."""
    threads = get_num_threads() if threads is None else threads
    n = len(a_ptr) - 1
    bounds = _even_parts(a_ptr + b_ptr, parts)
    sizes = np.zeros(n, np.int64)
    counting = (np.empty(0, np.int32), np.empty(0, np.float64))   # no cells: the pass counts them
    on_threads(_merge_pass, [(a_ptr, a_cols, a_values, b_ptr, b_cols, b_values, bounds[p], bounds[p + 1], sizes,
                              *counting) for p in range(parts)], threads)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=indptr[1:])
    cols = np.empty(indptr[n], np.int32)
    values = np.empty(indptr[n], np.float64)
    on_threads(_merge_pass, [(a_ptr, a_cols, a_values, b_ptr, b_cols, b_values, bounds[p], bounds[p + 1], indptr,
                              cols, values) for p in range(parts)], threads)
    return indptr, cols, values


@njit(nogil=True, cache=True)
def _merge_pass(a_ptr, a_cols, a_values, b_ptr, b_cols, b_values, lo, hi, at, cols, values):
    """merge_rows' pass over rows [lo, hi): with ``cols`` empty, each merged row's cells counted into ``at``
    [n]; else the merged rows written from their first slots ``at`` (indptr) into ``cols`` and ``values``. One
    kernel for both passes (the same walk of the two rows): one compile, as _bucket_pass."""
    fill = len(cols) > 0
    for r in range(lo, hi):
        i, j, m = a_ptr[r], b_ptr[r], 0
        o = at[r] if fill else 0
        while i < a_ptr[r + 1] or j < b_ptr[r + 1]:
            if j == b_ptr[r + 1] or (i < a_ptr[r + 1] and a_cols[i] < b_cols[j]):
                if fill:
                    cols[o + m], values[o + m] = a_cols[i], a_values[i]
                i += 1
            elif i == a_ptr[r + 1] or b_cols[j] < a_cols[i]:
                if fill:
                    cols[o + m], values[o + m] = b_cols[j], b_values[j]
                j += 1
            else:
                if fill:
                    cols[o + m], values[o + m] = a_cols[i], a_values[i] + b_values[j]
                i += 1
                j += 1
            m += 1
        if not fill:
            at[r] = m


# A corpus whose first block of kept ids is shorter than this, or a count on one thread, is counted on one
# thread (one of fewer pairs in numpy: NUMPY_PAIRS): the same kernels and counts, bit for bit; threads would
# gain a few hundredths of a second at most.
# objectives/glove.py fills each block to BLOCK_PAIRS pairs but the last, so a corpus whose first block is
# this small is one block.
SERIAL_POSITIONS = 1 << 18


def count_block_serial(ids, line, n_words, window, parts):
    """count_block on this thread alone: the same counts, bit for bit."""
    return _count_block(ids, line, n_words, window, parts, 1)


# A corpus whose first block has at most this many pairs (positions times the window) is counted in numpy
# (count_block_numpy): the same counts, bit for bit, and no kernel to compile, where count_block_serial's compile
# was the largest a cold quickstart paid after the loop's, and numpy counts its pairs in a fraction of that
# (benchmarks/log/first_run.md). The arrays cost ~40 bytes a pair at the peak; numpy's time grows faster with
# the window than the kernel's, hence a bound on pairs.
NUMPY_PAIRS = 1 << 21


def count_block_numpy(ids, line, n_words, window, parts=1):
    """count_block in numpy, the same CSR bit for bit (``parts`` unused): each pair of positions at most
    ``window`` apart on one line becomes its cell's number (smaller id * n_words + larger id), listed in corpus
    order (by first position, then distance); np.bincount adds each cell's weights 1/distance in that order,
    one at a time from 0, as the kernel does."""
    n = len(ids)
    cells = np.full((n, window), -1, np.int64)   # [position, distance - 1]: raveled, corpus order
    wide = ids.astype(np.int64)
    for d in range(1, min(window, n - 1) + 1):
        a, b = wide[:-d], wide[d:]
        cells[:n - d, d - 1] = np.where(line[d:] == line[:-d], np.minimum(a, b) * n_words + np.maximum(a, b), -1)
    cells = cells.ravel()
    kept = cells >= 0
    weights = np.broadcast_to(1.0 / np.arange(1, window + 1), (n, window)).ravel()[kept]
    cells, order = np.unique(cells[kept], return_inverse=True)
    values = np.bincount(order.ravel(), weights=weights, minlength=len(cells))
    values = values.astype(np.float64, copy=False)   # (an empty one is int64)
    rows = cells // n_words
    indptr = np.zeros(n_words + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n_words), out=indptr[1:])
    return indptr, (cells - rows * n_words).astype(np.int32), values


def count(blocks, n_words: int, window: int, threads: int):
    """CSR counts (indptr, cols, values) of ``blocks``: (ids, line) arrays, each a block of whole lines."""
    set_num_threads(kernel_threads(threads))
    parts = 4 * kernel_threads(threads)
    total, kernel = None, None
    for ids, line in blocks:
        if kernel is None:   # one kernel for every block, so that a run compiles one
            small = kernel_threads(threads) == 1 or len(ids) < SERIAL_POSITIONS
            kernel = count_block_serial if small else count_block
            if len(ids) * window <= NUMPY_PAIRS:
                kernel = count_block_numpy
        part = kernel(ids, line, n_words, window, parts)
        total = part if total is None else merge_rows(*total, *part, parts, threads=kernel_threads(threads))
    if total is None:
        return np.zeros(n_words + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64)
    return total


@njit(parallel=PARALLEL, nogil=True, cache=True)
def _pair_dots(table, rows, cols, out):
    for i in prange(len(rows)):
        a, b = table[rows[i]], table[cols[i]]
        x = 0.0
        for d in range(len(a)):
            x += float(a[d]) * float(b[d])
        out[i] = x


# Fewer pairs than this take _pair_dots's serial twin: the same sums, bit for bit, for about a third of its compile
# on a cold run, where a parallel loop over so few pairs (the quickstart's) gains a few hundredths of a second.
SERIAL_PAIRS = 1 << 21

_pair_dots_serial = serial(_pair_dots)


def pair_dots(table, rows, cols):
    """[n] float64: table[rows[i]] . table[cols[i]] (float32 rows, summed in float64, each in order)."""
    out = np.empty(len(rows), np.float64)
    (_pair_dots_serial if len(rows) < SERIAL_PAIRS else _pair_dots)(table, rows, cols, out)
    return out


@njit(nogil=True, cache=True)
def fit_rounds(rows, cols, target, weight, products, pick, n_words, rounds, b, scratch):
    """objectives/glove.py's fit_scale_and_biases, compiled: ``a`` returned, ``b`` filled (given as [n_words]
    float64 zeros; ``scratch``: [4, n_words] float64 zeros, made by numpy as ``b``: an allocation inside a kernel
    compiles numba's implementation of it in every cold process), over the pairs where ``pick`` is
    True (the pretrained words' pairs of all those counted: read in place, as copies they were 156 MB on the
    main job). One thread, the pairs in order, so the bits depend on nothing else.

    A round needs one pass over the pairs, not two: what does not change between rounds is summed once per
    word (w p and w t over the pairs it is in, on either side), so the numerator of ``a``,
    sum w p (t - b[row] - b[col]) = sum w p t - sum_x b[x] wp[x], takes a pass over the words, and a word's
    sum w (t - a p - b[other end]) = wt[x] - a wp[x] - nb[x], where only nb[x] (w b[other end] summed) reads the
    pairs. The same rounds as the two passes made, summed in another order (the biases agree to about 1e-13).
    """
    mass, wp, wt, nb = scratch[0], scratch[1], scratch[2], scratch[3]
    denominator = 0.0
    wpt = 0.0
    for i in range(len(rows)):
        if pick[i]:
            r, c, w = rows[i], cols[i], weight[i]
            mass[r] += w
            mass[c] += w
            x = w * products[i]
            denominator += x * products[i]
            wpt += x * target[i]
            wp[r] += x
            wp[c] += x
            y = w * target[i]
            wt[r] += y
            wt[c] += y
    a = 0.0
    for _ in range(rounds):
        numerator = wpt
        for r in range(n_words):
            numerator -= b[r] * wp[r]
        a = numerator / denominator if denominator else 0.0
        nb[:] = 0
        for i in range(len(rows)):
            if pick[i]:
                r, c, w = rows[i], cols[i], weight[i]
                nb[r] += w * b[c]
                nb[c] += w * b[r]
        for r in range(n_words):
            b[r] = 0.5 * b[r] + 0.5 * ((wt[r] - a * wp[r] - nb[r]) / mass[r] if mass[r] > 0 else 0.0)
    return a


def new_word_biases(row, col, weight, target, products, scale, bias, new):
    """objectives/glove.py's start of the new words' biases: [n_words] float64, ``bias`` with each new word's
    replaced by its least-squares value against its pretrained partners (0 without one). Compiled
    (``_new_word_biases``) from NUMPY_PAIRS pairs on; fewer in numpy, the same bits, compiling nothing on a fresh
    install (benchmarks/log/first_run.md)."""
    if len(row) >= NUMPY_PAIRS:
        out = np.array(bias, np.float64)   # the kernel's output and scratch made here (see _new_word_biases)
        _new_word_biases(row, col, weight, target, products, scale, bias, new, out, np.zeros((4, len(bias))))
        return out
    n = len(bias)
    bias = bias.copy()
    rest = weight * (target - scale * products)
    total = np.zeros(n)
    mass = np.zeros(n)
    for one, other in ((row, col), (col, row)):
        solo = new[one] & ~new[other]
        total += np.bincount(one[solo], rest[solo] - weight[solo] * bias[other[solo]], n)
        mass += np.bincount(one[solo], weight[solo], n)
    bias[new] = np.divide(total, mass, out=np.zeros(n), where=mass > 0)[new]
    return bias


@njit(nogil=True, cache=True)
def _new_word_biases(row, col, weight, target, products, scale, bias, new, out, scratch):
    """new_word_biases compiled: one pass in pair order, one sum each side, added up as numpy's bincounts of the
    pairs on each side (row side first), so the bits are numpy's; numpy made a dozen whole-array temporaries
    of the pairs (the main job's). ``out``: a copy of ``bias``, its new words' written here; ``scratch``: [4, n]
    float64 zeros (both made by the caller: an allocation inside a kernel compiles numba's implementation of it
    in every cold process)."""
    n = len(bias)
    by_row, by_col, mass_row, mass_col = scratch[0], scratch[1], scratch[2], scratch[3]
    for i in range(len(row)):
        r, c = row[i], col[i]
        if new[r] == new[c]:
            continue
        w = float(weight[i])
        rest = w * (float(target[i]) - scale * products[i])
        if new[r]:
            by_row[r] += rest - w * bias[c]
            mass_row[r] += w
        else:
            by_col[c] += rest - w * bias[r]
            mass_col[c] += w
    for r in range(n):
        if new[r]:
            total = (0.0 + by_row[r]) + by_col[r]
            mass = (0.0 + mass_row[r]) + mass_col[r]
            out[r] = total / mass if mass > 0 else 0.0
