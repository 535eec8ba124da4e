"""What the compiled (numba) steps share: the thread settings, the frozen rows' source, the small
row helpers (a dot product, a descent, a sum in order) and the lazy optimizers' update of one row. The
steps themselves: ``sgns.py``, ``classify.py``, ``glove.py``; their optimizer constants come from
embedtune/optimizer_constants.py, as TensorFlow's step's do."""

from __future__ import annotations

import math
import os
import types

import numpy as np

# numba's OpenMP threads wait at the end of each parallel loop (two a step). Spinning there (libgomp's
# default) made 2 threads far slower than 1 on a busy machine; they sleep instead (benchmarks/README.md,
# train_speed). Read when numba first starts its threads; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from numba import config as numba_config, njit, prange  # noqa: E402  (after the wait policy)

from embedtune._adapters.numba_private import parallel_options  # noqa: E402
from embedtune.kernels.compiling import listen  # noqa: E402
from embedtune.optimizer_constants import ADAM_BETA_1, ADAM_BETA_2, EPSILON  # noqa: E402

listen()   # a compile said (kernels/compiling.py)

# The gradient pass must end before the update pass starts (the updates change rows the gradients
# read): numba's loop fusion merged two such loops once (the comparison test caught it), so it is off,
# for every compile (a plain dict here was emptied by the first: _adapters/numba_private.py).
PARALLEL = parallel_options(fusion=False)
# Sums may be reordered (the dot products vectorise: benchmarks/README.md, train_speed) and
# multiply-adds fused; the code is fixed at compile time, so
# the bits still do not change from run to run. Not "fast" as a whole: NaN and infinity must stay
# visible to the divergence checks.
FASTMATH = {"reassoc", "contract"}
# --deterministic runs take each step kernel's strict twin (``strict``) instead: the same code without
# FASTMATH. With reassociation the vectoriser sums a dot product in as many lanes as the CPU's vector
# unit is wide (LLVM's choice differs between an AMD Zen 4 and an Intel Xeon), and with contraction a
# multiply-add is fused only where the CPU has FMA: both move a golden run's bits from one CPU to
# another (tests/test_golden.py). Without them every sum runs in source order and every product is
# rounded before it is added, on any x86-64 (element-wise loops still vectorise: their bits do not
# change). The default (lock-free) path keeps FASTMATH: its bits follow the thread timing anyway.
# Rows are given to threads in blocks of 2**ROW_BLOCK_BITS ids, so that two threads seldom write the
# same cache line (a 50-float row is 200 bytes).
ROW_BLOCK_BITS = 3


def _twin(kernel, suffix: str, namespace: dict | None = None, drop: tuple[str, ...] = ()):
    """``kernel`` (a cached numba dispatcher) as a function of its own named ``<name><suffix>``, compiled without
    the options in ``drop``: numba's cache keys machine code by the function's name and bytecode, not by its
    flags, so a twin is cached apart. ``namespace``: the globals it reads (the kernel's own by default)."""
    py_func = kernel.py_func
    twin = types.FunctionType(py_func.__code__, py_func.__globals__ if namespace is None else namespace,
                              py_func.__name__ + suffix, py_func.__defaults__, py_func.__closure__)
    twin.__qualname__ = py_func.__qualname__ + suffix
    twin.__doc__ = py_func.__doc__
    twin.__module__ = py_func.__module__
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("nopython", "boundscheck", *drop)}
    return njit(**options, cache=True)(twin)


def strict(kernel):
    """``kernel`` compiled again without fastmath, as ``<name>_strict``."""
    return _twin(kernel, "_strict", drop=("fastmath",))


def serial(kernel, **callees):
    """``kernel`` compiled again without ``parallel`` (its prange loops plain loops, the same arithmetic in the
    same order), as ``<name>_serial``; ``callees``: the kernels it calls by name, replaced (by their own serial
    twins). numba's parallel passes are most of a parallel kernel's compile (twice a serial one's: a cold run
    pays it), which a small input does not win back (benchmarks/log/first_run.md). Reads the kernel's module's
    globals as they are when it is made: made after the module's last kernel."""
    return _twin(kernel, "_serial", {**kernel.py_func.__globals__, **callees}, drop=("parallel",))


@njit(inline="always")
def _row(words, frozen, frozen_rows, n_trainable, c):
    if c < n_trainable:
        return words[c]
    return frozen[frozen_rows[c - n_trainable]]


