"""fastText's subword arithmetic, compiled: a word's n-gram rows and its vector, exactly as fastText's
``Dictionary::computeSubwords`` and ``FastText::getWordVector`` make them.

A word's subwords are its own row (when the dictionary holds it) and, for the word wrapped as
``<word>``, every n-gram of ``minn``..``maxn`` characters (UTF-8 continuation bytes stay with their
character; the lone ``<`` and ``>`` are left out), each hashed with fastText's FNV-1a (whose bytes are
sign-extended, as fastText's released models were made) modulo ``bucket`` and put after the ``nwords``
word rows. The vector is the float32 sum of those rows, in that order, from zero, times
``float32(1.0 / count)``: the same operations in the same order, so the same bits (no fast-math here,
unlike the training kernels). The dictionary's ``</s>`` has no n-grams.

Words come as one block of UTF-8 bytes with their start and end offsets (a WordList's ``data`` and
``ends``), so that 2M words need no Python loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from embedtune.kernels.compiling import listen
from embedtune.words import WordList

listen()   # a compile said (kernels/compiling.py)

FNV_OFFSET = 2166136261
FNV_PRIME = 16777619
EOS = b"</s>"


@njit(cache=True, nogil=True)
def _byte(data, start, length, p):
    """Byte ``p`` of ``<word>``, the word being data[start:start + length]."""
    if p == 0:
        return 60   # '<'
    if p == length + 1:
        return 62   # '>'
    return data[start + p - 1]


@njit(cache=True, nogil=True)
def _is_eos(data, start, length):
    return (length == 4 and data[start] == 60 and data[start + 1] == 47 and data[start + 2] == 115
            and data[start + 3] == 62)


@njit(cache=True, nogil=True)
def _ngram_ids(data, start, length, minn, maxn, bucket, out):
    """Fill ``out`` with the word's n-gram rows; returns how many."""
    count = 0
    if bucket <= 0 or maxn <= 0:
        return 0
    width = length + 2
    for i in range(width):
        if (_byte(data, start, length, i) & 0xC0) == 0x80:
            continue
        h = np.uint64(FNV_OFFSET)
        j = i
        n = 1
        while j < width and n <= maxn:
            b = np.uint64(_byte(data, start, length, j))
            if b >= 128:
                b = b | np.uint64(0xFFFFFF00)   # int8 sign-extended to uint32
            h = ((h ^ b) * np.uint64(FNV_PRIME)) & np.uint64(0xFFFFFFFF)
            j += 1
            while j < width and (_byte(data, start, length, j) & 0xC0) == 0x80:
                b = np.uint64(_byte(data, start, length, j)) | np.uint64(0xFFFFFF00)
                h = ((h ^ b) * np.uint64(FNV_PRIME)) & np.uint64(0xFFFFFFFF)
                j += 1
            if n >= minn and not (n == 1 and (i == 0 or j == width)):
                out[count] = np.int64(h % np.uint64(bucket))
                count += 1
            n += 1
    return count


@njit(cache=True, nogil=True)
def _ngrams(data, start, length, minn, maxn, bucket, ids):
    """The word's n-gram rows (into the bucket rows) into ``ids``; how many. ``</s>`` has none."""
    if _is_eos(data, start, length):
        return 0
    return _ngram_ids(data, start, length, minn, maxn, bucket, ids)


@njit(cache=True, nogil=True)
def _average(own_row, grams, ids, count, acc):
    """fastText's getWordVector arithmetic: zero, add the own row (if any) and each n-gram row in turn,
    times float32(1 / number of rows)."""
    acc[:] = 0
    n = count
    if own_row is not None:
        n += 1
        for d in range(acc.shape[0]):
            acc[d] += own_row[d]
    for k in range(count):
        row = grams[ids[k]]
        for d in range(acc.shape[0]):
            acc[d] += row[d]
    if n > 0:
        scale = np.float32(1.0 / n)
        for d in range(acc.shape[0]):
            acc[d] *= scale


