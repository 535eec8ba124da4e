"""Exact, fast float32 -> text: the shortest `%g` form that reads back to the same float32.

Each value is written as ``'%.{P}g' % value`` with the fewest significant digits P (1..9) whose
text parses (as a double, then rounded to float32, which is what numpy, gensim and Python do) to
the same float32. GloVe's files were printed with ``%.5g``, so their values come back as the very
same text, and an unchanged row is written byte for byte as before.

A Python loop over values is far too slow (400k x 50 = 20M values), so the work is done on whole
arrays: find the digits with float64 arithmetic that is exact in the range where most embedding
values live (1e-4 <= |x| < 1e7), render them through a table of 4-digit strings into 16-byte slots,
and squeeze out the padding. Values outside that range (0, nan, inf, tiny, huge, or anything `%g`
prints in scientific notation) go through `shortest_g`, the one-value reference.
"""

from __future__ import annotations

import numpy as np

SLOT_BYTES = 16  # ' ' + sign + at most 14 characters; NUL padding on the left

# Exact float64 powers of ten 10**0 .. 10**22 (10**23 is the first one that is not exact).
_POW10 = 10.0 ** np.arange(23)
# "0000".."9999" as little-endian uint32, so the four characters land in memory order.
_DIGITS4 = np.frombuffer(b"".join(b"%04d" % i for i in range(10000)), dtype=np.uint32).astype(np.uint64)
_ZEROS4 = np.uint64(np.frombuffer(b"0000", dtype=np.uint32)[0])
_SHIFT32 = np.uint64(32)


def shortest_g(value) -> str:
    """The reference: ``'%.{P}g' % value`` with the fewest digits P that reads back exactly."""
    x = np.float32(value)
    v = float(x)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "%g" % v
    with np.errstate(over="ignore"):  # 3.4e+38 rounded to 2 digits is beyond float32: not a match
        for p in range(1, 10):
            text = "%.*g" % (p, v)
            if np.float32(float(text)) == x:
                return text
    raise AssertionError(f"no round trip for {v!r}")  # 9 digits always suffice for float32


def _slot_tables():
    # For a value right-aligned in a 16-byte slot: which bytes to keep (AND) and which characters
    # to add (OR), indexed by (negative, text length, digits after the point). The digits arrive as
    # a zero-padded run; the table clears the padding and places ' ', '-' and '.'.
    keep = np.zeros((2, 17, 13, SLOT_BYTES), np.uint8)
    add = np.zeros((2, 17, 13, SLOT_BYTES), np.uint8)
    for neg in (0, 1):
        for length in range(1, 16):  # includes the sign
            for frac in range(13):
                start = SLOT_BYTES - length
                keep[neg, length, frac, start + neg:] = 0xFF
                add[neg, length, frac, start - 1] = ord(" ")
                if neg:
                    add[neg, length, frac, start] = ord("-")
                if frac > 0:
                    keep[neg, length, frac, 15 - frac] = 0
                    add[neg, length, frac, 15 - frac] = ord(".")
    keep = keep.reshape(-1, SLOT_BYTES).view(np.uint64)
    add = add.reshape(-1, SLOT_BYTES).view(np.uint64)
    return keep[:, 0].copy(), keep[:, 1].copy(), add[:, 0].copy(), add[:, 1].copy()


_KEEP_LO, _KEEP_HI, _ADD_LO, _ADD_HI = _slot_tables()


def _nine_digits(a: np.ndarray, a32: np.ndarray):
    """a (float64 copies of float32 magnitudes in [1e-4, 1e7)) -> (m9, residual, e10).

    m9 is `a` rounded to 9 significant digits (an integer in [1e8, 1e9), as float64),
    e10 the decimal exponent (a ~ m9 * 10**(e10 - 8)), and residual = a * 10**(8 - e10) - m9,
    exact, whose sign says which way the rounding went (needed to round m9 again correctly).
    The product is exact: a has 24 significant bits and 10**s (s <= 12) at most 28.
    """
    e10 = np.floor(np.log10(a32)).astype(np.intp)  # may be off by one near powers of ten
    while True:
        t9 = a * _POW10[8 - e10]
        m9 = np.rint(t9)  # half to even, like printf
        fix = (m9 >= 1e9).astype(np.intp) - (m9 < 1e8)
        if not fix.any():
            return m9, t9 - m9, e10
        e10 += fix


