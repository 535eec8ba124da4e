"""classify's batch layout: lines cut into fixed-size batches of distinct words (and n-gram rows), the
budgets those sizes come from (token slots, distinct-word slots, measured on the lines), several workers'
batches joined into one, and the lines' tokens looked up (``SeenWords``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

TOKEN_SLACK = 1.25     # a batch's token slots: this many times the mean line length per line slot
WORD_SLACK = 1.25      # a batch's distinct-word slots: this many times the most of WORD_SAMPLES sampled batches
WORD_SAMPLES = 4


@dataclass
class GramLines:
    """The lines' n-gram rows as batches take them: ids with an offset a line, the n-gram rows (G, the
    sink's row id after the labels' L), and a batch's budget: gram tokens and distinct grams."""

    ids: np.ndarray
    starts: np.ndarray
    rows: int
    per_batch: int
    distinct_per_batch: int


def line_batches(order: np.ndarray, ids: np.ndarray, starts: np.ndarray, targets: np.ndarray, n_labels: int,
                 n_local: int, B: int, T: int, W: int, grams: GramLines | None = None) -> Iterator[dict]:
    """Up to B lines, T tokens and W distinct words a batch, padded to all three (one traced step
    shape), of the lines ``order`` lists (their local ``ids`` with ``starts`` [lines + 1] offsets;
    ``targets`` [lines, L]). "word" [W + 1] the batch's distinct local ids (sorted; the last slot and
    unused ones are padding), "weight" [W + 1] 1 for a real one; "slot" [T] each token's place in
    "word" (padding: the last slot), "segment" [T] its line slot (padding: the extra slot B);
    "targets" [B, L]. With ``grams``, "gram", "gram_weight", "gram_slot", "gram_segment" likewise.

    The step gathers, and the trainer merges and updates, each distinct row once: a row repeated
    in a batch (``the``, ``of``: 13.9k tokens but 4.3k distinct words in 1,024 glosses) comes
    back from the step already summed, and the trainer does not merge it (``distinct_ids``). That
    and token slots 1.25x the mean instead of 2x, against a slot a token, cut the step's CPU
    (benchmarks/README.md, classify)."""
    lengths = np.diff(starts)
    starts = starts[:-1]
    if not len(lengths):   # a worker whose share has no usable line: its padding has the shape, nothing in it
        if not len(order):
            return
        yield {"word": np.zeros(W + 1, np.int32), "weight": np.zeros(W + 1, np.float32),
               "slot": np.full(T, W, np.int32), "segment": np.full(T, B, np.int32),
               "targets": np.zeros((B, n_labels), np.float32), "pairs": 0}
        return
    if grams is not None:
        TG, G = grams.per_batch, grams.distinct_per_batch
        gram_starts, gram_lengths = grams.starts[:-1], np.diff(grams.starts)
    at = 0
    while at < len(order):
        # The most lines from ``at`` on that fit the token budget, then the distinct-word one (then
        # the n-grams' two, which may cut the lines again).
        take, flat, words, slot = _cut(order[at:at + B], ids, starts, lengths, T, W, n_local)
        if grams is not None:
            fewer, gram_flat, gram_rows, gram_slot = _cut(take, grams.ids, gram_starts, gram_lengths, TG, G,
                                                          grams.rows)
            if len(fewer) < len(take):
                take, flat, words, slot = _cut(fewer, ids, starts, lengths, T, W, n_local)
        at += len(take)
        used, n_words = len(flat), len(words)
        word = np.zeros(W + 1, np.int32)
        word[:n_words] = words
        weight = np.zeros(W + 1, np.float32)
        weight[:n_words] = 1
        slots = np.full(T, W, np.int32)
        slots[:used] = slot
        segment = np.full(T, B, np.int32)
        segment[:used] = np.repeat(np.arange(len(take), dtype=np.int32), lengths[take])
        batch_targets = np.zeros((B, n_labels), np.float32)
        batch_targets[:len(take)] = targets[take]
        batch = {"word": word, "weight": weight, "slot": slots, "segment": segment, "targets": batch_targets,
                 "pairs": len(take)}
        if grams is not None:
            # Side ids: label rows are [0, L), n-gram g is row L + g; padding reads the sink row.
            L, sink = n_labels, n_labels + grams.rows
            gram = np.full(G + 1, sink, np.int32)
            gram[:len(gram_rows)] = L + gram_rows
            gram_weight = np.zeros(G + 1, np.float32)
            gram_weight[:len(gram_rows)] = 1
            gram_slots = np.full(TG, G, np.int32)
            gram_slots[:len(gram_flat)] = gram_slot
            gram_segment = np.full(TG, B, np.int32)
            gram_segment[:len(gram_flat)] = np.repeat(np.arange(len(take), dtype=np.int32), gram_lengths[take])
            batch.update(gram=gram, gram_weight=gram_weight, gram_slot=gram_slots, gram_segment=gram_segment)
        yield batch


