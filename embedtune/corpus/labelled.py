"""Labelled lines (fastText's supervised format): one example per line, its labels the tokens that
start with the label prefix, every other token a word. The classify objective's corpus
(embedtune/objectives/classify/); read with the plain-text reader's files, tokens and shares."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune.corpus.text import Corpus
from embedtune.errors import EmbedtuneError

LABEL_PREFIX = "__label__"
# The examples are kept after the first full read, up to this many tokens, for the passes after it
# (new-word starts, the objective): reading and splitting each pass again costs more than keeping them
# (benchmarks/README.md, classify).
CACHE_TOKENS = 1 << 22


@dataclass
class Example:
    line: int            # line number in the file, from 1
    labels: list[str]    # as written, prefix included
    tokens: list[str]    # lower-cased and split as the corpus reader does


@dataclass
class LineIds:
    """A labelled file's lines as ids (``LabelledCorpus.line_ids``), a line each that has a token, in order.

    rows : int32, the lines' words that ``index`` has, as its ids, line after line
    kept, pieces : per line, how many of ``rows`` are its, and how many words it has (with those it lacks)
    labels : the lines' labels as ids into ``names``, line after line (repeats kept); n_labels : per line
    """

    rows: np.ndarray
    kept: np.ndarray
    pieces: np.ndarray
    labels: np.ndarray
    n_labels: np.ndarray
    names: list[str]

    def with_known_words(self) -> tuple[np.ndarray, np.ndarray, list[list[str]], dict]:
        """The lines with a known word (the others skipped), as classify reads examples: (their ids, their
        offsets, each one's labels as written, figures: label counts by name, lines, words, skipped lines,
        whether a line has several labels)."""
        used = self.kept > 0
        starts = np.concatenate([[0], np.cumsum(self.kept[used])]).astype(np.int64)
        labels = self.labels[np.repeat(used, self.n_labels)].tolist()
        names, line_labels, at = self.names, [], 0
        for n in self.n_labels[used].tolist():
            line_labels.append([names[j] for j in labels[at:at + n]])
            at += n
        counts = np.bincount(np.asarray(labels, np.int64), minlength=len(names)).tolist()
        figures = {"labels": sorted((names[i], c) for i, c in enumerate(counts) if c), "lines": len(line_labels),
                   "raw": int(self.pieces.sum()), "skipped": int((~used).sum()),
                   "several": any(len(set(line)) > 1 for line in line_labels if len(line) > 1)}
        return self.rows, starts, line_labels, figures


def _labels_and_words(raw: list[str], prefix: str, path: str, number: int) -> tuple[list[str], list[str]]:
    """A labelled line's whitespace tokens as (labels, words); a line without either is an error."""
    labels = [token for token in raw if token.startswith(prefix)]
    words = [token for token in raw if not token.startswith(prefix)]
    if not labels:
        raise EmbedtuneError(f"no label (a token starting with {prefix!r}); the format is "
                             f"'{prefix}LABEL word word ...'", path, number)
    if not words:
        raise EmbedtuneError("labels but no words; the format is "
                             f"'{prefix}LABEL word word ...'", path, number)
    return labels, words


