"""word2vec binary: a text header `COUNT DIM\\n`, then per word the word's bytes, one space, and DIM
little-endian float32 values. The word2vec C tool writes a newline after each vector, gensim does
not; both are read. Writing follows the C tool (with the newline).
"""

from __future__ import annotations

import mmap
import os
import stat
import sys

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.io import check_header_fits, new_matrix
from embedtune.formats.text.parse import parse_header
from embedtune.words import WordList

BLOCK_BYTES = 16 << 20
MAX_WORD_BYTES = 1 << 16  # a longer "word" means the file is not what the header says
MAPPED_BATCH = 1 << 10  # records copied at a time from a mapped file (1.2 MB of vectors at dim 300)
MAPPED_RELEASE = 64 << 20  # bytes of the mapped file read before they are let go (RSS stays the matrix's)
STREAM_RELEASE = 16 << 20  # the same when the rows are not kept (binary_blocks): the map is most of the RSS


def read_binary(source, *, limit=None, replace_bad_utf8=False, progress=None):
    """-> (words [n], float32 matrix [n, dim], 2): records are counted from 1 after the header line.

    The matrix is allocated once from the header and filled record by record from one reused
    read buffer, so loading needs little more memory than the matrix itself.
    """
    name = source.name
    count, dim, start = _read_header(source)
    wanted = count if limit is None else min(count, limit)
    check_header_fits(source, wanted, dim, 4 * dim + 2)  # a word of at least one byte and a space
    mapped = _read_mapped(source, start, count, wanted, dim, progress)
    if mapped is not None:
        raw_words, matrix = mapped
    else:
        raw_words, matrix = _read_buffered(source, count, wanted, dim, progress,
                                           check_end=limit is None or limit >= count)
    if progress is not None:
        progress(source.size if mapped is not None else source.consumed(), source.size)
    if sys.byteorder != "little":  # the format is little-endian
        matrix.byteswap(inplace=True)
    return _decode_words(raw_words, matrix, name, replace_bad_utf8), matrix, 2


def read_binary_outline(source, *, sample: int, replace_bad_utf8=False, progress=None):
    """-> (words [n], float32 [min(n, sample), dim], 2): every record's word, and the vectors of the first
    ``sample`` records only; the rest are stepped over, never held (the dry run's read: it needs the words,
    not the matrix). The records are found and checked as read_binary finds them, through one reused buffer
    whatever the source (a plain file, compressed data, standard input)."""
    count, dim, _ = _read_header(source)
    check_header_fits(source, count, dim, 4 * dim + 2)
    raw_words, matrix = _read_buffered(source, count, count, dim, progress, check_end=True, kept=sample)
    if progress is not None:
        progress(source.consumed(), source.size)
    if sys.byteorder != "little":
        matrix.byteswap(inplace=True)
    return _decode_words(raw_words, matrix, source.name, replace_bad_utf8), matrix, 2


def _read_header(source):
    """-> (count, dim, the header line's length): the ``COUNT DIM`` line, read."""
    name = source.name
    head = source.peek(1024)
    newline = head.find(b"\n")
    if not head:
        raise EmbedtuneError("empty file (expected a header 'COUNT DIM')", name, 1)
    sizes = parse_header(head[:newline], name) if newline >= 0 else None
    if sizes is None:
        first = head[:newline if newline >= 0 else 40][:40].decode("utf-8", "replace")
        raise EmbedtuneError(f"expected a header 'COUNT DIM' (two whole numbers), got '{first}'", name, 1)
    source.read(newline + 1)
    count, dim = sizes
    if dim < 1:
        raise EmbedtuneError(f"header says dimension {dim} (expected at least 1)", name, 1)
    return count, dim, newline + 1


def _read_buffered(source, count: int, wanted: int, dim: int, progress, check_end: bool, kept: int | None = None):
    """-> (raw words, matrix): ``wanted`` records read through one reused buffer (standard input,
    compressed data, or a file the memory map found amiss); ``check_end``: nothing may follow them.
    ``kept``: only the first ``kept`` records' vectors go into the matrix (the others' are stepped over)."""
    (raw_words, matrix, _, _), = _buffered_batches(source, count, wanted, dim, progress, check_end, kept)
    return raw_words, matrix


