"""The one vector type that every reader returns and every writer takes, and the form training
returns it in: the input's rows with the trained ones put in their place, never copied whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from embedtune.words import WordIndex

if TYPE_CHECKING:   # an annotation only
    from embedtune.formats.fasttext import FastTextModel


@dataclass
class Vectors:
    """Words in file order and their float32 vectors.

    words : list of str, length n
    matrix : float32 array of shape = [n, dim]; row i is the vector of ``words[i]``
    index : WordIndex, word -> row (derived from ``words``; a read-only mapping)
    model : the fastText model the rows were read from (its settings, dictionary and subword rows: what
        writing the model back and new words' spelling starts need), None for any other source.
        As gensim's FastTextKeyedVectors carries its n-gram vectors: declared here, never set on the side.
    """

    words: list[str]
    matrix: np.ndarray
    index: WordIndex = field(init=False, repr=False)
    model: FastTextModel | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.matrix = np.asarray(self.matrix, dtype=np.float32)
        if self.matrix.ndim != 2:
            raise ValueError(f"matrix must be 2-D, got shape {self.matrix.shape}")
        if len(self.words) != self.matrix.shape[0]:
            raise ValueError(f"{len(self.words)} words but {self.matrix.shape[0]} rows")
        self.index = WordIndex(self.words)

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
        kv.key_to_index = dict(self.index.items())
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
    values : float32 [k, dim], their vectors; model : the fastText model ``base`` was read from (Vectors.model).

    Writers read it a block of rows at a time (``block``), so writing a 3M x 300 table needs no
    second 3.6 GB copy of it. ``matrix`` and ``index`` behave as in Vectors, made on first use.
    """

    def __init__(self, words: list[str], base: np.ndarray, rows: np.ndarray, values: np.ndarray,
                 model: FastTextModel | None = None):
        order = np.argsort(rows, kind="stable")
        self.words = words
        self.base = base
        self.model = model
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
    def index(self) -> WordIndex:
        return WordIndex(self.words)


@dataclass
class VectorsOutline:
    """A vectors file's words and shape without its matrix: what ``train --dry-run`` plans from
    (formats.outline_vectors), so that it can tell whether a file too large to load would fit.

    words : list of str (or a WordList), length n, every row's word as a run reads it
    dim : the rows' dimension
    sample : float32 array of shape = [k, dim], k <= n: the first k rows, read and checked as a run
        reads them (the values of the rows after them are not read)
    file_bytes : the file's size (None: standard input)
    model : as Vectors.model; its matrices stay mapped from the file, not read
    index : WordIndex, word -> row, as Vectors'
    """

    words: list[str]
    dim: int
    sample: np.ndarray = field(repr=False)
    file_bytes: int | None = None
    model: FastTextModel | None = field(default=None, repr=False, compare=False)
    index: WordIndex = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = WordIndex(self.words)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    @property
    def matrix_bytes(self) -> int:
        """What the matrix would take loaded: n x dim float32."""
        return len(self.words) * self.dim * 4


def is_lowercase_vocabulary(vectors: Vectors | VectorsOutline, sample: int = 10000) -> bool:
    """True when the vectors' first ``sample`` words hold no upper-case one (GloVe's vocabulary)."""
    return not any(w != w.lower() for w in vectors.words[:sample])


def decide_lowercase(setting: str | None, vectors: Vectors | VectorsOutline) -> bool:
    """Whether text read against ``vectors`` is lower-cased: ``--lowercase`` (``vocab.lowercase``) yes or
    no, or auto (anything else): as the vectors' vocabulary is. The one rule of train, its dry run, init
    and retrofit's lexicons; each run decides it once."""
    lowercase = {"yes": True, "no": False}.get(setting)
    return is_lowercase_vocabulary(vectors) if lowercase is None else lowercase