@njit(inline="always")
def _logit_terms(x, label):
    """(e^-x as float64, sigmoid(x) - label): the exponential is reused for the loss (``_add_loss``)."""
    e = math.exp(-float(x))
    return e, 1.0 / (1.0 + e) - label


# A pair's loss is -log sigmoid(x) - sum log(1 - sigmoid(x_k)) = log(prod (1 + e^-x)) + sum x_k: one log
# a pair, the exponentials being there already. A logit below -LARGE (a row grown far) adds its
# softplus(-x) itself, and a product past 1e250 is moved into the sum, so that it cannot overflow
# (the TF step's loss stays finite there; a product of inf made runs stop as diverged).
LARGE = 30.0


@njit(inline="always")
def _add_loss(x, e, product, extra):
    """The running (product, extra) with the logit ``x`` (e = e^-x) added."""
    if x < -LARGE:
        return product, extra - float(x) + math.log1p(math.exp(float(x)))
    product *= 1.0 + e
    if product > 1e250:
        return 1.0, extra + math.log(product)
    return product, extra


@njit(inline="always")
def _dot(a, b):
    x = np.float32(0.0)
    for j in range(len(a)):
        x += a[j] * b[j]
    return x


@njit(inline="always")
def _descend(row, lr, grad):
    """row -= lr * grad, in place."""
    for j in range(len(row)):
        row[j] -= lr * grad[j]


# The optimizers the kernels apply (training/optimizers.py's lazy ones, the same arithmetic). numba's cache keys a
# kernel by the text of its own file, not by what it inlines from here: a change of ``_update``'s arithmetic
# comes with a change to the files that inline it (their line naming its revision), or their cached machine
# code keeps the old arithmetic. Revision 2: adam's 1 - beta as TensorFlow's.
SGD, ADAGRAD, ADAM = 0, 1, 2
KERNEL_OPTIMIZERS = {"sgd": SGD, "adagrad": ADAGRAD, "adam": ADAM}


@njit(inline="always")
def _update(row, g, m, v, optimizer, lr, adam_lr, clip_norm):
    """One row's lazy update by its merged gradient ``g`` (capped first), as training/optimizers.py's:
    sgd row -= lr g; adagrad (m: the accumulator) m += g^2, row -= lr / (sqrt(m) + eps) g; adam m, v
    moments, row -= adam_lr / (sqrt(v) + eps) m (adam_lr: lr with the bias correction). float32
    throughout, so that the loops vectorise."""
    if clip_norm > 0:
        norm = np.float32(0.0)
        for j in range(len(g)):
            norm += g[j] * g[j]
        norm = np.sqrt(norm)
        if norm > clip_norm:
            scale = clip_norm / norm
            for j in range(len(g)):
                g[j] = g[j] * scale
    eps = np.float32(EPSILON)
    if optimizer == SGD:
        for j in range(len(row)):
            row[j] -= lr * g[j]
    elif optimizer == ADAGRAD:
        for j in range(len(row)):
            a = m[j] + g[j] * g[j]
            m[j] = a
            row[j] -= lr / (np.sqrt(a) + eps) * g[j]
    else:
        b1, b2 = np.float32(ADAM_BETA_1), np.float32(ADAM_BETA_2)
        # 1 - beta taken in float64 and rounded once, as TensorFlow's step makes its constant (1 - 0.999 in
        # float32 arithmetic is 1.3e-5 off, which every second moment carried).
        c1, c2 = np.float32(1 - ADAM_BETA_1), np.float32(1 - ADAM_BETA_2)
        for j in range(len(row)):
            mj = b1 * m[j] + c1 * g[j]
            vj = b2 * v[j] + c2 * (g[j] * g[j])
            m[j] = mj
            v[j] = vj
            row[j] -= adam_lr / (np.sqrt(vj) + eps) * mj


def adam_rate(state: dict, optimizer: int, lr: np.float32) -> np.float32:
    """adam: the step's iteration counted in ``state``, and lr with its bias correction
    (optimizers.Adam.apply); other optimizers: lr."""
    if optimizer != ADAM:
        return lr
    state["iterations"][...] += 1
    t = np.float32(state["iterations"])
    return np.float32(lr * np.sqrt(np.float32(1) - np.float32(ADAM_BETA_2) ** t)
                      / (np.float32(1) - np.float32(ADAM_BETA_1) ** t))


