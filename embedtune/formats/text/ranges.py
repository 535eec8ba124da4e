"""The parallel text read's ranges and transfers (read.py): where a file is cut, and the children's
replies and rows received into the matrix."""

from __future__ import annotations

import numpy as np

PART_BYTES = 64 << 20  # a child's rows are sent and let go this many bytes at a time


def _replies(children: list, dim: int):
    """Each child's ("ok", rows, dim, words), in range order; None when one failed or read another dimension."""
    replies = []
    for _, receive in children:
        try:
            reply = receive.recv()
        except EOFError:
            return None
        if reply[0] != "ok" or reply[2] != dim:
            return None
        replies.append(reply)
    return replies


def _receive_rows(matrix: np.ndarray, words: list, children: list, replies: list, progress=None) -> None:
    """The children's rows received straight into ``matrix`` after the first range's, their words
    added to ``words``; ``progress(rows received, rows in all)`` after each part (seconds of a large file)."""
    dim = matrix.shape[1]
    flat = memoryview(matrix.reshape(-1).view(np.uint8))
    offset = len(words) * dim * 4
    total, received = sum(reply[1] for reply in replies), 0
    for (_, receive), (_, n, _, more_words) in zip(children, replies):
        for a, b in reversed(_parts(n, dim)):
            receive.recv_bytes_into(flat, offset + a * dim * 4)
            received += b - a
            if progress is not None:
                progress(received, total)
        offset += n * dim * 4
        words.extend(more_words)


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
