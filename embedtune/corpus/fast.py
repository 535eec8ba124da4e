"""A corpus file counted and turned into ids in one compiled pass (embedtune/kernels/tokens.py).

The pass splits each line at whitespace into byte tokens and gives each distinct one a corpus-local
id; each new raw token is then decoded, lower-cased and split (``Tokenizer``) once, in Python, into
the tokens the reference reader (``Corpus._numbered_lines``) makes of it. A raw token's pieces are
ids of the corpus's words, in the order the reference first sees them, so the counts, their order,
the lines and every chunk of row ids are the reference's. The raw ids of the whole corpus are kept
(int32, 4 bytes a token, up to KEEP_TOKENS tokens) so an epoch reads no text; past that, each pass
scans the file again (still compiled). Lines of MAX_PIECE_BYTES or more, and blocks with bytes the
reference rejects, go through the reference's own code (``pieces``, ``Corpus.line_text``)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from itertools import accumulate, repeat

import numpy as np

from embedtune.corpus.files import MAX_PIECE_BYTES, UTF8_BOM, open_binary, pieces
from embedtune.errors import EmbedtuneError

BLOCK_BYTES = 1 << 20   # read at a time; a block ends at its last line feed (its arrays are made for the worst case)
# Raw ids kept from the count for the later passes (512 MB of int32): a larger corpus is scanned again
# by each pass instead, so memory stays bounded whatever the corpus.
KEEP_TOKENS = 1 << 27
# EMBEDTUNE_COMPILED_READER=0: the reference reader for every pass (the A/B benchmark, the tests); =1: this
# reader for every file, a small one too (the tests of a command's process that count with it).
_CHOICE = os.environ.get("EMBEDTUNE_COMPILED_READER", "")
ENABLED = _CHOICE != "0"
# A corpus file smaller than this, plain or labelled (classify's), is read by the reference reader (corpus/text.py,
# corpus/labelled.py): the same tokens, and none of this reader's kernels to compile on a fresh install (~3 CPU-s,
# the largest part of a cold quickstart's), where the reference's passes over a sample-sized corpus cost ~0.1-0.2 s
# a run more (benchmarks/log/first_run.md).
SMALL_FILE = 0 if _CHOICE == "1" else 1 << 20


def small_file(path) -> bool:
    """Whether ``path`` names a file of fewer than SMALL_FILE bytes (None, a pipe, one that cannot be asked: no)."""
    if not isinstance(path, str) or path == "-":
        return False
    try:
        return os.path.isfile(path) and os.path.getsize(path) < SMALL_FILE
    except OSError:
        return False


class _ReadFailed(Exception):
    """The file's own read failed (args[0]: its error); an error of this module's code is not one."""


class _Reads:
    """``raw``'s reads, their errors (OSError, EOFError, ValueError, as the reference catches) raised
    as _ReadFailed."""

    def __init__(self, raw):
        self.raw = raw

    def read(self, size: int) -> bytes:
        try:
            return self.raw.read(size)
        except (OSError, EOFError, ValueError) as err:
            raise _ReadFailed(err) from None

    def readline(self, size: int) -> bytes:
        try:
            return self.raw.readline(size)
        except (OSError, EOFError, ValueError) as err:
            raise _ReadFailed(err) from None


class _Prefixed:
    """``readline`` over ``buf[pos:]`` followed by ``raw``: the reference's ``pieces`` reads a long line
    from where the block reader stands."""

    def __init__(self, buf: bytes, pos: int, raw):
        self.buf, self.pos, self.raw = buf, pos, raw

    def readline(self, size: int) -> bytes:
        if self.pos >= len(self.buf):
            return self.raw.readline(size)
        nl = self.buf.find(b"\n", self.pos, self.pos + size)
        stop = nl + 1 if nl >= 0 else min(self.pos + size, len(self.buf))
        out = self.buf[self.pos:stop]
        self.pos = stop
        if nl >= 0 or len(out) == size:
            return out
        return out + self.raw.readline(size - len(out))

    def rest(self) -> bytes:
        return self.buf[self.pos:]


class Table:
    """The distinct raw tokens (a hash table over their bytes), their counts, and what each becomes:
    ``piece_start[t]:piece_start[t + 1]`` of ``piece_ids``, ids into ``words`` (first seen first)."""

    def __init__(self, lowercase: bool, tokenizer, label_prefix: str | None = None):
        from embedtune.kernels.tokens import byte_classes

        self.lowercase, self.tokenizer = lowercase, tokenizer
        # Labelled lines (corpus/labelled.py): a raw token starting with the prefix is a label, kept as
        # written (``labels``, first seen first; ``label_of``: each raw token's, -1 for a word's), and has
        # no pieces, so the counts and ids are the words' alone.
        self.label_prefix = label_prefix
        self.labels: list[str] = []
        self.label_of = np.empty(1 << 10, np.int32)
        self.classes = byte_classes()
        self.pool = np.empty(1 << 14, np.uint8)
        self.pool_used = 0
        self.tstart = np.empty(1 << 10, np.int64)
        self.tlen = np.empty(1 << 10, np.int64)
        self.thash = np.empty(1 << 10, np.uint64)
        self.tcount = np.empty(1 << 10, np.int64)
        self.tplain = np.empty(1 << 10, np.uint8)
        self.slots = np.full(1 << 12, -1, np.int32)
        self.n_types = 0
        self.words: list[str] = []
        self.word_ids: dict[str, int] = {}
        self.piece_ids: list[int] = []
        self.piece_start: list[int] = [0]
        self.n_pieces = np.empty(1 << 10, np.int32)

    def make_room(self, length: int, most: int) -> None:
        """Grow the arrays so that a line of ``length`` bytes and at most ``most`` tokens fits
        (kernels.tokens.scan's test)."""
        need = self.n_types + most
        if need > len(self.tstart):
            size = max(2 * len(self.tstart), need)
            for name in ("tstart", "tlen", "thash", "tcount", "tplain", "n_pieces", "label_of"):
                old = getattr(self, name)
                new = np.empty(size, old.dtype)
                new[:self.n_types] = old[:self.n_types]
                setattr(self, name, new)
        if self.pool_used + length + most > len(self.pool):
            new = np.empty(max(2 * len(self.pool), self.pool_used + length + most), np.uint8)
            new[:self.pool_used] = self.pool[:self.pool_used]
            self.pool = new
        if 2 * need > len(self.slots):
            from embedtune.kernels.tokens import rehash

            size = len(self.slots)
            while size < 4 * need:
                size *= 2
            self.slots = np.full(size, -1, np.int32)
            rehash(self.thash, self.n_types, self.slots)

    def scan(self, data: np.ndarray, pos: int, end: int, number: int, max_line: int):
        """kernels.tokens.scan over ``data[pos:end]``, the table grown as it asks. Returns (ids,
        unit_tokens, unit_numbers, status, pos, number): status LONG_LINE stops at ``pos``."""
        from embedtune.kernels.tokens import FULL, scan

        ids = np.empty((end - pos) // 2 + 2, np.int32)
        lines = int(np.count_nonzero(data[pos:end] == 10)) + 1
        unit_tokens = np.empty(lines, np.int32)
        unit_numbers = np.empty(lines, np.int64)
        n_ids = n_units = 0
        while True:
            status, pos, number, self.pool_used, self.n_types, n_ids, n_units, length, most = scan(
                data, pos, end, number, max_line, self.classes, self.pool, self.pool_used, self.tstart,
                self.tlen, self.thash, self.tcount, self.tplain, self.n_types, self.slots, ids, n_ids, unit_tokens,
                unit_numbers, n_units)
            if status != FULL:   # copies: views would keep the arrays' unused room alive
                return (ids[:n_ids].copy(), unit_tokens[:n_units].copy(), unit_numbers[:n_units].copy(),
                        status, pos, number)
            self.make_room(length, most)

    def resolve(self) -> None:
        """What each raw token added since the last call becomes: decoded, lower-cased and split as
        the reference reader does to each whitespace token (lower-casing a token is lower-casing its
        line there: no character lower-cases to or from whitespace)."""
        first, stop = len(self.piece_start) - 1, self.n_types
        if first == stop:
            return
        text = self.pool[self.tstart[first]:self.pool_used].tobytes().decode("utf-8")
        labelled = []   # the new raw tokens that are labels
        if self.label_prefix is not None:
            prefix, as_written = self.label_prefix, text.split("\n")
            labelled = [i for i, token in enumerate(as_written) if token.startswith(prefix)]
            self.label_of[first:stop] = -1
            self.label_of[np.asarray(labelled, np.int64) + first] = np.arange(len(self.labels),
                                                                             len(self.labels) + len(labelled))
            self.labels.extend(as_written[i] for i in labelled)
        if self.lowercase:
            text = text.lower()
        raw = text.split("\n")
        raw.pop()   # after the last separator
        words, word_ids = self.words, self.word_ids
        if self.tokenizer is None and not labelled:
            flat, lengths = raw, None
        else:
            # Tokenizer.split keeps a token with no punctuation (Unicode P*, S*) at either end, and a
            # letter or digit is never punctuation: only the others are split (a few in a hundred);
            # the scan marked those with ASCII letters or digits at both ends. A label has no pieces.
            split = self.tokenizer.split if self.tokenizer is not None else None   # each raw token once: no cache
            odd = np.flatnonzero(self.tplain[first:stop] == 0).tolist() if split is not None else []
            is_label = set(labelled)
            flat, lengths, at = [], [1] * len(raw), 0
            for i in sorted(is_label.union(odd)) if labelled else odd:
                token = raw[i]
                if i in is_label:
                    pieces = ()
                elif token[0].isalnum() and token[-1].isalnum():
                    continue
                else:
                    pieces = split(token)
                flat += raw[at:i]
                flat += pieces
                lengths[i] = len(pieces)
                at = i + 1
            flat = raw if at == 0 else flat + raw[at:]
        # New words in the order first seen, each numbered once (dict.fromkeys keeps the first of each)
        fresh = [word for word in dict.fromkeys(flat) if word not in word_ids]
        word_ids.update(zip(fresh, range(len(words), len(words) + len(fresh))))
        words.extend(fresh)
        self.piece_ids.extend(map(word_ids.__getitem__, flat))
        last = self.piece_start[-1]
        if lengths is None:
            self.piece_start.extend(range(last + 1, last + 1 + len(raw)))
        else:
            self.piece_start.extend(accumulate(lengths, initial=last))
            del self.piece_start[first]   # ``last`` again
        self.n_pieces[first:stop] = np.diff(np.asarray(self.piece_start[first:], np.int64))

    def counts(self) -> Counter:
        """The words' counts, in the order the reference first sees them."""
        n = self.n_types
        ids = np.asarray(self.piece_ids, np.int64)
        totals = np.zeros(len(self.words), np.int64)
        np.add.at(totals, ids, np.repeat(self.tcount[:n], self.n_pieces[:n]))
        return Counter(dict(zip(self.words, totals.tolist())))

    def keep_pieces_only(self) -> None:
        """Free what only a scan reads (the raw tokens' bytes, hash table and counts) and hold each raw
        token's pieces as arrays: all the later passes read once the ids are kept (``FastPass.rows_of``)."""
        self.piece_start = np.asarray(self.piece_start, np.int64)
        self.piece_ids = np.asarray(self.piece_ids, np.int64)
        self.pool = self.tstart = self.tlen = self.thash = self.tcount = self.tplain = self.slots = None
        self.n_pieces = self.word_ids = None

    def held_bytes(self) -> int:
        """Bytes of the arrays and lists held (the words' strings are the counts' own: counted with them)."""
        arrays = [self.pool, self.tstart, self.tlen, self.thash, self.tcount, self.tplain, self.slots, self.n_pieces,
                  self.label_of]
        held = sum(a.nbytes for a in arrays if a is not None) + sys.getsizeof(self.words)
        for array in (self.piece_start, self.piece_ids):   # a list's ints: 28 bytes past 256
            held += array.nbytes if isinstance(array, np.ndarray) else sys.getsizeof(array) + 28 * len(array)
        return held + (sys.getsizeof(self.word_ids) if self.word_ids is not None else 0)


class FastPass:
    """A corpus file's compiled passes: ``count`` once, then ``blocks`` for every later pass."""

    def __init__(self, corpus):
        self.corpus = corpus
        self.table = Table(corpus.lowercase, corpus.tokenizer, corpus.label_prefix)
        self.kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self._rows: tuple | None = None   # rows_of's: (index, n_types, (piece_start, piece_rows))

    def count(self, digest, advance=None) -> tuple[Counter, int, int]:
        """``Corpus.count``'s (counts, total tokens, lines with tokens); ``digest`` takes the bytes the
        reference's would. Keeps the raw ids for ``blocks`` while they stay within KEEP_TOKENS."""
        from embedtune.kernels.tokens import units_with_pieces

        table = self.table
        kept, n_kept, n_lines = [], 0, 0
        every_token = table.tokenizer is None   # every raw token is one word
        for block in self._scan(digest, advance):
            table.resolve()
            ids, unit_tokens, numbers = block
            if table.label_prefix is not None:
                self._check_labelled(ids, unit_tokens, numbers)
            n_lines += len(unit_tokens) if every_token else units_with_pieces(ids, unit_tokens, table.n_pieces)
            if kept is not None:
                n_kept += len(ids)
                kept.append(block)
                if n_kept > KEEP_TOKENS:
                    kept = None
        self.kept = kept
        counts = table.counts()
        if kept is not None:   # no pass scans the file again
            table.keep_pieces_only()
        return counts, sum(counts.values()), n_lines

    def _check_labelled(self, ids: np.ndarray, unit_tokens: np.ndarray, numbers: np.ndarray) -> None:
        """Each labelled line holds a label and a word; the first that does not is an error (its caller,
        LabelledCorpus.count, reads the file as the reference does to say which error comes first)."""
        labels = np.add.reduceat((self.table.label_of[ids] >= 0).astype(np.int64),
                                 np.cumsum(unit_tokens) - unit_tokens) if len(unit_tokens) else unit_tokens
        bad = np.flatnonzero((labels == 0) | (labels == unit_tokens))
        if len(bad):
            raise EmbedtuneError("a line without a label or without a word", self.corpus.path, int(numbers[bad[0]]))

    def rows_of(self, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(piece_start, piece_rows): raw token t's rows in ``index`` (-1: not in it) are
        ``piece_rows[piece_start[t]:piece_start[t + 1]]``. Made once for an index (every epoch passes
        the same one), again only when a pass found new raw tokens (the file changed since the count)."""
        table = self.table
        if self._rows is None or self._rows[0] is not index or self._rows[1] != table.n_types:
            n = len(table.words)
            word_rows = np.fromiter(map(index.get, table.words, repeat(-1, n)), np.int32, n)
            pieces = (np.asarray(table.piece_start, np.int64), word_rows[np.asarray(table.piece_ids, np.int64)])
            self._rows = (index, table.n_types, pieces)
        return self._rows[2]

    def held_bytes(self) -> int:
        """Bytes held from the count to the end of the run: the kept ids (4 a token, 12 a line), the
        table, and the rows of one index (``rows_of``: 8 bytes a raw token, 4 a piece)."""
        kept = sum(a.nbytes for block in self.kept for a in block) if self.kept is not None else 0
        table = self.table
        # piece_start is the table's own array once kept as int64 (keep_pieces_only): counted there.
        starts = 0 if isinstance(table.piece_start, np.ndarray) and table.piece_start.dtype == np.int64 \
            else 8 * (table.n_types + 1)
        return kept + table.held_bytes() + starts + 4 * len(table.piece_ids)

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(raw ids, tokens per line, line numbers) of the whole corpus, kept or scanned again."""
        if self.kept is not None:
            yield from self.kept
            return
        for block in self._scan(None):
            self.table.resolve()   # nothing new unless the file changed since the count
            yield block

    def _scan(self, digest, advance=None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        corpus = self.corpus
        try:
            try:
                raw = open_binary(corpus.read_path)
            except (OSError, EOFError, ValueError) as err:
                raise _ReadFailed(err) from None
            with raw:
                yield from self._blocks(_Reads(raw), digest, advance)
        except _ReadFailed as failed:   # damaged .gz/.bz2 among them
            # Read in blocks, the damage may show before a bad line the reference reads first: its
            # pass says which error comes first.
            for _ in corpus.numbered_lines(None):
                pass
            raise EmbedtuneError(f"cannot read: {failed.args[0]}", corpus.path) from None

    def _blocks(self, raw, digest, advance=None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        from embedtune.kernels.tokens import LONG_LINE

        buf, eof, number = b"", False, 1
        while True:
            end = len(buf) if eof else buf.rfind(b"\n") + 1
            if end == 0 and not eof:
                if len(buf) < MAX_PIECE_BYTES:   # no whole line yet
                    more = raw.read(BLOCK_BYTES)
                    if advance is not None:
                        advance(len(more))
                    eof = not more
                    buf = buf + more if buf else more
                    continue
                end = len(buf)   # a long line begins the buffer: the scan stops at it
            if not buf:
                return
            start = 0
            if number == 1 and buf.startswith(UTF8_BOM) and 0 < end:
                first = buf.find(b"\n")
                if (first if first >= 0 else len(buf)) < MAX_PIECE_BYTES:   # else the reference's
                    start = len(UTF8_BOM)
            data = np.frombuffer(buf, np.uint8)
            first_number = number
            ids, unit_tokens, unit_numbers, status, pos, number = self.table.scan(
                data, start, end, number, MAX_PIECE_BYTES)
            self._check(buf, pos, first_number)   # the lines scanned; a long line's pieces are checked as read
            if digest is not None:
                digest.update(memoryview(buf)[:pos])
            if len(unit_tokens):
                yield ids, unit_tokens, unit_numbers
            if status != LONG_LINE:
                buf = buf[end:]
                continue
            # A long line: cut into pieces by the reference's own reader, each piece scanned as a line.
            reader = _Prefixed(buf, pos, raw)
            for piece_number, offset, piece in pieces(reader, self.corpus.path, number):
                if digest is not None:
                    digest.update(piece)
                self.corpus.line_text(piece, self.corpus.path, piece_number, offset)   # its errors
                if piece_number == 1 and offset == 0 and piece.startswith(UTF8_BOM):
                    piece = piece[len(UTF8_BOM):]
                block = self.table.scan(np.frombuffer(piece, np.uint8), 0, len(piece), piece_number,
                                        len(piece) + 1)
                if len(block[1]):
                    yield block[0], block[1], np.full(len(block[1]), piece_number, np.int64)
                if piece.endswith(b"\n"):
                    break
            buf, eof, number = reader.rest(), False, number + 1

    def _check(self, buf: bytes, end: int, number: int) -> None:
        """The reference's errors for lines ``buf[:end]`` (numbered from ``number``): raised by
        ``Corpus.line_text`` line by line once the block as a whole is found not to be UTF-8 text."""
        try:
            bad = buf.find(b"\x00", 0, end) >= 0
            if not bad:
                str(memoryview(buf)[:end], "utf-8")
        except UnicodeDecodeError:
            bad = True
        if not bad:
            return
        at = 0
        while at < end:
            nl = buf.find(b"\n", at, end)
            stop = nl + 1 if nl >= 0 else end
            self.corpus.line_text(buf[at:stop], self.corpus.path, number, 0)
            at, number = stop, number + 1
        raise EmbedtuneError("not valid UTF-8 text; is this a corpus file?", self.corpus.path)
