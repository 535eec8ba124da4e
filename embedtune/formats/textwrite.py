"""Writing text vector files: blocks rendered as lines on threads, each block read back as written for
the caller's check (the frozen rows of ``embedtune train``)."""

from __future__ import annotations

import collections
import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.textparse import ASCII_SPACE, NUMBER, NotFast, parse_fast

# Writing renders blocks on threads (the compiled writer releases the GIL; the words' encoding and the
# shortest-form fallback hold it). The gain needs a free core
# (benchmarks/README.md, classify).
WRITE_THREADS = 4
WRITE_AHEAD = 2   # blocks a thread renders ahead of the writer: bounds the text held in memory


def check_text_words(words, name):
    """Words that would not read back as themselves are refused before anything is written."""
    for row, word in enumerate(words):
        if not word or word != word.strip(ASCII_SPACE) or "\n" in word or "\r" in word:
            raise EmbedtuneError(
                f"cannot write word {word!r} (row {row + 1}): a word cannot be empty, start or end "
                f"with whitespace, or contain a line break", name)
        parts = word.split(" ")
        if len(parts) > 1 and NUMBER.fullmatch(parts[-1].encode("utf-8", "replace")):
            raise EmbedtuneError(
                f"cannot write word {word!r} (row {row + 1}): a word with spaces cannot end in a number, "
                f"it would read back as an extra value", name)


def write_text(vectors, out, *, header: bool, name: str, progress=None, on_written=None, check_rows=None) -> None:
    """Write `vectors` as text lines `word v1 ... vdim`, after a `COUNT DIM` header if asked.

    vectors : Vectors or anything with `words`, `dim` and `block(start, stop)` (read a block at a time).
    on_written : if given, called as on_written(start, stop, rows) with each block's rows as they read
        back from the very text written (float32 [stop - start, dim]); this parses the output once more.
    check_rows : bool [<= n], the rows on_written needs read back (None: every row); a block with none
        of them is not parsed again and on_written is not called for it.

    Blocks are rendered (and read back) on up to WRITE_THREADS threads, a few blocks ahead of the
    writer, and written in order: the text is the same as from one thread.
    """
    words = vectors.words
    n, dim = len(words), vectors.dim
    check_text_words(words, name)
    if header:
        out.write(b"%d %d\n" % (n, dim))
    rows_per_block = max(1, (1 << 16) // max(dim, 1))
    blocks = [(start, min(n, start + rows_per_block)) for start in range(0, n, rows_per_block)]

    def render(block, digits):
        start, stop = block
        text, digits = _render_lines(words[start:stop], vectors.block(start, stop), digits)
        wanted = on_written is not None and (check_rows is None or bool(np.any(check_rows[start:stop])))
        return text, _read_back(text, dim, stop - start) if wanted else None, digits

    def emit(block, text, rows):
        out.write(text)
        if rows is not None:
            on_written(block[0], block[1], rows)
        if progress is not None:
            progress(block[1], n)

    threads = min(_write_threads(), len(blocks) - 1)
    digits = 0  # most values of a file need the same number of digits: tell the next block
    if threads <= 1:
        for block in blocks:
            text, rows, digits = render(block, digits)
            emit(block, text, rows)
        return
    # A block's hint is the digit count of the last block written when it is handed out: the hint only
    # saves work (the text is the same), but a stale one costs it (the first rows of a table are the
    # most frequent words, trained to 9 digits in most runs: held as every block's hint, it slowed the
    # rendering of GloVe's 5-digit rest; benchmarks/README.md, io).
    text, rows, digits = render(blocks[0], digits)
    emit(blocks[0], text, rows)
    rest = iter(blocks[1:])
    with ThreadPoolExecutor(threads) as pool:
        try:
            pending = collections.deque((block, pool.submit(render, block, digits))
                                        for block in itertools.islice(rest, threads * WRITE_AHEAD))
            while pending:
                block, future = pending.popleft()
                text, rows, digits = future.result()
                emit(block, text, rows)
                following = next(rest, None)
                if following is not None:
                    pending.append((following, pool.submit(render, following, digits)))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _write_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, WRITE_THREADS))


def _read_back(text: bytes, dim: int, n: int) -> np.ndarray:
    """float32 [n, dim]: the values of n lines as written, parsed as the reader parses them."""
    try:
        return parse_fast(text, dim, n)[1]
    except (ValueError, NotFast):  # words with spaces: the last dim fields are the values
        lines = text.split(b"\n")[:n]
        return np.array([line.rsplit(b" ", dim)[1:] for line in lines], np.float64).astype(np.float32)


def render_lines(words, rows) -> bytes:
    """Text lines ``word v1 ... vdim`` for words [k] and rows [k, dim], as the vectors are written
    (float32, the shortest %g text that reads back to the same bits), a block at a time."""
    block = max(1, (1 << 16) // max(rows.shape[1], 1))
    parts, digits = [], 0   # most values need the same number of digits: each block tells the next
    for start in range(0, len(words), block):
        text, digits = _render_lines(words[start:start + block], rows[start:start + block], digits)
        parts.append(text)
    return b"".join(parts)


def _render_lines(words, rows, digits_hint=0):
    """Lines for words [k] and float32 rows [k, dim] -> (bytes, most common digit count): the compiled
    writer (floatwrite.py), the bytes of floattext.py's shortest %g a value."""
    from embedtune.formats.floatwrite import render_lines as compiled_lines   # numba: imported when writing

    return compiled_lines([w.encode("utf-8") for w in words], rows, digits_hint)
