"""Reading a corpus: lines of tokens (whitespace tokens, split as the vectors spell words),
counted once, streamed as id chunks.

A corpus is one sentence or paragraph per line; context windows never cross a line.
It is read in passes (one to count, one per epoch) and never held in memory whole:
standard input is spooled once to a temporary file so it can be read again.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import gzip
import hashlib
import os
import shutil
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain, compress
from operator import itemgetter

import numpy as np

from embedtune.errors import EmbedtuneError

CHUNK_TOKENS = 1 << 20  # tokens per chunk handed to the pair generator


UTF8_BOM = b"\xef\xbb\xbf"   # dropped at the start of a corpus: it is not part of the first word
# Compression is known by content, as for vectors files: a plain file named .gz is read as text,
# a gzip file without the extension is decompressed.
_GZIP_MAGIC = b"\x1f\x8b"
_BZIP2_MAGIC = (b"BZh", b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")  # header, block, end
_UNREAD = {b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}


def _compression(head: bytes) -> str | None:
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    # "BZh", the block size (1-9), then a block or the end of the stream: ten bytes that a text
    # line starting with "BZh" does not have.
    if head[:3] == _BZIP2_MAGIC[0] and head[3:4].isdigit() and head[3:4] != b"0" \
            and head[4:10] in _BZIP2_MAGIC[1:]:
        return "bzip2"
    return None


def _open_binary(path: str):
    with open(path, "rb") as f:
        head = f.read(10)
    compression = _compression(head)
    if compression == "gzip":
        return gzip.open(path, "rb")
    if compression == "bzip2":
        return bz2.open(path, "rb")
    for magic, name in _UNREAD.items():
        if head.startswith(magic):
            raise EmbedtuneError(f"is {name}-compressed; embedtune reads gzip and bzip2 corpora "
                                 f"(decompress it, or pipe it in as '-')", path)
    return open(path, "rb")


MAX_PIECE_BYTES = 1 << 20  # a longer line is read in pieces cut at whitespace
HEAD_BYTES = 1 << 16  # what Corpus.check_start reads: enough to tell binary data or another encoding


def _pieces(raw, path: str) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset in the line, bytes) for each line; a line over MAX_PIECE_BYTES
    comes in pieces cut at whitespace, so memory stays bounded whatever the corpus (windows do
    not cross a cut)."""
    number, carry, offset = 1, b"", 0
    while True:
        chunk = raw.readline(MAX_PIECE_BYTES)
        if not chunk:
            if carry:
                yield number, offset, carry
            return
        data = carry + chunk if carry else chunk
        if data.endswith(b"\n") or len(chunk) < MAX_PIECE_BYTES:
            yield number, offset, data
            carry, offset = b"", 0
            number += 1
            continue
        cut = max(data.rfind(b" "), data.rfind(b"\t"))
        if cut <= 0:
            if len(data) > 4 * MAX_PIECE_BYTES:
                raise EmbedtuneError(
                    f"a token longer than {4 * MAX_PIECE_BYTES:,} bytes; is this a text corpus?", path, number)
            carry = data
            continue
        yield number, offset, data[:cut]
        carry = data[cut + 1:]
        offset += cut + 1


def _decode(data: bytes, final: bool = True) -> str:
    """UTF-8 ``data`` as text; not ``final``: an incomplete character at the end is no error (it is left out)."""
    return data.decode("utf-8") if final else codecs.getincrementaldecoder("utf-8")().decode(data, final=False)


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


