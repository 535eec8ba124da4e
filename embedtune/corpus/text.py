"""The plain-text corpus: one sentence or paragraph per line, re-readable, counted once."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator

import numpy as np

from embedtune.corpus import fast
from embedtune.corpus.counts import ShareCount
from embedtune.corpus.files import HEAD_BYTES, UTF8_BOM, decode, open_binary, pieces
from embedtune.corpus.held import HeldLines
from embedtune.corpus.tokenize import TOKENIZE, Tokenizer
from embedtune.errors import EmbedtuneError


class Corpus(HeldLines):
    """A re-readable corpus, held whole by the process that reads it (``HeldLines``' defaults).

    source : a path (gzip and bzip2 data are decompressed, known by their first bytes), ``"-"`` for standard input, or a
        re-iterable of token lists / strings (a list, or an object whose ``__iter__``
        starts over, like gensim's corpora); a one-pass iterator (a generator) is spooled
        to a temporary file first.
    lowercase : lower-case every token (before tokenizing)
    tokenize : "none" (whitespace tokens as they are) or "auto" (split as the vectors spell
        words; see :class:`Tokenizer`), which needs ``vocabulary``, the vectors' words
    """

    label_prefix: str | None = None   # labelled lines' (corpus/labelled.py): their labels are no words

    def __init__(self, source, lowercase: bool = False, tokenize: str = "none", vocabulary=None):
        if tokenize not in TOKENIZE:
            raise EmbedtuneError(f"tokenize must be one of {', '.join(TOKENIZE)}, got {tokenize!r}")
        if tokenize == "auto" and vocabulary is None:
            raise EmbedtuneError("tokenize 'auto' needs the vectors' vocabulary")
        self.lowercase = lowercase
        self.tokenizer = Tokenizer(vocabulary) if tokenize == "auto" else None
        self._spool = None
        # The file every pass reads (the compiled reader's too): the corpus file, or its spool (a pipe,
        # a one-pass iterator); None for sentences held in memory.
        self.read_path: str | None = None
        self._hash = None
        self.digest: str | None = None   # sha256 of the content, set by count(); resume compares it
        self._counted = None   # count()'s figures, once made
        # Passes over a file by the compiled reader (corpus/fast.py), the same tokens as _numbered_lines';
        # ``fast`` is its state once count() has read the whole corpus (id_chunks reads the ids there).
        self.compiled = fast.ENABLED
        self.fast: fast.FastPass | None = None
        # Passes begun over the lines, by share ((k, n); None: the whole corpus): a multi-worker run's
        # tests check that no worker read the whole corpus.
        self.reads: Counter = Counter()
        if isinstance(source, (str, os.PathLike)):
            self.path = str(source)
            self.sentences = None
            if self.path != "-":
                if not os.path.exists(self.path):
                    raise EmbedtuneError("no such corpus file", self.path)
                if os.path.isdir(self.path):
                    raise EmbedtuneError("is a folder, expected a corpus file", self.path)
            if self.path == "-" or not os.path.isfile(self.path):
                # A pipe (standard input, `<(zcat ...)`) can be read once; the corpus is read
                # several times, so it is copied to a temporary file first.
                with self._spooling("wb") as spool:
                    try:
                        with open(self.path, "rb") if self.path != "-" else contextlib.nullcontext(
                                sys.stdin.buffer) as pipe:
                            shutil.copyfileobj(pipe, spool, 1 << 20)
                    except OSError as err:
                        raise EmbedtuneError(f"cannot copy it to a temporary file in {tempfile.gettempdir()}: "
                                             f"{err.strerror or err}", self.path) from None
                self.read_path = self._spool
            else:
                self.read_path = self.path
        elif isinstance(source, Iterator):
            # A one-pass iterator (a generator): spooled like standard input, since training reads
            # the corpus more than once (counts, new-word starts, then every epoch).
            self.path = "<corpus>"
            self.sentences = None
            with self._spooling("w", encoding="utf-8") as spool:
                for sentence in source:
                    spool.write((sentence if isinstance(sentence, str) else " ".join(sentence)) + "\n")
            self.read_path = self._spool
        else:
            self.path = "<corpus>"
            self.sentences = source
        if fast.small_file(self.read_path):   # classify's labelled lines too: its reference reads them
            self.compiled = False   # a sample-sized file: the reference's passes (corpus/fast.SMALL_FILE)

    @contextlib.contextmanager
    def _spooling(self, mode: str, **options):
        """A new spool file, open for writing, removed if filling it fails or is interrupted (Ctrl-C,
        or SIGTERM turned into an exception by the command layer): the constructor raises then, so
        no `with` around the Corpus would remove it. Its name is chosen and kept before the file
        exists, so an interrupt at any point in between leaves nothing behind."""
        name = f"embedtune-corpus-{os.getpid()}-{os.urandom(6).hex()}.txt"
        self._spool = os.path.join(tempfile.gettempdir(), name)
        try:
            # readable by its owner only, as tempfile's files are: a corpus may be private
            fd = os.open(self._spool, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, mode, **options) as spool:
                yield spool
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.fast = None   # the kept ids: memory of 4 bytes a token
        if self._spool is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._spool)
            self._spool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _tokens(self, tokens: list[str]) -> list[str]:
        # The one place this reader's tokens are produced; the compiled reader (corpus/fast.py), which
        # counts a file and makes its id chunks, makes the same ones (tests/test_corpus.py checks).
        if self.tokenizer is None:
            return tokens
        return self.tokenizer.tokens(tokens)

    def lines(self, share: tuple[int, int] | None = None) -> Iterator[list[str]]:
        """Token lists, one per line (empty lines skipped). ``share`` (k, n): only lines k, k + n,
        k + 2n, ... (counted from 0, empty ones included), one worker's share of a distributed run;
        the other lines are not decoded."""
        return (tokens for _, tokens in self._numbered_lines(share))

    @property
    def reads_compiled(self) -> bool:
        """Whether ``count`` reads this corpus with the compiled reader (corpus/fast.py): a file of plain
        lines (a subclass that makes its lines otherwise, such as classify's, reads them itself)."""
        return self.compiled and self.sentences is None and type(self)._numbered_lines is Corpus._numbered_lines

    def numbered_lines(self, share: tuple[int, int] | None = None) -> Iterator[tuple[int, list[str]]]:
        """lines() with each line's number (the same number for a line whichever share reads it)."""
        return self._numbered_lines(share)

    def _numbered_lines(self, share: tuple[int, int] | None) -> Iterator[tuple[int, list[str]]]:
        """(line number, tokens) for lines(); the digest, while counting, takes every line, the
        share's or not, so every worker's digest is the whole corpus's."""
        digest = self._hash
        k, n = share if share is not None else (0, 1)
        self.reads[share] += 1
        if self.sentences is not None:
            for number, sentence in enumerate(self.sentences):
                mine = number % n == k
                if not mine and digest is None:
                    continue
                tokens = sentence.split() if isinstance(sentence, str) else list(sentence)
                if digest is not None:
                    digest.update(" ".join(tokens).encode("utf-8", "surrogatepass") + b"\n")
                if not mine:
                    continue
                if self.lowercase:
                    tokens = [t.lower() for t in tokens]
                tokens = self._tokens(tokens)
                if tokens:
                    yield number, tokens
            return
        lower = self.lowercase
        for number, text in self._file_texts(k, n):
            if lower:
                text = text.lower()
            tokens = self._tokens(text.split())
            if tokens:
                yield number, tokens

    def _file_texts(self, k: int, n: int) -> Iterator[tuple[int, str]]:
        """(line number, text) of lines k, k + n, ... of the file (counted from 0; the others are not
        decoded), as ``line_text`` decodes them; the digest, while counting, takes every line's bytes."""
        digest = self._hash
        try:
            with open_binary(self.read_path) as raw:
                for number, offset, piece in pieces(raw, self.path):
                    if digest is not None:
                        digest.update(piece)
                    if (number - 1) % n == k:
                        yield number, self.line_text(piece, self.path, number, offset)
        except (OSError, EOFError, ValueError) as err:   # damaged .gz/.bz2 among them
            raise EmbedtuneError(f"cannot read: {err}", self.path) from None

    @classmethod
    def line_text(cls, piece: bytes, path: str, number: int, offset: int, final: bool = True) -> str:
        """A piece of line ``number`` (from byte ``offset`` of the line) as text, or the error that says
        why it is not: not UTF-8, or NUL bytes. ``final``: False for a piece cut off at an arbitrary
        byte (check_start's last), whose end may be part of a character."""
        if number == 1 and offset == 0 and piece.startswith(UTF8_BOM):
            piece = piece[len(UTF8_BOM):]
        try:
            text = decode(piece, final)
        except UnicodeDecodeError as err:
            raise EmbedtuneError(
                f"not valid UTF-8 text (byte {offset + err.start + 1} of the line: {err.reason}); "
                "is this a corpus file?", path, number) from None
        if "\x00" in text:
            raise EmbedtuneError("contains NUL bytes; is this a text corpus?", path, number)
        return text

    @classmethod
    def check_start(cls, path: str) -> None:
        """The errors that the first HEAD_BYTES of the corpus file at ``path`` would give when read (binary
        data, NUL bytes, another encoding than UTF-8, a compression not read), raised now: a command checks
        them before it loads the vectors and imports TensorFlow, which take seconds before the corpus is
        read. Standard input and other pipes are left alone: what is read from them cannot be put back."""
        for _ in cls._head(path):
            pass

    @classmethod
    def _head(cls, path: str) -> Iterator[tuple[int, str, bool]]:
        """(line number, text, whole) of each line in the first HEAD_BYTES of a corpus file, checked as
        a full read checks them; ``whole`` is False for a last line the head cuts off. Nothing for
        standard input, pipes or no path."""
        if path is None or path == "-" or not os.path.isfile(path):
            return
        with open_binary(path) as raw:
            number, left = 0, HEAD_BYTES
            while left > 0:
                try:   # line by line, as a full read: an error in a line comes before damage after it
                    line = raw.readline(left)
                except (OSError, EOFError, ValueError) as err:   # a damaged .gz or .bz2
                    raise EmbedtuneError(f"cannot read: {err}", path) from None
                if not line:
                    return
                number += 1
                left -= len(line)
                whole = line.endswith(b"\n") or left > 0   # else cut by the head's end
                yield number, cls.line_text(line, path, number, 0, final=whole), whole

    def count(self, advance=None) -> tuple[Counter, int, int]:
        """(token counts, total tokens, lines with tokens) in one pass; also sets ``digest``, a
        sha256 of the bytes read (cheap next to the read: benchmarks/README.md, io). The pass
        is made once for two calls: the first returns a copy of the counts and keeps them, the next
        is handed the kept ones (so the command counts while TensorFlow imports and train() finds the
        count made, without a second copy of a large vocabulary held through training); a third
        call reads the corpus again. A file is read by the compiled reader (corpus/fast.py): the same
        figures, and the corpus's ids kept for ``id_chunks`` (``fast``). ``advance``: called with the
        bytes of each block the compiled reader reads (a set-up phase's progress)."""
        if self._counted is not None:
            counted, self._counted = self._counted, None
            return counted
        counts: Counter = Counter()
        n_lines = 0
        self._hash = hashlib.sha256()
        self.fast = None
        try:
            if self.reads_compiled:
                self.reads[None] += 1
                passes = fast.FastPass(self)
                counts, _, n_lines = passes.count(self._hash, advance)
                self.fast = passes
            else:
                for tokens in self.lines():
                    counts.update(tokens)
                    n_lines += 1
            self.digest = self._hash.hexdigest()
        finally:
            self._hash = None
        self._counted = (counts, sum(counts.values()), n_lines)
        return Counter(counts), self._counted[1], n_lines

    @property
    def counted(self) -> bool:
        """count() has made its pass over the whole corpus and keeps the figures for the next call."""
        return self._counted is not None

    @property
    def shares_lines(self) -> bool:
        """Whether ``count_share`` counts what ``count`` does: not for a subclass that makes its lines
        otherwise than through ``_numbered_lines`` (classify's LabelledCorpus makes them there: its
        words, labels removed), which is counted whole."""
        return type(self).lines is Corpus.lines

    def count_share(self, share: tuple[int, int]) -> ShareCount:
        """One worker's part of ``count``: the counts of its share of the lines (k, n), with the line
        where each word was first seen, so that ``merge_counts`` over all shares gives ``count``'s
        result, its words in the same order. Sets ``digest`` (the whole corpus's: every line is hashed)."""
        counts: Counter = Counter()
        n_lines = 0
        news = []   # (index in counts where a line's new words begin, that line's number)
        self._hash = hashlib.sha256()
        try:
            for number, tokens in self._numbered_lines(share):
                before = len(counts)
                counts.update(tokens)
                if len(counts) > before:
                    news.append((before, number))
                n_lines += 1
            self.digest = self._hash.hexdigest()
        finally:
            self._hash = None
        starts = np.array([b for b, _ in news] + [len(counts)], np.int64)
        first_line = np.repeat(np.array([line for _, line in news], np.int64), np.diff(starts))
        return ShareCount(counts, n_lines, first_line)


