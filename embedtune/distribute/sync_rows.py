"""The averaging sync's row arithmetic, compiled (numba): finding and packing a worker's changed rows
(``pack``), adding every worker's changes to a table (``add_changes``, ``finish``). One pass over each
table where numpy's fancy indexing made several copies of every payload (a sync's CPU was a tenth of a
worker's round: benchmarks/README.md, distribute_speed). The float32 arithmetic is numpy's, in the same
order (no fast-math): the sums of a row's changes in worker order, the mean, the last sync's value plus
the mean, so every worker gets the same bits."""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)


@njit(cache=True, nogil=True)
def changed(current, base, rows):
    """The ids of the rows of ``current`` that differ from ``base`` (NaN differs from itself) written
    to ``rows``, in order; returns how many."""
    n = 0
    width = current.shape[1]
    for r in range(current.shape[0]):
        for j in range(width):
            if current[r, j] != base[r, j]:
                rows[n] = r
                n += 1
                break
    return n


@njit(cache=True, nogil=True)
def pack(current, base, rows, deltas):
    """``deltas[i] = current[rows[i]] - base[rows[i]]`` (float32)."""
    for i in range(len(rows)):
        r = rows[i]
        for j in range(current.shape[1]):
            deltas[i, j] = current[r, j] - base[r, j]


@njit(cache=True, nogil=True)
def add_changes(rows, deltas, current, count, touched, n_touched):
    """One worker's changes added to ``current``'s rows (called in worker order): a row's first change
    replaces its value (0 + change, as a sum from zero), later ones are added; ``count`` counts a row's
    changes, ``touched[:n]`` lists the rows changed so far (returns the new n)."""
    zero = np.float32(0.0)
    for i in range(len(rows)):
        r = rows[i]
        if count[r] == 0:
            touched[n_touched] = r
            n_touched += 1
            for j in range(current.shape[1]):
                current[r, j] = zero + deltas[i, j]
        else:
            for j in range(current.shape[1]):
                current[r, j] += deltas[i, j]
        count[r] += 1
    return n_touched


@njit(cache=True, nogil=True)
def finish(touched, current, base, count):
    """Each touched row: the sum of its changes (in ``current``) divided by their count, added to its
    value at the last sync (``base``), the result in both; its count back to 0."""
    for i in range(len(touched)):
        r = touched[i]
        n = np.float32(count[r])
        for j in range(current.shape[1]):
            base[r, j] = base[r, j] + current[r, j] / n
            current[r, j] = base[r, j]
        count[r] = 0
