"""fastText model files (``.bin``, what fastText's ``save_model`` writes): read, and written back.

Layout (little-endian; fastText's src/fasttext.cc, args.cc, dictionary.cc, densematrix.cc):

    magic int32 793712314, version int32 (11 or 12); a model from before 2017 has neither, and no
        pruneidx_size, quant or qout below (gensim's lee_fasttext.bin; read, and written back as version 12)
    args: dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate (int32 each), t (float64)
    dictionary: size int32, nwords int32, nlabels int32, ntokens int64, pruneidx_size int64,
        then per entry: word bytes, NUL, count int64, type int8 (0 word, 1 label); words come first
    quant bool (1 byte; true: a quantized .ftz, not read here)
    input matrix: rows int64 (nwords + bucket), cols int64 (dim), float32 values
    qout bool, output matrix: rows int64, cols int64, float32 values

A word's vector is fastText's get_word_vector (embedtune.formats.subwords): its own row and its
n-gram rows averaged. The reader returns those vectors as the file's words and keeps the model
(``FastTextModel``) with them, so that a model can be written back: the same settings, dictionary
and n-gram rows, each changed word's own row set so that the model's arithmetic gives its new vector,
new words added after the model's words. A plain file's matrices are memory-mapped, not copied.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.words import WordList

MAGIC = 793712314
MAGIC_BYTES = struct.pack("<i", MAGIC)
VERSIONS = (11, 12)
ARGS = ("dim", "ws", "epoch", "min_count", "neg", "word_ngrams", "loss", "model", "bucket", "minn", "maxn",
        "lr_update_rate")
_ARGS = struct.Struct("<12id")
_DICT = struct.Struct("<iiiqq")
_MATRIX = struct.Struct("<qq")
MODEL_NAMES = {1: "cbow", 2: "skipgram", 3: "supervised"}
LOSS_NAMES = {1: "hs", 2: "ns", 3: "softmax", 4: "ova"}
SUPERVISED = 3


_OLD_DICT = struct.Struct("<iiiq")


def is_fasttext_model(head: bytes) -> bool:
    """Whether the data starts as a fastText model does (whatever the file's name): its magic number, or
    the settings and dictionary header of a model from before the magic number, which no text starts
    with (their first bytes hold zeros)."""
    if head[:4] == MAGIC_BYTES:
        return True
    if len(head) < _ARGS.size + _OLD_DICT.size:
        return False
    *values, t = _ARGS.unpack_from(head)
    a = dict(zip(ARGS, values))
    size, nwords, nlabels, ntokens = _OLD_DICT.unpack_from(head, _ARGS.size)
    return (0 < a["dim"] <= 1 << 16 and a["ws"] > 0 and a["epoch"] > 0 and a["neg"] >= 0 and a["word_ngrams"] > 0
            and a["loss"] in LOSS_NAMES and a["model"] in MODEL_NAMES and a["bucket"] >= 0
            and 0 <= a["minn"] <= 64 and 0 <= a["maxn"] <= 64 and 0 <= t <= 1 and nwords >= 0 and nlabels >= 0
            and size == nwords + nlabels and ntokens >= 0)


@dataclass
class FastTextModel:
    """A fastText model as read: everything needed to write it back byte for byte.

    args : the 12 integer settings by name (ARGS) and ``t``; dictionary: ``entries`` (the raw bytes of
    the word entries, then of the label entries, split at ``labels_at``), ``words`` (the words' bytes)
    input : float32 [nwords + bucket, dim] (memory-mapped for a plain file); output : float32 [m, dim]
    """

    version: int | None   # None: the layout from before the magic number
    args: dict
    t: float
    nwords: int
    nlabels: int
    ntokens: int
    entries: bytes
    labels_at: int
    input: np.ndarray
    qout: bool
    output: np.ndarray
    words: WordList = field(repr=False, default=None)

    @property
    def dim(self) -> int:
        return self.args["dim"]

    @property
    def bucket(self) -> int:
        return self.args["bucket"]

    @property
    def minn(self) -> int:
        return self.args["minn"]

    @property
    def maxn(self) -> int:
        """n-grams up to this many characters; 0 for a version-11 supervised model (fastText's own rule)."""
        if self.version in (None, 11) and self.args["model"] == SUPERVISED:
            return 0
        return self.args["maxn"]

    def settings(self) -> dict:
        """What ``inspect`` shows: the model's kind and its subword settings."""
        a = self.args
        return {"version": self.version if self.version is not None else "before 11 (no magic number)", "model": MODEL_NAMES.get(a["model"], str(a["model"])),
                "loss": LOSS_NAMES.get(a["loss"], str(a["loss"])), "words": self.nwords, "labels": self.nlabels,
                "minn": self.minn, "maxn": self.maxn, "bucket": self.bucket, "word_ngrams": a["word_ngrams"],
                "output_rows": int(self.output.shape[0]), "tokens": self.ntokens}

    def word_vectors(self, words, own_rows, progress=None) -> np.ndarray:
        """fastText's get_word_vector of ``words`` (own_rows: their dictionary rows, -1 for unknown words);
        ``progress``: subwords.word_vectors'."""
        from embedtune.formats.subwords import word_vectors

        return word_vectors(words, own_rows, self.input[:self.nwords], self.grams, self.minn, self.maxn,
                            progress=progress, release=self.release_read_pages if is_mapped(self.input) else None)

    def release_read_pages(self) -> None:
        """Let the pages of the mapped file read so far go from this process (the page cache keeps them; a
        later read maps them again): the rows of words whose vectors were computed and handed on need not
        stay resident, and a model's matrices are several times its words' vectors (issue 48: diff of two models
        held every page of both files; benchmarks/log/memory_sizes.md)."""
        mapping = _mapping(self.input)
        if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            mapping.madvise(mmap.MADV_DONTNEED)

    def word_bytes(self, ids) -> list[bytes]:
        """The bytes of the dictionary's words ``ids``: what fastText hashes, whatever they show as (a word
        read with --replace-bad-utf8 shows U+FFFD where its bytes are not UTF-8)."""
        data, ends = self.words.data, self.words.ends
        return [data[self._start(i):int(ends[i])] for i in np.asarray(ids, np.int64).tolist()]

    def hashed_words(self, ids):
        """``word_bytes(ids)`` as the arithmetic (``word_vectors``) reads them: for a run of consecutive ids,
        a WordList over the dictionary's block of bytes (no word copied one by one); else the list."""
        ids = np.asarray(ids, np.int64)
        if not len(ids) or not np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
            return self.word_bytes(ids)
        first, last = int(ids[0]), int(ids[-1])
        begin = self._start(first)
        return WordList(self.words.data[begin:int(self.words.ends[last])],
                        np.asarray(self.words.ends[first:last + 1], np.int64) - begin)

    def _start(self, i: int) -> int:
        return int(self.words.ends[i - 1]) + 1 if i else 0

    @property
    def grams(self) -> np.ndarray:
        """The subword (bucket) rows: the input matrix's rows after the words'."""
        return self.input[self.nwords:]

    def oov_vectors(self, words) -> np.ndarray:
        """The vectors fastText gives ``words`` from their n-grams alone (as for words it lacks)."""
        return self.word_vectors(words, np.full(len(words), -1, np.int64))


def is_mapped(matrix: np.ndarray) -> bool:
    """Whether ``matrix`` lies in a memory map of a plain file (read_model's matrices of one), not in
    bytes read whole (a compressed or piped model's)."""
    return _mapping(matrix) is not None


def _mapping(matrix: np.ndarray) -> mmap.mmap | None:
    """The memory map ``matrix`` lies in, or None."""
    base = matrix
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap) else None


# -- reading -----------------------------------------------------------------------------------

class _Reader:
    """The file's bytes (a memory map of a plain file, else all of it read) and a position in them."""

    def __init__(self, source):
        self.name = source.name
        self.data = None
        self._map = None
        if source.compression is None and source.size is not None and not source.bom and not source.pipe:
            try:
                if stat.S_ISREG(os.stat(source.path).st_mode):
                    with open(source.path, "rb") as f:
                        self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    self.data = self._map
            except (OSError, ValueError):
                self._map = None
        if self.data is None:
            chunks = []
            while block := source.read(1 << 24):
                chunks.append(block)
            self.data = b"".join(chunks)
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.data):
            raise EmbedtuneError(f"fastText model: file ends inside the {what} (at byte {self.pos}, "
                                 f"{n} bytes expected, {len(self.data) - self.pos} left); truncated?", self.name)
        view = memoryview(self.data)[self.pos:self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: struct.Struct, what: str):
        return fmt.unpack(self.take(fmt.size, what))


def read_model(source, limit=None, replace_bad_utf8=False, progress=None):
    """-> (words, float32 word vectors [n, dim], 1, FastTextModel): the model's words (the first ``limit``)
    and fastText's vector of each."""
    r = _Reader(source)
    name = r.name
    version = None   # before the magic number
    if is_fasttext_model(r.data[:4]):
        version = struct.unpack("<ii", r.take(8, "header"))[1]
    elif not is_fasttext_model(r.data[:_ARGS.size + _OLD_DICT.size]):
        raise EmbedtuneError("not a fastText model (no fastText magic number)", name)
    if version is not None and version not in VERSIONS:
        raise EmbedtuneError(f"fastText model version {version}: this reader knows versions 11 and 12 "
                             f"(fastText's own{' newer' if version > 12 else ''} tool may read it)", name)
    *values, t = r.unpack(_ARGS, "settings")
    args = dict(zip(ARGS, values))
    dim, bucket = args["dim"], args["bucket"]
    if not 0 < dim <= 1 << 16 or bucket < 0 or args["minn"] < 0 or args["maxn"] < 0:
        raise EmbedtuneError(f"fastText model: damaged settings (dim {dim}, bucket {bucket}, minn {args['minn']}, "
                             f"maxn {args['maxn']})", name)
    if version is None:
        size, nwords, nlabels, ntokens = r.unpack(_OLD_DICT, "dictionary header")
        pruneidx_size = -1
    else:
        size, nwords, nlabels, ntokens, pruneidx_size = r.unpack(_DICT, "dictionary header")
    if size < 0 or nwords < 0 or nlabels < 0 or size != nwords + nlabels:
        raise EmbedtuneError(f"fastText model: damaged dictionary header ({size} entries, {nwords} words, "
                             f"{nlabels} labels)", name)
    begin = r.pos
    starts, ends, types, stop = _scan_entries(r, size)
    if np.any(types[:nwords] != 0) or np.any(types[nwords:] != 1):
        bad = int(np.flatnonzero(np.concatenate([types[:nwords] != 0, types[nwords:] != 1]))[0])
        raise EmbedtuneError(f"fastText model: dictionary entry {bad + 1} has type {int(types[bad])} "
                             f"(expected the {nwords} words first, then the {nlabels} labels)", name)
    entries = bytes(r.data[begin:stop])
    labels_at = int(starts[nwords]) - begin if nlabels else len(entries)
    if pruneidx_size > 0:
        r.take(8 * pruneidx_size, "pruned index")
    quant = r.take(1, "quantization flag")[0] if version is not None else 0
    if quant not in (0, 1):   # a flag is 0 or 1: the byte is within a dictionary entry the header left out
        raise EmbedtuneError(f"fastText model: the byte after the dictionary's {size} entries (offset {r.pos - 1}) is "
                             f"{quant}, not the quantization flag (0 or 1): the dictionary header's counts ({nwords} words, "
                             f"{nlabels} labels) are wrong; damaged?", name)
    if quant:
        raise EmbedtuneError("a quantized fastText model (.ftz, from fastText's quantize): its rows are compressed "
                             "codes, not vectors; use the full .bin model", name)
    if pruneidx_size >= 0:
        raise EmbedtuneError(f"fastText model: a pruned dictionary ({pruneidx_size} entries) in a model that is "
                             "not quantized; damaged?", name)
    input_ = _matrix(r, "input matrix", nwords + bucket, dim)
    qout = bool(r.take(1, "output quantization flag")[0]) if version is not None else False
    if qout:
        raise EmbedtuneError("a fastText model with a quantized output matrix (.ftz): use the full .bin model", name)
    output = _matrix(r, "output matrix", None, dim)
    if r.pos != len(r.data):
        raise EmbedtuneError(f"fastText model: {len(r.data) - r.pos} bytes after the output matrix "
                             "(expected the file to end there); damaged?", name)
    words = _words(r.data, starts[:nwords], ends[:nwords], name, replace_bad_utf8)
    model = FastTextModel(version, args, t, nwords, nlabels, ntokens, entries, labels_at, input_, qout, output, words)
    wanted = nwords if limit is None else min(limit, nwords)
    shown = words if wanted == nwords else words[:wanted]
    from embedtune.formats.io import new_matrix

    # The words' own bytes hashed (a slice of the words is their shown text: U+FFFD for a byte not UTF-8).
    hashed = words if wanted == nwords else model.hashed_words(np.arange(wanted))
    # The words' vectors read the (mapped) matrices: most of the read's time, said as the share of the bytes.
    total = source.size or len(r.data)
    told = None if progress is None else (lambda done: progress(total * done // max(1, wanted), source.size))
    matrix = model.word_vectors(hashed, np.arange(wanted, dtype=np.int64), told) if wanted else new_matrix(0, dim)
    if progress is not None:
        progress(total, source.size)
    return shown, matrix, 1, model


def _scan_entries(r: _Reader, size: int):
    """(starts, ends, types, position after them) of the dictionary's ``size`` entries (their counts are
    written back with the entries' bytes as they are)."""
    from embedtune.formats.subwords import scan_entries

    data = np.frombuffer(r.data, np.uint8)
    starts = np.empty(size, np.int64)
    ends = np.empty(size, np.int64)
    counts = np.empty(size, np.int64)
    types = np.empty(size, np.int8)
    done, stop = scan_entries(data, r.pos, starts, ends, counts, types)
    if done < size:
        raise EmbedtuneError(f"fastText model: file ends inside the dictionary (entry {done + 1} of {size}); "
                             "truncated?", r.name)
    r.pos = stop
    return starts, ends, types, stop


def _matrix(r: _Reader, what: str, rows: int | None, dim: int) -> np.ndarray:
    m, n = r.unpack(_MATRIX, f"{what}'s header")
    if n != dim or m < 0 or (rows is not None and m != rows):
        expected = f"{rows} x {dim}" if rows is not None else f"rows x {dim}"
        raise EmbedtuneError(f"fastText model: the {what} is {m} x {n}, the settings say {expected}; damaged?", r.name)
    view = r.take(4 * m * n, what)
    matrix = np.frombuffer(view, "<f4").reshape(m, n)
    if sys.byteorder != "little":
        matrix = matrix.astype(np.float32)
    return matrix


def _words(data, starts, ends, name, replace_bad_utf8) -> WordList:
    """The word entries' bytes as a WordList (checked to be UTF-8)."""
    from embedtune.formats.subwords import join_words

    block = np.frombuffer(data, np.uint8)
    lengths = ends - starts
    out = np.empty(int(lengths.sum()) + max(len(starts) - 1, 0), np.uint8)
    new_ends = join_words(block, starts, ends, out)
    joined = out.tobytes()
    if np.any(lengths == 0) or joined.count(b"\n") != max(0, len(starts) - 1):
        bad = int(np.flatnonzero((lengths == 0) | _holds_newline(block, starts, ends))[0])
        raise EmbedtuneError(f"fastText model: dictionary entry {bad + 1} is empty or holds a line break; damaged?",
                             name)
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        words = []
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
            raw = bytes(data[s:e])
            try:
                words.append(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                if not replace_bad_utf8:
                    raise EmbedtuneError(f"fastText model: word {i + 1} is not valid UTF-8 (byte 0x{raw[err.start]:02x} "
                                         f"at column {err.start + 1}; --replace-bad-utf8 replaces such bytes)",
                                         name) from None
                words.append(raw.decode("utf-8", "replace"))
        # Kept as the model's own bytes (its n-grams hash those), shown with replacements.
        return _ReplacedWords(joined, new_ends, words)
    return WordList(joined, new_ends)


def _holds_newline(block, starts, ends) -> np.ndarray:
    return np.array([10 in bytes(block[s:e]) for s, e in zip(starts.tolist(), ends.tolist())], bool)


class _ReplacedWords(WordList):
    """A model's words whose bytes are not all UTF-8: the bytes kept for the arithmetic (``data``), str with
    replacement characters shown; words appended (a run's new words) follow in ``tail``, as a WordList's."""

    def __init__(self, data, ends, shown, tail=None):
        super().__init__(data, ends, tail)
        self._shown = shown

    def _word(self, i: int) -> str:
        return self._shown[i]

    def _words(self, start: int, stop: int) -> list[str]:
        return self._shown[start:stop]

    def appended(self, words) -> WordList:
        """These words and then ``words``, the model's bytes still shared (its arithmetic reads them)."""
        return _ReplacedWords(self.data, self.ends, self._shown, self.tail + list(words))
