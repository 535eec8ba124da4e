"""The corpus streamed as chunks of row ids, each ending at a line boundary."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune.corpus.fast import FastPass
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
    passes = getattr(corpus, "fast", None)
    if passes is not None:   # counted by the compiled reader: its ids, no text read again
        corpus.reads[None] += 1
        yield from fast_id_chunks(passes, index, chunk_tokens, numbered)
        return
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



def fast_id_chunks(passes: FastPass, index: dict[str, int], chunk_tokens: int,
                   numbered: bool) -> Iterator[IdChunk]:
    """id_chunks' chunks from the compiled reader's raw ids: each raw token's pieces looked up in
    ``index`` once, the ids expanded (kernels.tokens.expand) and cut into chunks where id_chunks cuts:
    after the first line that brings the chunk to ``chunk_tokens`` ids."""
    from embedtune.kernels.tokens import expand

    table = passes.table
    pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []   # (rows, kept, numbers, raw)
    n_pending = 0
    rows_of = None
    for ids, unit_tokens, unit_numbers in passes.blocks():
        if rows_of is None or len(rows_of[0]) < table.n_types + 1:   # again if the pass found new tokens
            rows_of = passes.rows_of(index)
        rows, kept, pieces = expand(ids, unit_tokens, *rows_of)
        ends = np.cumsum(kept)
        u0 = 0
        while True:
            base = int(ends[u0 - 1]) if u0 else 0
            u = int(np.searchsorted(ends, base + chunk_tokens - n_pending, side="left"))
            if u >= len(ends):
                break
            pending.append(_part(rows, kept, pieces, unit_numbers, u0, u + 1, base, int(ends[u])))
            yield _joined(pending, numbered)
            pending, n_pending, u0 = [], 0, u + 1
        base = int(ends[u0 - 1]) if u0 else 0
        pending.append(_part(rows, kept, pieces, unit_numbers, u0, len(kept), base, len(rows)))
        n_pending += len(rows) - base
    if n_pending or any(part[3] for part in pending):
        yield _joined(pending, numbered)


def _part(rows, kept, pieces, numbers, u0: int, u1: int, r0: int, r1: int):
    """Units u0:u1 of a block (their rows r0:r1): rows, ids per line with ids, those lines' numbers, tokens."""
    lines = kept[u0:u1]
    has = lines > 0
    return rows[r0:r1], lines[has], numbers[u0:u1][has], int(pieces[u0:u1].sum())


def _joined(parts, numbered: bool) -> IdChunk:
    lengths = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    line = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    ids = np.concatenate([p[0] for p in parts]).astype(np.int32, copy=False) if parts else np.zeros(0, np.int32)
    numbers = np.concatenate([p[2] for p in parts]).astype(np.int64) if numbered and parts else None
    if numbered and numbers is None:
        numbers = np.zeros(0, np.int64)
    return IdChunk(ids, line, sum(p[3] for p in parts), numbers)