@njit(cache=True, nogil=True)
def _word_vectors(data, starts, ends, own, own_matrix, grams, minn, maxn, bucket, out):
    ids = np.empty(_most_ids(starts, ends, maxn) + 1, np.int64)
    for w in range(len(starts)):
        count = _ngrams(data, starts[w], ends[w] - starts[w], minn, maxn, bucket, ids)
        if own[w] >= 0:
            _average(own_matrix[own[w]], grams, ids, count, out[w])
        else:
            _average(None, grams, ids, count, out[w])


@njit(cache=True, nogil=True)
def _most_ids(starts, ends, maxn):
    longest = 0
    for w in range(len(starts)):
        longest = max(longest, ends[w] - starts[w])
    return (longest + 2) * max(min(maxn, longest + 2), 1) + 1   # an n-gram a start and length that fits


WALK = 256   # ulps a solved component may be walked toward its target (the corrections leave a few)


@njit(cache=True, nogil=True)
def _through(x, grams, ids, grams_n, d, scale):
    """fastText's arithmetic for one component: 0 + x (the own row), each n-gram row's added, times scale."""
    acc = np.float32(0.0) + x
    for k in range(grams_n):
        acc += grams[ids[k], d]
    return acc * scale


@njit(cache=True, nogil=True)
def _solve_rows(data, starts, ends, grams, minn, maxn, bucket, targets, rows):
    """For each word and component, the own-row value that makes fastText's average of (own row, its n-gram
    rows) come out as ``targets[w, d]``, or as near as float32 allows: n * target - sum(n-gram values) in
    float64, corrected twice by what the float32 arithmetic gives back (n times the miss), then walked one
    float32 step at a time toward the target while the result comes nearer (it never goes down as the own
    value goes up, so the walk ends at the nearest result it can reach). Writes ``rows[w]``; returns the
    largest |average - target|."""
    ids = np.empty(_most_ids(starts, ends, maxn) + 1, np.int64)
    dim = targets.shape[1]
    worst = 0.0
    for w in range(len(starts)):
        grams_n = _ngrams(data, starts[w], ends[w] - starts[w], minn, maxn, bucket, ids)
        count = grams_n + 1   # the own row and the n-grams
        scale = np.float32(1.0 / count)
        for d in range(dim):
            t = targets[w, d]
            s = 0.0
            for k in range(grams_n):
                s += grams[ids[k], d]
            x = np.float32(count * np.float64(t) - s)
            y = _through(x, grams, ids, grams_n, d, scale)
            for _round in range(2):
                if y == t:
                    break
                nx = np.float32(np.float64(x) + count * (np.float64(t) - np.float64(y)))
                ny = _through(nx, grams, ids, grams_n, d, scale)
                if abs(np.float64(ny) - t) > abs(np.float64(y) - t):
                    break
                x, y = nx, ny
            for _step in range(WALK):
                if y == t:
                    break
                nx = np.nextafter(x, np.float32(np.inf) if y < t else np.float32(-np.inf))
                ny = _through(nx, grams, ids, grams_n, d, scale)
                if abs(np.float64(ny) - t) > abs(np.float64(y) - t):
                    break
                x, y = nx, ny
            rows[w, d] = x
            worst = max(worst, abs(np.float64(y) - t))
    return worst


def _layout(words):
    """(uint8 data, int64 starts, int64 ends) of ``words``: a WordList's own block, else the words encoded."""
    if isinstance(words, WordList) and not words.tail:
        data, ends = words.data, np.asarray(words.ends, np.int64)
        starts = np.empty_like(ends)
        if len(ends):
            starts[0] = 0
            starts[1:] = ends[:-1] + 1
        return np.frombuffer(data, np.uint8), starts, ends
    encoded = [w if isinstance(w, bytes) else w.encode("utf-8") for w in words]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return np.frombuffer(b"".join(encoded), np.uint8) if encoded else np.zeros(0, np.uint8), starts, ends