def _buffered_batches(source, count: int, wanted: int, dim: int, progress, check_end: bool, kept: int | None = None,
                      batch: int | None = None):
    """The records read through one reused buffer, as (raw words, matrix, first, before) per batch: without
    ``batch``, one for all ``wanted`` records (``kept``: as _read_buffered); with it, ``batch`` records at a time,
    each batch's matrix its own, so that what is held is a batch, not the matrix (binary_blocks). ``first``: the
    record the lists' row 0 is; ``before``: 1 where that row is the previous batch's last record, kept for the
    check that a word with a space in it misread the records after it (``_raise_spaced_word``), else 0."""
    name, row_bytes = source.name, 4 * dim
    rows = (wanted if kept is None else min(wanted, kept)) if batch is None else min(batch, wanted) + 1
    matrix = new_matrix(rows, dim, name, 1)
    kept_bytes = matrix.nbytes
    flat = memoryview(matrix).cast("B") if matrix.size else None   # no rows (a header of 0): none to fill
    raw_words = []
    # A small file gets a buffer of its own size: zero-filling BLOCK_BYTES for each of many small files
    # was most of their read.
    small = source.size is not None and source.compression is None
    block = min(BLOCK_BYTES, source.size + 1) if small else BLOCK_BYTES
    buf = bytearray(max(block, 4 * (row_bytes + MAX_WORD_BYTES)))
    view = memoryview(buf)
    find = buf.find
    add_word = raw_words.append
    pos = end = 0  # buf[pos:end] holds data not yet used
    ended = False
    row = 0
    first = before = 0
    offset = 0  # of the row in the matrix's bytes
    while row < wanted:
        space = find(b" ", pos, end)
        stop = space + 1 + row_bytes
        if space < 0 or stop > end:
            if ended:
                _raise_spaced_word(raw_words, matrix, row - 1 - first, name, first)
                _raise_truncated(name, row, count, buf[pos:end], space - pos if space >= 0 else -1, row_bytes)
            if space < 0 and end - pos > MAX_WORD_BYTES:
                raise EmbedtuneError(f"record {row + 1}: no space after the word within {MAX_WORD_BYTES} bytes "
                                     f"(is the header's dimension {dim} right?)", name)
            pos, end, ended = _refill(source, view, pos, end, progress)
            continue
        # gensim writes no newline after a vector, the C tool does: skip it before the next word
        while buf[pos] == 10 and pos < space:
            pos += 1
        add_word(buf[pos:space])
        if offset < kept_bytes:
            flat[offset:offset + row_bytes] = view[space + 1:stop]
            offset += row_bytes
        pos = stop
        row += 1
        if batch is not None and offset == kept_bytes and row < wanted:
            yield raw_words, matrix.copy(), first, before
            # the last record stays as row 0 of the next batch
            raw_words[:] = raw_words[-1:]
            matrix[0] = matrix[-1]
            first, before, offset = row - 1, 1, row_bytes
    if check_end:
        _check_no_more(source, view, pos, end, ended, raw_words, matrix, count, first)
    yield raw_words, (matrix if batch is None else matrix[:len(raw_words)]), first, before


def _refill(source, view, pos: int, end: int, progress):
    """-> (pos, end, ended): what is left of the buffer (less than one record) moved to its front and
    the buffer filled up after it."""
    left = bytes(view[pos:end])
    view[:len(left)] = left
    pos, end = 0, len(left)
    got = source.readinto(view[end:])
    if progress is not None:
        progress(source.consumed(), source.size)
    return pos, end + got, got == 0


