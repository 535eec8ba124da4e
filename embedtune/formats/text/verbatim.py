"""A text vectors file's own lines, taken where they are the very bytes the writer would render.

GloVe's files were printed with ``%.5g``, so most of their lines are what shortest.py would write of the
rows read from them: copying such a line is the same output as rendering it, without rendering it
(the 400k lines of GloVe 6B 50d cost about as much to render as the rest of a classify run's set-up:
benchmarks/log/classify.md). A line is copied only when this module proves it is the rendering of its
row: its word's UTF-8 bytes, then ``dim`` values each after one space, then the line feed; and each value
in the plain form ``%g`` writes with d <= 6 significant digits (``-?(0|[1-9][0-9]*)(.[0-9]*[1-9])?``,
no leading or trailing zero, its first digit's exponent X in -4 <= X < d) whose value, read as a double
and rounded to float32 (as shortest.py reads back), has the row's bits.

Why that is the writer's text: shortest.py writes ``%.Pg`` with the fewest digits P whose text, read as a
double and rounded to float32, is the row's value, and this line's text T (d <= 6 digits) reads back to it
(checked here, with the same two roundings). No P < d does: its text would be another decimal of at most 6
digits reading back to the same float32, and float32 keeps those apart (FLT_DIG is 6; the double of a
decimal of at most 8 places after the point is never exactly halfway between two float32s unless the
decimal itself is, so the second rounding moves nothing there). And ``%.dg`` of the value gives T back: the
value is within 2^-24 of T, relatively, plus the double's rounding, under a tenth of the d-th digit's unit.
Zero (``0``, ``-0``) is left to the writer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)

_POW10 = 10.0 ** np.arange(10)   # up to 9 digits after the point: 4 zeros, then 6 digits at most
MOST_DIGITS = 6   # float32's FLT_DIG: decimals of this many significant digits stay apart as float32


@njit(cache=True, nogil=True, inline="always")
def _read_value(buf, i, end, pow10):
    """The value written from ``buf[i]`` on, as a double read and rounded to float32, when it is in the copied
    form (the module's docstring), and where it stops (at a space or ``end``); 0.0 when it is not in that form
    (zero itself is not: a nonzero float32 equals another only with the same bits)."""
    neg = buf[i] == 45 if i < end else False   # '-'
    if neg:
        i += 1
    m = 0          # the digits as an integer (leading zeros add nothing)
    sig = 0        # digits from the first nonzero one
    n_int = 0      # digits before the point
    n_frac = 0     # after it
    last = 0       # the last digit
    first = -1     # the first digit
    while i < end and 48 <= buf[i] <= 57:
        last = buf[i] - 48
        if first < 0:
            first = last
        elif first == 0:   # a leading zero before another digit
            return np.float32(0.0), i
        n_int += 1
        i += 1
        if sig or last:
            m = m * 10 + last
            sig += 1
            if sig > MOST_DIGITS:
                return np.float32(0.0), i
    if n_int == 0:
        return np.float32(0.0), i
    if i < end and buf[i] == 46:   # '.'
        i += 1
        while i < end and 48 <= buf[i] <= 57:
            last = buf[i] - 48
            n_frac += 1
            i += 1
            if sig or last:
                m = m * 10 + last
                sig += 1
                if sig > MOST_DIGITS:
                    return np.float32(0.0), i
            elif n_frac > 3:   # a fourth zero after '0.': %g writes 0.0001, but 1e-05
                return np.float32(0.0), i
        if n_frac == 0:   # '5.'
            return np.float32(0.0), i
    if (i < end and buf[i] != 32) or sig == 0 or last == 0:
        # another character; zero; a trailing zero ('0.50', or '100', which %g writes '1e+02')
        return np.float32(0.0), i
    value = m / pow10[n_frac]   # both exact: the double nearest the decimal, as a reader's first rounding
    return np.float32(-value if neg else value), i


@njit(cache=True, nogil=True)
def verbatim_lines(buf, pos, word_bytes, rows, ok):
    """Which of the lines from ``buf[pos]`` on are the writer's rendering of (word, row): ``word_bytes`` the
    rows' words, each followed by a line feed; ``rows`` float32 [k, dim]. Sets ``ok[r]`` for
    each of the k lines (False past the buffer's last whole line) and returns where line k ends (after its
    line feed), or -1 when the buffer holds fewer than k whole lines."""
    n = len(buf)
    k, dim = rows.shape
    w = 0
    pow10 = _POW10
    for r in range(k):
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        if end == n:   # no whole line left
            for rest in range(r, k):
                ok[rest] = False
            return -1
        good = True
        i = pos
        while word_bytes[w] != 10:   # the word, then one space
            if good and (i >= end or buf[i] != word_bytes[w]):
                good = False
            i += 1
            w += 1
        w += 1
        if good and (i >= end or buf[i] != 32):
            good = False
        j = 0
        while good and j < dim:
            value, i = _read_value(buf, i + 1, end, pow10)
            if value == 0 or value != rows[r, j]:
                good = False
            j += 1
        ok[r] = good and i == end
        pos = end + 1
    return pos


class InputLines:
    """A text vectors file's lines in order, a block of rows at a time (``take``), each with whether it is the
    writer's rendering of its row: a run's output copies those (``RenderedAhead``). The file is the one the
    rows were read from; a line that is not its row's rendering (another file, a row left out, a value in
    another form) is only not copied. ``header``: the file's first line is a ``COUNT DIM`` header."""

    READ_BYTES = 1 << 20

    def __init__(self, path: str, header: bool):
        self.path, self.header = path, header
        self._file = None
        self._buf, self._pos, self._eof = b"", 0, False

    def __enter__(self):
        self._file = open(self.path, "rb")
        if self.header:
            self._file.readline()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file, self._buf, self._eof = None, b"", True

    def take(self, words: list[str], rows: np.ndarray) -> tuple[bytes, np.ndarray] | None:
        """The next ``len(words)`` lines (bytes, their line feeds included) and bool [k]: those that are the
        rendering of (``words[r]``, ``rows[r]``, float32 [k, dim]). None when the file has fewer lines left,
        or none of these is its row's (the rows do not follow the file's lines: the file is closed then)."""
        k = len(words)
        if self._file is None or k == 0:
            return None
        while self._buf.count(b"\n", self._pos) < k and not self._eof:
            more = self._file.read(max(self.READ_BYTES, k * 64))
            self._eof = not more
            self._buf, self._pos = self._buf[self._pos:] + more, 0
        try:
            word_bytes = np.frombuffer(("\n".join(words) + "\n").encode("utf-8"), np.uint8)
        except UnicodeEncodeError:   # the writer says what is wrong with such a word
            self.close()
            return None
        ok = np.zeros(k, bool)
        end = verbatim_lines(np.frombuffer(self._buf, np.uint8), self._pos, word_bytes,
                             np.ascontiguousarray(rows, np.float32), ok)
        if end < 0 or not ok.any():
            self.close()
            return None
        lines = self._buf[self._pos:end]
        self._pos = end
        return lines, ok
