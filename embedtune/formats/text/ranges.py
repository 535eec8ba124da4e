"""The parallel text read's ranges and transfers (read.py): where a file is cut, a range read as a
source, the children's bytes read so far (a shared counter), and their replies and rows received into
the matrix."""

from __future__ import annotations

import mmap
import os

import numpy as np

PART_BYTES = 64 << 20  # a child's rows are sent and let go this many bytes at a time
WAIT_REPORT = 0.25  # seconds between progress reports while the reading process waits for a child


def _shared_counts(n: int) -> np.ndarray:
    """n int64 zeros in memory shared with the processes forked after this (an anonymous mmap is
    MAP_SHARED): each child writes its bytes read so far into its own slot, the parent reads them all."""
    return np.frombuffer(mmap.mmap(-1, 8 * max(1, n)), np.int64)[:n]


def _replies(children: list, dim: int, waiting=None):
    """Each child's ("ok", rows, dim, words), in range order; None when one failed or read another dimension.
    ``waiting()`` is called every WAIT_REPORT seconds while a child has not replied (its progress)."""
    replies = []
    for _, receive in children:
        try:
            while waiting is not None and not receive.poll(WAIT_REPORT):
                waiting()
            reply = receive.recv()
        except EOFError:
            return None
        if reply[0] != "ok" or reply[2] != dim:
            return None
        replies.append(reply)
    return replies


def _receive_rows(matrix: np.ndarray, words: list, children: list, replies: list) -> None:
    """The children's rows received straight into ``matrix`` after the first range's, their words
    added to ``words``."""
    dim = matrix.shape[1]
    offset = len(words) * dim * 4
    with memoryview(matrix.reshape(-1).view(np.uint8)) as flat:
        for (_, receive), (_, n, _, more_words) in zip(children, replies):
            for a, b in reversed(_parts(n, dim)):
                _receive_into(receive, flat[offset + a * dim * 4:offset + b * dim * 4])
            offset += n * dim * 4
            words.extend(more_words)


def _send_raw(send, data: memoryview) -> None:
    """``data``'s bytes down ``send``'s pipe as they are (_receive_into's; its length known to both sides)."""
    fd, done = send.fileno(), 0
    while done < len(data):
        done += os.write(fd, data[done:])


def _receive_into(receive, target: memoryview) -> None:
    """Exactly len(target) bytes from ``receive``'s pipe, read straight into ``target``: Connection's
    recv_bytes_into gathers a whole message in a buffer of its own first, which at PART_BYTES was the
    largest thing the reading process held besides the matrix and the words (issue 48.6)."""
    fd, done = receive.fileno(), 0
    while done < len(target):
        got = os.readv(fd, [target[done:]])
        if not got:
            raise EOFError("a reading process ended in the middle of its rows")
        done += got


def _parts(rows: int, dim: int) -> list:
    """[(start, stop)] of a child's rows sent one part at a time (about PART_BYTES each)."""
    step = max(1, PART_BYTES // (4 * max(1, dim)))
    return [(a, min(rows, a + step)) for a in range(0, rows, step)]


def _end_children(children: list) -> None:
    """However the read ends (done, given up, interrupted): no child outlives it. A child still
    sending gets EPIPE once its reader is closed, and SIGTERM ends it where it is."""
    for child, receive in children:
        receive.close()
        child.terminate()
    for child, _ in children:
        child.join()


def _cuts(path: str, start: int, size: int, parts: int):
    """[start, c1, ..., size]: `parts` ranges of whole lines of about equal bytes, or None when a
    cut cannot be placed (a line longer than a range) or a range would end in a blank line (a
    blank line is allowed only at the end of the file, which a range cannot see)."""
    cuts = [start]
    with open(path, "rb") as f:
        for k in range(1, parts):
            at = start + (size - start) * k // parts
            if at <= cuts[-1]:
                return None
            f.seek(at)
            window = f.read(1 << 16)
            newline = window.find(b"\n")
            if newline < 0 or at + newline + 1 >= size:
                return None
            cut = at + newline + 1
            f.seek(max(cuts[-1], cut - (1 << 16)))
            before = f.read(cut - 1 - f.tell())
            if not before[before.rfind(b"\n") + 1:].strip():
                return None
            cuts.append(cut)
    cuts.append(size)
    return cuts


class _Range:
    """Bytes [start, stop) of a plain file, read as a Source is (TextReader needs no more)."""

    compression = None
    bom = False

    def __init__(self, path: str, start: int, stop: int, size: int):
        self.path = self.name = path
        self.size = size
        self._file = open(path, "rb")
        self._file.seek(start)
        self._pos, self._stop = start, stop
        self.span = (start, stop)   # what TextReader sizes its matrix from

    def read(self, n: int) -> bytes:
        data = self._file.read(max(0, min(n, self._stop - self._pos)))
        self._pos += len(data)
        return data

    def consumed(self) -> int:
        return self._pos

    def close(self) -> None:
        self._file.close()
