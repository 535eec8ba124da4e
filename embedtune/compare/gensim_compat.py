"""gensim's test-data paths and its unit vectors, reproduced without importing gensim.

``import gensim`` pulls in scipy.sparse, gensim.corpora and more, and took longer than scoring the
word pairs (benchmarks/README.md, eval_speed); eval needs only a folder name and two BLAS calls.
tests/test_compare.py checks both against gensim's own functions.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

from embedtune.errors import EmbedtuneError


def gensim_datapath(name: str) -> str:
    """gensim.test.utils.datapath(name): a file of gensim/test/test_data, found without running gensim."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedtuneError(f"gensim is not installed: its {name} is the default benchmark; give files instead")
    return os.path.join(list(spec.submodule_search_locations)[0], "test", "test_data", name)


def _blas():
    # gensim.matutils takes nrm2 and scal for float64 (its blas_nrm2, blas_scal): float32 input is
    # converted to float64 by the call, the norm is OpenBLAS's dnrm2.
    from scipy.linalg.blas import dnrm2, dscal

    return dnrm2, dscal


def unitvec(vec: np.ndarray) -> np.ndarray:
    """gensim.matutils.unitvec(vec) for a 1-D float array, the same bits: scaled by 1 / dnrm2 in
    float64, back to vec's dtype; returned unchanged when its norm is not above zero (NaN included)."""
    if vec.size == 0:
        return vec
    dnrm2, dscal = _blas()
    veclen = dnrm2(vec)
    if veclen > 0.0:
        return dscal(1.0 / veclen, vec).astype(vec.dtype)
    return vec


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """unitvec of each row of a float32 [n, dim] array, as float32 [n, dim].

    The norms are dnrm2's, one call a row (numpy's norm may round differently); the scaling is one
    float64 multiplication per value, as dscal's, done for all rows at once.
    """
    dnrm2, _ = _blas()
    veclens = np.array([dnrm2(row) for row in rows], np.float64)
    scale = np.ones(len(rows), np.float64)
    positive = veclens > 0.0
    scale[positive] = 1.0 / veclens[positive]
    out = (rows.astype(np.float64) * scale[:, None]).astype(rows.dtype)
    out[~positive] = rows[~positive]   # unitvec returns such a row as it is (NaN stays NaN)
    return out
