"""Text vector files: word2vec / fastText text (header `COUNT DIM`) and GloVe (no header).

One line per word: the word, then DIM numbers, separated by single spaces. The last DIM fields are
the vector and the rest is the word, so a word may contain spaces (glove.840B has such lines).

Reading goes a block of lines at a time. The fast path finds the separators of a block with numpy and parses
its values as plain decimals on whole arrays (decimals.py: faster than `np.loadtxt` on GloVe, the same bits;
benchmarks/README.md, io), a big file's in one pass by a compiled kernel (lines.py). A block that is not one
word and dim values after single spaces on every line goes to numpy's C text reader (`np.loadtxt`, faster
than `np.fromstring`); a block neither can take (a word with spaces, doubled spaces, tabs, a bad value or bad
UTF-8) is split in halves until the odd lines are isolated, and those go through a per-line reader that
handles every case and names the exact line of any error.

A big plain file is read by several processes at once (`np.loadtxt` holds the GIL, so threads
cannot share the work): the file is cut into byte ranges at line boundaries, forked children parse
all ranges but the first and send their words and rows back through pipes, straight into the
matrix (each child counts the bytes it has read in memory shared with the reading process, which
reports them). Each range is parsed by the same code as a whole file, so the result is the same; any
doubt (an error anywhere, a dimension that differs between ranges, a blank line before a cut,
a row count that is not the header's) and the file is read again in one process, which gives
the exact error and line.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import stat

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.io import MAX_DIM, UTF8_BOM, check_header_fits, new_matrix, resize_matrix
from embedtune.formats.text.ranges import (_cuts, _end_children, _parts, _Range, _receive_rows, _replies, _send_raw,
                                           _shared_counts)
from embedtune.formats.text.parse import (NUMBER, NotFast, count_fields, load_parser, nth_newline, parse_fast,
                                          parse_header, takes_compiled)

BLOCK_BYTES = 8 << 20  # bytes read at a time; a few MB keeps numpy's per-call costs small
SLOW_LINES = 64  # below this many lines a failing block goes straight to the per-line reader
PARALLEL_MIN_BYTES = 16 << 20  # below this many bytes per process a fork and the transfer cost more than they save
MAX_PROCESSES = 8
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
def _shorten(data: bytes, limit: int = 40) -> str:
    """The start of a line for a message; bytes that are not UTF-8 and control bytes are escaped
    (\\x8b), so binary data (a compressed or damaged file) never puts raw bytes on a terminal."""
    text = data[:limit * 4].decode("utf-8", errors="backslashreplace")
    text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return text if len(text) <= limit else text[:limit] + "..."


class TextReader:
    """Reads one text vectors file; `header` says whether the first line is `COUNT DIM`.

    room : a parallel read's first range (header=False): the matrix is made with this many rows before its
    first row and keeps them (read() returns it with rows to spare), for the other ranges' rows.
    compiled : blocks parsed by lines.py's kernel; by default as takes_compiled says for the file's size."""

    def __init__(self, source, *, header: bool, limit=None, replace_bad_utf8=False, progress=None,
                 parallel=True, room=None, compiled=None):
        self.source = source
        self.name = source.name
        self.header = header
        self.limit = limit
        self.replace_bad_utf8 = replace_bad_utf8
        self.progress = progress
        self.parallel = parallel
        self.room = room
        self.compiled = compiled if compiled is not None else takes_compiled(source.size)

    # -- the file ------------------------------------------------------------------------------

    def read(self):
        """-> (words [n], float32 matrix [n, dim], line number of the first row)."""
        processes = self._processes()
        if processes > 1:
            result = self._read_parallel(processes)
            if result is not None:
                return result
        data, line, count, wanted = self._start()
        words, matrix = self._read_rows(data, line, count, wanted)
        return words, matrix, line

    def blocks(self):
        """(words, float32 [rows, dim]) a block of lines at a time, in file order, in one process: what
        a caller needs that looks at each row once (inspect, diff) and need not hold them all.
        ``self.dim`` and ``self.first_line`` are set before the first block comes."""
        data, line, count, wanted = self._start()
        if count is not None:
            check_header_fits(self.source, wanted, self.dim, 2 * self.dim + 2)
        yield from self._row_blocks(data, line, count, wanted)

    def _start(self):
        """-> (what was read after the header, the first row's line, the header's count or None, the rows
        wanted or None): the header (or the first row's dimension) read."""
        data = self._first_line_and_more()
        newline = data.find(b"\n")
        first = data if newline < 0 else data[:newline]
        if self.header:
            count = self._read_header(first)
            data = data[newline + 1:] if newline >= 0 else b""
            line, wanted = 2, count if self.limit is None else min(count, self.limit)
        else:
            self._dim_from_first_row(first)
            count, line, wanted = None, 1, self.limit
        self.first_line = line
        return data, line, count, wanted

    def _read_header(self, first: bytes) -> int:
        """The row count of a 'COUNT DIM' header line; sets the dimension."""
        sizes = parse_header(first, self.name)
        if sizes is None:
            raise EmbedtuneError(
                f"expected a header 'COUNT DIM' (two whole numbers), got '{_shorten(first)}'", self.name, 1)
        count, self.dim = sizes
        if self.dim < 1:
            raise EmbedtuneError(f"header says dimension {self.dim} (expected at least 1)", self.name, 1)
        self.dim_note = "as in the header"
        return count

    def _dim_from_first_row(self, first: bytes) -> None:
        """Without a header, the dimension is the count of trailing numbers of line 1 (its vector: its
        word may contain spaces)."""
        if count_fields(first) > MAX_DIM + 1:   # before the fields are made
            self._too_many_values(1, MAX_DIM)
        fields = first.split()
        numbers = 0
        for field in reversed(fields):
            if not NUMBER.fullmatch(field):
                break
            numbers += 1
        self.dim = min(numbers, len(fields) - 1)
        if self.dim < 1:
            raise EmbedtuneError(f"expected a word followed by numbers, got '{_shorten(first)}'", self.name, 1)
        self.dim_note = "as on line 1"

    def _read_rows(self, data: bytes, line: int, count, wanted):
        """-> (words, matrix): the rows from ``line`` on (``data`` holds their start), at most ``wanted``;
        with a header's ``count`` (and no smaller limit) exactly that many, into a matrix made once.
        Without a header the matrix grows where it lies as rows come, sized from the bytes left
        (resize_matrix): no block is held past its copy."""
        if count is not None:
            check_header_fits(self.source, wanted, self.dim, 2 * self.dim + 2)  # 'w 0 0 ... 0\n'
            matrix = new_matrix(wanted, self.dim, self.name, 1)
        else:
            matrix = new_matrix(self.room, self.dim, self.name) if self.room else None
        words, rows = [], 0
        for block_words, block_matrix in self._row_blocks(data, line, count, wanted):
            n = len(block_words)
            words.extend(block_words)
            if matrix is None or rows + n > len(matrix):   # only without a header
                matrix = self._grown(matrix, rows + n)
            matrix[rows:rows + n] = block_matrix
            rows += n
        if matrix is None:
            matrix = new_matrix(0, self.dim, self.name)
        elif len(matrix) != rows and not self.room:
            matrix = resize_matrix(matrix, rows, self.name)
        return words, matrix

    def _grown(self, matrix, need: int) -> np.ndarray:
        """``matrix`` (None: none yet) with room for at least ``need`` rows: as many as the bytes read so
        far say the whole input holds, a little over (new rows are zeroed, so each is paid for)."""
        source = self.source
        start, stop = getattr(source, "span", (0, source.size))
        done = source.consumed() - start
        expected = int(need * (stop - start) / done * 1.02) + 64 if stop is not None and done > 0 else need
        rows = max(need, expected, int(1.25 * len(matrix)) if matrix is not None else 0)
        if matrix is None:
            return new_matrix(rows, self.dim, self.name)
        return resize_matrix(matrix, rows, self.name)

    def _row_blocks(self, data: bytes, line: int, count, wanted):
        """(words, float32 [rows, dim]) per block of the rows from ``line`` on (``data`` holds their start),
        at most ``wanted``; with a header's ``count`` (and no smaller limit) exactly that many."""
        exact_count = count is not None and (self.limit is None or self.limit >= count)
        rows = 0
        blank_line = None  # a blank line is fine only if nothing but blank lines follows it
        for block, n_block in self._blocks(data, line):
            body, n_body, blank_line = self._without_blank_end(block, n_block, line, blank_line)
            if wanted is not None and rows + n_body > wanted:
                body, n_body = self._cut_at(body, wanted - rows, line, count, exact_count)
            if n_body:
                parsed = self._parse_lines(body, line, n_body)
                del block, body   # not held beside the rows the caller has or the next block's bytes
                yield parsed
                rows += n_body
            line += n_block
            if wanted is not None and rows >= wanted and not exact_count:
                return  # stopped by the limit: the rest of the file is not read
        if count is not None and rows < wanted:
            raise EmbedtuneError(
                f"file ends early (expected {count} rows as the header says, got {rows})", self.name, line)

    def _without_blank_end(self, block: bytes, n_block: int, line: int, blank_line):
        """-> (the block's rows, their count, the first blank line of the file's end so far): blank lines
        at the end of a block (rare) are dropped; a row after one is an error."""
        last = block[block.rfind(b"\n", 0, len(block) - 1) + 1:]
        if blank_line is None and last.strip():
            return block, n_block, None
        body = block.rstrip(b" \t\r\n")
        if body and blank_line is not None:
            raise EmbedtuneError(f"empty line (expected a word and {self.dim} values)", self.name, blank_line)
        n_body = body.count(b"\n") + 1 if body else 0
        if blank_line is None and n_block > n_body:
            blank_line = line + n_body
        return (body + b"\n" if body else b""), n_body, blank_line

    def _cut_at(self, body: bytes, take: int, line: int, count, exact_count: bool):
        """The first ``take`` rows of ``body``; a row after them is an error when the header's count is exact."""
        cut = nth_newline(body, take)
        if exact_count and body[cut + 1:].strip():
            # a bad line among those taken is the first fault, as the per-line reader says (an empty row
            # there makes the count overflow)
            self._parse_lines(body[:cut + 1], line, take)
            raise EmbedtuneError(
                f"more rows than the header says (expected {count}, got at least {count + 1})", self.name, line + take)
        return body[:cut + 1], take

    def _processes(self) -> int:
        """How many processes to read with: 1 unless this is a big plain file and cores are free."""
        source = self.source
        if (not self.parallel or self.limit is not None or source.compression is not None
                or source.size is None or source.size < 2 * PARALLEL_MIN_BYTES
                or "fork" not in multiprocessing.get_all_start_methods()
                or multiprocessing.current_process().daemon):   # a daemon may not have children
            return 1
        try:
            if not stat.S_ISREG(os.stat(source.path).st_mode):
                return 1
            cores = len(os.sched_getaffinity(0))
        except (OSError, AttributeError):
            return 1
        return max(1, min(cores, MAX_PROCESSES, source.size // PARALLEL_MIN_BYTES))

    def _read_parallel(self, processes: int):
        """The file read in `processes` ranges at once; None when it must be read in one process.

        The first range is read here into a matrix made with room for the whole file's rows (the header's
        count, or as many as its first lines' length says), so the other ranges' rows are received into rows
        that were never touched: no copy of the first range, and no zeroing of the rest (a resize, with the
        GIL held, was most of a 2.2M-row file's stall at 50%). The progress said is the bytes every process
        has read: each child writes its own into a shared counter, reported with this process's blocks and,
        once its range is done, while it waits for the children."""
        source = self.source
        start = self._parallel_start()
        if start is None:
            return None
        start, count, dim = start
        cuts = _cuts(source.path, start, source.size, processes)
        if cuts is None:
            return None
        done = _shared_counts(len(cuts) - 2)   # bytes read by each child
        progress = None if self.progress is None else (
            lambda consumed, size: self.progress(consumed + int(done.sum()), size))
        children = []
        if self.compiled:   # loaded before the fork: the children inherit it
            load_parser()
        try:
            self._start_children(cuts, children, done)
            room = count if count is not None else self._rows_guess(start)
            try:
                words, matrix, first_dim = _read_range(source.path, cuts[0], cuts[1], self.replace_bad_utf8,
                                                       self.compiled, progress, source.size, room)
            except EmbedtuneError:
                return None
            replies = _replies(children, first_dim, None if progress is None else (
                lambda: progress(cuts[1], source.size)))
            if replies is None:
                return None
            rows = len(words) + sum(reply[1] for reply in replies)
            if (dim is not None and first_dim != dim) or (count is not None and rows != count):
                return None
            if rows > len(matrix):   # more rows than the first lines' length said
                matrix = resize_matrix(matrix, rows, self.name)
            _receive_rows(matrix, words, children, replies)
        finally:
            _end_children(children)
        if len(matrix) != rows:
            matrix = resize_matrix(matrix, rows, self.name)   # let go of the room not needed
        if self.progress is not None:
            self.progress(source.size, source.size)
        self.dim = first_dim
        return words, matrix, 2 if self.header else 1

    def _rows_guess(self, start: int):
        """The rows of a file without a header, as its first lines' length says (a little over: rows made
        and never written are never touched, and are let go at the end); None when no line ends in its
        first MiB."""
        head = self.source.peek(start + (1 << 20))[start:]
        end = head.rfind(b"\n") + 1
        if not end:
            return None
        return int((self.source.size - start) * head.count(b"\n", 0, end) / end * 1.02) + 64

    def _parallel_start(self):
        """-> (the offset of the first row, the header's count and dimension, or None without a header),
        or None when the header is not one the ranges can be read after."""
        source = self.source
        start = len(UTF8_BOM) if source.bom else 0
        if not self.header:
            return start, None, None
        head = source.peek(1 << 16)
        newline = head.find(b"\n")
        sizes = parse_header(head[:newline], self.name) if newline >= 0 else None
        if sizes is None or sizes[1] < 1:
            return None
        count, dim = sizes
        check_header_fits(source, count, dim, 2 * dim + 2)
        return start + newline + 1, count, dim

    def _start_children(self, cuts: list, children: list, done: np.ndarray) -> None:
        """A forked child for each range after the first, added to ``children`` (with its pipe) as it starts;
        child k writes the bytes it has read into ``done[k]``."""
        ctx = multiprocessing.get_context("fork")
        for k, (a, b) in enumerate(zip(cuts[1:-1], cuts[2:])):
            receive, send = ctx.Pipe(duplex=False)
            readers = [r for _, r in children] + [receive]
            args = (self.source.path, a, b, self.replace_bad_utf8, self.compiled, send, readers, done[k:k + 1])
            child = ctx.Process(target=_read_range_in_child, daemon=True, args=args)
            # Ctrl-C and SIGTERM wait until the child has set its own handlers: between the fork
            # and that, the parent's copied handlers would run in the child.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                child.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                send.close()
            children.append((child, receive))

    def _first_line_and_more(self) -> bytes:
        """The first line and what was read with it. Its fields are counted as it comes: a line past
        MAX_DIM values is an error before the rest of it is read."""
        pieces, fields, joined = [], 0, False
        while True:
            more = self.source.read(BLOCK_BYTES)
            if not more:
                break
            newline = more.find(b"\n")
            head = more if newline < 0 else more[:newline]
            fields += count_fields(head) - (joined and head[:1].strip() != b"")
            joined = bool(head) and head[-1:].strip() != b""   # a field goes on into the next read
            pieces.append(more)
            if newline >= 0:
                break
            if fields > MAX_DIM + 1:
                self._too_many_values(1, MAX_DIM)
        data = b"".join(pieces)
        if not data.strip():
            what = "a header 'COUNT DIM'" if self.header else "lines of a word and its values"
            raise EmbedtuneError(f"empty file (expected {what})", self.name, 1)
        return data

    def _too_many_values(self, line: int, most: int):
        what = f"expected {most:,} {self.dim_note}" if most < MAX_DIM else f"a row has at most {MAX_DIM:,}"
        raise EmbedtuneError(f"more than {most:,} values on one line ({what})", self.name, line)

    def _blocks(self, data: bytes, line: int):
        """(block, its newlines: counted once, a pass over the bytes) for blocks of whole lines, each ending in a
        newline (one is added at the end if missing). ``line``: the number of data's first line. A line that
        grows past dim values without its newline is an error then (it is held whole until its newline)."""
        rest = data
        while True:
            more = self.source.read(BLOCK_BYTES)
            if not more:
                if rest:
                    block = rest if rest.endswith(b"\n") else rest + b"\n"
                    yield block, block.count(b"\n")
                return
            cut = more.rfind(b"\n")
            if cut < 0:
                rest += more
                if len(rest) > 2 * BLOCK_BYTES:   # rare: a line longer than two reads
                    start = rest.rfind(b"\n") + 1
                    if count_fields(memoryview(rest)[start:]) > self.dim + 1:
                        self._too_many_values(line + rest.count(b"\n", 0, start), self.dim)
                continue
            block = b"".join((rest, memoryview(more)[:cut + 1])) if rest else more[:cut + 1]
            rest, more = more[cut + 1:], None   # not held beside its copy while the block is parsed
            if self.progress is not None:
                self.progress(self.source.consumed(), self.source.size)
            n_block = block.count(b"\n")
            line += n_block
            yield block, n_block

    # -- a block of lines ----------------------------------------------------------------------

    def _parse_lines(self, body: bytes, line: int, n: int):
        """body: n whole lines, each ending in a newline -> (words, float32 [n, dim])."""
        try:
            return parse_fast(body, self.dim, n, self.compiled)
        except (ValueError, NotFast):
            pass
        if n <= SLOW_LINES:
            return self._parse_slow(body, line)
        cut = body.find(b"\n", len(body) // 2)
        if cut == len(body) - 1:
            cut = body.rfind(b"\n", 0, len(body) // 2)
        left, right = body[:cut + 1], body[cut + 1:]
        n_left = left.count(b"\n")
        left_words, left_matrix = self._parse_lines(left, line, n_left)
        right_words, right_matrix = self._parse_lines(right, line + n_left, n - n_left)
        return left_words + right_words, np.concatenate([left_matrix, right_matrix])

    def _parse_slow(self, body: bytes, line: int):
        dim = self.dim
        lines = body.split(b"\n")
        lines.pop()  # after the final newline
        words = []
        rows = np.empty((len(lines), dim), np.float64)
        for i, text in enumerate(lines):
            number = line + i
            parts = text.rsplit(None, dim)
            if not parts:
                raise EmbedtuneError(f"empty line (expected a word and {dim} values)", self.name, number)
            if len(parts) <= dim:
                got = len(parts) - 1
                raise EmbedtuneError(
                    f"wrong number of values (expected {dim} {self.dim_note}, got {got})", self.name, number)
            word = parts[0]
            if b" " in word.strip():  # a word with spaces must not end in what looks like a value
                extra = 0
                for token in reversed(word.split(b" ")):
                    if not NUMBER.fullmatch(token):
                        break
                    extra += 1
                if extra:
                    raise EmbedtuneError(
                        f"wrong number of values (expected {dim} {self.dim_note}, got {dim + extra})",
                        self.name, number)
            for k, token in enumerate(parts[1:]):
                if not NUMBER.fullmatch(token):
                    raise EmbedtuneError(
                        f"value {k + 1} is not a number (expected a number, got '{_shorten(token)}')",
                        self.name, number)
                rows[i, k] = float(token)
            words.append(self._decode(word, number))
        # double first, then float32: the same rounding as numpy's reader and every other tool; a value
        # beyond float32 becomes inf without a RuntimeWarning, as in the fast parsers: load_vectors names it
        with np.errstate(over="ignore"):
            return words, rows.astype(np.float32)

    def _decode(self, word: bytes, number: int) -> str:
        try:
            return word.decode("utf-8")
        except UnicodeDecodeError as err:
            if self.replace_bad_utf8:
                return word.decode("utf-8", errors="replace")
            raise EmbedtuneError(
                f"word is not valid UTF-8 (byte 0x{word[err.start]:02x} at column {err.start + 1}; "
                f"--replace-bad-utf8 replaces such bytes)", self.name, number) from None


def _read_range(path, start, stop, replace_bad_utf8, compiled, progress=None, size=None, room=None):
    """-> (words, float32 matrix, dim) of the whole lines in bytes [start, stop) of a file; with ``room``, the
    matrix has at least that many rows, the words' first (TextReader's)."""
    source = _Range(path, start, stop, size)
    try:
        reader = TextReader(source, header=False, replace_bad_utf8=replace_bad_utf8, progress=progress,
                            parallel=False, room=room, compiled=compiled)
        words, matrix, _ = reader.read()
    finally:
        source.close()
    return words, matrix, reader.dim


def _read_range_in_child(path, start, stop, replace_bad_utf8, compiled, send, readers, done) -> None:
    """A forked child's work: ('ok', rows, dim, words) then the rows' bytes, or ('error',).

    readers : the read ends of every child's pipe, which the fork copied; closed here so that a
    send fails at once when the parent stops reading, instead of blocking on a full pipe forever.
    done : a one-slot shared counter (ranges._shared_counts) of the bytes of the range read so far."""
    # Interrupts are the parent's to handle and report: Ctrl-C reaches the whole process group, so
    # the child ignores it; the parent's terminate() must end the child at once, not unwind it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    for reader in readers:
        reader.close()
    try:
        def progress(consumed, size):
            done[0] = consumed - start

        words, matrix, dim = _read_range(path, start, stop, replace_bad_utf8, compiled, progress)
        send.send(("ok", len(words), dim, words))
        del words
        # From the last rows back, each part let go once sent: the range is not held twice over, here
        # and in the parent's matrix.
        for a, b in reversed(_parts(len(matrix), dim)):
            with memoryview(matrix[a:b].reshape(-1).view(np.uint8)) as part:
                _send_raw(send, part)
            matrix = resize_matrix(matrix, a)
    except BaseException:  # the parent reads the file again in one process, for the exact error
        try:
            send.send(("error",))
        except OSError:
            pass
    finally:
        send.close()