def _cut(take: np.ndarray, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, T: int, W: int, rows: int):
    """(the most lines of ``take`` from its start, and at least one, whose ``ids`` (of ``rows`` rows) fit
    in T tokens and W distinct ids; those lines' ids in order; their distinct ids, sorted; each id's
    place among them)."""
    ends = np.cumsum(lengths[take])
    take = take[:max(np.searchsorted(ends, T, side="right"), 1)]
    n, ends = lengths[take], ends[:len(take)]
    flat = ids[np.arange(ends[-1]) + np.repeat(starts[take] - (ends - n), n)]
    words, slot = _distinct(flat, rows)
    if len(words) > W:
        _, first = np.unique(flat, return_index=True)
        seen = np.zeros(len(flat) + 1, np.int64)
        seen[first + 1] = 1
        distinct = np.cumsum(seen)[ends]   # distinct ids up to each line's end (a line may have none)
        take = take[:max(np.searchsorted(distinct, W, side="right"), 1)]
        flat = flat[:ends[len(take) - 1]]
        words, slot = _distinct(flat, rows)
    return take, flat, words, slot


def _distinct(flat: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ids of ``flat``, sorted; each token's index among them): np.unique's, by a
    mark a row where the rows are few against the tokens, instead of a sort, which cost more
    (benchmarks/README.md, classify). ``rows``: the ids' range (local rows, or n-gram rows)."""
    if rows > 16 * len(flat):
        return np.unique(flat, return_inverse=True)
    present = np.zeros(rows, bool)
    present[flat] = True
    words = np.flatnonzero(present)
    place = np.empty(rows, np.int32)
    place[words] = np.arange(len(words), dtype=np.int32)
    return words, place[flat]


# --- the budgets: a batch's slots, from the lines -------------------------------------------------

def most_distinct(ids: np.ndarray, starts: np.ndarray, first: int, end: int, lines: int) -> int:
    """The most distinct ``ids`` in WORD_SAMPLES batches of ``lines`` lines drawn from lines [first, end)
    with a fixed seed (the run's own random state is left alone): what a batch's distinct slots follow."""
    rng, most = np.random.default_rng(0), 0
    for _ in range(WORD_SAMPLES):
        take = first + rng.choice(end - first, min(lines, end - first), replace=False)
        flat = np.concatenate([ids[starts[i]:starts[i + 1]] for i in take])
        most = max(most, len(np.unique(flat)))
    return most


def budget_figures(ids: np.ndarray, starts: np.ndarray, first: int, end: int, lines: int) -> list[int]:
    """[longest line, tokens, lines, most distinct words] of lines [first, end) held here, the last
    seen in a few batches of ``lines`` lines (a part's) drawn with a fixed seed; zeros for no line.
    ``word_budgets`` makes the batch budgets from every share's."""
    if end == first:
        return [0, 0, 0, 0]
    lengths = np.diff(starts[first:end + 1])
    most = most_distinct(ids, starts, first, end, lines)
    return [int(lengths.max()), int(lengths.sum()), int(end - first), most]


def word_budgets(figures: list[list[int]], part_lines: int) -> tuple[int, int]:
    """(token slots, distinct-word slots) of a batch of ``part_lines`` lines from every share's
    ``budget_figures``: token slots TOKEN_SLACK times the mean line length a line slot, distinct-word
    slots WORD_SLACK times the most distinct words, each at least the longest line."""
    budgets = np.array(figures, np.int64)   # [shares, 4]
    most_tokens, tokens, n_lines, most = budgets[:, 0].max(), budgets[:, 1].sum(), budgets[:, 2].sum(), \
        budgets[:, 3].max()
    tokens_per_batch = int(max(most_tokens, np.ceil(TOKEN_SLACK * (tokens / n_lines) * part_lines)))
    return tokens_per_batch, min(tokens_per_batch, int(max(most_tokens, np.ceil(WORD_SLACK * most))))


def gram_budgets(gram_ids: np.ndarray, gram_starts: np.ndarray, lines: int) -> tuple[int, int]:
    """(gram token slots, distinct-gram slots) of a batch of ``lines`` lines (one process: n-grams are not
    built by shares): as the words', the distinct ones WORD_SLACK times the most seen in a few batches
    drawn with a fixed seed, and at least a line's; (0, 0) for lines with no n-gram row."""
    if not len(gram_ids):
        return 0, 0
    lengths = np.diff(gram_starts)
    per_batch = int(max(lengths.max(), np.ceil(TOKEN_SLACK * lengths.mean() * lines)))
    most = most_distinct(gram_ids, gram_starts, 0, len(lengths), lines)
    return per_batch, min(per_batch, int(max(lengths.max(), np.ceil(WORD_SLACK * most))))


def line_targets(gold: list[list[int]], n_labels: int, one_vs_all: bool) -> np.ndarray:
    """[lines, n_labels] each line's target: 1 a label (one-vs-all), else its labels sharing 1 (a repeated
    one counts once)."""
    targets = np.zeros((len(gold), n_labels), np.float32)
    for row, labels in enumerate(gold):
        targets[row, labels] = 1.0
    if not one_vs_all:
        targets /= targets.sum(axis=1, keepdims=True)
    return targets


def joined_lines(parts: list[dict]) -> dict:
    """Several workers' batches (``line_batches``', in worker order) as one batch of distinct rows, as the
    compiled step takes it: the parts' real words merged into one sorted list of distinct ids and a padding
    slot after them ("word", "weight"), each token's slot moved to its word's place there, its line segment
    past the parts before it (padding: the last, extra line slot); a token of a row of weight 0 (padding, or
    every row of a part that is padding: Objective.emptied) takes the padding slot. The n-gram rows likewise."""
    lines = len(parts[0]["targets"])
    batch = {"targets": np.concatenate([part["targets"] for part in parts]),
             "pairs": sum(int(part["pairs"]) for part in parts)}
    keys = [("word", "weight", "slot", "segment")]
    if "gram" in parts[0]:
        keys.append(("gram", "gram_weight", "gram_slot", "gram_segment"))
    for rows, weights, slots, segments in keys:
        real = np.unique(np.concatenate([part[rows][part[weights] > 0] for part in parts]))
        batch[rows] = np.append(real, parts[0][rows][-1]).astype(parts[0][rows].dtype)   # the padding slot last
        batch[weights] = np.append(np.ones(len(real), np.float32), np.float32(0))
        moved_slots, moved_segments = [], []
        for k, part in enumerate(parts):
            padding = part[weights][part[slots]] == 0   # the padding slot's, and a padding part's (emptied)
            moved_slots.append(np.where(padding, len(real), np.searchsorted(real, part[rows][part[slots]])))
            moved_segments.append(np.where(part[segments] == lines, lines * len(parts), part[segments] + k * lines))
        batch[slots] = np.concatenate(moved_slots).astype(np.int32)
        batch[segments] = np.concatenate(moved_segments).astype(np.int32)
    return batch


class SeenWords(dict):
    """word -> its id in ``index`` (None: not there), for the words seen so far: the lines' tokens looked up
    here, among the corpus's few distinct words, not in the vocabulary's large index (its entries out of
    the CPU's cache: about three times as long for the glosses' lines, benchmarks/log/classify.md)."""

    def __init__(self, index: dict):
        super().__init__()
        self.index = index

    def __missing__(self, word: str):
        self[word] = found = self.index.get(word)
        return found