def _check_no_more(source, view, pos: int, end: int, ended: bool, raw_words, matrix, count: int,
                   first: int = 0) -> None:
    """Nothing but white space may follow the header's ``count`` records (``raw_words`` and ``matrix``: the
    last of them, from record ``first``)."""
    rest = bytes(view[pos:end]).strip()
    while not rest and not ended:
        got = source.readinto(view)
        ended = got == 0
        rest = bytes(view[:got]).strip()
    if rest:
        _raise_spaced_word(raw_words, matrix, count - 1 - first, source.name, first)
        raise EmbedtuneError(
            f"record {count + 1}: more data after {count} records (expected {count} as the header says)", source.name)


def _read_mapped(source, start: int, count: int, wanted: int, dim: int, progress=None):
    """A plain file read through a memory map: (raw words, matrix), or None when it must be read the
    buffered way (standard input, compressed data, or anything amiss, which that way names exactly).

    The records are found by one `find` per word on the map and their vectors copied into the matrix
    a batch at a time by one fancy-indexing call, with no read buffer in between: less CPU than the
    buffered reader (benchmarks/README.md, io). Pages already read are let go
    as the reading moves on, so the resident size stays about the matrix's. ``progress``: told the share of
    the file's bytes read after each batch (a large file's read takes seconds).
    """
    mapped = _open_map(source)
    if mapped is None:
        return None
    try:
        return _read_records(mapped, start, count, wanted, dim, progress)
    finally:
        _close_map(mapped)