@njit(inline="always")
def _sum_in_order(values):
    """The sum in index order (the loss's bits must not depend on the thread count)."""
    total = 0.0
    for i in range(len(values)):
        total += values[i]
    return total


@njit(inline="always")
def _search_sorted(a, x, right):
    """np.searchsorted(a, x, side="right" if right else "left") for ``a`` sorted and ``x`` not NaN: the same
    index. numba's own searchsorted compiles for over half a second a type on a cold run, this loop in a
    tenth (benchmarks/log/first_run.md)."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x or (right and a[mid] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(nogil=True)
def _sort(a):
    """``a`` (1-D, integers) sorted in place, ascending: numba's own sort as a quicksort (median of three, runs
    under 16 by insertion), written out because numba's compiles for over a second on a cold run, this in a
    fraction (benchmarks/log/first_run.md). Integers only: the order of equal values does not show."""
    lo, hi = 0, len(a) - 1
    stack = np.empty(128 if hi >= 16 else 0, np.int64)   # (lo, hi) of the larger parts left: depth <= log2(n)
    top = 0
    while True:
        while hi - lo >= 16:
            mid = (lo + hi) >> 1
            if a[mid] < a[lo]:
                a[mid], a[lo] = a[lo], a[mid]
            if a[hi] < a[mid]:
                a[hi], a[mid] = a[mid], a[hi]
                if a[mid] < a[lo]:
                    a[mid], a[lo] = a[lo], a[mid]
            pivot = a[mid]
            i, j = lo, hi
            while i <= j:
                while a[i] < pivot:
                    i += 1
                while pivot < a[j]:
                    j -= 1
                if i <= j:
                    a[i], a[j] = a[j], a[i]
                    i += 1
                    j -= 1
            if j - lo < hi - i:   # the smaller part next, the larger kept
                stack[top], stack[top + 1] = i, hi
                hi = j
            else:
                stack[top], stack[top + 1] = lo, j
                lo = i
            top += 2
        for k in range(lo + 1, hi + 1):
            x = a[k]
            m = k - 1
            while m >= lo and a[m] > x:
                a[m + 1] = a[m]
                m -= 1
            a[m + 1] = x
        if top == 0:
            return
        top -= 2
        lo, hi = stack[top], stack[top + 1]



@njit(parallel=True, cache=True)
def _started(values):
    for i in prange(len(values)):
        values[i] += 1.0
    return values


def warm_up() -> None:
    """numba's compiler and its parallel threads started, from its cache, on a run's import thread
    while the corpus is counted (embedtune.run.count_while_importing): most of a compiled step's
    first call otherwise (its typing and lowering contexts, the OpenMP layer), whatever the step."""
    _started(np.zeros(1))


def frozen_source(matrix, frozen_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the matrix frozen rows are read from, frozen local id T + i -> its row there): the input matrix
    itself in C order; a Fortran-ordered one is read a row at a time across the whole table, so only
    the corpus's frozen rows are copied, once, in C order."""
    matrix = np.asarray(matrix)
    if matrix.flags.c_contiguous:
        return matrix, np.ascontiguousarray(frozen_rows, np.int64)
    return np.ascontiguousarray(matrix[frozen_rows], np.float32), np.arange(len(frozen_rows), dtype=np.int64)


def kernel_threads(threads: int) -> int:
    """The threads a kernel runs on: at most what numba was started with (NUMBA_NUM_THREADS)."""
    return max(1, min(threads, numba_config.NUMBA_NUM_THREADS))


def on_threads(kernel, calls: list, threads: int) -> None:
    """``kernel(*args)`` for each args of ``calls``, on up to ``threads`` threads (the kernels are ``nogil``): a
    serial kernel called on Python threads in place of numba's ``parallel`` loops, whose passes were most of a
    cold run's compile (a parallel count compiled for 6.3 CPU-s, its serial twin 2.9: benchmarks/log/first_run.md);
    one kernel then serves a run on one thread and on several. The calls end before this returns; the first
    error of one is raised here."""
    if threads <= 1 or len(calls) <= 1:
        for args in calls:
            kernel(*args)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(calls))) as pool:
        for done in [pool.submit(kernel, *args) for args in calls]:
            done.result()
