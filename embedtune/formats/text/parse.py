"""Parsing text vectors: the ``COUNT DIM`` header line (read.py's and binary.py's), and a block of whole
lines (a word and DIM values each) into words and a float32 matrix: the fast paths (lines.py's compiled
kernel for a big file, decimals.py on whole arrays, ``np.loadtxt``) that read.py's reader and write.py's
read-back both use."""

from __future__ import annotations

import io
import os
import re
import sys
import warnings

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.text import decimals
from embedtune.formats.io import MAX_DIM

# what float() and numpy accept as a value (not: underscores, hex, surrounding spaces)
NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|nan|inf|infinity)",
                    re.IGNORECASE)
ASCII_SPACE = " \t\n\r\x0b\x0c"  # what the readers split on (bytes.split); other spaces belong to words
PIECE_BYTES = 1 << 20  # the columns parser's arrays stay in cache (benchmarks/README.md, io)
# Which parse a file takes (takes_compiled) weighs what the process pays for lines.py's kernel: numba's
# import and first call, a fixed cost in CPU and resident memory whatever the file's size
# (benchmarks/log/text_read.md). The same words and bits either way.
# - numba loaded already, or said to be coming (load_vectors's ``kernels``: train, eval's analogies, a convert
#   to text, whose writer's kernel loads it): the kernel from COMPILED_MIN_BYTES on, where it saves more than
#   its first call costs (benchmarks/log/eval_speed.md);
# - otherwise (a convert to binary, neighbors, a Python caller's load_vectors): numpy's parse (decimals.py)
#   below COMPILED_ALONE_MIN_BYTES, which keeps a GloVe text read within issue 48's 1.3x its matrix; from
#   there the matrix (about 0.47 bytes a byte of text) is big enough that numba's fixed memory keeps it so.
COMPILED_MIN_BYTES = 128 << 20
COMPILED_ALONE_MIN_BYTES = 2 << 30

_HEADER = re.compile(rb"\s*(\d+)\s+(\d+)\s*")
_SIGNED_HEADER = re.compile(rb"\s*([+-]?\d+)\s+([+-]?\d+)\s*")


def parse_header(line: bytes, name: str):
    """b'400000 50' -> (400000, 50); anything else -> None, but two whole numbers with a minus sign
    are an error: a first line of two whole numbers is a header (the readers take ``5 50`` as one),
    and a count or dimension cannot be negative, so ``-5 50`` is a damaged header, not a GloVe row."""
    match = _HEADER.fullmatch(line)
    if match:
        count, dim = int(match.group(1)), int(match.group(2))
        if dim > MAX_DIM:
            raise EmbedtuneError(f"header says dimension {dim:,} (at most {MAX_DIM:,})", name, 1)
        return count, dim
    signed = _SIGNED_HEADER.fullmatch(line)
    if signed:
        count, dim = int(signed.group(1)), int(signed.group(2))
        if count < 0:
            raise EmbedtuneError(f"header says {count} rows (a count cannot be negative)", name, 1)
        if dim < 0:
            raise EmbedtuneError(f"header says dimension {dim} (expected at least 1)", name, 1)
    return None


_SPACE_BYTES = np.zeros(256, bool)
_SPACE_BYTES[list(b" \t\n\r\x0b\x0c")] = True   # bytes.split()'s


def count_fields(data) -> int:
    """len(data.split()), without making the fields (a line of millions of values)."""
    space = _SPACE_BYTES[np.frombuffer(data, np.uint8)]
    if not len(space):
        return 0
    return int(np.count_nonzero(~space[1:] & space[:-1])) + (not space[0])


class NotFast(Exception):
    """The block needs the per-line reader."""


def parse_fast(body: bytes, dim: int, n: int, compiled: bool = False):
    """n whole lines of a word and dim values each -> (words, float32 [n, dim]); ValueError or NotFast
    when the block needs the careful reader (the caller then splits it, down to single lines).
    compiled : the common case by lines.py's kernel (numba; see load_parser) rather than by numpy."""
    first = body[:body.find(b"\n") + 1]
    if first.endswith((b" \n", b" \r\n")):  # the word2vec C tool ends every line with a space
        body = body.replace(b" \n", b"\n").replace(b" \r\n", b"\r\n")
    try:
        return parse_columns(body, dim, n, compiled)
    except NotFast:
        return parse_loadtxt(body, dim, n)


def parse_columns(body: bytes, dim: int, n: int, compiled: bool = False):
    """The common case: every line is a word, then dim values, each after one space (decimals.py, or
    with ``compiled`` lines.py). Faster than np.loadtxt on GloVe (benchmarks/README.md, io); NotFast for
    anything else."""
    if b"\r" in body:
        body = body.replace(b"\r\n", b"\n")
        if b"\r" in body:
            raise NotFast
    if compiled:
        return _parse_compiled(body, dim, n)
    # 16 bytes of padding: decimals.py looks at the 16 bytes that end where a value ends
    text = np.empty(len(body) + decimals.WIDTH, np.uint8)
    text[:decimals.WIDTH] = ord("0")
    text[decimals.WIDTH:] = np.frombuffer(body, np.uint8)
    matrix = np.empty((n, dim), np.float32)
    words = []
    row = 0
    start = decimals.WIDTH
    while start < text.size:
        stop = body.find(b"\n", min(start + PIECE_BYTES, text.size) - 1 - decimals.WIDTH) + 1 + decimals.WIDTH
        k = parse_piece(body, text, start, stop, dim, matrix[row:], words)
        row += k
        start = stop
    if row != n:
        raise NotFast
    return words, matrix


