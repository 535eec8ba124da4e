"""Freeze rules -> a plan of which rows are frozen, trainable and new.

The rules, in order (the first that applies decides):

1. A new word (not in the vectors, seen at least ``min_count`` times in the corpus)
   is trainable. A freeze rule that names or matches a new word is an error: its
   vector would be random.
2. A pretrained word matched by a freeze rule (``freeze_list``, ``freeze_top``,
   ``freeze_pattern``, ``freeze_pretrained``) is frozen. Freeze rules win.
3. A pretrained word matched by a train rule (``train_list``, ``train_pattern``) is
   trainable.
4. Any other pretrained word is frozen if a train rule was given (a train rule
   means "only these move"), and trainable otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from embedtune.errors import EmbedtuneError, counted, option_name
from embedtune.plan.patterns import WordPattern
from embedtune.vectors import Vectors
from embedtune.words import WordIndex, WordList

if TYPE_CHECKING:   # an annotation only
    from embedtune.config.schema import VocabConfig

MISSING_SHOWN = 5  # list words missing from the vocabulary, shown by name in the report


@dataclass
class MissingWords:
    """Words of a list file that are not in the vocabulary."""

    path: str
    count: int
    first: list[str]


@dataclass
class Plan:
    """Which rows are frozen, trainable and new.

    words : list of str (or a WordList), length n_pretrained + n_new; pretrained words first, in file order
    frozen : bool array of shape = [n_words]; True where the row must stay bit-identical
    n_pretrained : rows that come from the vectors file
    missing : list words absent from the vocabulary, per list file
    """

    words: list[str]
    frozen: np.ndarray
    n_pretrained: int
    missing: list[MissingWords] = field(default_factory=list)
    # What the run must say about its lists (a list that freezes nothing, listed new words that have a
    # vector), and what became of --new-words' words (newwords.listed_report): in the summary too
    notes: list[str] = field(default_factory=list)
    listed: dict = field(default_factory=dict)
    # The pretrained words' index (Vectors.index) and the new words' rows, for ``row_counts``; None: a
    # word at a time over ``words``
    index: WordIndex | None = field(default=None, repr=False, compare=False)
    new_index: dict | None = field(default=None, repr=False, compare=False)
    # row_counts' last (counts, result): the run's checks and its tables ask for the same counts
    _counted: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def row_counts(self, counts: Mapping[str, int]) -> np.ndarray:
        """int64 [n_words], read-only: each row's count in ``counts`` (a corpus's, not changed once
        counted), 0 for a row it lacks; made once for the same ``counts``. The
        corpus's words are looked up in the index, in time that follows the corpus's vocabulary, not
        the vectors' (a word at a time over every row when the plan has no index, or the vectors repeat a word)."""
        if self._counted is None or self._counted[0] is not counts:
            out = self._row_counts(counts)
            out.flags.writeable = False
            self._counted = (counts, out)
        return self._counted[1]

    def _row_counts(self, counts: Mapping[str, int]) -> np.ndarray:
        out = np.zeros(len(self.words), np.int64)
        if (not isinstance(self.index, WordIndex) or self.new_index is None
                or len(self.index) != self.n_pretrained):
            out[:] = np.fromiter((counts.get(w, 0) for w in self.words), np.int64, len(self.words))
            return out
        words = list(counts)
        rows = self.index.rows_of_keys(counts).copy()
        for i in np.flatnonzero(rows < 0).tolist():
            rows[i] = self.new_index.get(words[i], -1)
        found = rows >= 0
        out[rows[found]] = np.fromiter(counts.values(), np.int64, len(words))[found]
        return out

    @property
    def n_new(self) -> int:
        return len(self.words) - self.n_pretrained

    @property
    def n_frozen(self) -> int:
        return int(self.frozen.sum())

    @property
    def n_trainable_pretrained(self) -> int:
        return int((~self.frozen[: self.n_pretrained]).sum())

    def summary(self) -> dict:
        return {
            "frozen": self.n_frozen,
            "trainable": self.n_trainable_pretrained,
            "new": self.n_new,
            "missing_list_words": {m.path: {"count": m.count, "first": m.first} for m in self.missing},
            **self.listed,
            **({"notes": list(self.notes)} if self.notes else {}),
        }


UTF8_BOM = b"\xef\xbb\xbf"
LIST_SPACE = b" \t\r\n\x0b\x0c"   # what the vectors readers split on: no word begins or ends with it


