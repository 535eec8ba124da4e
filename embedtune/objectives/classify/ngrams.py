"""classify's word n-gram rows (--word-ngrams): which n-grams of the training lines become rows of the
classifier's table, each line's n-grams as row ids, and each row's start."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from embedtune.objectives.classify.model import LINE_END, line_means


@dataclass
class NgramRows:
    """ngrams : [G] the n-grams that are rows (words joined by one space), row g is ngrams[g];
    index : n-gram -> its row; ids, starts : each line's n-gram rows as ids with an offset a line
    ([n_lines + 1]; None without n-grams); start : float32 [G, dim] each row's start (None without)."""

    ngrams: list[str] = field(default_factory=list)
    index: dict = field(default_factory=dict)
    ids: np.ndarray | None = None
    starts: np.ndarray | None = None
    start: np.ndarray | None = None


def ngram_rows(line_tokens: list[list[str]], word_ngrams: int, min_count: int, local_index: dict,
               start: np.ndarray) -> NgramRows:
    """The n-gram rows: the n-grams of 2 to word_ngrams tokens of the training lines (``line_tokens``:
    each line's tokens) seen at least min_count times, most frequent first (ties by text, so runs and
    resumes agree), each line's as ids (a line's 2-grams in order, then its 3-grams, ...:
    ``model.word_ngrams``' order); each starts at the mean of its words' starting rows (``start``
    [n_local, dim], words of the run by ``local_index``; zero with none), so that a line's mean starts
    near its words' mean and the fitted classifier still fits. None of them below 2."""
    if word_ngrams < 2:
        return NgramRows()
    # The n-grams as numbers, not strings: each distinct token an int, each k-gram the rank of (its
    # first k - 1 tokens' (k-1)-gram, its last token), counted and ranked by np.unique; only the
    # rows kept are joined into text, to sort ties by it. The same rows, ids and starts as a string
    # an occurrence (word_ngrams, a Counter, a dict lookup each), in about half the time
    # (benchmarks/README.md, classify).
    n_lines = len(line_tokens)
    tokens = list(itertools.chain.from_iterable(line_tokens))
    lengths = np.fromiter(map(len, line_tokens), np.int64, n_lines)
    line_of = np.repeat(np.arange(n_lines), lengths)
    left = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(tokens))   # tokens to the line's end
    seen: dict[str, int] = {}   # token -> where it first occurs
    token_ids = np.fromiter(map(seen.setdefault, tokens, itertools.count()), np.int64, len(tokens))
    width = len(tokens) + 1   # every token id and k-gram rank is below it
    prefix = token_ids        # at each place, the id of the (k-1)-gram starting there
    gram_at, gram_line, first, size = [], [], [], []   # per k: each occurrence's gram and line; each gram's first place
    for k in range(2, word_ngrams + 1):
        at = np.flatnonzero(left >= k)
        _, first_k, rank = np.unique(prefix[at] * width + token_ids[at + k - 1], return_index=True,
                                     return_inverse=True)
        offset = sum(map(len, first))
        gram_at.append(offset + rank)
        gram_line.append(line_of[at])
        first.append(at[first_k])
        size.append(np.full(len(first_k), k))
        prefix = np.zeros(len(tokens), np.int64)
        prefix[at] = rank
    # Occurrences in word_ngrams' order: by line (stable: within a line by k, then place).
    gram_line = np.concatenate(gram_line)
    order = np.argsort(gram_line, kind="stable")
    gram_at, gram_line = np.concatenate(gram_at)[order], gram_line[order]
    first, size = np.concatenate(first), np.concatenate(size)
    counts = np.bincount(gram_at, minlength=len(first))
    kept = np.flatnonzero(counts >= min_count)
    texts = [" ".join(tokens[p:p + k]) for p, k in zip(first[kept].tolist(), size[kept].tolist())]
    # Most frequent first, ties by text: sorted by text, then a stable sort by count.
    by_text = np.array(sorted(range(len(kept)), key=texts.__getitem__), np.int64)
    by_count = by_text[np.argsort(-counts[kept[by_text]], kind="stable")]
    ngrams = [texts[i] for i in by_count.tolist()]
    row = np.full(len(first), -1, np.int64)
    row[kept[by_count]] = np.arange(len(kept))
    ids = row[gram_at]
    known = ids >= 0
    gram_ids = ids[known].astype(np.int32)
    gram_starts = np.concatenate([[0], np.cumsum(np.bincount(gram_line[known], minlength=n_lines))])
    # Each n-gram's words, in order: the tokens from its first place on.
    local = np.full(len(tokens) + 1, -1, np.int64)   # token id -> local row (-1: not a word of the run)
    local[np.fromiter(seen.values(), np.int64, len(seen))] = np.fromiter(
        map(local_index.get, seen, itertools.repeat(-1)), np.int64, len(seen))
    gram_size = size[kept[by_count]]
    of_gram = np.repeat(np.arange(len(ngrams)), gram_size)
    places = np.repeat(first[kept[by_count]], gram_size) + np.arange(len(of_gram)) \
        - np.repeat(np.cumsum(gram_size) - gram_size, gram_size)
    word_ids = local[token_ids[places]]
    found = word_ids >= 0
    ngram_start = line_means(start, word_ids[found], np.concatenate(
        [[0], np.cumsum(np.bincount(of_gram[found], minlength=len(ngrams)))]))
    return NgramRows(ngrams, {g: i for i, g in enumerate(ngrams)}, gram_ids, gram_starts, ngram_start)


def with_line_end(rows: NgramRows, n_lines: int, dim: int) -> NgramRows:
    """``rows`` and one more, LINE_END's, last in every line's (fastText's end-of-line word, model.py),
    starting at zero (the mean's other rows decide the fitted classifier's start)."""
    if not rows.ngrams:
        ids, starts = np.zeros(0, np.int32), np.zeros(n_lines + 1, np.int64)
        start = np.zeros((0, dim), np.float32)
    else:
        ids, starts, start = rows.ids, rows.starts, rows.start
    end = len(rows.ngrams)
    # each line's ids, then the line end's: the old ids shifted by the lines before, one each
    placed = np.empty(len(ids) + n_lines, np.int32)
    new_starts = starts + np.arange(n_lines + 1)
    keep = np.ones(len(placed), bool)
    keep[new_starts[1:] - 1] = False
    placed[keep] = ids
    placed[~keep] = end
    return NgramRows(rows.ngrams + [LINE_END], {**rows.index, LINE_END: end}, placed, new_starts,
                     np.concatenate([start, np.zeros((1, dim), np.float32)]))


def ngram_features(ngrams: list[str], table, ids, starts):
    """model.line_means' ``ngrams`` argument: (n-gram rows, each line's n-gram ids, their offsets), or
    None without n-gram rows."""
    return None if not ngrams else (table, ids, starts)
