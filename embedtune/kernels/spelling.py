"""The spelling model's conjugate gradient (embedtune/newwords/spelling.py), its element-wise steps fused: each
round numpy made seven whole-array passes over the [used buckets, columns] work arrays (61 MB each on the main
job), reading and writing them again for every operation; these make them in three. Every element is computed as
numpy computed it, one float32 rounding per operation in the same order (no fastmath: no product is fused
into a sum), so the bits are numpy's (tests/test_spelling.py keeps numpy's round as the reference). The
column sums (numpy's einsum) stay numpy's, and so do the sparse products (scipy's).
"""

from __future__ import annotations

from embedtune.kernels.common import njit


@njit(nogil=True, cache=True)
def add_ridge(ap, p, ridge):
    """ap += p * ridge, in place: numpy's ``ap += np.multiply(p, ridge)`` (the product rounded, then the sum).

    ap, p : [n, columns] float32; ridge : float32
    """
    n, m = ap.shape
    for i in range(n):
        for j in range(m):
            ap[i, j] += p[i, j] * ridge


@njit(nogil=True, cache=True)
def step_residual(r, ap, alpha, inv, z):
    """r -= ap * alpha, then z = inv * r, in place: numpy's ``ap *= alpha; r -= ap; np.multiply(inv, r, out=z)``
    (``ap`` is left as it was: the caller drops it).

    r, ap, z : [n, columns] float32; alpha : [columns] float32; inv : [n, 1] float32 (Jacobi's preconditioner)
    """
    n, m = r.shape
    for i in range(n):
        for j in range(m):
            step = ap[i, j] * alpha[j]
            r[i, j] = r[i, j] - step
            z[i, j] = inv[i, 0] * r[i, j]


@njit(nogil=True, cache=True)
def next_direction(p, beta, z):
    """p = p * beta + z, in place: numpy's ``p *= beta; p += z``.

    p, z : [n, columns] float32; beta : [columns] float32
    """
    n, m = p.shape
    for i in range(n):
        for j in range(m):
            p[i, j] = p[i, j] * beta[j] + z[i, j]