def _open_map(source):
    """A read-only memory map of a plain file's bytes, or None (standard input, compressed data, a BOM)."""
    if source.compression is not None or source.size is None or source.bom:
        return None
    try:
        if not stat.S_ISREG(os.stat(source.path).st_mode):
            return None
        with open(source.path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _close_map(mapped) -> None:
    try:
        mapped.close()
    except BufferError:  # an exception's traceback still holds a view: the map goes with it
        pass


class _Amiss(Exception):
    """The map's reading stopped at something the buffered reader names exactly."""


def _read_records(mapped, start: int, count: int, wanted: int, dim: int, progress=None):
    matrix = new_matrix(wanted, dim)
    rows = matrix.view(np.dtype((np.void, 4 * dim))).reshape(-1)
    raw_words = []
    size = len(mapped)
    try:
        for first, batch_words, vectors in _mapped_batches(mapped, start, count, wanted, dim):
            raw_words.extend(batch_words)
            rows[first:first + len(batch_words)] = vectors
            if progress is not None:
                progress(size * (first + len(batch_words)) // max(1, wanted), size)
    except _Amiss:
        return None
    return raw_words, matrix


def _mapped_batches(mapped, start: int, count: int, wanted: int, dim: int, release: int = MAPPED_RELEASE):
    """(first record, raw words, their vectors as void records) per MAPPED_BATCH records of the map;
    _Amiss when a record is not where it should be or data follows the last."""
    size = len(mapped)
    row_bytes = 4 * dim
    vectors = np.ndarray(buffer=mapped, dtype=np.dtype((np.void, row_bytes)),
                         shape=(max(0, size - row_bytes + 1),), strides=(1,))
    find = mapped.find
    starts = np.empty(min(wanted, MAPPED_BATCH), np.intp)
    pos = start
    released = 0
    try:
        for first in range(0, wanted, MAPPED_BATCH):
            batch = min(MAPPED_BATCH, wanted - first)
            raw_words = []
            add_word = raw_words.append
            for k in range(batch):
                while mapped[pos] == 10:  # the C tool's newline after the previous vector
                    pos += 1
                space = find(b" ", pos, pos + MAX_WORD_BYTES)
                if space < 0 or space + 1 + row_bytes > size:
                    raise _Amiss
                add_word(mapped[pos:space])
                starts[k] = space + 1
                pos = space + 1 + row_bytes
            yield first, raw_words, vectors[starts[:batch]]
            if pos - released > release and hasattr(mmap, "MADV_DONTNEED"):
                done = pos & ~(mmap.PAGESIZE - 1)
                mapped.madvise(mmap.MADV_DONTNEED, released, done - released)
                released = done
    except IndexError:  # the file ends where a word should start
        raise _Amiss from None
    finally:
        del vectors
    while wanted == count and pos < size:  # more data than the header says? (looked at 1 MB at a time)
        if mapped[pos:pos + (1 << 20)].strip():
            raise _Amiss
        pos += 1 << 20


def binary_blocks(source, *, replace_bad_utf8=False, progress=None, on_header=None):
    """(words, float32 [rows, dim]) a batch of records at a time, in file order: for a caller that looks
    at each row once (inspect, diff) and need not hold them all. ``on_header(count, dim)`` is called
    before the first batch. A plain file is read through the map; anything else, or anything amiss
    (which the buffered reader then names exactly, or mends with ``replace_bad_utf8``), is read whole
    by read_binary's buffered way and handed on from the record the map reached."""
    name = source.name
    count, dim, start = _read_header(source)
    check_header_fits(source, count, dim, 4 * dim + 2)
    if on_header is not None:
        on_header(count, dim)
    done = 0
    mapped = _open_map(source)
    if mapped is not None:
        batches = _mapped_batches(mapped, start, count, count, dim, STREAM_RELEASE)
        try:
            for _, raw_words, vectors in batches:
                words = WordList.from_bytes(raw_words)
                if words is None:
                    break
                matrix = vectors.view(np.float32).reshape(len(raw_words), dim)
                if sys.byteorder != "little":
                    matrix = matrix.byteswap()
                yield words, matrix
                done += len(raw_words)
                if progress is not None:
                    progress(source.size * done // max(1, count), source.size)
            else:
                return
        except _Amiss:
            pass
        finally:
            batches.close()   # its view of the map goes before the map
            _close_map(mapped)
    # Read through the buffer a batch at a time (standard input, compressed data, a file the map found amiss): what
    # is held is a batch, not the matrix. Handed on from the record the map reached.
    for raw_words, matrix, first, before in _buffered_batches(source, count, count, dim, progress, check_end=True,
                                                              batch=MAPPED_BATCH):
        if sys.byteorder != "little":
            matrix.byteswap(inplace=True)
        words = _decode_words(raw_words, matrix, name, replace_bad_utf8, first, before)
        skip = max(0, done - first - before)
        if skip < len(words) - before:
            yield words[before + skip:], matrix[before + skip:]


def _decode_words(raw_words, matrix, name, replace_bad_utf8, first: int = 0, before: int = 0):
    """All words checked in one decode call and kept as bytes (a WordList, far smaller than str
    objects: benchmarks/README.md, memory) when they are fine; one by one to name the bad one (or the
    word with a space in it that made the reader take a vector's bytes for it, ``_raise_spaced_word``).
    ``first``: the record ``raw_words[0]`` is; ``before``: rows at their front already decoded (a previous
    batch's), given back as they are. -> the words, ``before`` rows included."""
    words = WordList.from_bytes(raw_words)
    if words is not None:
        return words
    words = [bytes(word).decode("utf-8", errors="replace") for word in raw_words[:before]]
    for row in range(before, len(raw_words)):
        word = raw_words[row]
        if not word:
            _raise_spaced_word(raw_words, matrix, row - 1, name, first)
            raise EmbedtuneError(f"record {first + row + 1}: empty word", name)
        try:
            words.append(word.decode("utf-8"))
        except UnicodeDecodeError as err:
            # --replace-bad-utf8 mends a word's bytes, not records misread after a word with a space
            _raise_spaced_word(raw_words, matrix, row - 1, name, first)
            if not replace_bad_utf8:
                raise EmbedtuneError(
                    f"record {first + row + 1}: word is not valid UTF-8 (byte 0x{word[err.start]:02x} at column "
                    f"{err.start + 1}; --replace-bad-utf8 replaces such bytes)", name) from None
            words.append(word.decode("utf-8", errors="replace"))
    return words


def _raise_spaced_word(raw_words, matrix, row: int, name, first: int = 0) -> None:
    """An error naming record ``first + row`` (0-based; ``raw_words`` and ``matrix`` begin at record
    ``first``) if its vector begins with text and a space: a word
    with a space in it ("new york"), which this format cannot hold (a word ends at its first space),
    so the reader took the word's second part for the vector's first bytes and misread the records
    after it; what it reports then (a next word that is not UTF-8, an empty word, a file ending
    inside a record or data after the last) does not say why. Only asked about the record just
    before such a failure: a vector's own bytes begin with a printable byte and a space too rarely
    to name a record for that alone."""
    if not 0 <= row < min(len(raw_words), len(matrix)):
        return
    vector = matrix[row].astype("<f4").tobytes()
    space = vector.find(b" ")
    if space < 1:
        return
    try:
        word, rest = bytes(raw_words[row]).decode("utf-8"), vector[:space].decode("utf-8")
    except UnicodeDecodeError:
        return
    if not (word + rest).isprintable():
        return
    raise EmbedtuneError(
        f"record {first + row + 1}: word '{word}' is followed by '{rest}' and a space where its vector should begin: "
        f"a word with a space in it ('{word} {rest}')? word2vec binary ends a word at its first space, so "
        f"the records from here on are misread", name)


def _raise_truncated(name, row, count, left: bytes, space: int, row_bytes: int):
    """The data ended inside record `row` + 1; `left` is what there is of it."""
    if not left.strip():
        raise EmbedtuneError(
            f"record {row + 1}: file ends early (expected {count} records as the header says, got {row})", name)
    got = max(0, len(left) - space - 1) if space >= 0 else 0
    raise EmbedtuneError(
        f"record {row + 1}: file ends inside the record (expected {row_bytes} bytes of vector, got {got}; "
        f"header says {count} records)", name)


def write_binary(vectors, out, *, name: str, progress=None, on_written=None, check_rows=None) -> None:
    """Write `vectors` (Vectors, or anything with `words`, `dim` and `block(start, stop)`).

    on_written : if given, called as on_written(start, stop, rows) with each block's rows read back
        from the very bytes written (float32 [stop - start, dim]).
    check_rows : bool [<= n], the rows on_written needs (None: every row); a block with none of them
        is not read back and on_written is not called for it.
    """
    words = vectors.words
    n, dim = len(words), vectors.dim
    step = max(1, (8 << 20) // max(1, 4 * dim))
    # Every word is checked before anything is written, but encoded again block by block: a list
    # of 3M encoded words would hold 130 MB through the whole write.
    for start in range(0, n, step):
        _encode(words, start, min(n, start + step), name)
    out.write(b"%d %d\n" % (n, dim))
    for start in range(0, n, step):
        stop = min(n, start + step)
        encoded = _encode(words, start, stop, name)
        rows = np.ascontiguousarray(vectors.block(start, stop), dtype="<f4")
        chunk = b"".join([w + b" " + r.tobytes() + b"\n" for w, r in zip(encoded, rows)])
        out.write(chunk)
        if on_written is not None and (check_rows is None or np.any(check_rows[start:stop])):
            on_written(start, stop, _read_back(chunk, encoded, dim))
        if progress is not None:
            progress(stop, n)


def _encode(words, start: int, stop: int, name: str) -> list:
    """UTF-8 of words[start:stop]; a word that cannot be written in this format is an error."""
    encoded = [word.encode("utf-8") for word in words[start:stop]]
    for row, data in enumerate(encoded, start):
        if not data or b" " in data or b"\n" in data or data.strip() != data:
            raise EmbedtuneError(
                f"cannot write word {words[row]!r} (row {row + 1}) in word2vec binary: words in this format "
                f"cannot be empty or contain spaces or line breaks", name)
    return encoded


def _read_back(chunk: bytes, words, dim: int) -> np.ndarray:
    """float32 [len(words), dim]: the vectors of the records in `chunk`, found from the word lengths."""
    row_bytes = 4 * dim
    ends = np.cumsum([len(w) + row_bytes + 2 for w in words])
    view = memoryview(chunk)
    data = b"".join([view[e - 1 - row_bytes:e - 1] for e in ends.tolist()])
    return np.frombuffer(data, "<f4").reshape(len(words), dim).astype(np.float32)