def _fewest_digits_guess(a, a32, m9, e10):
    """Largest j (0..8) such that a multiple of 10**j (in units of the 9th digit) lies in the
    float32 rounding interval, found optimistically (never too small a j), so 9 - j is a lower
    bound on the digits needed."""
    scale = _POW10[8 - e10]
    half_gap = np.spacing(a32).astype(np.float64) * 0.5
    upper = (a + half_gap) * scale + 1e-6
    lower = (a - half_gap) * scale - 1e-6
    # an interval this wide always holds a multiple of 10**j_lo
    j_lo = np.floor(np.log10(upper - lower))
    np.clip(j_lo, 0, 8, out=j_lo)
    j_hi = np.full(a.shape, 9.0)
    while True:
        open_ = j_hi - j_lo > 1
        if not open_.any():
            return j_lo
        mid = np.floor((j_lo + j_hi + 1) * 0.5)
        p = _POW10[mid.astype(np.intp)]
        fits = np.floor(upper / p + 1e-9) * p >= lower
        fits &= open_
        np.copyto(j_lo, mid, where=fits)
        np.copyto(j_hi, mid, where=open_ & ~fits)


def _round_to(j, m9, residual, e10, a32):
    """Round m9 to 9 - j digits (half to even on exact ties of the true value) and check that
    the result reads back as a32. Returns (digits q, exponent e, reads_back, exponent_too_big)."""
    p = _POW10[j.astype(np.intp)]
    q = np.floor(m9 / p)  # exact: m9 < 1e9 and the remainder is never within an ulp of p
    rest = m9 - q * p
    half = p * 0.5
    q += rest > half
    tie = (rest == half) & (j > 0)
    if tie.any():
        t = np.flatnonzero(tie)
        odd = q[t] - 2 * np.floor(q[t] * 0.5)
        q[t] += (residual[t] > 0) | ((residual[t] == 0) & (odd > 0))
    carry = q * p >= 1e9  # 99.96 -> 100.0: one more digit before the point
    q[carry] = np.floor(q[carry] * 0.1 + 0.5)
    e = e10 + carry
    shift = 8 - j - e  # digits after the point when written positionally (P - 1 - e)
    # q / 10**shift is correctly rounded (q < 2**53, 10**shift exact): the same double a parser gets
    back = (q / _POW10[np.maximum(shift, 0).astype(np.intp)]).astype(np.float32)
    return q, e, back == a32, shift < 0


def _shortest_search(a, a32, m9, residual, e10):
    """Fewest digits that read back, for any values: a lower bound, then one more digit at a time.
    -> (j, q, e): 9 - j digits q (float64 integers), decimal exponent e."""
    j = _fewest_digits_guess(a, a32, m9, e10)
    q, e, good, big = _round_to(j, m9, residual, e10, a32)
    todo = np.flatnonzero(~(good | big))
    while todo.size:
        j[todo] -= 1
        qt, et, gt, bt = _round_to(j[todo], m9[todo], residual[todo], e10[todo], a32[todo])
        done = gt | bt
        q[todo[done]] = qt[done]
        e[todo[done]] = et[done]
        todo = todo[~done]
    return j, q, e


def _shortest(a, a32, m9, residual, e10, digits_hint: int):
    """Like _shortest_search, but first tries `digits_hint` digits for every value: where that reads
    back and one digit fewer does not, it is the answer (reading back is monotone in the digits,
    except at exact powers of two, whose rounding interval is lopsided). Values in one file mostly
    need the same number of digits (5 in GloVe), so this settles most of them in two checks."""
    if not 1 < digits_hint <= 9:
        return _shortest_search(a, a32, m9, residual, e10)
    j = np.full(a.shape, 9.0 - digits_hint)
    q, e, good, big = _round_to(j, m9, residual, e10, a32)
    _, _, shorter, shorter_big = _round_to(j + 1, m9, residual, e10, a32)
    settled = good & ~big & ~shorter & ~shorter_big
    settled &= (a32.view(np.uint32) & np.uint32(0x7FFFFF)) != 0
    rest = np.flatnonzero(~settled)
    if rest.size:
        j[rest], q[rest], e[rest] = _shortest_search(a[rest], a32[rest], m9[rest], residual[rest], e10[rest])
    return j, q, e