def parse_piece(body: bytes, text, start: int, stop: int, dim: int, out, words) -> int:
    """The lines in text[start:stop] (body after 16 bytes of padding) into out[:k] and words; -> k, the
    number of lines."""
    piece = text[start:stop]
    seps = np.flatnonzero((piece == 32) | (piece == 10))
    k = seps.size // (dim + 1)
    if seps.size != k * (dim + 1) or k == 0:
        raise NotFast
    rows = seps.reshape(k, dim + 1)
    # each line's last separator a newline: then every line has exactly dim spaces
    if not (piece[rows[:, dim]] == 10).all() or rows[-1, dim] != piece.size - 1:
        raise NotFast
    line_starts = np.empty(k, np.intp)
    line_starts[0] = 0
    line_starts[1:] = rows[:-1, dim] + 1
    if (rows[:, 0] <= line_starts).any():  # an empty word (the line starts with a space)
        raise NotFast
    lengths = np.empty(seps.size, np.intp)
    np.subtract(seps[1:], seps[:-1], out=lengths[:-1])
    lengths = lengths.reshape(k, dim + 1)[:, :dim].ravel() - 1
    ends = rows[:, 1:].ravel() + start
    values = np.empty(k * dim, np.float64)
    odd = decimals.parse_decimals(text, ends, lengths, values)
    if odd.size:
        # exponents, nan, inf: float() gives the same double as numpy's reader, but at Python's speed
        if odd.size > max(64, values.size >> 6):
            raise NotFast
        for i in odd.tolist():
            token = text[ends[i] - lengths[i]:ends[i]].tobytes()
            if not NUMBER.fullmatch(token):
                raise NotFast
            values[i] = float(token)
    with np.errstate(over="ignore"):   # beyond float32: inf here, reported with its line by the caller
        out[:k] = values.reshape(k, dim)
    # the words: a slice per line (cheaper than a mask and cumsum over the bytes; benchmarks/README.md, io)
    base = start - decimals.WIDTH
    joined = b" ".join([body[a:b] for a, b in zip((line_starts + base).tolist(), (rows[:, 0] + base).tolist())])
    try:
        piece_words = joined.decode("utf-8").split(" ")
    except UnicodeDecodeError:
        raise NotFast from None
    words.extend(piece_words)
    return k


def load_parser() -> None:
    """lines.py's kernel loaded: numba's import and its first call in a process are a second or two of CPU
    (its typing and target registries) and its resident memory, so the text reader takes that kernel only
    where the process pays for numba anyway or the file is big enough to (takes_compiled), and a
    reading that forks loads it first so that its children inherit it rather than each load it."""
    _parse_compiled(b"w 0\n", 1, 1)   # the argument types of every call: one specialisation


def takes_compiled(size) -> bool:
    """Whether a file of ``size`` bytes on disk (None: unknown) is parsed by lines.py's kernel in this process:
    the rule above COMPILED_MIN_BYTES, numba's load weighed against what the process pays for it anyway."""
    size = size or 0
    return size >= COMPILED_MIN_BYTES and ("numba" in sys.modules or size >= COMPILED_ALONE_MIN_BYTES)


def load_parser_ahead(path) -> None:
    """lines.py's kernel loaded before ``path`` is read, by a process that loads numba anyway (train's corpus
    reader and compiled steps, eval's analogy search), where the file is big enough for the kernel once numba
    is loaded: the read then takes it (takes_compiled) rather than numpy's slower parse. Nothing for a
    smaller file, standard input or a name that is not a file (the read says what is wrong)."""
    try:
        size = os.stat(path).st_size if path != "-" else 0
    except (OSError, TypeError, ValueError):
        return
    if size >= COMPILED_MIN_BYTES:
        load_parser()


def _parse_compiled(body: bytes, dim: int, n: int):
    """parse_columns by lines.py's kernel: the same words and bits."""
    from embedtune.formats.text import lines   # numba: imported when a big file is read

    # exponents, nan, inf: float() gives the same double as numpy's reader, but at Python's speed; past 1 in
    # 64 values the block goes to numpy's reader
    parsed = lines.parse_lines(body, dim, n, max(64, (n * dim) >> 6))
    if parsed is None:
        raise NotFast
    joined, matrix, (odd_at, odd_start, odd_end) = parsed
    if odd_at.size:
        values = matrix.reshape(-1)
        for i, a, b in zip(odd_at.tolist(), odd_start.tolist(), odd_end.tolist()):
            token = body[a:b]
            if not NUMBER.fullmatch(token):
                raise NotFast
            with np.errstate(over="ignore"):   # beyond float32: inf here, reported with its line by the caller
                values[i] = float(token)
    try:
        words = str(joined, "utf-8").split(" ") if n else []
    except UnicodeDecodeError:
        raise NotFast from None
    return words, matrix


def parse_loadtxt(body: bytes, dim: int, n: int):
    words = []
    add = words.append

    def word_column(text):
        add(text)
        return 0.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = np.loadtxt(io.BytesIO(body), dtype=np.float32, delimiter=" ", comments=None, quotechar=None,
                           encoding="utf-8", converters={0: word_column}, ndmin=2)
    # loadtxt skips blank lines and splits at a lone '\r': the row count catches both
    if table.shape != (n, dim + 1) or len(words) != n:
        raise NotFast
    return words, table[:, 1:]


def nth_newline(body: bytes, k: int) -> int:
    """Index of the k-th newline (k >= 1), or -1 for k == 0."""
    if k == 0:
        return -1
    return int(np.flatnonzero(np.frombuffer(body, np.uint8) == 10)[k - 1])
