"""Opening a corpus file: compression known by content, lines read in bounded pieces, UTF-8 decoded.

Shared by the plain-text reader (text.py) and the labelled one (labelled.py)."""

from __future__ import annotations

import bz2
import codecs
import gzip
from collections.abc import Iterator


from embedtune.errors import EmbedtuneError




UTF8_BOM = b"\xef\xbb\xbf"   # dropped at the start of a corpus: it is not part of the first word
# Compression is known by content, as for vectors files: a plain file named .gz is read as text,
# a gzip file without the extension is decompressed.
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = (b"BZh", b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # header, block, end
_UNREAD = {b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}
# A plain corpus file is read a MiB at a time: each read lets the GIL go, and getting it back from the
# run's other threads (the trainer's import, a fit) cost up to a switch interval a read at 8 KiB ones
# (benchmarks/README.md, classify).
READ_BUFFER = 1 << 20


def compression_of(head: bytes) -> str | None:
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    # "BZh", the block size (1-9), then a block or the end of the stream: ten bytes that a text
    # line starting with "BZh" does not have.
    if head[:3] == _BZIP2_MAGIC[0] and head[3:4].isdigit() and head[3:4] != b"0" \
            and head[4:10] in _BZIP2_MAGIC[1:]:
        return "bzip2"
    return None


def open_binary(path: str):
    with open(path, "rb") as f:
        head = f.read(10)
    compression = compression_of(head)
    if compression == "gzip":
        return gzip.open(path, "rb")
    if compression == "bzip2":
        return bz2.open(path, "rb")
    for magic, name in _UNREAD.items():
        if head.startswith(magic):
            raise EmbedtuneError(f"is {name}-compressed; embedtune reads gzip and bzip2 corpora "
                                 f"(decompress it, or pipe it in as '-')", path)
    return open(path, "rb", buffering=READ_BUFFER)


MAX_PIECE_BYTES = 1 << 20  # a longer line is read in pieces cut at whitespace
HEAD_BYTES = 1 << 16  # what Corpus.check_start reads: enough to tell binary data or another encoding


def pieces(raw, path: str, number: int = 1) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset in the line, bytes) for each line, the first numbered ``number``; a
    line over MAX_PIECE_BYTES comes in pieces cut at whitespace, so memory stays bounded whatever the
    corpus (windows do not cross a cut). A line's last piece is yielded before more is read."""
    carry, offset = b"", 0
    while True:
        chunk = raw.readline(MAX_PIECE_BYTES)
        if not chunk:
            if carry:
                yield number, offset, carry
            return
        data = carry + chunk if carry else chunk
        if data.endswith(b"\n") or len(chunk) < MAX_PIECE_BYTES:
            yield number, offset, data
            carry, offset = b"", 0
            number += 1
            continue
        cut = max(data.rfind(b" "), data.rfind(b"\t"))
        if cut <= 0:
            if len(data) > 4 * MAX_PIECE_BYTES:
                raise EmbedtuneError(
                    f"a token longer than {4 * MAX_PIECE_BYTES:,} bytes; is this a text corpus?", path, number)
            carry = data
            continue
        yield number, offset, data[:cut]
        carry = data[cut + 1:]
        offset += cut + 1


def decode(data: bytes, final: bool = True) -> str:
    """UTF-8 ``data`` as text; not ``final``: an incomplete character at the end is no error (it is left out)."""
    return data.decode("utf-8") if final else codecs.getincrementaldecoder("utf-8")().decode(data, final=False)

