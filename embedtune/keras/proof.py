"""The frozen rows' proof: a hash of each frozen row's bits, taken from the vectors as read, that the
layer's check (``Embedding.check_frozen``, run after each epoch by embedtune.keras.callback) compares with.

A row's hash is sum_j bits_j * c_j modulo 2^64 (bits: the float32's as an integer; c_j: fixed odd
numbers), so a change of any one value always changes it, and several at once go unseen with
odds of about 2^-64. It costs a pass over the frozen rows, a block at a time, and 8 bytes a row.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np

BLOCK = 1 << 16   # rows hashed at a time: the uint64 work copy of a block stays a few tens of MB


def _multipliers(dim: int) -> np.ndarray:
    rng = np.random.default_rng(20260)   # fixed: a digest must not depend on the process
    return rng.integers(0, 2**63, dim, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def row_hashes(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """uint64 [len(rows)]: the hash of each of ``rows`` (int, ascending) of ``matrix`` (float32 [n, dim])."""
    c = _multipliers(matrix.shape[1])
    out = np.empty(len(rows), np.uint64)
    for start in range(0, len(rows), BLOCK):
        block = np.ascontiguousarray(matrix[rows[start:start + BLOCK]], np.float32)
        with np.errstate(over="ignore"):
            out[start:start + BLOCK] = (block.view(np.uint32).astype(np.uint64) * c).sum(axis=1, dtype=np.uint64)
    return out


def digest(hashes: np.ndarray) -> str:
    """The frozen rows' hashes as one hex digest (the layer's config keeps it)."""
    return hashlib.blake2b(np.ascontiguousarray(hashes, np.uint64).tobytes(), digest_size=16).hexdigest()


def warn_once(owner, message: str) -> None:
    """``message`` as a UserWarning, once for ``owner``."""
    if not getattr(owner, "_embedtune_warned", False):
        owner._embedtune_warned = True
        warnings.warn(message, UserWarning, stacklevel=3)
