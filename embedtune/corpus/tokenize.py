"""Splitting whitespace tokens the way the vectors spell words (``--tokenize auto``)."""

from __future__ import annotations

import unicodedata
from itertools import chain, compress
from operator import itemgetter




TOKENIZE = ("auto", "none")
# Distinct raw tokens remembered with their split (a corpus has far fewer distinct tokens than
# tokens); past this many, new ones are split each time they occur, so memory stays bounded.
TOKEN_CACHE_LIMIT = 1 << 20


def _is_punctuation(char: str) -> bool:
    # Unicode punctuation (P*) and symbols (S*: $ % + emoji ...), as they stick to words in raw text.
    return unicodedata.category(char)[0] in "PS"


class Tokenizer(dict):
    """Whitespace tokens split the way the vectors spell words (``--tokenize auto``).

    A token the vectors have is kept as written (``u.s.``, ``e-mail``, ``:)``). Otherwise the fewest
    leading and trailing punctuation characters are cut off that leave a word the vectors have
    (``u.s.,`` -> ``u.s.`` ``,``), or all of them when none does (``said.`` -> ``said`` ``.``,
    ``"minister,`` -> ``"`` ``minister`` ``,``). A cut-off run becomes tokens the vectors have,
    longest first (``.)`` -> ``.`` ``)``); punctuation the vectors lack is dropped, so it can never
    become a new word.

    vocabulary : the vectors' words (a dict or set), already lower-cased where the corpus is; it
        must not change once tokens are split (splits are remembered, and so is an index of its words).
    Used as ``tokenizer[raw]`` -> tuple of tokens: each distinct raw token is split once and
    remembered (up to TOKEN_CACHE_LIMIT), which keeps the cost to a dict lookup per token.

    Splitting costs time linear in the token's length (times the length of the vectors' longest
    punctuation word): the candidates are looked up by the word left between the punctuation, in an
    index of the vectors' words that begin or end with punctuation, never tried cut by cut (cubic in
    a run of punctuation; benchmarks/README.md, tokenize_split).
    """

    def __init__(self, vocabulary):
        super().__init__()
        self.vocabulary = vocabulary
        self.whole: set[str] = set()   # remembered tokens that stay as they are (most of them)
        self._index: tuple[dict, dict] | None = None   # _affixes(), made when first needed

    def __missing__(self, token: str) -> tuple[str, ...]:
        pieces = self.split(token)
        if len(self) < TOKEN_CACHE_LIMIT:
            self[token] = pieces
            if pieces == (token,):
                self.whole.add(token)
        return pieces

    def tokens(self, raw: list[str]) -> list[str]:
        """The tokens of a line's whitespace tokens: ``raw`` itself when each stays as it is (one set
        check of them all, in C: 84% of the WordNet glosses' lines), else each one's pieces."""
        if self.whole.issuperset(raw):
            return raw
        return list(chain.from_iterable(map(self.__getitem__, raw)))

    def _affixes(self) -> tuple[dict, dict]:
        """(middle -> [(leading run, trailing run)] of the vectors' words that begin or end with
        punctuation around a middle that does neither; a trie of the words that are all punctuation).
        Only words whose first or last character is punctuation are looked at, picked in C."""
        if self._index is None:
            words = self.vocabulary
            first, last = itemgetter(slice(None, 1)), itemgetter(slice(-1, None))
            ends = set(map(first, words)) | set(map(last, words))
            marks = {c for c in ends if c and _is_punctuation(c)}
            affixed = set(compress(words, map(marks.__contains__, map(first, words))))
            affixed.update(compress(words, map(marks.__contains__, map(last, words))))
            middles: dict[str, list[tuple[str, str]]] = {}
            trie: dict = {}
            for word in affixed:
                lead, trail = _punctuation_ends(word)
                if lead == len(word):
                    node = trie
                    for char in word:
                        node = node.setdefault(char, {})
                    node[""] = True   # a word ends here ("" is no character)
                else:
                    middles.setdefault(word[lead:len(word) - trail], []).append(
                        (word[:lead], word[len(word) - trail:]))
            self._index = middles, trie
        return self._index

    def split(self, token: str) -> tuple[str, ...]:
        if token in self.vocabulary:
            return (token,)
        n = len(token)
        lead, trail = _punctuation_ends(token)
        if lead == n:
            return self._run(token)
        if lead == 0 and trail == 0:
            return (token,)
        # A word the vectors have inside the token is its middle with the end of the leading run and
        # the start of the trailing one: the fewest cut wins, then the one that cuts less in front.
        # Nothing found cuts both runs whole, the middle kept whether the vectors have it or not.
        middle = token[lead:n - trail]
        before, after = token[:lead], token[n - trail:]
        kept = (0, 0)
        for head, tail in self._affixes()[0].get(middle, ()):
            if (len(head) + len(tail), len(head)) > (sum(kept), kept[0]) \
                    and before.endswith(head) and after.startswith(tail):
                kept = (len(head), len(tail))
        i, j = lead - kept[0], trail - kept[1]
        return self._run(token[:i]) + (token[i:n - j],) + self._run(token[n - j:])

    def _run(self, run: str) -> tuple[str, ...]:
        """A run of punctuation as the longest pieces the vectors have; pieces they lack dropped."""
        trie = self._affixes()[1]
        pieces, start, n = [], 0, len(run)
        while start < n:
            node, stop = trie, None
            for k in range(start, n):
                node = node.get(run[k])
                if node is None:
                    break
                if "" in node:
                    stop = k + 1
            if stop is None:
                start += 1
                continue
            pieces.append(run[start:stop])
            start = stop
        return tuple(pieces)


def _punctuation_ends(token: str) -> tuple[int, int]:
    """(leading, trailing) punctuation characters of a token; (n, 0) when it is all punctuation."""
    n = len(token)
    lead = 0
    while lead < n and _is_punctuation(token[lead]):
        lead += 1
    if lead == n:
        return n, 0
    trail = 0
    while _is_punctuation(token[n - 1 - trail]):
        trail += 1
    return lead, trail


