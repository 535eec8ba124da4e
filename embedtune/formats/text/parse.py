"""Parsing text vectors: the ``COUNT DIM`` header line (read.py's and binary.py's), and a block of whole
lines (a word and DIM values each) into words and a float32 matrix: the fast paths (decimals.py's
compiled kernel, ``np.loadtxt``) that read.py's reader and write.py's read-back both use."""

from __future__ import annotations

import io
import re
import warnings

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.io import MAX_DIM

# what float() and numpy accept as a value (not: underscores, hex, surrounding spaces)
NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|nan|inf|infinity)",
                    re.IGNORECASE)
ASCII_SPACE = " \t\n\r\x0b\x0c"  # what the readers split on (bytes.split); other spaces belong to words

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


def parse_fast(body: bytes, dim: int, n: int):
    """n whole lines of a word and dim values each -> (words, float32 [n, dim]); ValueError or NotFast
    when the block needs the careful reader (the caller then splits it, down to single lines)."""
    first = body[:body.find(b"\n") + 1]
    if first.endswith((b" \n", b" \r\n")):  # the word2vec C tool ends every line with a space
        body = body.replace(b" \n", b"\n").replace(b" \r\n", b"\r\n")
    try:
        return parse_columns(body, dim, n)
    except NotFast:
        return parse_loadtxt(body, dim, n)


def parse_columns(body: bytes, dim: int, n: int):
    """The common case: every line is a word, then dim values, each after one space (decimals.py's
    compiled kernel). Faster than np.loadtxt on GloVe (benchmarks/README.md, io); NotFast for anything else."""
    from embedtune.formats.text import decimals   # numba: imported when text is parsed

    if b"\r" in body:
        body = body.replace(b"\r\n", b"\n")
        if b"\r" in body:
            raise NotFast
    # exponents, nan, inf: float() gives the same double as numpy's reader, but at Python's speed; past 1 in
    # 64 values the block goes to numpy's reader
    parsed = decimals.parse_lines(body, dim, n, max(64, (n * dim) >> 6))
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


def load_parser() -> None:
    """parse_columns' kernel loaded: numba's first call in a process costs about a second of CPU (its typing
    and target registries), so a reading that forks loads it first and its children inherit it."""
    parse_columns(b"w 0\n", 1, 1)   # the argument types of every call: one specialisation


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