def format_slots(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, digits_hint: int = 0) -> int:
    """Render float32 values [N] as ' ' + shortest %g text, right-aligned in 16-byte slots.

    lo, hi : uint64 arrays [N] receiving bytes 0-7 and 8-15 of each slot (NUL padded on the left).
    digits_hint : the digit count to try first (pass back what the previous call returned).
    Returns the most common digit count among these values.
    """
    x = values
    a32 = np.abs(x)
    fast = (a32 >= 1e-4) & (a32 < 1e7)  # False for nan
    if not fast.all():
        a32 = np.where(fast, a32, np.float32(1))
    a = a32.astype(np.float64)
    m9, residual, e10 = _nine_digits(a, a32)
    j, q, e = _shortest(a, a32, m9, residual, e10, digits_hint)

    digits = 9 - j
    positional = fast & (e >= -4) & (e < digits)  # where %g would not switch to scientific
    frac = digits - 1 - e  # digits after the point
    p_frac = _POW10[np.clip(frac, 0, 22).astype(np.intp)]
    # Write the digits as one integer with a 0 where the point goes (4.0071 -> 40 0071),
    # then the table turns that 0 into '.'; for |x| < 1 the point falls in the zero padding.
    int_part = np.floor(q / p_frac)
    run = q + 9 * int_part * p_frac * (frac > 0)
    length = np.maximum(e, 0) + 1 + (frac > 0) + frac  # without the sign
    g0 = np.floor(run * 1e-8)
    g12 = run - g0 * 1e8
    g1 = np.floor(g12 * 1e-4)
    g2 = g12 - g1 * 1e4
    neg = np.signbit(x)
    table = ((neg * 17 + length + neg) * 13 + frac).astype(np.intp)
    table[~positional] = 0
    np.left_shift(_DIGITS4[g0.astype(np.intp)], _SHIFT32, out=lo)
    lo |= _ZEROS4
    np.left_shift(_DIGITS4[g2.astype(np.intp)], _SHIFT32, out=hi)
    hi |= _DIGITS4[g1.astype(np.intp)]
    lo &= _KEEP_LO[table]
    lo |= _ADD_LO[table]
    hi &= _KEEP_HI[table]
    hi |= _ADD_HI[table]

    slow = np.flatnonzero(~positional)
    if slow.size:
        texts = [(" " + shortest_g(v)).encode("ascii").rjust(SLOT_BYTES, b"\0") for v in x[slow].tolist()]
        slots = np.array(texts, dtype=f"S{SLOT_BYTES}").view(np.uint64).reshape(-1, 2)
        lo[slow] = slots[:, 0]
        hi[slow] = slots[:, 1]
    return int(np.bincount(digits.astype(np.intp), minlength=10).argmax()) if digits.size else 0


def format_values(values: np.ndarray) -> bytes:
    """float32 values [N] -> b' v1 v2 ... vN' (each value preceded by one space)."""
    x = np.ascontiguousarray(values, dtype=np.float32).ravel()
    lo = np.empty(x.size, np.uint64)
    hi = np.empty(x.size, np.uint64)
    step = 1 << 16
    hint = 0
    for start in range(0, x.size, step):
        stop = start + step
        hint = format_slots(x[start:stop], lo[start:stop], hi[start:stop], hint)
    return np.stack([lo, hi], axis=1).tobytes().translate(None, b"\0")


def render_lines(encoded: list[bytes], rows: np.ndarray, digits_hint: int = 0) -> tuple[bytes, int]:
    """Lines for words (UTF-8 bytes) [k] and float32 rows [k, dim] -> (bytes, most common digit count): the bytes
    of render.py's compiled writer, in numpy (a small table's: write.py ``COMPILED_MIN_VALUES``)."""
    k, dim = rows.shape
    values = np.ascontiguousarray(rows, dtype=np.float32).ravel()
    lo = np.empty(values.size, np.uint64)
    hi = np.empty(values.size, np.uint64)
    digits = format_slots(values, lo, hi, digits_hint) if values.size else digits_hint
    joined = b"".join(encoded)
    if not k or b"\0" in joined:  # the padding is squeezed out as NULs, so such words go line by line
        slots = np.stack([lo, hi], axis=1).reshape(k, dim * 2)
        return b"".join(w + s.tobytes().translate(None, b"\0") + b"\n" for w, s in zip(encoded, slots)), digits
    # one row of uint64 per line: the word (NUL padded), 2 per value, then the line feed
    width = (max(map(len, encoded)) + 7) // 8
    lines = np.zeros((k, width + 2 * dim + 1), np.uint64)
    lines[:, :width] = np.array(encoded, dtype=f"S{8 * width}").view(np.uint64).reshape(k, width)
    lines[:, width:width + 2 * dim:2] = lo.reshape(k, dim)
    lines[:, width + 1:width + 2 * dim:2] = hi.reshape(k, dim)
    lines[:, -1] = ord("\n")
    return lines.tobytes().translate(None, b"\0"), digits
