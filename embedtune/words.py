"""Words held compactly, below the vector type and the formats that both read them: a list of words as
one block of UTF-8 bytes (``WordList``) and the word -> row index over any list of words (``WordIndex``).
A fastText model (embedtune.formats.fasttext) keeps its dictionary as a WordList, and the vectors
(embedtune.vectors) declare the model they came from: both stand on this module, not on each other."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

SLOTS_PER_WORD = 2.5   # at least; the table's size is a power of two (at most 5 slots a word)


class WordList(Sequence):
    """A list of words kept as UTF-8 bytes in one block, a str made only for the word asked for.

    One block of bytes and its offsets takes a fraction of the memory of 3M Python str and their
    list (benchmarks/README.md, memory). The word2vec binary reader returns one (the 3M-row GoogleNews case, issue
    16), other readers a plain list. Reads like a list: ``len``, ``words[i]``, ``words[i:j]``
    (a list of str), iteration, ``==`` with any sequence of words, ``+`` (a list).

    data : bytes, the words joined by ``\n`` (no word holds one, each is valid UTF-8)
    ends : int64 [n], where each word's bytes end in ``data``
    tail : list of str, words after those of ``data`` (``appended``: a plan's new words)
    """

    BLOCK = 1 << 16   # words decoded at a time when iterating

    def __init__(self, data: bytes, ends: np.ndarray, tail: list | None = None):
        self._data = data
        self._ends = ends
        self._tail = list(tail or ())

    @classmethod
    def from_bytes(cls, raw_words: list) -> "WordList | None":
        """The words of ``raw_words`` (bytes), or None when one is empty, holds a line break or is
        not UTF-8 (the caller then names it)."""
        data = b"\n".join(raw_words)
        if data.count(b"\n") != max(0, len(raw_words) - 1) or not all(raw_words):
            return None
        try:
            data.decode("utf-8")   # checks every word: each starts after a \n, a character boundary
        except UnicodeDecodeError:
            return None
        ends = np.cumsum(np.fromiter(map(len, raw_words), np.int64, len(raw_words)) + 1) - 1
        return cls(data, ends)

    @property
    def data(self) -> bytes:
        """The words before ``tail``, UTF-8, joined by ``\n`` (what compiled code reads: formats/subwords.py)."""
        return self._data

    @property
    def ends(self) -> np.ndarray:
        """int64: where each word of ``data`` ends in it."""
        return self._ends

    @property
    def tail(self) -> list:
        """The words appended after those of ``data``."""
        return self._tail

    def _start(self, i: int) -> int:
        return int(self._ends[i - 1]) + 1 if i else 0

    def __len__(self) -> int:
        return len(self._ends) + len(self._tail)

    def _word(self, i: int) -> str:
        """Word ``i`` of ``data`` (i < len(ends))."""
        return self._data[self._start(i):int(self._ends[i])].decode("utf-8")

    def _words(self, start: int, stop: int) -> list[str]:
        """Words ``start`` to ``stop`` - 1 of ``data`` (stop <= len(ends))."""
        if start >= stop:
            return []
        return self._data[self._start(start):int(self._ends[stop - 1])].decode("utf-8").split("\n")

    def __getitem__(self, i):
        n_data = len(self._ends)
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[k] for k in range(start, stop, step)]
            return self._words(start, min(stop, n_data)) + self._tail[max(start - n_data, 0):max(stop - n_data, 0)]
        i = operator.index(i)
        if i < 0:
            i += len(self)
        if 0 <= i < n_data:
            return self._word(i)
        if n_data <= i < len(self):
            return self._tail[i - n_data]
        raise IndexError("word index out of range")

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self._ends), self.BLOCK):
            yield from self[start:min(start + self.BLOCK, len(self._ends))]
        yield from self._tail

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other))

    __hash__ = None

    def __add__(self, other) -> list:
        return list(self) + list(other)

    def __radd__(self, other) -> list:
        return list(other) + list(self)

    def appended(self, words) -> "WordList":
        """These words and then ``words``: a new WordList sharing this one's bytes."""
        return WordList(self._data, self._ends, self._tail + list(words))

    def __repr__(self) -> str:
        return f"WordList({len(self)} words)"


class WordIndex(Mapping):
    """word -> row over a list of words, like ``{w: i for i, w in enumerate(words)}`` (the last row
    of a repeated word; iteration in first-seen order) without a Python dict.

    A dict of 3M words holds 3M int objects and an 8M-slot table of entries, more memory than issue
    16's 3M memory goal was missed by (benchmarks/README.md, memory). Here the index is one int32 array
    of rows by ``hash(word)`` with linear probing (2.5 to 5 slots a word), filled with numpy, a few
    rounds in all; a lookup probes about 1.3 slots and compares
    the word itself, so a hash that two words share never gives a wrong row. It keeps ``words``
    (not copied), which must not change afterwards.

    A lookup costs somewhat more than a dict's (benchmarks/README.md, memory); code that looks up
    every corpus token makes a dict of the words it needs first
    (init.context_sums), and ``rows`` answers many words at once with numpy.
    """

    def __init__(self, words):
        self._words = words
        n = len(words)
        size = 8
        while size < SLOTS_PER_WORD * n:
            size *= 2
        self._mask = mask = size - 1
        table = np.full(size, -1, np.int32 if n < 2**31 else np.int64)
        hashes = np.fromiter(map(hash, words), np.int64, n)
        pending = np.arange(n, dtype=table.dtype)
        slots = (hashes & mask).astype(np.int64)
        skipped = []   # rows that repeat a word seen at another row
        while len(pending):
            free = table[slots] < 0
            table[slots[free]] = pending[free]   # of rows that want the same free slot, one gets it
            lost = table[slots] != pending
            if lost.any():
                # A lost row that meets its own hash may repeat a word: the later row is kept.
                lost_at = np.flatnonzero(lost)
                holders = table[slots[lost_at]]
                for i in lost_at[hashes[holders] == hashes[pending[lost_at]]].tolist():
                    row, other = int(pending[i]), int(table[slots[i]])
                    if words[row] == words[other]:
                        table[slots[i]] = max(row, other)
                        skipped.append(min(row, other))
                        lost[i] = False
            pending, slots = pending[lost], (slots[lost] + 1) & mask
        self._table = table
        self._keys_rows = None   # rows_of_keys' last (mapping, rows)
        self._slots = memoryview(table)   # indexing a memoryview gives a Python int, faster than numpy
        self._len = n - len(skipped)
        # Rows whose word is at an earlier row too: iteration skips them (a dict's order).
        self._later = None
        if skipped:
            rows_of = {}
            for row in skipped:
                rows_of.setdefault(words[row], {self.find(words[row])}).add(row)
            self._later = {row for rows in rows_of.values() for row in rows if row != min(rows)}

    def find(self, word) -> int:
        """The row of ``word``, -1 when it has none."""
        slots, words, mask = self._slots, self._words, self._mask
        slot = hash(word) & mask
        while True:
            row = slots[slot]
            if row < 0:
                return -1
            if words[row] == word:
                return row
            slot = (slot + 1) & mask

    def rows(self, words: Iterable) -> np.ndarray:
        """int64 [len(words)]: the row of each word, -1 where there is none (one numpy pass a probe)."""
        words = words if isinstance(words, (list, tuple)) else list(words)
        out = np.full(len(words), -1, np.int64)
        own = self._words
        pending = np.arange(len(words))
        slots = np.fromiter(map(hash, words), np.int64, len(words)) & self._mask
        while len(pending):
            held = self._table[slots]
            occupied = held >= 0
            pending, slots, held = pending[occupied], slots[occupied], held[occupied]
            same = np.fromiter((own[r] == words[i] for i, r in zip(pending.tolist(), held.tolist())), bool,
                               len(pending))
            out[pending[same]] = held[same]
            pending, slots = pending[~same], (slots[~same] + 1) & self._mask
        return out

    def rows_of_keys(self, counts: Mapping) -> np.ndarray:
        """``rows(list(counts))``, read-only, made once for the same ``counts`` (a corpus's, not changed once
        counted): the plan, the new words' choice and their context pass each look the corpus's words up. The
        rows follow the keys alone; a mapping whose number of keys changed since is looked up again (one that
        swapped a key for another is not told apart: a corpus's counts are not changed once counted)."""
        held = self._keys_rows
        if held is None or held[0] is not counts or len(held[1]) != len(counts):
            rows = self.rows(list(counts))
            rows.flags.writeable = False
            self._keys_rows = held = (counts, rows)
        return held[1]

    def __getitem__(self, word) -> int:
        row = self.find(word)
        if row < 0:
            raise KeyError(word)
        return row

    def get(self, word, default=None):
        row = self.find(word)
        return default if row < 0 else row

    def __contains__(self, word) -> bool:
        return self.find(word) >= 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator:
        if self._later is None:
            return iter(self._words)
        return (w for row, w in enumerate(self._words) if row not in self._later)

    def values(self):
        if self._later is None:
            return range(len(self._words))
        return [self.find(w) for w in self]

    def items(self):
        return zip(self, self.values())
