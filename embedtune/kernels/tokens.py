"""Compiled (numba) passes over a corpus's bytes: lines split at whitespace into byte tokens, each
token given a corpus-local id in a hash table of the distinct tokens (``scan``); the ids later
expanded into row ids (``expand``). embedtune/corpus/fast.py drives them and owns the rules.

Whitespace is what Python's ``str.split()`` splits at, on UTF-8 bytes known to be valid: the ASCII
controls 9-13 and 28-31, space, and the 19 multi-byte characters ``str.isspace`` is true of."""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.compiling import listen

listen()   # a compile said (kernels/compiling.py)

FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)
SEPARATOR = 10   # written after each token in the pool: no token holds a line feed

LONG_TOKENS = 1 << 12   # a line that may hold more tokens has them counted before room is made for them
# Status of a scan that returned early.
DONE, LONG_LINE, FULL = 0, 1, 2


def byte_classes() -> np.ndarray:
    """Per byte value: 1 for ASCII whitespace, 2 for the lead byte of a multi-byte whitespace character
    (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), else 0."""
    classes = np.zeros(256, np.uint8)
    classes[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = 1
    classes[[0xC2, 0xE1, 0xE2, 0xE3]] = 2
    return classes


@njit(cache=True, nogil=True)
def _wide_space(b, c, d):
    """Bytes of the multi-byte whitespace character that starts with bytes ``b`` (a lead byte of class 2),
    ``c`` and ``d`` (0 where the line ends before them), or 0. Bytes, not the buffer: an array handed to a
    kernel's helper, inlined or not, is reference-counted at each call (numba's NRT_incref and NRT_decref,
    atomic operations), which cost the scan more than its own work (benchmarks/log/train_speed.md)."""
    if b == 0xC2:
        return 2 if c == 0x85 or c == 0xA0 else 0
    if b == 0xE1:
        return 3 if c == 0x9A and d == 0x80 else 0
    if b == 0xE3:
        return 3 if c == 0x80 and d == 0x80 else 0
    if c == 0x80:   # 0xE2
        return 3 if d <= 0x8A and d >= 0x80 or d == 0xA8 or d == 0xA9 or d == 0xAF else 0
    return 3 if c == 0x81 and d == 0x9F else 0


@njit(cache=True, nogil=True)
def _count_tokens(buf, pos, end, classes):
    """Whitespace tokens in ``buf[pos:end]``."""
    n = 0
    inside = False
    i = pos
    while i < end:
        kind = classes[buf[i]]
        w = 1 if kind == 1 else (_wide_space(buf[i], buf[i + 1] if i + 1 < end else 0,
                                            buf[i + 2] if i + 2 < end else 0) if kind == 2 else 0)
        if w:
            inside = False
            i += w
        else:
            if not inside:
                n += 1
                inside = True
            i += 1
    return n


@njit(cache=True, nogil=True)
def _alnum(b):
    return (b >= 48 and b <= 57) or (b >= 65 and b <= 90) or (b >= 97 and b <= 122)


@njit(cache=True, nogil=True)
def scan(buf, pos, end, number, max_line, classes, pool, pool_used, tstart, tlen, thash, tcount, tplain, n_types,
         slots, ids, n_ids, unit_tokens, unit_numbers, n_units):
    """Tokenize the lines of ``buf[pos:end]`` (each ended by a line feed, or by ``end``), line
    ``number`` first: each token's id (new tokens added to the table: pool, tstart, tlen, thash, tcount,
    tplain, slots) appended to ``ids``, and each line with tokens appended to ``unit_tokens`` (its token count)
    and ``unit_numbers`` (its number). ``tplain``: 1 for a token that begins and ends with an ASCII
    letter or digit (no tokenizer splits it), else 0. Stops before a line of ``max_line`` bytes or more (status
    LONG_LINE) and before a line the arrays may lack room for (FULL). Time linear in the bytes.
    Returns (status, pos, number, pool_used, n_types, n_ids, n_units, length, most): the last two, for
    FULL, the bytes of the line it stopped at and the tokens it may hold (the room to make)."""
    mask = len(slots) - 1
    while pos < end:
        e = pos
        while e < end and buf[e] != 10:
            e += 1
        length = e - pos
        if length >= max_line:
            return LONG_LINE, pos, number, pool_used, n_types, n_ids, n_units, length, 0
        most = length // 2 + 1   # tokens a line of this length can hold
        if most > LONG_TOKENS:   # a long line (a piece of a longer one): its tokens counted first
            most = _count_tokens(buf, pos, e, classes)
        if (n_ids + most > len(ids) or n_types + most > len(tstart) or pool_used + length + most > len(pool)
                or 2 * (n_types + most) > len(slots) or n_units + 1 > len(unit_tokens)):
            return FULL, pos, number, pool_used, n_types, n_ids, n_units, length, most
        i = pos
        found = 0
        while i < e:
            kind = classes[buf[i]]
            if kind == 1:
                i += 1
                continue
            if kind == 2:
                w = _wide_space(buf[i], buf[i + 1] if i + 1 < e else 0, buf[i + 2] if i + 2 < e else 0)
                if w:
                    i += w
                    continue
            start = i
            h = FNV_OFFSET
            while i < e:
                kind = classes[buf[i]]
                if kind == 1 or (kind == 2 and _wide_space(buf[i], buf[i + 1] if i + 1 < e else 0,
                                                           buf[i + 2] if i + 2 < e else 0)):
                    break
                h = (h ^ np.uint64(buf[i])) * FNV_PRIME
                i += 1
            # The token's id, added when new (its bytes copied to the pool, its count 0). Here, not in a helper:
            # the arrays handed to one were reference-counted at each token (see _wide_space).
            n = i - start
            slot = h & mask
            while True:
                t = slots[slot]
                if t < 0:   # a new token
                    t = slots[slot] = n_types
                    tstart[t], tlen[t], thash[t], tcount[t] = pool_used, n, h, 0
                    tplain[t] = _alnum(buf[start]) and _alnum(buf[i - 1])
                    for k in range(n):   # not a slice assignment: numba's compiles for seconds on a cold run (first_run.md)
                        pool[pool_used + k] = buf[start + k]
                    pool[pool_used + n] = SEPARATOR
                    pool_used, n_types = pool_used + n + 1, n_types + 1
                    break
                if thash[t] == h and tlen[t] == n:
                    k, s = 0, tstart[t]
                    while k < n and pool[s + k] == buf[start + k]:
                        k += 1
                    if k == n:
                        break
                slot = (slot + 1) & mask
            tcount[t] += 1
            ids[n_ids] = t
            n_ids += 1
            found += 1
        if found:
            unit_tokens[n_units] = found
            unit_numbers[n_units] = number
            n_units += 1
        number += 1
        pos = e + 1 if e < end else end
    return DONE, pos, number, pool_used, n_types, n_ids, n_units, 0, 0


@njit(cache=True, nogil=True)
def rehash(thash, n_types, slots):
    """Fill the empty ``slots`` (a power of two) with the first ``n_types`` tokens' ids."""
    mask = len(slots) - 1
    for t in range(n_types):
        slot = thash[t] & mask
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = t


@njit(cache=True, nogil=True)
def units_with_pieces(ids, unit_tokens, n_pieces):
    """How many units (runs of ``unit_tokens`` ids) hold a token with at least one piece."""
    kept = 0
    at = 0
    for u in range(len(unit_tokens)):
        stop = at + unit_tokens[u]
        for j in range(at, stop):
            if n_pieces[ids[j]] > 0:
                kept += 1
                break
        at = stop
    return kept


def expand(ids, unit_tokens, piece_start, piece_rows):
    """The units' raw-token ids as row ids: each raw token becomes its pieces
    (``piece_rows[piece_start[t]:piece_start[t + 1]]``), those without a row (-1) dropped. Returns
    (rows, kept per unit, pieces per unit: the tokens the unit holds, kept or not). The arrays are made here, by
    numpy, and filled by ``_expand``: an allocation inside a kernel compiles numba's implementation of it in
    every cold process (benchmarks/log/first_run.md)."""
    units = len(unit_tokens)
    kept, pieces = np.empty(units, np.int64), np.empty(units, np.int64)
    rows = np.empty(len(ids) + (len(ids) >> 2) + 16, np.int32)   # room for most; else made again at its size
    n = _expand(ids, unit_tokens, piece_start, piece_rows, rows, kept, pieces)
    if n < 0:
        rows = np.empty(-n, np.int32)
        n = _expand(ids, unit_tokens, piece_start, piece_rows, rows, kept, pieces)
    return rows[:n], kept, pieces


@njit(cache=True, nogil=True)
def _expand(ids, unit_tokens, piece_start, piece_rows, rows, kept, pieces):
    """expand's pass: the rows into ``rows`` and each unit's counts into ``kept`` and ``pieces``; returns the rows
    written, or minus the units' pieces where ``rows`` has less room than that (nothing written then)."""
    total = 0
    for j in range(len(ids)):
        t = ids[j]
        total += piece_start[t + 1] - piece_start[t]
    if total > len(rows):
        return -total
    for u in range(len(unit_tokens)):
        kept[u] = 0
        pieces[u] = 0
    n = 0
    at = 0
    for u in range(len(unit_tokens)):
        stop = at + unit_tokens[u]
        for j in range(at, stop):
            t = ids[j]
            for p in range(piece_start[t], piece_start[t + 1]):
                pieces[u] += 1
                r = piece_rows[p]
                if r >= 0:
                    rows[n] = r
                    n += 1
                    kept[u] += 1
        at = stop
    return n