class Corpus:
    """A re-readable corpus.

    source : a path (gzip and bzip2 data are decompressed, known by their first bytes), ``"-"`` for standard input, or a
        re-iterable of token lists / strings (a list, or an object whose ``__iter__``
        starts over, like gensim's corpora); a one-pass iterator (a generator) is spooled
        to a temporary file first.
    lowercase : lower-case every token (before tokenizing)
    tokenize : "none" (whitespace tokens as they are) or "auto" (split as the vectors spell
        words; see :class:`Tokenizer`), which needs ``vocabulary``, the vectors' words
    """

    def __init__(self, source, lowercase: bool = False, tokenize: str = "none", vocabulary=None):
        if tokenize not in TOKENIZE:
            raise EmbedtuneError(f"tokenize must be one of {', '.join(TOKENIZE)}, got {tokenize!r}")
        if tokenize == "auto" and vocabulary is None:
            raise EmbedtuneError("tokenize 'auto' needs the vectors' vocabulary")
        self.lowercase = lowercase
        self.tokenizer = Tokenizer(vocabulary) if tokenize == "auto" else None
        self._spool = None
        self._hash = None
        self.digest: str | None = None   # sha256 of the content, set by count(); resume compares it
        self._counted = None   # count()'s figures, once made
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
                self._read_path = self._spool
            else:
                self._read_path = self.path
        elif isinstance(source, Iterator):
            # A one-pass iterator (a generator): spooled like standard input, since training reads
            # the corpus more than once (counts, new-word starts, then every epoch).
            self.path = "<corpus>"
            self.sentences = None
            with self._spooling("w", encoding="utf-8") as spool:
                for sentence in source:
                    spool.write((sentence if isinstance(sentence, str) else " ".join(sentence)) + "\n")
            self._read_path = self._spool
        else:
            self.path = "<corpus>"
            self.sentences = source

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
        # The one place tokens are produced: counts, new-word starts and every epoch read them here.
        if self.tokenizer is None:
            return tokens
        return self.tokenizer.tokens(tokens)

    def lines(self, share: tuple[int, int] | None = None) -> Iterator[list[str]]:
        """Token lists, one per line (empty lines skipped). ``share`` (k, n): only lines k, k + n,
        k + 2n, ... (counted from 0, empty ones included), one worker's share of a distributed run;
        the other lines are not decoded."""
        return (tokens for _, tokens in self._numbered_lines(share))

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
        try:
            with _open_binary(self._read_path) as raw:
                for number, offset, piece in _pieces(raw, self.path):
                    if digest is not None:
                        digest.update(piece)
                    if (number - 1) % n != k:
                        continue
                    text = self._text(piece, self.path, number, offset)
                    if lower:
                        text = text.lower()
                    tokens = self._tokens(text.split())
                    if tokens:
                        yield number, tokens
        except (OSError, EOFError, ValueError) as err:   # damaged .gz/.bz2 among them
            raise EmbedtuneError(f"cannot read: {err}", self.path) from None

    @classmethod
    def _text(cls, piece: bytes, path: str, number: int, offset: int, final: bool = True) -> str:
        """A piece of line ``number`` (from byte ``offset`` of the line) as text, or the error that says
        why it is not: not UTF-8, or NUL bytes. ``final``: False for a piece cut off at an arbitrary
        byte (check_start's last), whose end may be part of a character."""
        if number == 1 and offset == 0 and piece.startswith(UTF8_BOM):
            piece = piece[len(UTF8_BOM):]
        try:
            text = _decode(piece, final)
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
        with _open_binary(path) as raw:
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
                yield number, cls._text(line, path, number, 0, final=whole), whole

    def count(self) -> tuple[Counter, int, int]:
        """(token counts, total tokens, lines with tokens) in one pass; also sets ``digest``, a
        sha256 of the bytes read (cheap next to the read: benchmarks/README.md, io). The pass
        is made once for two calls: the first returns a copy of the counts and keeps them, the next
        is handed the kept ones (so the command counts while TensorFlow imports and train() finds the
        count made, without a second copy of a large vocabulary held through training); a third
        call reads the corpus again."""
        if self._counted is not None:
            counted, self._counted = self._counted, None
            return counted
        counts: Counter = Counter()
        n_lines = 0
        self._hash = hashlib.sha256()
        try:
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


@dataclass
class IdChunk:
    """A run of corpus tokens as row ids.

    ids : int32 array of shape = [n]; words outside the training vocabulary are dropped
    line : int32 array of shape = [n]; tokens with equal values come from the same line
    raw_tokens : tokens read for this chunk, dropped ones included (for progress and lr decay)
    """

    ids: np.ndarray
    line: np.ndarray
    raw_tokens: int
    numbers: np.ndarray | None = None   # int64 [lines of the chunk]: each line's number in the corpus (numbered)


def id_chunks(corpus: Corpus, index: dict[str, int], chunk_tokens: int = CHUNK_TOKENS,
              numbered: bool = False) -> Iterator[IdChunk]:
    """Stream the corpus as chunks of ids, each chunk ending at a line boundary; ``numbered``: with
    each line's number in the corpus (``corpus.numbered_lines``: a share of the lines numbers them as
    the whole corpus does)."""
    ids: list[int] = []
    line_lengths: list[int] = []
    numbers: list[int] = []
    raw = 0
    get = index.get
    lines = corpus.numbered_lines() if numbered else ((0, tokens) for tokens in corpus.lines())
    for number, tokens in lines:
        row = [i for i in map(get, tokens) if i is not None]
        raw += len(tokens)
        if row:
            ids.extend(row)
            line_lengths.append(len(row))
            numbers.append(number)
        if len(ids) >= chunk_tokens:
            yield _chunk(ids, line_lengths, raw, numbers if numbered else None)
            ids, line_lengths, numbers, raw = [], [], [], 0
    if ids or raw:
        yield _chunk(ids, line_lengths, raw, numbers if numbered else None)


def _chunk(ids, line_lengths, raw, numbers=None) -> IdChunk:
    line = np.repeat(np.arange(len(line_lengths), dtype=np.int32), line_lengths)
    return IdChunk(np.asarray(ids, dtype=np.int32), line, raw,
                   None if numbers is None else np.asarray(numbers, np.int64))

