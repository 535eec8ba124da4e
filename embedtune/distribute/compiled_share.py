"""A worker's share of a corpus file through the compiled reader (embedtune/corpus/fast.py).

The reference reader decodes and splits a share's lines in Python, a pass that cost a worker more CPU
than its half of the pairs (benchmarks/README.md, distribute_speed). A file the compiled reader can read
is instead scanned whole, once, by it (a compiled pass over the bytes, far faster than a share in
Python) and its ids kept, as one process keeps them (``Corpus.fast``); the share's count
(``count_share``: the reference's ShareCount, the same words, order, first lines and lines) and every
later pass over the share (``SharePass``: what id_chunks reads for training, glove's co-occurrences and
the new words' contexts) take the share's lines from those ids. Every worker scans every line, so a
line no reader accepts fails every worker, as it fails one process.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator

import numpy as np

from embedtune.corpus.counts import ShareCount


def reads_compiled(corpus) -> bool:
    """Whether ``Corpus.count`` would read ``corpus`` with the compiled reader (a plain-text file; labelled
    lines' shares are read by the reference's reader: a share's compiled pass keeps no labels)."""
    from embedtune.corpus.text import Corpus

    return isinstance(corpus, Corpus) and corpus.reads_compiled and corpus.label_prefix is None


def share_blocks(blocks, share: tuple[int, int]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The compiled reader's blocks (raw ids, tokens per unit, line numbers) cut to the units of lines
    k, k + n, ... (line numbers from 1, as the reference's shares count them)."""
    k, n = share
    for ids, unit_tokens, unit_numbers in blocks:
        mine = (unit_numbers - 1) % n == k
        if mine.all():
            yield ids, unit_tokens, unit_numbers
        elif mine.any():
            yield ids[np.repeat(mine, unit_tokens)], unit_tokens[mine], unit_numbers[mine]


class SharePass:
    """A FastPass's interface (``table``, ``blocks``, ``rows_of``) over one share of its lines: what
    id_chunks reads. The rows of an index are the whole file's pass's, made once for every share."""

    def __init__(self, passes, share: tuple[int, int]):
        self.passes, self.share, self.table = passes, share, passes.table

    def blocks(self):
        return share_blocks(self.passes.blocks(), self.share)

    def rows_of(self, index: dict[str, int]):
        return self.passes.rows_of(index)


def count_share(corpus, share: tuple[int, int]) -> ShareCount:
    """``Corpus.count_share(share)``'s result from one compiled pass over the whole file, which is kept
    as ``corpus.fast`` (and its digest as ``corpus.digest``) for the passes that follow."""
    from embedtune.corpus.fast import FastPass
    from embedtune.kernels.tokens import expand

    digest = hashlib.sha256()
    passes = FastPass(corpus)
    corpus.reads[None] += 1
    passes.count(digest)
    corpus.fast, corpus.digest = passes, digest.hexdigest()
    table = passes.table
    n_words = len(table.words)
    piece_start = np.asarray(table.piece_start, np.int64)
    piece_words = np.asarray(table.piece_ids, np.int32)   # every piece is a word: none dropped
    totals = np.zeros(n_words, np.int64)
    first_line = np.zeros(n_words, np.int64)
    seen = np.zeros(n_words, bool)
    order, n_lines = [], 0
    for ids, unit_tokens, unit_numbers in share_blocks(passes.blocks(), share):
        words, kept, _ = expand(ids, unit_tokens, piece_start, piece_words)
        n_lines += int(np.count_nonzero(kept))
        found, first, times = np.unique(words, return_index=True, return_counts=True)
        totals[found] += times
        new = ~seen[found]
        found, first = found[new], first[new]
        by_first = np.argsort(first, kind="stable")   # the words new in this block, in the order first seen
        found, first = found[by_first], first[by_first]
        seen[found] = True
        first_line[found] = np.repeat(unit_numbers, kept)[first]
        order.append(found)
    order = np.concatenate(order) if order else np.zeros(0, np.int64)
    counts = Counter(dict(zip([table.words[i] for i in order.tolist()], totals[order].tolist())))
    return ShareCount(counts, n_lines, first_line[order])
