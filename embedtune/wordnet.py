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
from collections.abc import Iterable, Iterator

from embedtune.errors import EmbedtuneError

DATA_FILES = ("noun", "verb", "adj", "adv")   # data.<name>
POS_FILE = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")


def _lemma(word: str) -> str:
    return ADJ_MARKER.sub("", word)


POINTERS = ("!", "&")   # antonym (between words), similar to (between adjective synsets)


def read_wordnet(folder: str) -> tuple[dict[tuple[str, int], list[str]], list[tuple]]:
    """Parse ``folder``/data.{noun,verb,adj,adv}.

    Returns (synsets: {(file, offset): [lemma, ...]},
             pointers: [(symbol, file, offset, source word number, target file, target offset,
                         target word number)] for the symbols in POINTERS; word number 0: the synset).
    A missing data file is skipped; a folder with none of them is an error.
    """
    synsets: dict[tuple[str, int], list[str]] = {}
    pointers = []
    found = 0
    for name in DATA_FILES:
        path = os.path.join(folder, f"data.{name}")
        if not os.path.exists(path):
            continue
        found += 1
        for number, raw in _data_lines(path):
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
                    if symbol in POINTERS:
                        pointers.append((symbol, name, offset, int(source_target[:2], 16), POS_FILE[pos],
                                         int(target), int(source_target[2:], 16)))
            except (ValueError, IndexError, KeyError, UnicodeDecodeError):
                raise EmbedtuneError("not a WordNet data line (offset lex_filenum ss_type w_cnt word lex_id "
                                     "... p_cnt pointers ... | gloss)", path, number) from None
            synsets[(name, offset)] = words
    if not found:
        raise EmbedtuneError(f"no WordNet data files here (expected data.{', data.'.join(DATA_FILES)})", folder)
    return synsets, pointers


def _data_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of a WordNet data file's synset lines, past its licence header (lines that
    start with a space)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.startswith(b" ") and raw.strip():
                yield number, raw


def _add(table: dict[str, dict[str, None]], word: str, other: str) -> None:
    if word != other:
        table.setdefault(word, {})[other] = None   # a dict keeps first-seen order


def wordnet_lexicons(folder: str, single_words: bool = False,
                     similar: bool = False) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(synonyms, antonyms) as {word: [neighbour, ...]}, both symmetric.

    single_words : leave out multi-word lemmas (``natural_object``), which word vectors such as
        GloVe's do not hold
    similar : follow adjectives' "similar to" pointers (``&``, a satellite such as huge to its head
        large): the words of both synsets become synonyms, and a satellite's words antonyms of the
        head's antonyms (WordNet's indirect antonyms: huge / small)
    """
    synsets, pointers = read_wordnet(folder)

    def words_of(name, offset, number, at):
        try:
            words = synsets[(name, offset)]
            return words if number == 0 else [words[number - 1]]
        except (KeyError, IndexError):
            raise EmbedtuneError(f"a pointer of synset {at[1]:08d} points at a word or synset that does not exist "
                                 f"({name} {offset:08d} word {number})",
                                 os.path.join(folder, f"data.{at[0]}")) from None

    synonyms: dict[str, dict[str, None]] = {}
    for words in synsets.values():
        for word in words:
            for other in words:
                _add(synonyms, word, other)
    satellites: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for symbol, name, offset, source, target_name, target_offset, target in pointers:
        if symbol == "&" and similar:
            satellites.setdefault((target_name, target_offset), []).append((name, offset))
            for word in words_of(name, offset, source, (name, offset)):
                for other in words_of(target_name, target_offset, target, (name, offset)):
                    _add(synonyms, word, other)
                    _add(synonyms, other, word)
    antonyms: dict[str, dict[str, None]] = {}
    for symbol, name, offset, source, target_name, target_offset, target in pointers:
        if symbol != "!":
            continue
        # The pointer's word, and with similar also the words of its synset's satellites, against
        # the target word.
        ends = [(words_of(name, offset, source, (name, offset)), words_of(target_name, target_offset, target,
                                                                             (name, offset)))]
        if similar:
            ends += [(words_of(*s, 0, (name, offset)), ends[0][1]) for s in satellites.get((name, offset), [])]
        for words, others in ends:
            for word in words:
                for other in others:
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
                           single_words: bool = False, similar: bool = False) -> dict:
    """Write the synonym lexicon (and the antonym one) of a WordNet folder; each file is written to
    a temporary name and renamed into place. Returns counts for a summary."""
    from embedtune.formats.io import open_target

    synonyms, antonyms = wordnet_lexicons(folder, single_words, similar)
    written = [(synonyms_path, synonyms)] + ([(antonyms_path, antonyms)] if antonyms_path else [])
    for path, lexicon in written:
        with open_target(path) as f:
            for line in format_lexicon(lexicon):
                f.write(line.encode("utf-8"))
    return {"synonyms": {"path": synonyms_path, "words": len(synonyms),
                         "neighbours": sum(map(len, synonyms.values()))},
            "antonyms": {"path": antonyms_path, "words": len(antonyms),
                         "neighbours": sum(map(len, antonyms.values()))} if antonyms_path else None}


# WordNet's lexicographer files by number (lexnames(5WN); Debian's wordnet-base ships no lexnames file).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant",
    "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)


def read_glosses(folder: str, name: str = "noun") -> Iterable[tuple[int, str, str]]:
    """(offset, lexicographer file name, gloss) for each synset of ``folder``/data.``name``, in file order.

    The gloss is the text after `` | `` (definition and quoted examples), stripped."""
    path = os.path.join(folder, f"data.{name}")
    if not os.path.exists(path):
        raise EmbedtuneError(f"no WordNet data file data.{name} here", folder)
    for number, raw in _data_lines(path):
        try:
            line = raw.decode("utf-8")
            head, gloss = line.split(" | ", 1)
            fields = head.split()
            yield int(fields[0]), LEXNAMES[int(fields[1])], gloss.strip()
        except (ValueError, IndexError, UnicodeDecodeError):
            raise EmbedtuneError("not a WordNet data line (offset lex_filenum ... | gloss)", path, number) from None
