"""Exact, fast text -> float32 for a big file: lines of a word and plain decimals parsed by a compiled kernel.

numpy's own text reader (`np.loadtxt`) is slow on a GloVe file's values (benchmarks/README.md, io): it
reads decoded Python text and calls a general float parser per field. The values of nearly every
vectors file are plain decimals of a few digits (`-0.41242`, `4.0071`), and for those a correctly
rounded result needs no general parser: with the digits as an integer M < 2**53 and f digits after
the point, M / 10**f is one IEEE division of two exact doubles, hence correctly rounded, hence the
very double any correct parser (Python's, numpy's) gives (Clinger's fast path). Rounding that double
to float32 is what every reader here does, so the bits are the same.

The kernel walks each line once: the word up to its first space (copied, space-separated, into one
buffer that is decoded and split once: no Python object per line until the words themselves), then
dim values, each after one space, the last before the newline. decimals.py does the same with numpy's
whole-array operations (the digits read eight at a time from uint64 words), whose temporary arrays made
reading a big file most of eval's CPU time; numba's import and first call in a process are what this
costs instead, so only a big file is read here, and below a very big one only by a process that loads numba
anyway (parse.py's takes_compiled; benchmarks/log/eval_speed.md, text_read.md).

Anything else (an exponent, nan, inf, a sign '+', more than 15 characters, a stray byte) is reported
back, not guessed: its position comes back and the caller parses it (or gives up on the block).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)

MAX_CHARS = 15  # 15 characters hold at most 15 digits: M < 10**15 < 2**53, so M is exact

_POW10 = 10.0 ** np.arange(MAX_CHARS + 1)
_SPACE, _NEWLINE, _MINUS, _POINT, _ZERO = 32, 10, 45, 46, 48


@njit(cache=True, nogil=True)
def _parse_lines(text, dim, out, words, odd_at, odd_start, odd_end, pow10):
    """Lines ``word v1 ... vdim\\n`` of text (uint8) into out (float32 [rows, dim]) and words (the words'
    bytes joined by spaces) -> (rows, bytes of words, values handed back), or rows -1 when a line is not a
    nonempty word and dim values after single spaces, or when more than len(odd_at) values are handed back.

    A value is parsed as its bytes are passed: -?digits[.digits] (or .digits, digits.) of at most MAX_CHARS
    characters is exact (above); any other leaves its slot as it was and comes back in odd_at (its index in
    the rows' values) with its bytes' start and end. text ends in a newline (parse_lines checks): every scan
    stops at one, so no byte is tested for the end of text as well (benchmarks/log/eval_speed.md)."""
    size = text.size
    pos = row = w = n_odd = 0
    while pos < size:
        if row == out.shape[0]:
            return -1, w, n_odd
        start = pos
        while text[pos] != _SPACE and text[pos] != _NEWLINE:
            pos += 1
        if pos == start or pos == size or text[pos] != _SPACE:
            return -1, w, n_odd
        if row:
            words[w] = _SPACE
            w += 1
        for i in range(start, pos):
            words[w] = text[i]
            w += 1
        pos += 1
        for k in range(dim):
            a = pos
            negative = text[pos] == _MINUS
            pos += negative
            m = digits = 0
            point = -1   # the digits before the point; -1 while no point was seen
            plain = True
            while True:   # ends at the newline that ends text, if not before
                c = text[pos]
                if _ZERO <= c <= _ZERO + 9:
                    m = m * 10 + (c - _ZERO)   # wraps past 18 digits: then too long to be plain anyway
                    digits += 1
                elif c == _POINT and point < 0:
                    point = digits
                elif c == _SPACE or c == _NEWLINE:
                    break
                else:
                    plain = False
                pos += 1
            if pos == size or (text[pos] == _NEWLINE) != (k == dim - 1):
                return -1, w, n_odd
            if plain and digits and pos - a <= MAX_CHARS:
                value = m / pow10[digits - point if point >= 0 else 0]
                out[row, k] = -value if negative else value
            elif n_odd == odd_at.size:
                return -1, w, n_odd
            else:
                odd_at[n_odd] = row * dim + k
                odd_start[n_odd] = a
                odd_end[n_odd] = pos
                n_odd += 1
            pos += 1
        row += 1
    return row, w, n_odd


def parse_lines(body: bytes, dim: int, n: int, most_odd: int):
    """n lines ``word v1 ... vdim`` (each value after one space, each line ending in a newline) -> (the words'
    UTF-8 bytes joined by spaces, float32 [n, dim], the values not parsed as (index in the values, start, end)
    in body), or None when the lines are not of that shape or more than ``most_odd`` values are not plain
    decimals. The slots of the values handed back hold garbage."""
    if body and not body.endswith(b"\n"):
        return None   # the kernel's scans stop at a newline: the readers' blocks end in one
    text = np.frombuffer(body, np.uint8)   # read-only always: one specialisation of the kernel
    matrix = np.empty((n, dim), np.float32)
    words = np.empty(len(body), np.uint8)
    odd_at, odd_start, odd_end = (np.empty(most_odd, np.int64) for _ in range(3))
    rows, w, n_odd = _parse_lines(text, dim, matrix, words, odd_at, odd_start, odd_end, _POW10)
    if rows != n:
        return None
    return words[:w], matrix, (odd_at[:n_odd], odd_start[:n_odd], odd_end[:n_odd])

