"""Exact, fast text -> float: plain decimals parsed on whole arrays, eight digits at a time.

numpy's own text reader (`np.loadtxt`) is slow on a GloVe file's values (benchmarks/README.md, io): it
reads decoded Python text and calls a general float parser per field. The values
of nearly every vectors file are plain decimals of a few digits (`-0.41242`, `4.0071`), and for those
a correctly rounded result needs no general parser: with the digits as an integer M < 2**53 and f
digits after the point, M / 10**f is one IEEE division of two exact doubles, hence correctly rounded,
hence the very double any correct parser (Python's, numpy's) gives (Clinger's fast path). Rounding that
double to float32 is what every reader here does, so the bits are the same.

So each value is taken as the 16 bytes that end where it ends (one gather from a strided view),
the bytes before its start are replaced by '0' (leading zeros change nothing), the point is dropped by
moving the digits before it one byte along, and two 8-digit halves are read with the SWAR
multiplications of simdjson's `parse_eight_digits_unrolled` on uint64 words; a value of at most 8
bytes (93% of GloVe's) needs only the second word, about half the work (benchmarks/README.md, io).

Anything else (an exponent, nan, inf, a sign '+', more than 15 characters, a stray byte) is reported
back, not guessed: `parse_decimals` returns the indices it could not parse and the caller parses those
(or gives up on the block).
"""

from __future__ import annotations

import numpy as np

WIDTH = 16  # bytes looked at per value; values of more than MAX_CHARS go back to the caller
MAX_CHARS = 15  # 15 characters hold at most 15 digits: M < 10**15 < 2**53, so M is exact

_U = np.uint64
_ZERO_CHARS = _U(0x3030303030303030)  # '0' * 8: XOR turns digit characters into digit values
_LOW7 = _U(0x7F7F7F7F7F7F7F7F)
_HIGH = _U(0x8080808080808080)
_PLUS_118 = _U(0x7676767676767676)  # a byte <= 9 plus 118 stays below 128
_POINT = _U(0x1E1E1E1E1E1E1E1E)  # '.' ^ '0' in every byte
_BYTE = _U(0xFF)
_ALL = _U(0xFFFFFFFFFFFFFFFF)
_EIGHT_DIGITS = _U(100_000_000)
_PAIRS = _U(0x000000FF000000FF)
_MUL_A = _U(100 + (1_000_000 << 32))
_MUL_B = _U(1 + (10_000 << 32))
_LOW32 = _U(0xFFFFFFFF)
_S7, _S8, _S16, _S32, _S56 = _U(7), _U(8), _U(16), _U(32), _U(56)


def _window_tables():
    """For a value of length L right-aligned in 16 bytes: the bytes to keep, and '0' in the others."""
    keep = np.zeros((WIDTH + 1, WIDTH), np.uint8)
    zeros = np.zeros((WIDTH + 1, WIDTH), np.uint8)
    for length in range(WIDTH + 1):
        keep[length, WIDTH - length:] = 0xFF
        zeros[length, :WIDTH - length] = ord("0")
    keep = keep.view(_U).reshape(-1, 2)
    zeros = zeros.view(_U).reshape(-1, 2)
    return keep[:, 0].copy(), keep[:, 1].copy(), zeros[:, 0].copy(), zeros[:, 1].copy()


_KEEP_LO, _KEEP_HI, _ZEROS_LO, _ZEROS_HI = _window_tables()
# divisors 10**f, then -10**f for negative values (the sign rides on the one division; -0 stays -0)
_DIVISORS = np.concatenate([10.0 ** np.arange(WIDTH), -(10.0 ** np.arange(WIDTH))])


def _eight_digits(v: np.ndarray) -> np.ndarray:
    """uint64 words of 8 digit values (0..9, the first digit in the lowest byte) -> their numbers."""
    v = v * _U(10) + (v >> _S8)
    v = ((v & _PAIRS) * _MUL_A + ((v >> _S16) & _PAIRS) * _MUL_B) >> _S32
    return v & _LOW32


def _nonzero_bytes(x: np.ndarray) -> np.ndarray:
    """0x80 in each byte of x that is not zero, 0 elsewhere (no carries between bytes)."""
    return (((x & _LOW7) + _LOW7) | x) & _HIGH