def read_word_list(path: str) -> list[tuple[int, str]]:
    """(line number, word) for each non-empty line of a word-list file (UTF-8).

    Every non-empty line is a word, byte for byte: there are no comments, since a vectors file
    may hold any word ('#', '#hashtag', '//'). Only ASCII spaces, tabs and the line end
    (``\n`` or ``\r\n``) around a word are dropped (no vectors word begins or ends with one;
    other spaces, like U+00A0, belong to the word), and a UTF-8 byte-order mark at the start.
    """
    entries = []
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if number == 1 and raw.startswith(UTF8_BOM):
                    raw = raw[len(UTF8_BOM):]
                raw = raw.strip(LIST_SPACE)
                if not raw:
                    continue
                try:
                    word = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise EmbedtuneError(f"not valid UTF-8 ({err.reason} at byte {err.start})", path, number) from None
                entries.append((number, word))
    except FileNotFoundError:
        raise EmbedtuneError("no such word-list file", path) from None
    except IsADirectoryError:
        raise EmbedtuneError("is a folder, expected a word-list file", path) from None
    except OSError as err:
        raise EmbedtuneError(f"cannot read: {err.strerror or err}", path) from None
    return entries


def _list_rows(path, index, new_index, strict, frozen_rule):
    """Rows of list words; words absent from the vocabulary are collected as missing."""
    rows, missing = [], []
    for number, word in read_word_list(path):
        if word in index:
            rows.append(index[word])
        elif word in new_index:
            if frozen_rule:
                raise EmbedtuneError(
                    f"'{word}' is not in the vectors but is a new word from the corpus; "
                    "a new word cannot be frozen (its vector would be random)", path, number)
            rows.append(new_index[word])
        else:
            if strict:
                raise EmbedtuneError(f"'{word}' is not in the vocabulary", path, number)
            missing.append(word)
    return rows, MissingWords(path, len(missing), missing[:MISSING_SHOWN])


def plan_notes(plan: Plan) -> list[str]:
    """What a run tells its user about ``plan`` beyond its counts, a line each: every list's words that are
    not in the vocabulary, then the plan's notes. ``embedtune train`` prints each as a "Note:"; the Keras
    layer warns with each (a misspelt freeze-list word must not pass quietly in either)."""
    lines = [f"{counted(m.count, 'word')} of {m.path} {'is' if m.count == 1 else 'are'} not in the vocabulary "
             f"(first: {', '.join(m.first)})" for m in plan.missing]
    return lines + list(plan.notes)


def make_plan(vectors: Vectors, new_words: list[str], vocab: VocabConfig) -> Plan:
    """Apply the freeze rules to the pretrained words and the new corpus words."""
    n_pre = len(vectors)
    # A WordList (the binary reader's) stays one: a list would make a str of each of 3M words.
    words = (vectors.words.appended(new_words) if isinstance(vectors.words, WordList)
             else list(vectors.words) + list(new_words))
    new_index = {w: n_pre + i for i, w in enumerate(new_words)}
    missing = []

    freeze = np.zeros(len(words), dtype=bool)
    train = np.zeros(len(words), dtype=bool)
    has_train_rule = bool(vocab.train_list or vocab.train_pattern is not None)

    if vocab.freeze_pretrained:
        freeze[:n_pre] = True
    if vocab.freeze_top:
        freeze[: min(vocab.freeze_top, n_pre)] = True
    notes = []
    if vocab.freeze_list:
        rows, miss = _list_rows(vocab.freeze_list, vectors.index, new_index, vocab.strict_lists, True)
        freeze[rows] = True
        missing.append(miss)
        if not rows and not miss.count:   # an empty file, /dev/null: a guarantee the user thinks they have
            notes.append(f"{option_name('freeze_list')} {vocab.freeze_list} holds no word: it freezes nothing")
    if vocab.freeze_pattern is not None:
        pattern = WordPattern(vocab.freeze_pattern, "freeze_pattern")
        hits = [w for w, hit in zip(new_words, pattern.matches(new_words, len(new_words))) if hit]
        if hits:
            raise EmbedtuneError(
                f"{option_name('freeze_pattern')} {vocab.freeze_pattern!r} matches "
                f"{counted(len(hits), 'new corpus word')} "
                f"(e.g. {', '.join(repr(h) for h in hits[:3])}); a new word cannot be frozen")
        freeze[:n_pre] |= pattern.matches(vectors.words, n_pre)
    if vocab.train_list:
        rows, miss = _list_rows(vocab.train_list, vectors.index, new_index, vocab.strict_lists, False)
        train[rows] = True
        missing.append(miss)
        if not rows and not miss.count:
            notes.append(f"{option_name('train_list')} {vocab.train_list} holds no word: it trains nothing "
                         "(every pretrained row not otherwise trained is frozen)")
    if vocab.train_pattern is not None:
        pattern = WordPattern(vocab.train_pattern, "train_pattern")
        train[:n_pre] |= pattern.matches(vectors.words, n_pre)

    frozen = freeze.copy()
    if has_train_rule:
        frozen[:n_pre] |= ~train[:n_pre]
    frozen[n_pre:] = False  # rule 1: new words always train
    return Plan(words=words, frozen=frozen, n_pretrained=n_pre, missing=[m for m in missing if m.count],
                notes=notes, index=vectors.index, new_index=new_index)
