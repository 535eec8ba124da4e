"""The one vector type that every reader returns and every writer takes, and the form training
returns it in: the input's rows with the trained ones put in their place, never copied whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass
class Vectors:
    """Words in file order and their float32 vectors.

    words : list of str, length n
    matrix : float32 array of shape = [n, dim]; row i is the vector of ``words[i]``
    index : dict word -> row (derived from ``words``)
    """

    words: list[str]
    matrix: np.ndarray
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.matrix = np.asarray(self.matrix, dtype=np.float32)
        if self.matrix.ndim != 2:
            raise ValueError(f"matrix must be 2-D, got shape {self.matrix.shape}")
        if len(self.words) != self.matrix.shape[0]:
            raise ValueError(f"{len(self.words)} words but {self.matrix.shape[0]} rows")
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __getitem__(self, word: str) -> np.ndarray:
        return self.matrix[self.index[word]]

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def to_keyed_vectors(self):
        """A gensim ``KeyedVectors`` with a copy of these words and vectors, in this order: changing
        one leaves the other as it was."""
        from gensim.models import KeyedVectors

        kv = KeyedVectors(self.dim, count=0, dtype=np.float32)
        kv.index_to_key = list(self.words)
        kv.key_to_index = dict(self.index)
        kv.vectors = self.matrix.copy()
        kv.next_index = len(self.words)
        return kv

    @classmethod
    def from_keyed_vectors(cls, kv) -> "Vectors":
        """Vectors with a copy of a gensim ``KeyedVectors``' words (``index_to_key``, which must be
        strings) and vectors, as float32."""
        words = list(kv.index_to_key)
        bad = next((w for w in words if not isinstance(w, str)), None)
        if bad is not None:
            from embedtune.errors import EmbedtuneError

            raise EmbedtuneError(f"KeyedVectors keys must be words (str), got {type(bad).__name__} {bad!r}")
        # gensim may allocate rows ahead of its keys; only the first len(words) hold vectors.
        return cls(words, np.array(kv.vectors[: len(words)], dtype=np.float32, copy=True))

    def block(self, start: int, stop: int) -> np.ndarray:
        """float32 [stop - start, dim]: rows start..stop-1 (what writers read, a block at a time)."""
        return self.matrix[start:stop]


class PatchedVectors:
    """``base``'s rows with some replaced, plus appended ones: what training returns.

    words : list of str [n], n >= len(base); base : float32 [n_base, dim], not copied;
    rows : int [k], the rows that differ from ``base`` (every row from n_base on among them);
    values : float32 [k, dim], their vectors.

    Writers read it a block of rows at a time (``block``), so writing a 3M x 300 table needs no
    second 3.6 GB copy of it. ``matrix`` and ``index`` behave as in Vectors, made on first use.
    """

    def __init__(self, words: list[str], base: np.ndarray, rows: np.ndarray, values: np.ndarray):
        order = np.argsort(rows, kind="stable")
        self.words = words
        self.base = base
        self.rows = np.asarray(rows, np.int64)[order]
        self.values = np.asarray(values, np.float32)[order]
        n, n_base = len(words), len(base)
        if len(self.rows) != len(self.values) or len(np.unique(self.rows)) != len(self.rows):
            raise ValueError("rows must be distinct, one per row of values")
        if len(self.rows) and (self.rows[0] < 0 or self.rows[-1] >= n):
            raise ValueError(f"rows must lie in [0, {n})")
        if n - n_base != int((self.rows >= n_base).sum()):
            raise ValueError("every row after the base's must be given")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __getitem__(self, word: str) -> np.ndarray:
        return self.block(self.index[word], self.index[word] + 1)[0]

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])

    def block(self, start: int, stop: int) -> np.ndarray:
        """float32 [stop - start, dim]: rows start..stop-1, a fresh array."""
        stop = min(stop, len(self.words))
        out = np.empty((max(stop - start, 0), self.dim), np.float32)
        from_base = min(stop, len(self.base))
        if from_base > start:
            out[:from_base - start] = self.base[start:from_base]
        lo, hi = np.searchsorted(self.rows, [start, stop])
        out[self.rows[lo:hi] - start] = self.values[lo:hi]
        return out

    @cached_property
    def matrix(self) -> np.ndarray:
        """float32 [n, dim], the whole table (a copy: for library use, not for writing)."""
        return self.block(0, len(self.words))

    @cached_property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}
