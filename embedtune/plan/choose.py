"""Which words become new rows: those a ``--new-words`` file names, and corpus words seen ``--min-count`` times.

A listed word gets a row whatever its count (its start comes from the contexts the corpus has, from its
spelling alone when it has none); with a list and no ``--min-count``, no other word is added, so a user
who knows the words wanted does not get every once-seen corpus word with them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from embedtune.errors import EmbedtuneError, counted, option_name
from embedtune.newwords.defaults import DEFAULT_MIN_COUNT
from embedtune.plan.rules import read_word_list
from embedtune.vectors import Vectors
from embedtune.words import WordIndex


def read_new_words(path: str, lowercase: bool = False, lowered: list | None = None) -> list[str]:
    """The words of a ``--new-words`` file (one a line, as word lists are read: embedtune.plan.rules.read_word_list),
    in file order, repeats dropped; lower-cased when the corpus is (each word that changed appended to
    ``lowered`` as (as written, lower-cased), for ``listed_notes``). A word holding a space could never be
    a corpus token: an error naming its line, as is a file with no word."""
    words = []
    for number, word in read_word_list(path):
        if any(ch.isspace() for ch in word):
            raise EmbedtuneError(f"{word!r} holds a space: a new word is one corpus token", path, number)
        if lowercase and word.lower() != word and lowered is not None:
            lowered.append((word, word.lower()))
        words.append(word.lower() if lowercase else word)
    if not words:
        raise EmbedtuneError(f"the {option_name('new_words')} file holds no word", path)
    return list(dict.fromkeys(words))


def effective_min_count(min_count: int | None, listed: bool) -> int | None:
    """The corpus count that adds a word: ``min_count`` when given, else 5, or none (None) beside a list."""
    if min_count is not None:
        return min_count
    return None if listed else DEFAULT_MIN_COUNT


def pick_new_words(counts: Counter, vectors: Vectors, min_count: int | None, max_new: int = 0,
                   listed: list[str] | None = None) -> list[str]:
    """The new rows: ``listed`` words the vectors lack (file order), then corpus words not in ``vectors``
    seen at least ``min_count`` times (none when None), most frequent first, at most ``max_new`` of those."""
    first = [w for w in (listed or ()) if w not in vectors.index]
    taken = set(first)
    new = []
    if min_count is not None:
        index = vectors.index
        if isinstance(index, WordIndex):   # the corpus's words looked up once for the run (rows_of_keys)
            known = index.rows_of_keys(counts) >= 0
            new = [(c, w) for (w, c), k in zip(counts.items(), known.tolist()) if c >= min_count and not k
                   and w not in taken]
        else:
            new = [(c, w) for w, c in counts.items() if c >= min_count and w not in index and w not in taken]
        new.sort(key=lambda cw: (-cw[0], cw[1]))
        if max_new:
            new = new[:max_new]
    return first + [w for _, w in new]


def listed_notes(path: str, listed: list[str], vectors: Vectors, lowered: list) -> list[str]:
    """What a user of --new-words must be told: listed words that already have a vector (they keep it,
    no row is added) and listed words lower-cased to match the corpus (GloVe's vocabulary is lower-case)."""
    notes = []
    if lowered:
        shown = ", ".join(f"{raw!r} -> {low!r}" for raw, low in lowered[:3])
        notes.append(f"{counted(len(lowered), 'word')} of {path} lower-cased, as the corpus is ({option_name('lowercase')}): "
                     f"{shown}{', ...' if len(lowered) > 3 else ''}")
    known = [w for w in listed if w in vectors.index]
    if known:
        has = "already has a vector: it keeps it" if len(known) == 1 else "already have a vector: they keep it"
        notes.append(f"{counted(len(known), 'word')} of {path} {has}, no row is added (first: "
                     f"{', '.join(known[:5])})")
    return notes


def listed_report(listed: list[str] | None, vectors: Vectors, counts: Counter) -> dict:
    """What became of a list's words: how many were added, already had a vector, or are not in the corpus."""
    if not listed:
        return {}
    known = sum(w in vectors.index for w in listed)
    absent = sum(1 for w in listed if w not in vectors.index and not counts.get(w))
    return {"listed_new_words": len(listed) - known, "listed_in_vectors": known, "listed_not_in_corpus": absent}


@dataclass
class Chosen:
    """The new words of a run, and what a user of ``--new-words`` is told about them.

    words : the new rows, in output order (pick_new_words)
    min_count : the corpus count that added a word (None: only the list's words are added)
    listed : the ``--new-words`` file's words as the corpus reads them (None without a file)
    notes : listed_notes' lines; report : listed_report's figures (empty without a file)
    """

    words: list[str]
    min_count: int | None
    listed: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    report: dict = field(default_factory=dict)


def choose_new_words(vectors: Vectors, counts: Counter, min_count: int | None = None, max_new: int = 0,
                     new_words_file: str | None = None, lowercase: bool = False) -> Chosen:
    """The new words of a counted corpus: ``new_words_file``'s (lower-cased when the corpus is) and
    those seen ``min_count`` times (effective_min_count), as `embedtune init` and `train` both choose them."""
    lowered: list = []
    listed = read_new_words(new_words_file, lowercase, lowered) if new_words_file else None
    min_count = effective_min_count(min_count, listed is not None)
    words = pick_new_words(counts, vectors, min_count, max_new, listed)
    if listed is None:
        return Chosen(words, min_count)
    return Chosen(words, min_count, listed, listed_notes(new_words_file, listed, vectors, lowered),
                  listed_report(listed, vectors, counts))
