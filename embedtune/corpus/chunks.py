"""The corpus streamed as chunks of row ids, each ending at a line boundary."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune.corpus.text import Corpus


CHUNK_TOKENS = 1 << 20  # tokens per chunk handed to the pair generator


@dataclass
class IdChunk:
    """A run of corpus tokens as row ids.

    ids : int32 array of shape = [n]; words outside the training vocabulary are dropped
    line : int32 array of shape = [n]; tokens with equal values come from the same line
    raw_tokens : tokens read for this chunk, dropped ones included (for progress and lr decay)
    """

    ids: np.ndarray
    line: np.ndarray
    raw_tokens: int
    numbers: np.ndarray | None = None   # int64 [lines of the chunk]: each line's number in the corpus (numbered)


def id_chunks(corpus: Corpus, index: dict[str, int], chunk_tokens: int = CHUNK_TOKENS,
              numbered: bool = False) -> Iterator[IdChunk]:
    """Stream the corpus as chunks of ids, each chunk ending at a line boundary; ``numbered``: with
    each line's number in the corpus (``corpus.numbered_lines``: a share of the lines numbers them as
    the whole corpus does)."""
    ids: list[int] = []
    line_lengths: list[int] = []
    numbers: list[int] = []
    raw = 0
    get = index.get
    lines = corpus.numbered_lines() if numbered else ((0, tokens) for tokens in corpus.lines())
    for number, tokens in lines:
        row = [i for i in map(get, tokens) if i is not None]
        raw += len(tokens)
        if row:
            ids.extend(row)
            line_lengths.append(len(row))
            numbers.append(number)
        if len(ids) >= chunk_tokens:
            yield _chunk(ids, line_lengths, raw, numbers if numbered else None)
            ids, line_lengths, numbers, raw = [], [], [], 0
    if ids or raw:
        yield _chunk(ids, line_lengths, raw, numbers if numbered else None)


def _chunk(ids, line_lengths, raw, numbers=None) -> IdChunk:
    line = np.repeat(np.arange(len(line_lengths), dtype=np.int32), line_lengths)
    return IdChunk(np.asarray(ids, dtype=np.int32), line, raw,
                   None if numbers is None else np.asarray(numbers, np.int64))

