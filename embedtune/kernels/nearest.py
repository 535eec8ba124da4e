"""The k largest scores of each row of a block, compiled: retrofit's nearest neighbours in the input
(embedtune/objectives/retrofit.py). One pass over each row keeping its k best, where an argpartition
per row sorts part of the row it does not need (benchmarks/README.md, retrofit)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)


@njit(parallel=True, nogil=True, cache=True)
def top_k_columns(scores, k, out):
    """out[t] = the columns of the k largest scores[t], in no order (a tie keeps the first column).

    scores : float32 [rows, columns], columns >= k; out : int64 [rows, k]
    """
    for t in prange(scores.shape[0]):
        best = np.full(k, -np.inf, np.float32)
        columns = np.zeros(k, np.int64)
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
        out[t] = columns
