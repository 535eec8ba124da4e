"""Opening vector files: plain, .gz, .bz2 or standard input for reading; an atomic write for output.

Reading: compression is recognised by its magic bytes (so `-` works with compressed data too, and a
.gz name on a plain file does no harm), and the first bytes of the decompressed data are buffered so
the format can be detected without seeking (standard input cannot seek). A UTF-8 byte-order mark at
the start of the (decompressed) data is dropped.

Writing: the data goes to a temporary file in the target folder, renamed over the target only when
everything was written; on any failure the temporary file is removed, so no partial output is left.
`-` writes standard output; a target that exists but is not a regular file (/dev/null, /dev/full,
a pipe) is written directly, since renaming over it would replace the device.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import os
import stat
import sys
import zlib

import numpy as np

from embedtune._adapters.numpy_private import set_hugepage_advice
from embedtune.errors import EmbedtuneError

STDIO = "-"
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = b"BZh"
UTF8_BOM = b"\xef\xbb\xbf"


# The most values a row may have, as --dim allows: a line or header past it is a damaged or wrong file,
# found before the line is read whole (one 200 MB line would otherwise take GBs as split fields).
MAX_DIM = 1 << 16


def check_header_fits(source, count: int, dim: int, min_row_bytes: int) -> None:
    """A damaged header (say '4000000000 300') must be an error, not an attempt at a huge matrix.
    (A small excess is left to the reader, which then says how many rows the file really has.)"""
    if (source.size is not None and source.compression is None and count * min_row_bytes > source.size
            and count * dim * 4 > 256 << 20):
        raise EmbedtuneError(
            f"header says {count} rows of {dim} values, too many for the file's size "
            f"(expected at least {count * min_row_bytes} bytes, got {source.size})", source.name, 1)


def new_matrix(rows: int, dim: int, name: str | None = None, line: int | None = None) -> np.ndarray:
    """An uninitialised float32 matrix [rows, dim] for a reader to fill, on ordinary pages; ``name``
    and ``line``: the file, and the line whose figures ask for it (1: the header's), for the error.

    numpy asks Linux for transparent huge pages for big arrays; with the common setting
    defrag=madvise the kernel then compacts memory on every huge-page fault, which on a busy
    machine was most of a large file's load (benchmarks/README.md, io). Readers write each page
    once, sequentially.
    """
    return _sized(lambda: np.empty((rows, dim), np.float32), rows, dim, name, line)


def resize_matrix(matrix: np.ndarray, rows: int, name: str | None = None) -> np.ndarray:
    """``matrix`` (new_matrix's, owning its data, no view of it alive) with ``rows`` rows, its first rows
    kept and any new ones zero: resized where it lies (the C library remaps a large block rather than
    copying it), so a reader that does not know its row count grows one matrix instead of holding its
    blocks and their concatenation at once (issue 48: the GloVe reader peaked at 2.5x the matrix)."""
    dim = matrix.shape[1]

    def resize():
        matrix.resize((rows, dim), refcheck=False)
        return matrix

    return _sized(resize, rows, dim, name, None)


def _sized(make, rows: int, dim: int, name, line) -> np.ndarray:
    """make()'s matrix of rows x dim, on ordinary pages (new_matrix); not enough memory is an error naming the file."""
    previous = set_hugepage_advice(False)
    try:
        return make()
    except (MemoryError, ValueError):   # ValueError: more than numpy can address (a damaged header)
        size = 4 * rows * dim
        size = f"{size / 1e9:.1f} GB" if size < 10**18 else f"more than 10^{len(str(size)) - 1} bytes"
        raise EmbedtuneError(f"not enough memory for {rows} x {dim} float32 values ({size})"
                             f"{' as the header says' if line == 1 else ''}", name, line) from None
    finally:
        set_hugepage_advice(previous)


def display_name(path) -> str:
    return "<stdin>" if str(path) == STDIO else str(path)


def _os_error(path, action: str, err: OSError) -> EmbedtuneError:
    reason = err.strerror or str(err)
    return EmbedtuneError(f"cannot {action}: {reason}", path=display_name(path))


# Sources of a pipe ('-', a FIFO, `<(...)`'s /dev/fd/N) that were only peeked at (by detect_format),
# by path: a pipe can be read once, so the next reader continues from the bytes already taken.
_parked: dict = {}


def open_source(path) -> "Source":
    """A Source for `path`; for a pipe the one detect_format peeked at, so nothing read is lost."""
    source = _parked.pop(str(path), None)
    if source is not None:
        if source.still_reads(path):
            return source
        source.discard()
    return Source(path)


class Source:
    """A binary input whose first bytes can be looked at before reading.

    name : str for messages; size : bytes on disk (None for standard input);
    consumed() : bytes taken from the underlying file so far (for progress on compressed input).
    """

    def __init__(self, path):
        self.path = str(path)
        self.name = display_name(path)
        self._file = None
        self._owned = None
        self.size = None
        self.pipe = True   # cannot be opened a second time at its start (until a stat says otherwise)
        if self.path == STDIO:
            raw = sys.stdin.buffer
        else:
            try:
                raw = open(self.path, "rb")
            except FileNotFoundError:
                raise EmbedtuneError("no such file", path=self.path) from None
            except IsADirectoryError:
                raise EmbedtuneError("is a folder, expected a vectors file", path=self.path) from None
            except OSError as err:
                raise _os_error(self.path, "open for reading", err) from None
            self._owned = raw
            try:
                info = os.fstat(raw.fileno())
                self.size = info.st_size
                self.pipe = not stat.S_ISREG(info.st_mode)
            except OSError:
                self.size = None
        try:   # a damaged stream fails here, before a `with` holds the source: close the file
            self._raw = raw
            self._raw_read = 0
            magic = self.read_raw(3)
            self.compression = None
            if magic.startswith(_GZIP_MAGIC):
                self.compression = "gzip"
            elif magic == _BZIP2_MAGIC:
                self.compression = "bzip2"
            self._magic = magic
            if self.compression is None:
                self._stream = None
            else:
                inner = _Prefixed(magic, self)
                self._stream = (gzip.GzipFile(fileobj=inner, mode="rb") if self.compression == "gzip"
                                else bz2.BZ2File(inner))
            self._head = b""
            self._head_pos = 0
            self._reading = False
            # A byte-order mark (Windows editors write one) is not part of the first word or header.
            self.bom = self.peek(len(UTF8_BOM)) == UTF8_BOM
            if self.bom:
                self._head = self._head[len(UTF8_BOM):]
        except BaseException:
            if self._owned is not None:
                self._owned.close()
            raise

    def read_raw(self, n: int) -> bytes:
        """Up to n bytes of the file as they are on disk (compressed data still compressed; -1: all the rest)."""
        try:
            data = self._raw.read(n)
        except OSError as err:
            raise _os_error(self.path, "read", err) from None
        self._raw_read += len(data)
        return data

    def consumed(self) -> int:
        return self._raw_read

    def _read_stream(self, n: int) -> bytes:
        if self._stream is None:
            if self._magic:
                data, self._magic = self._magic, b""
                if n > len(data):
                    data += self.read_raw(n - len(data))
                return data
            return self.read_raw(n)
        try:
            return self._stream.read(n)
        except (OSError, EOFError, zlib.error) as err:
            raise EmbedtuneError(f"damaged {self.compression} data ({err})", path=self.name) from None

    def peek(self, n: int) -> bytes:
        """Up to n first bytes (fewer only at end of data), without consuming them."""
        while len(self._head) < n:
            more = self._read_stream(n - len(self._head))
            if not more:
                break
            self._head += more
        return self._head[:n]

    def read(self, n: int) -> bytes:
        """Up to n bytes; b'' only at end of data."""
        self._reading = True
        if self._head_pos < len(self._head):
            data = self._head[self._head_pos:self._head_pos + n]
            self._head_pos += len(data)
            if self._head_pos >= len(self._head):
                self._head, self._head_pos = b"", 0
            return data
        return self._read_stream(n)

    def readinto(self, view: memoryview) -> int:
        """Fill the start of `view` (a writable memoryview of bytes); 0 only at end of data.
        Reading into one reused buffer avoids a fresh allocation (and its page faults) per block."""
        self._reading = True
        if self._head_pos < len(self._head):
            data = self.read(len(view))
            view[:len(data)] = data
            return len(data)
        if self._stream is None:
            if self._magic:
                data, self._magic = self._magic[:len(view)], self._magic[len(view):]
                view[:len(data)] = data
                return len(data)
            try:
                n = self._raw.readinto(view)
            except OSError as err:
                raise _os_error(self.path, "read", err) from None
            n = n or 0
            self._raw_read += n
            return n
        try:
            return self._stream.readinto(view) or 0
        except (OSError, EOFError, zlib.error) as err:
            raise EmbedtuneError(f"damaged {self.compression} data ({err})", path=self.name) from None

    def still_reads(self, path) -> bool:
        """Whether `path` still names the file this Source reads (tests replace standard input)."""
        if self.path == STDIO:
            return self._raw is sys.stdin.buffer
        try:
            here, there = os.fstat(self._raw.fileno()), os.stat(path)
        except (OSError, ValueError):
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def discard(self) -> None:
        """Close for good, even a pipe only peeked at (not parked for its next reader)."""
        self._reading = True
        self.close()

    def close(self) -> None:
        if self.pipe and not self._reading:
            _parked[self.path] = self  # only peeked at: the next reader of the pipe continues from here
            return
        if self._stream is not None:
            self._stream.close()
        if self._owned is not None:
            self._owned.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Prefixed:
    """The raw file for the decompressor, with the magic bytes already read put back in front."""

    def __init__(self, prefix: bytes, source: Source):
        self._prefix = prefix
        self._source = source

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            data, self._prefix = self._prefix, b""
            return data + self._source.read_raw(-1)
        if self._prefix:
            data, self._prefix = self._prefix[:n], self._prefix[n:]
            return data
        return self._source.read_raw(n)

    def readable(self):
        return True


def compression_for(path) -> str | None:
    name = str(path).lower()
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith(".bz2"):
        return "bzip2"
    return None


class _Sink:
    """File-like wrapper that turns write errors into EmbedtuneError naming the target."""

    def __init__(self, fileobj, name):
        self._f = fileobj
        self._name = name

    def write(self, data) -> None:
        try:
            self._f.write(data)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise _os_error(self._name, "write", err) from None


@contextlib.contextmanager
def open_target(path):
    """Open `path` for writing binary data: `with open_target(path) as out: out.write(b'...')`.

    Compressed by extension (.gz, .bz2). Atomic for regular files (temporary file + rename).
    """
    path = str(path)
    compression = compression_for(path)
    tmp = None
    if path == STDIO:
        name, raw, close_raw = "<stdout>", sys.stdout.buffer, False
    elif os.path.exists(path) and not os.path.isfile(path):
        if os.path.isdir(path):
            raise EmbedtuneError("is a folder, expected a file name to write", path=path)
        name, close_raw = path, True
        try:
            raw = open(path, "wb")
        except OSError as err:
            raise _os_error(path, "open for writing", err) from None
    else:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise EmbedtuneError(f"folder {os.path.dirname(path) or folder} does not exist", path=path)
        name, close_raw = path, True
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies as usual
        except OSError as err:
            raise _os_error(path, "create a file in its folder", err) from None
        except BaseException:   # Ctrl-C or SIGTERM (an exception, see cli/main.py) as it was created
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        try:
            raw = os.fdopen(fd, "wb", buffering=1 << 20)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
    done = False
    try:
        if compression == "gzip":
            # mtime=0 and the target's own name keep the output the same from run to run
            inner = gzip.GzipFile(filename=os.path.basename(path), fileobj=raw, mode="wb", compresslevel=6, mtime=0)
        elif compression == "bzip2":
            inner = bz2.BZ2File(raw, "wb")
        else:
            inner = raw
        yield _Sink(inner, name)
        if inner is not raw:
            inner.close()
        raw.flush()
        if close_raw:
            raw.close()
        if tmp is not None:
            os.replace(tmp, path)
        done = True
    except BrokenPipeError:
        raise
    except OSError as err:
        raise _os_error(name, "write", err) from None
    finally:
        if not done:
            if close_raw:
                with contextlib.suppress(OSError):
                    raw.close()
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

