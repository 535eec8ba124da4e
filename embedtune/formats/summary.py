"""What `embedtune inspect` shows of a vectors file, read a block of rows at a time (formats.stream_table)."""

from __future__ import annotations

import numpy as np

from embedtune.formats import stream_table
from embedtune.formats.io import display_name
from embedtune.words import WordList

def summarize_vectors(path, format=None, *, replace_bad_utf8=False, progress=None, max_listed=20) -> dict:
    """What `embedtune inspect` shows: format, count, dimension, norms, NaN/inf rows, duplicates.

    Returns a JSON-ready dict; the lists name at most `max_listed` rows each. The file is read a block
    of rows at a time: what is kept is 8 bytes of norm, 8 of hash and the word's bytes per row, never
    the matrix (issue 48: inspect held three copies of it, and is the first command run on a new file).
    """
    norms, bad, bad_words, repeats, rows = [], [], [], _Repeats(), 0
    with stream_table(path, format, replace_bad_utf8=replace_bad_utf8, progress=progress) as stream:
        for words, block in stream.blocks():
            finite = np.isfinite(block).all(axis=1)
            if not finite.all():
                block = block[finite]
                lost = np.flatnonzero(~finite)
                bad.append(lost + rows)
                bad_words.extend(words[int(r)] for r in lost[:max(0, max_listed - len(bad_words))])
            norms.append(np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64)))
            repeats.add(words)
            rows += len(words)
        head, dim, model = stream.head, stream.dim, stream.model
    norms = np.concatenate(norms) if norms else np.empty(0)
    bad = np.concatenate(bad) if bad else np.empty(0, np.intp)
    duplicates = repeats.find()
    first_where = (lambda r: {"first_line": head.first_row + r}) if head.rows_are_lines \
        else (lambda r: {"first_record": r + 1})
    return {
        "file": display_name(path),
        "format": head.format,
        "count": rows,
        "dim": int(dim),
        "norm": {
            "min": float(norms.min()) if norms.size else None,
            "median": float(np.median(norms)) if norms.size else None,
            "max": float(norms.max()) if norms.size else None,
        },
        "nonfinite_rows": int(bad.size),
        "nonfinite": [{"word": word, **head.where(int(r))} for word, r in zip(bad_words, bad[:max_listed])],
        "duplicate_words": len(duplicates),
        "duplicates": [{"word": repeats.word(r), **head.where(r), **first_where(f)}
                       for r, f in duplicates[:max_listed]],
        **({"fasttext": model.settings()} if model is not None else {}),
    }


class _Repeats:
    """find_duplicates over words seen a block at a time, holding each word's UTF-8 bytes and a 64-bit
    hash instead of a str and a set entry (a fraction of their memory on millions of words): rows whose
    hash was seen before are the only candidates, and those are compared by their bytes."""

    def __init__(self):
        self._hashes, self._lengths, self._data = [], [], []

    def add(self, words) -> None:
        if isinstance(words, WordList) and not words.tail and len(words):
            encoded = words.data.split(b"\n")   # its words hold no line break
        else:
            encoded = [word.encode("utf-8", "surrogatepass") for word in words]
        self._hashes.append(np.fromiter(map(hash, encoded), np.int64, len(encoded)))
        self._lengths.append(np.fromiter(map(len, encoded), np.int64, len(encoded)))
        self._data.append(b"".join(encoded))

    def find(self) -> list:
        """[(row, first_row)] for every row whose word appeared earlier (0-based rows), as find_duplicates."""
        self._data = b"".join(self._data)
        lengths = np.concatenate(self._lengths) if self._lengths else np.empty(0, np.int64)
        self._ends = np.cumsum(lengths)
        self._starts = self._ends - lengths
        hashes = np.concatenate(self._hashes) if self._hashes else np.empty(0, np.int64)
        self._hashes = self._lengths = None
        order = np.argsort(hashes, kind="stable")
        same = hashes[order[1:]] == hashes[order[:-1]]
        if not same.any():
            return []
        grouped = np.zeros(len(order), bool)
        grouped[1:] |= same
        grouped[:-1] |= same
        first, duplicates = {}, []
        for row in np.sort(order[grouped]).tolist():
            seen = first.setdefault(self._bytes(row), row)
            if seen != row:
                duplicates.append((row, seen))
        return duplicates

    def _bytes(self, row: int) -> bytes:
        return self._data[self._starts[row]:self._ends[row]]

    def word(self, row: int) -> str:
        return self._bytes(row).decode("utf-8", "surrogatepass")
