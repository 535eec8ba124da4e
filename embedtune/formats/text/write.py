"""Writing text vector files: blocks rendered as lines on threads, each block read back as written for
the caller's check (the frozen rows of ``embedtune train``)."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.text.parse import ASCII_SPACE, NUMBER, NotFast, parse_fast

if TYPE_CHECKING:   # verbatim.py imports numba: imported by a run that copies lines (formats.render_ahead)
    from embedtune.formats.text.verbatim import InputLines

# Writing renders blocks on threads (the compiled writer releases the GIL; the words' encoding and the
# shortest-form fallback hold it). The gain needs a free core
# (benchmarks/README.md, classify).
WRITE_THREADS = 4
WRITE_AHEAD = 2   # blocks a thread renders ahead of the writer: bounds the text held in memory
# A run renders its input's lines on a spare core while it trains (RenderedAhead), keeping them until the
# write; only when the text is at most this big (GloVe 6B 50d's is 171 MB), since it is held in memory.
AHEAD_MAX_BYTES = 1 << 28
AHEAD_BYTES_PER_VALUE = 12   # ' ' and a sign, point and 9 digits: a trained row's most
AHEAD_NICE = 10   # the rendering thread's niceness above the run's
# A table of fewer values is rendered in numpy (shortest.py), not by the compiled writer (render.py), and its
# input's lines are not copied (verbatim.py, compiled too): the same bytes, and no kernels to compile on a fresh
# install, whose compile the quickstart's table would not win back (numpy takes about twice the kernels' time on
# it: benchmarks/log/first_run.md). Above it the kernels win back their compile.
COMPILED_MIN_VALUES = 1 << 21


def renders_compiled(n: int, dim: int) -> bool:
    """Whether a table of n rows of dim values is rendered by the compiled writer (else by numpy's)."""
    return n * dim >= COMPILED_MIN_VALUES


def rows_per_block(dim: int) -> int:
    """The rows of a block the writer renders, reads back and writes at once (about 64k values)."""
    return max(1, (1 << 16) // max(dim, 1))


class RenderedAhead:
    """The text lines of a table's rows (``words``, float32 ``matrix`` [n, dim]) rendered a block at a time on
    a thread of their own, started now: a run starts it after the vectors load, and its write takes each
    block's lines from here, rendering again only the lines whose word or row bits changed (``write_text``).
    A line's text depends on its word and its row's bits alone, so the bytes are the same as rendered at the
    write; the work moves to a core the run's set-up leaves free. ``stop`` ends the thread (the blocks
    rendered so far are kept); a block it did not reach is rendered by the write as any other.

    source : the text file the rows were read from, as an InputLines (verbatim.py): its lines that are the
        rendering of their rows are copied, not rendered (GloVe's, but for a few); None, or a table rendered in
        numpy (``renders_compiled``): every line rendered.
    held : the thread waits for ``go`` before its first block (a cold run: its compiles would hold numba's
        compiler lock, from a niced thread, while the run's own thread waits to compile; kernels/ahead.py).
    """

    def __init__(self, words, matrix: np.ndarray, source: InputLines | None = None, held: bool = False):
        self.compiled = renders_compiled(*matrix.shape)
        self.words, self.matrix, self.source = words, matrix, source if self.compiled else None
        self.rows_per_block = rows_per_block(matrix.shape[1])
        self.blocks: dict[int, bytes] = {}   # a block's first row -> its lines
        self._stopping = threading.Event()
        self._going = threading.Event()
        if not held:
            self._going.set()
        self._thread = threading.Thread(target=self._render, name="embedtune-render-ahead", daemon=True)
        self._thread.start()

    @classmethod
    def fits(cls, n: int, dim: int) -> bool:
        return n * (dim * AHEAD_BYTES_PER_VALUE + 16) <= AHEAD_MAX_BYTES

    @classmethod
    def expected_bytes(cls, n: int, dim: int) -> int:
        """The text of n rows of dim values, about (9 bytes a value: GloVe's files 8.6 with the word)."""
        return n * (dim * 9 + 8)

    def _render(self) -> None:
        digits = 0
        n = len(self.words)
        try:
            # Behind the run's own threads: this work only moves to a core they leave free (Linux
            # nices a thread of its own; elsewhere, or refused, the thread runs as the others do).
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                           min(19, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) + AHEAD_NICE))
        except (AttributeError, OSError):
            pass
        self._going.wait()
        try:
            with self.source or contextlib.nullcontext():
                for start in range(0, n, self.rows_per_block):
                    if self._stopping.is_set():
                        return
                    stop = min(n, start + self.rows_per_block)
                    self.blocks[start], digits = self._block(self.words[start:stop], self.matrix[start:stop], digits)
        except Exception:   # (memory, an unwritable word) the write renders the rest, and says what is wrong
            return

    def _block(self, words, rows: np.ndarray, digits: int) -> tuple[bytes, int]:
        """A block's lines: the source's where they are the rendering of their rows, the others rendered."""
        copied = self.source.take(words, rows) if self.source is not None else None
        if copied is None:
            return _render_lines(words, rows, digits, self.compiled)
        lines, same = copied
        redo = np.flatnonzero(~same)
        if not len(redo):
            return lines, digits
        text, digits = _render_lines([words[i] for i in redo], rows[redo], digits, self.compiled)
        return _splice(lines, len(words), redo, text), digits

    def go(self) -> None:
        """Let a held rendering start."""
        self._going.set()

    def stop(self) -> None:
        """End the rendering (at the end of its current block) and wait for it."""
        self._stopping.set()
        self._going.set()
        self._thread.join()

    def lines(self, words, rows: np.ndarray, start: int, digits: int) -> tuple[bytes, int] | None:
        """The lines of ``words`` and ``rows`` (rows ``start``.. of the table written), from the block rendered
        here with the lines that differ rendered again; None when the block was not rendered here."""
        base = self.blocks.pop(start, None)   # each block is written once: its text is let go after
        if base is None:
            return None
        n_base = min(len(self.words), start + self.rows_per_block) - start
        if len(rows) < n_base or rows.shape[1] != self.matrix.shape[1]:
            return None
        old = self.matrix[start:start + n_base].view(np.uint32)
        changed = np.flatnonzero(np.any(np.ascontiguousarray(rows[:n_base]).view(np.uint32) != old, axis=1))
        mine = self.words[start:start + n_base]
        renamed = [] if list(words[:n_base]) == mine else [i for i in range(n_base) if words[i] != mine[i]]
        if renamed:
            changed = np.union1d(changed, renamed)
        if len(rows) == n_base and not len(changed):
            return base, digits
        # the changed lines, then the rows past the table's end (appended: new words)
        redo = np.concatenate([changed, np.arange(n_base, len(rows))]).astype(np.int64)
        text, digits = _render_lines([words[i] for i in redo], rows[redo], digits, self.compiled)
        return _splice(base, n_base, redo, text), digits


