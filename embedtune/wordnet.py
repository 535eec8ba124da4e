"""Synonym and antonym lexicons from a WordNet database folder (the ``data.*`` files).

WordNet's data files (wndb(5WN)) hold one synset a line:

    offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] p_cnt [symbol offset pos src/tgt ...] ... | gloss

``w_cnt`` is two hex digits, ``lex_id`` one, ``p_cnt`` three decimal digits; lines that start
with a space are the licence. The words of one synset are synonyms; an antonym is a lexical
pointer ``!`` from word ``src`` of this synset to word ``tgt`` of the synset at ``offset``
(``src``/``tgt`` two hex digits each, counting from 1). Multi-word lemmas keep WordNet's
underscores (``natural_object``); adjective markers such as ``(a)`` or ``(p)`` are dropped.

A lexicon is written as Faruqui et al.'s retrofitting lexicons are: ``word neighbour ...`` per
line, one line per word, words and neighbours in first-seen order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from embedtune.errors import EmbedtuneError

DATA_FILES = ("noun", "verb", "adj", "adv")   # data.<name>
POS_FILE = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")


def _lemma(word: str) -> str:
    return ADJ_MARKER.sub("", word)


def read_wordnet(folder: str) -> tuple[dict[tuple[str, int], list[str]], list[tuple[str, int, int, str, int, int]]]:
    """Parse ``folder``/data.{noun,verb,adj,adv}.

    Returns (synsets: {(file, offset): [lemma, ...]},
             antonyms: [(file, offset, source word number, target file, target offset, target word number)]).
    A missing data file is skipped; a folder with none of them is an error.
    """
    synsets: dict[tuple[str, int], list[str]] = {}
    antonyms = []
    found = 0
    for name in DATA_FILES:
        path = os.path.join(folder, f"data.{name}")
        if not os.path.exists(path):
            continue
        found += 1
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if raw.startswith(b" ") or not raw.strip():
                    continue   # the licence header
                try:
                    line = raw.decode("utf-8")
                    fields = line.split(" | ", 1)[0].split()
                    offset = int(fields[0])
                    n_words = int(fields[3], 16)
                    words = [_lemma(fields[4 + 2 * i]) for i in range(n_words)]
                    at = 4 + 2 * n_words
                    n_pointers = int(fields[at])
                    at += 1
                    for _ in range(n_pointers):
                        symbol, target, pos, source_target = fields[at: at + 4]
                        at += 4
                        if symbol == "!":
                            antonyms.append((name, offset, int(source_target[:2], 16), POS_FILE[pos],
                                             int(target), int(source_target[2:], 16)))
                except (ValueError, IndexError, KeyError, UnicodeDecodeError):
                    raise EmbedtuneError("not a WordNet data line (offset lex_filenum ss_type w_cnt word lex_id "
                                         "... p_cnt pointers ... | gloss)", path, number) from None
                synsets[(name, offset)] = words
    if not found:
        raise EmbedtuneError(f"no WordNet data files here (expected data.{', data.'.join(DATA_FILES)})", folder)
    return synsets, antonyms


def _add(table: dict[str, dict[str, None]], word: str, other: str) -> None:
    if word != other:
        table.setdefault(word, {})[other] = None   # a dict keeps first-seen order


def wordnet_lexicons(folder: str, single_words: bool = False) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(synonyms, antonyms) as {word: [neighbour, ...]}, both symmetric.

    single_words : leave out multi-word lemmas (``natural_object``), which word vectors such as
    GloVe's do not hold
    """
    synsets, pointers = read_wordnet(folder)
    synonyms: dict[str, dict[str, None]] = {}
    for words in synsets.values():
        for word in words:
            for other in words:
                _add(synonyms, word, other)
    antonyms: dict[str, dict[str, None]] = {}
    for name, offset, source, target_name, target_offset, target in pointers:
        try:
            word = synsets[(name, offset)][source - 1]
            other = synsets[(target_name, target_offset)][target - 1]
        except (KeyError, IndexError):
            raise EmbedtuneError(f"antonym pointer of synset {offset:08d} points at a word that does not exist "
                                 f"({target_name} {target_offset:08d} word {target})",
                                 os.path.join(folder, f"data.{name}")) from None
        _add(antonyms, word, other)
        _add(antonyms, other, word)
    if single_words:
        synonyms, antonyms = _single_words(synonyms), _single_words(antonyms)
    return ({w: list(n) for w, n in synonyms.items()}, {w: list(n) for w, n in antonyms.items()})


def _single_words(table: dict[str, dict[str, None]]) -> dict[str, dict[str, None]]:
    out = {}
    for word, neighbours in table.items():
        kept = {n: None for n in neighbours if "_" not in n}
        if "_" not in word and kept:
            out[word] = kept
    return out


def format_lexicon(lexicon: dict[str, list[str]]) -> Iterable[str]:
    """Lines of a lexicon file (with newlines), Faruqui's format."""
    for word, neighbours in lexicon.items():
        if neighbours:
            yield " ".join([word, *neighbours]) + "\n"


def write_wordnet_lexicons(folder: str, synonyms_path: str, antonyms_path: str | None = None,
                           single_words: bool = False) -> dict:
    """Write the synonym lexicon (and the antonym one) of a WordNet folder; each file is written to
    a temporary name and renamed into place. Returns counts for a summary."""
    from embedtune.formats.io import open_target

    synonyms, antonyms = wordnet_lexicons(folder, single_words)
    written = [(synonyms_path, synonyms)] + ([(antonyms_path, antonyms)] if antonyms_path else [])
    for path, lexicon in written:
        with open_target(path) as f:
            for line in format_lexicon(lexicon):
                f.write(line.encode("utf-8"))
    return {"synonyms": {"path": synonyms_path, "words": len(synonyms),
                         "neighbours": sum(map(len, synonyms.values()))},
            "antonyms": {"path": antonyms_path, "words": len(antonyms),
                         "neighbours": sum(map(len, antonyms.values()))} if antonyms_path else None}