def parse_decimals(text: np.ndarray, ends: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Parse the values text[ends - lengths : ends] into out (float64 [k]).

    text : uint8 array that has at least WIDTH bytes before the first value (padding: any bytes).
    ends, lengths : intp [k], where each value ends (exclusive) and how many bytes it has.
    Values of the form -?digits[.digits] (or .digits, digits.) of at most MAX_CHARS characters are
    parsed exactly (the correctly rounded double); returns the indices of the others, whose slots in
    out hold garbage.

    Most values of a file fit in 8 bytes (GloVe's `-0.41242`): those take one uint64 word, half the
    work; the longer ones are parsed again from two words.
    """
    odd = _parse_short(text, ends, lengths, out)
    longer = np.flatnonzero(lengths > 8)
    if not longer.size:
        return odd
    values = np.empty(longer.size, np.float64)
    odd_long = _parse_long(text, ends[longer], lengths[longer], values)
    out[longer] = values
    odd = odd[lengths[odd] <= 8]
    return np.union1d(odd, longer[odd_long]) if odd_long.size else odd


def _parse_short(text: np.ndarray, ends: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> np.ndarray:
    """parse_decimals for values of at most 8 bytes, from one uint64 word; longer ones come back odd."""
    words = np.ndarray(buffer=text, dtype=_U, shape=(text.size - 7,), strides=(1,))
    clipped = np.minimum(lengths, 8)
    x = ((words[ends - 8] & _KEEP_HI[clipped]) | _ZEROS_HI[clipped]) ^ _ZERO_CHARS
    other = (((x & _LOW7) + _PLUS_118) | x) & _HIGH
    point = ~_nonzero_bytes(x ^ _POINT) & _HIGH
    negative = text[ends - lengths] == ord("-")
    points = np.bitwise_count(point)
    others = np.bitwise_count(other)
    good = (lengths <= 8) & (points <= 1) & (others == points + negative) & (lengths > others)
    x &= ~((other >> _S7) * _BYTE)
    before = ((point >> _S7) - _U(1)) & (points != 0).astype(_U) * _ALL
    x = (x & ~before) | ((x & before) << _S8)
    after_point = (7 - (np.bitwise_count(before).astype(np.intp) >> 3)) * (points != 0)
    np.copyto(out, _eight_digits(x), casting="unsafe")
    out /= _DIVISORS[after_point + WIDTH * negative]
    return np.flatnonzero(~good)


def _parse_long(text: np.ndarray, ends: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> np.ndarray:
    """parse_decimals from two uint64 words (values of up to MAX_CHARS bytes)."""
    windows = np.ndarray(buffer=text, dtype=f"V{WIDTH}", shape=(text.size - WIDTH + 1,), strides=(1,))
    words = windows[ends - WIDTH].view(_U).reshape(-1, 2)
    clipped = np.minimum(lengths, WIDTH)
    lo = ((words[:, 0] & _KEEP_LO[clipped]) | _ZEROS_LO[clipped]) ^ _ZERO_CHARS
    hi = ((words[:, 1] & _KEEP_HI[clipped]) | _ZEROS_HI[clipped]) ^ _ZERO_CHARS
    del words
    # a byte is a digit iff it is now <= 9; the point is 0x1E, the minus sign 0x1D
    other_lo = (((lo & _LOW7) + _PLUS_118) | lo) & _HIGH
    other_hi = (((hi & _LOW7) + _PLUS_118) | hi) & _HIGH
    point_lo = ~_nonzero_bytes(lo ^ _POINT) & _HIGH
    point_hi = ~_nonzero_bytes(hi ^ _POINT) & _HIGH
    negative = text[ends - lengths] == ord("-")
    points = np.bitwise_count(point_lo) + np.bitwise_count(point_hi)
    others = np.bitwise_count(other_lo) + np.bitwise_count(other_hi)
    # at most one point, a '-' only first, nothing else, and at least one digit
    good = (lengths <= MAX_CHARS) & (points <= 1) & (others == points + negative) & (lengths > others)
    lo &= ~((other_lo >> _S7) * _BYTE)  # the point and the sign become 0
    hi &= ~((other_hi >> _S7) * _BYTE)
    # drop the point: the bytes before it move one byte right (the first byte is padding)
    has_point = (points != 0).astype(_U) * _ALL
    before_lo = ((point_lo >> _S7) - _U(1)) & has_point
    in_hi = point_hi >> _S7
    before_hi = (in_hi - _U(1)) & (in_hi != 0).astype(_U) * _ALL
    moved_lo = lo & before_lo
    lo &= ~before_lo
    lo |= moved_lo << _S8
    hi = (hi & ~before_hi) | ((hi & before_hi) << _S8) | (moved_lo >> _S56)  # 0 unless the point is in hi
    digits = _eight_digits(lo) * _EIGHT_DIGITS + _eight_digits(hi)
    point_at = (np.bitwise_count(before_lo) + np.bitwise_count(before_hi)).astype(np.intp) >> 3
    after_point = (WIDTH - 1 - point_at) * (points != 0)
    np.copyto(out, digits, casting="unsafe")
    out /= _DIVISORS[after_point + WIDTH * negative]
    return np.flatnonzero(~good)