def _splice(base: bytes, n_base: int, redo: np.ndarray, text: bytes) -> bytes:
    """``base``'s n_base lines with lines ``redo`` (ascending) put in from ``text`` (a line each, in order):
    those below n_base in place of base's, the others after base's last."""
    base_ends = np.flatnonzero(np.frombuffer(base, np.uint8) == 10) + 1
    new_ends = np.flatnonzero(np.frombuffer(text, np.uint8) == 10) + 1
    base_view, text_view = memoryview(base), memoryview(text)
    pieces, at, was = [], 0, 0
    for line, end in zip(redo.tolist(), new_ends.tolist()):
        begin = len(base)
        if line < n_base:
            begin = int(base_ends[line - 1]) if line else 0
        pieces.append(base_view[at:begin])
        at = int(base_ends[line]) if line < n_base else len(base)
        pieces.append(text_view[was:end])
        was = end
    pieces.append(base_view[at:])
    return b"".join(pieces)


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


def write_text(vectors, out, *, header: bool, name: str, progress=None, on_written=None, check_rows=None,
               ahead: RenderedAhead | None = None) -> None:
    """Write `vectors` as text lines `word v1 ... vdim`, after a `COUNT DIM` header if asked.

    vectors : Vectors or anything with `words`, `dim` and `block(start, stop)` (read a block at a time).
    on_written : if given, called as on_written(start, stop, rows) with each block's rows as they read
        back from the very text written (float32 [stop - start, dim]); this parses the output once more.
    check_rows : bool [<= n], the rows on_written needs read back (None: every row); a block with none
        of them is not parsed again and on_written is not called for it.
    ahead : the lines of a table rendered ahead (RenderedAhead, stopped here): a block's lines are taken from
        there where its words and rows are the same bits, the same text as rendered here.

    Blocks are rendered (and read back) on up to WRITE_THREADS threads, a few blocks ahead of the
    writer, and written in order: the text is the same as from one thread.
    """
    words = vectors.words
    n, dim = len(words), vectors.dim
    check_text_words(words, name)
    if header:
        out.write(b"%d %d\n" % (n, dim))
    per_block = rows_per_block(dim)
    blocks = [(start, min(n, start + per_block)) for start in range(0, n, per_block)]
    compiled = renders_compiled(n, dim)
    if ahead is not None:
        ahead.stop()
        if ahead.rows_per_block != per_block:
            ahead = None

    def render(block, digits):
        start, stop = block
        block_words, rows = words[start:stop], vectors.block(start, stop)
        made = ahead.lines(block_words, rows, start, digits) if ahead is not None else None
        text, digits = made if made is not None else _render_lines(block_words, rows, digits, compiled)
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
    block = rows_per_block(rows.shape[1])
    compiled = renders_compiled(*rows.shape)
    parts, digits = [], 0   # most values need the same number of digits: each block tells the next
    for start in range(0, len(words), block):
        text, digits = _render_lines(words[start:start + block], rows[start:start + block], digits, compiled)
        parts.append(text)
    return b"".join(parts)


def _render_lines(words, rows, digits_hint=0, compiled=True):
    """Lines for words [k] and float32 rows [k, dim] -> (bytes, most common digit count): the compiled
    writer (render.py), the bytes of shortest.py's shortest %g a value; ``compiled`` False: shortest.py's numpy
    writer, the same bytes (a small table's: ``renders_compiled``)."""
    if not compiled:
        from embedtune.formats.text.shortest import render_lines as numpy_lines

        return numpy_lines([w.encode("utf-8") for w in words], rows, digits_hint)
    from embedtune.formats.text.render import render_lines as compiled_lines   # numba: imported when writing

    return compiled_lines([w.encode("utf-8") for w in words], rows, digits_hint)