# Words computed a call at a time when progress is asked: a 2M-word model's vectors take seconds.
PROGRESS_WORDS = 1 << 16
# Words computed between two calls of word_vectors's ``release``: a word's n-gram rows lie anywhere among the
# bucket rows, and a kernel that maps the page cache's large folios whole maps much of a model's matrix for a few
# thousand words, so a smaller count holds little less and maps the same pages again more often
# (benchmarks/log/memory_sizes.md, diff of two fastText models).
RELEASE_WORDS = 1 << 16


def word_vectors(words, own_rows, own_matrix: np.ndarray, grams: np.ndarray, minn: int, maxn: int,
                 out: np.ndarray | None = None, progress=None, release=None) -> np.ndarray:
    """float32 [len(words), dim]: fastText's get_word_vector for each word, bit for bit.

    own_rows : int64 [len(words)], each word's row in ``own_matrix`` (the model's word rows), -1 for a word
    the model lacks (its vector is then its n-grams' alone, zero when it has none); grams : the model's
    bucket rows [bucket, dim] (the input matrix's rows after the words'). progress : called with the words
    done so far after each PROGRESS_WORDS (each word's vector is its own: the bits do not change).
    release : called after each RELEASE_WORDS words (a mapped model's read pages let go: FastTextModel).
    """
    data, starts, ends = _layout(words)
    dim = grams.shape[1] if own_matrix is None else own_matrix.shape[1]
    if out is None:
        out = np.empty((len(starts), dim), np.float32)
    if own_matrix is None:
        own_matrix = np.zeros((0, dim), np.float32)
    own_rows = np.asarray(own_rows, np.int64)
    step = len(starts) if progress is None else PROGRESS_WORDS
    if release is not None:
        step = min(step, RELEASE_WORDS)
    told = 0
    for a in range(0, len(starts), max(step, 1)):
        b = min(a + step, len(starts))
        _word_vectors(data, starts[a:b], ends[a:b], own_rows[a:b], own_matrix, grams, minn, maxn, grams.shape[0],
                      out[a:b])
        if release is not None:
            release()
        if progress is not None and (b - told >= PROGRESS_WORDS or b == len(starts)):
            told = b
            progress(b)
    return out


def solve_own_rows(words, grams: np.ndarray, minn: int, maxn: int, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """(rows [len(words), dim], worst miss): each word's own row set so that fastText's average of it and
    the word's n-gram rows (``grams``, unchanged) gives ``targets`` back within float32 rounding."""
    data, starts, ends = _layout(words)
    rows = np.empty((len(starts), targets.shape[1]), np.float32)
    if not len(starts):
        return rows, 0.0
    worst = _solve_rows(data, starts, ends, grams, minn, maxn, grams.shape[0],
                        np.ascontiguousarray(targets, np.float32), rows)
    return rows, float(worst)


@njit(cache=True, nogil=True)
def scan_entries(data, pos, starts, ends, counts, types):
    """fastText's dictionary entries from ``pos``: each a word's bytes, NUL, count (int64), type (int8).
    Fills the arrays; returns (entries found, position after the last); fewer than asked: the data ended."""
    size = len(data)
    for e in range(len(starts)):
        start = pos
        while pos < size and data[pos] != 0:
            pos += 1
        if pos + 10 > size:
            return e, pos
        starts[e] = start
        ends[e] = pos
        count = np.int64(0)
        for k in range(8):
            count |= np.int64(data[pos + 1 + k]) << (8 * k)
        counts[e] = count
        t = data[pos + 9]
        types[e] = t if t < 128 else t - 256
        pos += 10
    return len(starts), pos


@njit(cache=True, nogil=True)
def join_words(data, starts, ends, out):
    """The words data[starts[i]:ends[i]] joined by newlines into ``out``; returns each one's end in it."""
    new_ends = np.empty(len(starts), np.int64)
    at = 0
    for i in range(len(starts)):
        if i:
            out[at] = 10
            at += 1
        for p in range(starts[i], ends[i]):
            out[at] = data[p]
            at += 1
        new_ends[i] = at
    return new_ends
