"""A share of a corpus's lines counted, sent between workers as bytes, and the shares merged."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np



@dataclass
class ShareCount:
    """The counts of one share of a corpus's lines (``Corpus.count_share``).

    counts : token counts, in the order first seen in the share
    n_lines : lines of the share with tokens
    first_line : int64 array of shape = [len(counts)], the line where each word was first seen
    """

    counts: Counter
    n_lines: int
    first_line: np.ndarray

    def to_bytes(self) -> bytes:
        """[words, lines], then counts, first lines and the words' byte lengths (int64 each), then the
        words (UTF-8): what a worker sends the others."""
        words = [w.encode("utf-8", "surrogatepass") for w in self.counts]
        numbers = np.concatenate([[len(words), self.n_lines], np.fromiter(self.counts.values(), np.int64, len(words)),
                                  self.first_line, np.fromiter(map(len, words), np.int64, len(words))])
        return numbers.astype("<i8").tobytes() + b"".join(words)

    @classmethod
    def from_bytes(cls, data: bytes) -> ShareCount:
        n, n_lines = (int(x) for x in np.frombuffer(data, "<i8", 2))
        numbers = np.frombuffer(data, "<i8", 3 * n, 16)
        values, first_line, lengths = numbers[:n], numbers[n:2 * n], numbers[2 * n:]
        ends = np.cumsum(lengths) + 16 + 24 * n
        starts = ends - lengths
        words = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts.tolist(), ends.tolist())]
        return cls(Counter(dict(zip(words, values.tolist()))), n_lines, first_line.copy())


def merge_counts(parts: list[ShareCount]) -> tuple[Counter, int, int]:
    """``Corpus.count``'s result from the counts of all shares of its lines: the summed counts, their
    words in the order first seen in the corpus (by first line; a line is in one share, which saw its
    words in order), total tokens and lines."""
    words = [word for part in parts for word in part.counts]
    values = [c for part in parts for c in part.counts.values()]
    first_line = np.concatenate([part.first_line for part in parts] + [np.zeros(0, np.int64)])
    seen = np.concatenate([np.arange(len(part.counts)) for part in parts] + [np.zeros(0, np.int64)])
    counts: Counter = Counter()
    for i in np.lexsort((seen, first_line)).tolist():   # by first line, then as seen in it
        counts[words[i]] += values[i]
    return counts, sum(counts.values()), sum(part.n_lines for part in parts)


