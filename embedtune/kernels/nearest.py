"""The k largest scores of each row of a block, compiled: retrofit's nearest neighbours in the input
(embedtune/objectives/retrofit.py). One pass over each row keeping its k best, where an argpartition
per row sorts part of the row it does not need (benchmarks/README.md, retrofit)."""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.common import on_threads
from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)


@njit(nogil=True, cache=True)
def _top_k_rows(scores, k, out, lo, hi):
    """out[t] = the columns of the k largest scores[t] for the rows t in [lo, hi), in no order (a tie keeps the
    first column). A serial kernel that threads call for their own rows (``top_k_columns``): numba's parallel
    form compiled for 4.4 CPU-s, most of a fresh install's first retrofit (benchmarks/log/first_run.md)."""
    best = np.empty(k, np.float32)
    columns = np.empty(k, np.int64)
    for t in range(lo, hi):
        for m in range(k):   # element loops, not slice assignments: numba's slicing is most of a compile
            best[m] = -np.inf
            columns[m] = 0
        low = 0   # where the smallest of the k kept sits
        for j in range(scores.shape[1]):
            s = scores[t, j]
            if s > best[low]:
                best[low] = s
                columns[low] = j
                low = 0
                for m in range(1, k):
                    if best[m] < best[low]:
                        low = m
        for m in range(k):
            out[t, m] = columns[m]


def top_k_columns(scores: np.ndarray, k: int, out: np.ndarray, threads: int = 1) -> None:
    """out[t] = the columns of the k largest scores[t], in no order (a tie keeps the first column), the rows
    shared among ``threads`` threads.

    scores : float32 [rows, columns], columns >= k; out : int64 [rows, k]
    """
    rows = scores.shape[0]
    parts = max(1, min(threads, rows))
    on_threads(_top_k_rows, [(scores, k, out, p * rows // parts, (p + 1) * rows // parts) for p in range(parts)],
               parts)