class LabelledCorpus(Corpus):
    """A corpus in fastText's supervised format: ``lines()`` yields the words of each line (labels
    removed, so counts, the plan and new-word starts see words only); ``examples()`` the labels too.

    label_prefix : tokens starting with it are labels (kept as written: not lower-cased or split)
    valid : a --valid file in the same format, read with the same settings (``valid_examples``)
    """

    def __init__(self, source, lowercase: bool = False, tokenize: str = "none", vocabulary=None,
                 label_prefix: str = LABEL_PREFIX, valid: str | None = None):
        super().__init__(source, lowercase=lowercase, tokenize=tokenize, vocabulary=vocabulary)
        if not label_prefix:
            raise EmbedtuneError("--label-prefix must not be empty")
        self.label_prefix = label_prefix
        self.valid = valid
        self._cached: tuple[tuple | None, list[Example]] | None = None   # (share, its examples)
        self._settings = dict(lowercase=lowercase, tokenize=tokenize, vocabulary=vocabulary,
                              label_prefix=label_prefix)

    @property
    def reads_compiled(self) -> bool:
        """A file's lines are counted by the compiled reader (corpus/fast.py), which keeps each raw token's
        labels apart: the same counts as the reference's, and the lines' ids and labels for ``line_ids``."""
        return self.compiled and self.sentences is None

    def count(self, advance=None):
        """Corpus.count; a bad line found by the compiled reader is said as the reference's reader says it,
        which reads the file again to the first error in line order (one of the lines before it may be the
        first: the compiled reader checks a block's text before its labels)."""
        try:
            return super().count(advance)
        except EmbedtuneError:
            if self.reads_compiled:
                for _ in self._read_examples(None):
                    pass
            raise

    def line_ids(self, index: dict) -> LineIds | None:
        """The lines as the compiled reader kept them (after ``count``), their words as ids in ``index`` (words
        it lacks dropped); None when it kept none (standard input's lines in memory, a corpus past
        fast.KEEP_TOKENS, the reference's reader): read ``examples`` then."""
        passes = self.fast
        if passes is None or passes.kept is None:
            return None
        from embedtune.kernels.tokens import expand

        piece_start, piece_rows = passes.rows_of(index)
        label_of = passes.table.label_of
        parts = []
        for ids, unit_tokens, numbers in passes.blocks():
            rows, kept, pieces = expand(ids, unit_tokens, piece_start, piece_rows)
            labels = label_of[ids]
            unit = np.repeat(np.arange(len(unit_tokens)), unit_tokens)[labels >= 0]
            parts.append((rows, kept, pieces, labels[labels >= 0], np.bincount(unit, minlength=len(unit_tokens))))
        rows, kept, pieces, labels, n_labels = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, np.int64)
                                                for i in range(5))
        return LineIds(rows.astype(np.int32), kept, pieces, labels, n_labels, passes.table.labels)

    def valid_examples(self) -> Iterator[Example]:
        if self.valid is None:
            return
        with LabelledCorpus(self.valid, **self._settings) as valid:
            yield from valid.examples()

    def _texts(self, share: tuple[int, int] | None = None) -> Iterator[tuple[int, str]]:
        """(line number, text) of each line, or of lines k, k + n, ... of ``share`` (k, n) (the others are
        not decoded); feeds the digest with every line, as Corpus.lines does."""
        digest = self._hash
        k, n = share if share is not None else (0, 1)
        self.reads[share] += 1
        if self.sentences is not None:
            for number, sentence in enumerate(self.sentences, 1):
                mine = (number - 1) % n == k
                if not mine and digest is None:
                    continue
                text = sentence if isinstance(sentence, str) else " ".join(sentence)
                if digest is not None:
                    digest.update(text.encode("utf-8", "surrogatepass") + b"\n")
                if mine:
                    yield number, text
            return
        yield from self._file_texts(k, n)

    @classmethod
    def check_start(cls, path: str, label_prefix: str = LABEL_PREFIX) -> None:
        """Corpus.check_start, and each whole line of the head has a label and a word, which a full read
        checks as it goes: an error there comes before one further on."""
        for number, text, whole in cls._head(path):
            raw = text.split()
            if whole and raw:
                _labels_and_words(raw, label_prefix, path, number)

    @classmethod
    def line_text(cls, piece: bytes, path: str, number: int, offset: int, final: bool = True) -> str:
        """Corpus.line_text for labelled lines: a line is one example, so a line cut in pieces is an error."""
        if offset:
            raise EmbedtuneError("a line over 1 MiB; one example per line is expected", path, number)
        return super().line_text(piece, path, number, offset, final)

    def examples(self, share: tuple[int, int] | None = None) -> Iterator[Example]:
        """Every non-blank line as an Example (of ``share``'s lines only, as Corpus.lines); a line
        without a label or without a word is an error. The last share read is kept (CACHE_TOKENS)."""
        if self._cached is not None and self._cached[0] == share and self._hash is None:
            yield from self._cached[1]   # a pass that digests reads the bytes
            return
        kept, tokens = [], 0
        for example in self._read_examples(share):
            tokens += len(example.tokens)
            if kept is not None:
                kept.append(example)
                if tokens > CACHE_TOKENS:
                    kept = None
            yield example
        if kept is not None:
            self._cached = (share, kept)

    def _read_examples(self, share: tuple[int, int] | None) -> Iterator[Example]:
        prefix = self.label_prefix
        for number, text in self._texts(share):
            raw = text.split()
            if not raw:
                continue
            if len(raw) > 1 and raw[0].startswith(prefix) and text.count(prefix) == 1:
                # The usual line, one label and then words, without a test a token. Lower-cased whole:
                # str.lower maps no character to or from whitespace, and its one rule that reads the
                # neighbours (a final sigma) stops at whitespace, so each token is as if lowered alone.
                yield Example(number, raw[:1], self._tokens(text.lower().split()[1:] if self.lowercase
                                                            else raw[1:]))
                continue
            labels, words = _labels_and_words(raw, prefix, self.path, number)
            if self.lowercase:
                words = [w.lower() for w in words]
            yield Example(number, labels, self._tokens(words))

    def _numbered_lines(self, share: tuple[int, int] | None) -> Iterator[tuple[int, list[str]]]:
        """The words of each line (labels removed), for Corpus.lines and Corpus.count_share: a worker
        counts its share of the labelled lines as of plain ones."""
        for example in self.examples(share):
            if example.tokens:
                yield example.line, example.tokens
