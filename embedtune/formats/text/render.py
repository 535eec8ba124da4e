"""Text lines ``word v1 ... vdim`` rendered by a compiled kernel: the bytes of shortest.py's writer.

Each value is the shortest ``%g`` text that reads back to the same float32 (shortest.py's
``shortest_g``), found one value at a time with shortest.py's float64 arithmetic (exact for
1e-4 <= |x| < 1e7): the digit count of the previous value is tried first (most values of a file need
the same), then one digit fewer or more at a time. Values outside that range, or that ``%g``
writes in scientific notation, are written by ``shortest_g`` itself (a few in a file). numpy's
whole-array version (shortest.py ``format_slots``) spent most of a 400k-row write's time in
temporary arrays and the NUL squeeze (benchmarks/README.md, classify); this writes each line once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from embedtune.formats.text.shortest import shortest_g
from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)

_POW10 = 10.0 ** np.arange(23)
_INV10 = 1.0 / _POW10
SLOT_BYTES = 16   # at most ' ' + sign + 14 characters a value


@njit(cache=True, nogil=True)
def _round_to(j, m9, residual, e10, a32, pow10, inv10):
    """m9 (9 significant digits) rounded to 9 - j digits as printf rounds: (digits q, exponent e,
    reads back as a32, written in scientific notation by %g). shortest.py ``_round_to``, one value."""
    p = pow10[j]
    q = math.floor(m9 * inv10[j])   # m9 // p, without a division: settled exactly below
    if q * p > m9:
        q -= 1.0
    elif (q + 1.0) * p <= m9:
        q += 1.0
    rest = m9 - q * p
    half = p * 0.5
    if rest > half:
        q += 1.0
    elif rest == half and j > 0:
        odd = q - 2.0 * math.floor(q * 0.5)
        if residual > 0 or (residual == 0 and odd > 0):
            q += 1.0
    e = e10
    if q * p >= 1e9:   # 99.96 -> 100.0: one more digit before the point
        q = math.floor(q * 0.1 + 0.5)
        e += 1
    shift = 8 - j - e
    if shift >= 0:
        return q, e, np.float32(q / pow10[shift]) == a32, False
    return q, e, np.float32(q * pow10[-shift]) == a32, True


@njit(cache=True, nogil=True)
def _digits(values, hint, pow10, inv10, q_out, e_out, p_out, slow, counts):
    """For each float32 value: its shortest digits q (p_out of them), decimal exponent e, or slow[i]
    True where shortest_g writes it (out of range, nan, or scientific notation). Returns the most common
    digit count. counts: [10] int64 zeros, scratch (each digit count's values; numpy allocates it: an
    allocation inside a kernel compiles numba's implementation of it in every cold process)."""
    for i in range(values.size):
        x = values[i]
        a32 = abs(x)
        if not (a32 >= 1e-4 and a32 < 1e7):
            slow[i] = True
            continue
        a = np.float64(a32)
        # the decimal exponent from the binary one (off by one at most: the loop settles it)
        e10 = int(math.floor((math.frexp(a)[1] - 1) * 0.30102999566398120))
        while True:
            t9 = a * pow10[8 - e10]
            m9 = np.rint(t9)
            if m9 >= 1e9:
                e10 += 1
            elif m9 < 1e8:
                e10 -= 1
            else:
                break
        residual = t9 - m9
        found = 0
        q, e, good, big = 0.0, 0, False, False
        # Reading back is monotone in the digits except at exact powers of two (searched from one digit):
        # from the hint (the previous value's count), down while one fewer reads back, else up until one does.
        if 1 <= hint <= 9 and math.frexp(a)[0] != 0.5:
            found = hint
            q, e, good, big = _round_to(9 - found, m9, residual, e10, a32, pow10, inv10)
            if good:
                while found > 1:
                    q1, e1, good1, big1 = _round_to(10 - found, m9, residual, e10, a32, pow10, inv10)
                    if not good1:
                        break
                    found -= 1
                    q, e, good, big = q1, e1, good1, big1
            else:
                while not good and found < 9:
                    found += 1
                    q, e, good, big = _round_to(9 - found, m9, residual, e10, a32, pow10, inv10)
        else:
            for digits in range(1, 10):
                q, e, good, big = _round_to(9 - digits, m9, residual, e10, a32, pow10, inv10)
                if good:
                    found = digits
                    break
        # 9 digits always read back
        if big or e < -4:
            slow[i] = True
            continue
        q_out[i] = np.int64(q)
        e_out[i] = e
        p_out[i] = found
        counts[found] += 1
        hint = found
    most = 0   # np.argmax(counts) (the first of equal counts), a loop: numba's argmax compiles for longer
    for d in range(1, len(counts)):
        if counts[d] > counts[most]:
            most = d
    return most


@njit(cache=True, nogil=True)
def _lines(word_bytes, word_ends, values, dim, q, e, p, slow, slow_bytes, slow_ends, out, digits):
    """Write ``word v1 ... vdim\\n`` a row into out; returns the bytes written. digits: [10] uint8, scratch."""
    at = 0
    w0 = 0
    s = 0   # the next slow value's text
    for row in range(word_ends.size):
        for b in range(w0, word_ends[row]):
            out[at] = word_bytes[b]
            at += 1
        w0 = word_ends[row]
        for k in range(dim):
            i = row * dim + k
            out[at] = 32   # ' '
            at += 1
            if slow[i]:
                start = slow_ends[s - 1] if s > 0 else 0
                for b in range(start, slow_ends[s]):
                    out[at] = slow_bytes[b]
                    at += 1
                s += 1
                continue
            if values[i] < 0:
                out[at] = 45   # '-'
                at += 1
            n, v = p[i], q[i]
            for d in range(n - 1, -1, -1):
                digits[d] = 48 + v % 10
                v //= 10
            ex = e[i]
            if ex >= 0:   # ex + 1 digits before the point (ex < n)
                for d in range(ex + 1):
                    out[at] = digits[d]
                    at += 1
                if n > ex + 1:
                    out[at] = 46   # '.'
                    at += 1
                    for d in range(ex + 1, n):
                        out[at] = digits[d]
                        at += 1
            else:   # 0.000ddd
                out[at] = 48
                out[at + 1] = 46
                at += 2
                for _ in range(-ex - 1):
                    out[at] = 48
                    at += 1
                for d in range(n):
                    out[at] = digits[d]
                    at += 1
        out[at] = 10   # '\n'
        at += 1
    return at


def render_lines(encoded: list[bytes], rows: np.ndarray, digits_hint: int = 0) -> tuple[bytes, int]:
    """Lines for words (UTF-8 bytes) [k] and float32 rows [k, dim] -> (bytes, most common digit count)."""
    k, dim = rows.shape
    values = np.ascontiguousarray(rows, dtype=np.float32).ravel()
    q = np.empty(values.size, np.int64)
    e = np.empty(values.size, np.int64)
    p = np.empty(values.size, np.int64)
    slow = np.zeros(values.size, np.bool_)
    digits = (int(_digits(values, digits_hint, _POW10, _INV10, q, e, p, slow, np.zeros(10, np.int64))) if values.size
              else digits_hint)
    slow_text = [shortest_g(v).encode("ascii") for v in values[slow].tolist()]
    # Read-only (np.frombuffer) whether empty or not: numba compiles a kernel once per argument type, and a
    # writable empty array beside read-only full ones made a fresh install compile _lines twice.
    slow_bytes = np.frombuffer(b"".join(slow_text), np.uint8)
    slow_ends = np.cumsum([len(t) for t in slow_text], dtype=np.int64) if slow_text else np.zeros(0, np.int64)
    word_bytes = np.frombuffer(b"".join(encoded), np.uint8)
    word_ends = np.cumsum([len(w) for w in encoded], dtype=np.int64) if k else np.zeros(0, np.int64)
    out = np.empty(word_bytes.size + values.size * SLOT_BYTES + k, np.uint8)
    n = _lines(word_bytes, word_ends, values, dim, q, e, p, slow, slow_bytes, slow_ends, out, np.empty(10, np.uint8))
    return out[:n].tobytes(), digits
