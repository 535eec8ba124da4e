"""The one vector type that every reader returns and every writer takes."""

from __future__ import annotations

from dataclasses import dataclass, field

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

