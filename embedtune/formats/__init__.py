"""Vector file formats: one reader and one writer per format, chosen from the table FORMATS.

    name             layout
    word2vec         text: header `COUNT DIM`, then `word v1 ... vDIM` per line
    word2vec-binary  header `COUNT DIM`, then per word: `word `, DIM float32 (little-endian), newline
    glove            text without a header: `word v1 ... vDIM` per line
    fasttext         fastText `.vec`: the same layout as word2vec text
    fasttext-model   fastText's own model (`.bin`, detected by its magic number): dictionary, word rows,
                     subword rows; a word's vector is fastText's get_word_vector (formats/fasttext.py)

Every reader returns (words, float32 matrix [n, dim], where the rows start); every writer takes a
`Vectors`. Files ending in `.gz` / `.bz2` are compressed, `-` is standard input / output.
Text values are written in the shortest `%g` form that reads back to the same float32
(see text/shortest.py), so save then load is bit-identical in every format, and an unchanged row is
written as the very text it was read from.
"""

from __future__ import annotations

import codecs
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.binary import binary_blocks, read_binary, read_binary_outline, write_binary
from embedtune.formats.fasttext import is_fasttext_model
from embedtune.formats.io import Source, open_source, open_target
from embedtune.formats.text.outline import TextOutline
from embedtune.formats.text.read import TextReader
from embedtune.formats.text.parse import NUMBER, load_parser_ahead, parse_header
from embedtune.formats.text.write import RenderedAhead, write_text
from embedtune.vectors import Vectors, VectorsOutline

__all__ = [
    "FORMATS", "FORMAT_NAMES", "VECTOR_FORMATS", "Format", "check_format_name", "detect_format", "load_vectors",
    "outline_vectors", "read_table", "save_vectors",
    "duplicate_error", "nonfinite_error", "output_format", "stream_table", "without_nonfinite",
]


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    read: Callable  # (source, limit, replace_bad_utf8, progress) -> (words, matrix, first row's line[, model])
    write: Callable  # (vectors, out, name, progress, on_written, check_rows[, ahead: text formats]) -> None
    rows_are_lines: bool  # text rows are named by line number, binary ones by record number
    from_model: bool = False  # written only from vectors read from such a file (a fastText model's subwords)
    renders_ahead: bool = False  # its write takes lines rendered ahead (render_ahead), by a compiled kernel


def _text_format(name, description, header):
    def read(source, limit, replace_bad_utf8, progress):
        reader = TextReader(source, header=header, limit=limit, replace_bad_utf8=replace_bad_utf8, progress=progress)
        return reader.read()

    def write(vectors, out, name, progress, on_written, check_rows, ahead=None):
        write_text(vectors, out, header=header, name=name, progress=progress, on_written=on_written,
                   check_rows=check_rows, ahead=ahead)

    return Format(name, description, read, write, rows_are_lines=True, renders_ahead=True)


def _binary_read(source, limit, replace_bad_utf8, progress):
    return read_binary(source, limit=limit, replace_bad_utf8=replace_bad_utf8, progress=progress)


def _binary_write(vectors, out, name, progress, on_written, check_rows):
    write_binary(vectors, out, name=name, progress=progress, on_written=on_written, check_rows=check_rows)


def _model_read(source, limit, replace_bad_utf8, progress):
    from embedtune.formats.fasttext import read_model

    return read_model(source, limit=limit, replace_bad_utf8=replace_bad_utf8, progress=progress)


def _model_write(vectors, out, name, progress, on_written, check_rows):
    from embedtune.formats.fasttext_write import write_model

    write_model(vectors, out, name=name, progress=progress, on_written=on_written, check_rows=check_rows)


FORMATS = {
    "word2vec": _text_format(
        "word2vec", "text: header 'COUNT DIM', then 'word v1 ... vDIM' per line", header=True),
    "word2vec-binary": Format(
        "word2vec-binary", "binary: header 'COUNT DIM', then per word: word, space, DIM float32, newline",
        _binary_read, _binary_write, rows_are_lines=False),
    "glove": _text_format("glove", "text without a header: 'word v1 ... vDIM' per line", header=False),
    "fasttext": _text_format("fasttext", "fastText .vec: the same layout as word2vec text", header=True),
    "fasttext-model": Format(
        "fasttext-model", "fastText's model (.bin): dictionary, word and subword rows; vectors as get_word_vector",
        _model_read, _model_write, rows_are_lines=False, from_model=True),
}
FORMAT_NAMES = tuple(FORMATS)
# The formats any vectors can be written in (a fastText model needs one read to write one).
VECTOR_FORMATS = tuple(name for name, f in FORMATS.items() if not f.from_model)


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise EmbedtuneError(f"unknown format '{name}' (expected one of {', '.join(FORMAT_NAMES)})") from None


def check_format_name(name: str) -> str:
    """`name` if it is a format name, else an EmbedtuneError listing the names."""
    return get_format(name).name


# An output name's extension (before .gz / .bz2) -> the formats it means, the first when it decides:
# gensim's users name word2vec binary files .bin and fastText's text .vec.
EXTENSIONS = {".bin": ("word2vec-binary", "fasttext-model"), ".vec": ("fasttext", "word2vec")}


def output_format(path, to: str | None, in_format: str) -> str:
    """The format to write ``path`` in: ``to`` if given, else the one its extension means (.bin, .vec),
    else ``in_format``. ``to`` that the extension contradicts (``--to glove -o x.bin``) is an error,
    before any work."""
    name = str(path).lower()
    for suffix in (".gz", ".bz2"):
        name = name.removesuffix(suffix)
    ext = next((e for e in EXTENSIONS if name.endswith(e)), None) if str(path) != "-" else None
    implied = EXTENSIONS.get(ext, ())
    if to is not None:
        check_format_name(to)
        if implied and to not in implied:
            raise EmbedtuneError(f"the name ends in {ext}, which means {' or '.join(implied)}, but --to says {to}; "
                                 f"rename the output or drop --to", str(path))
        return to
    if implied:
        return in_format if in_format in implied else implied[0]
    return check_format_name(in_format)


# -- detection ---------------------------------------------------------------------------------

def detect_format(path) -> str:
    """The format name of the file at `path`. Standard input ('-') is only peeked at: a following
    load_vectors('-') still reads it from the start."""
    with open_source(path) as source:
        return _detect(source)


def _detect(source: Source) -> str:
    """Header of two integers -> word2vec text, unless what follows is binary; else GloVe.

    Looks only at the first bytes (peeked, not consumed), so it works on standard input too.
    """
    head = source.peek(1 << 16)
    if is_fasttext_model(head):
        return "fasttext-model"
    if not head.strip():
        raise EmbedtuneError("empty file (expected vectors)", source.name, 1)
    newline = head.find(b"\n")
    sizes = parse_header(head[:newline] if newline >= 0 else head, source.name)
    if sizes is None:
        return "glove"
    dim = sizes[1]
    rest = head[newline + 1:] if newline >= 0 else b""
    if not rest.strip():
        return "word2vec"
    line_end = rest.find(b"\n")
    parts = (rest[:line_end] if line_end >= 0 else rest).rsplit(None, dim)
    if len(parts) == dim + 1 and all(NUMBER.fullmatch(p) for p in parts[1:]):
        return "word2vec"
    # Raw float32 bytes are full of control bytes and invalid UTF-8; a damaged text file is not.
    sample = rest[:4096]
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return "word2vec-binary"
    if any(b < 32 and b not in (9, 10, 13) for b in sample):
        return "word2vec-binary"
    return "word2vec"


# -- loading -----------------------------------------------------------------------------------

@dataclass
class Table:
    """All rows of a file as read, before duplicate and NaN checks.

    words : list of str [n]; matrix : float32 [n, dim]; format : format name;
    first_row : line number of the first row (text) or 1 (binary records are counted from 1).
    """

    name: str
    format: str
    words: list
    matrix: np.ndarray
    first_row: int
    rows_are_lines: bool
    model: object = None   # a fastText model's FastTextModel (its subword rows and settings)

    def error(self, row: int, message: str) -> EmbedtuneError:
        """An error about row `row` (0-based), named by its line (text) or record (binary)."""
        if self.rows_are_lines:
            return EmbedtuneError(message, self.name, self.first_row + row)
        return EmbedtuneError(f"record {row + 1}: {message}", self.name)

    def where(self, row: int) -> dict:
        return {"line": self.first_row + row} if self.rows_are_lines else {"record": row + 1}


def read_table(path, format=None, limit=None, *, replace_bad_utf8=False, progress=None) -> Table:
    """Read every row of a vectors file (format detected unless given); no duplicate/NaN checks."""
    if format is not None:
        fmt = get_format(format)
    if limit is not None and limit < 0:
        raise EmbedtuneError(f"limit must be 0 or more (got {limit})")
    with open_source(path) as source:
        if format is None:
            fmt = FORMATS[_detect(source)]
        words, matrix, first_row, *model = fmt.read(source, limit, replace_bad_utf8, progress)
    return Table(source.name, fmt.name, words, matrix, first_row, fmt.rows_are_lines, *model)


class TableStream:
    """A vectors file's rows a block at a time (``blocks()``), for a caller that looks at each row once
    and need not hold them all: its memory is a block's, not the matrix's. What read_table would say
    of a bad file is said here too, at the block where it shows (after the blocks before it).

    head : a Table with no rows (its name, format and where rows start: for ``error`` and ``where``);
    dim : the rows' dimension, known once the first block has come (or the iteration ended);
    model : a fastText model's FastTextModel, once the blocks have started.
    """

    BLOCK_ROWS = 1 << 14   # a fastText model's rows computed and handed on at a time

    def __init__(self, source: Source, fmt: Format, replace_bad_utf8: bool, progress):
        self.source, self.fmt = source, fmt
        self.replace_bad_utf8, self.progress = replace_bad_utf8, progress
        self.head = Table(source.name, fmt.name, [], None, 2 if fmt.rows_are_lines else 1, fmt.rows_are_lines)
        self.dim = None
        self.model = None

    def blocks(self):
        """(words, float32 [rows, dim]) per block, in file order."""
        fmt, source = self.fmt, self.source
        if fmt.name == "word2vec-binary":
            def on_header(count, dim):
                self.dim = dim
            yield from binary_blocks(source, replace_bad_utf8=self.replace_bad_utf8, progress=self.progress,
                                     on_header=on_header)
        elif fmt.rows_are_lines:
            # numba's load would be most of what a streamed read holds (inspect, diff; text/parse.py's takes_compiled)
            reader = TextReader(source, header=fmt.name != "glove", replace_bad_utf8=self.replace_bad_utf8,
                                progress=self.progress, parallel=False, compiled=False)
            blocks = reader.blocks()
            for block in blocks:
                self.dim, self.head.first_row = reader.dim, reader.first_line
                yield block
            self.dim, self.head.first_row = reader.dim, reader.first_line
        else:   # a fastText model: its dictionary read, each block's word vectors computed from the matrices
            _, _, _, model = fmt.read(source, 0, self.replace_bad_utf8, None)   # (mapped from a plain file)
            self.dim, self.model, words = model.dim, model, model.words
            total = source.size or 0
            for start in range(0, len(words), self.BLOCK_ROWS):
                ids = np.arange(start, min(start + self.BLOCK_ROWS, len(words)), dtype=np.int64)
                # each word's vector is its own rows' sum: a block's bits are the whole read's
                yield words[start:ids[-1] + 1], model.word_vectors(model.hashed_words(ids), ids)
                if self.progress is not None:
                    self.progress(total * (int(ids[-1]) + 1) // len(words), source.size)


@contextmanager
def stream_table(path, format=None, *, replace_bad_utf8=False, progress=None):
    """A TableStream of the vectors file at ``path`` (format detected unless given); no duplicate/NaN checks."""
    fmt = get_format(format) if format is not None else None
    with open_source(path) as source:
        yield TableStream(source, fmt or FORMATS[_detect(source)], replace_bad_utf8, progress)


def load_vectors(path, format=None, limit=None, *, keep_first_duplicate=False, allow_nan=False,
                 replace_bad_utf8=False, progress=None, kernels=False) -> Vectors:
    """Load a vectors file.

    path : file name, '-' for standard input; .gz / .bz2 are decompressed.
    format : one of FORMAT_NAMES, or None to detect it.
    limit : read only the first `limit` rows.
    keep_first_duplicate : a repeated word keeps its first row (default: an error naming both lines).
    allow_nan : keep rows with NaN or infinity (default: an error naming the line).
    replace_bad_utf8 : replace bytes that are not UTF-8 in words (default: an error naming the line).
    progress : called as progress(bytes_read, total_bytes_or_None) after each block.
    kernels : the process loads numba anyway (train, eval, a text writer, your own compiled code): a text file of
        128 MiB or more is then parsed faster by a compiled kernel; else only from 2 GiB (text/parse.py).
    Returns Vectors (words in file order, float32 matrix [n, dim]).
    """
    if kernels:
        load_parser_ahead(path)
    table = read_table(path, format, limit, replace_bad_utf8=replace_bad_utf8, progress=progress)
    if not allow_nan:
        bad = _nonfinite_rows(table.matrix)
        if bad.size:
            raise nonfinite_error(path, table, int(bad[0]), table.matrix[int(bad[0])])
    vectors = Vectors(table.words, table.matrix, model=table.model)
    if len(vectors.index) == len(vectors.words):
        return vectors  # no duplicates (the index, built anyway, tells without another pass)
    duplicates = find_duplicates(table.words)
    if not keep_first_duplicate:
        row, first = duplicates[0]
        raise duplicate_error(table, table.words[row], row, first)
    keep = np.ones(len(table.words), bool)
    keep[[row for row, _ in duplicates]] = False
    # Written back, the model keeps the rows left out here as they were.
    return Vectors([w for w, k in zip(table.words, keep) if k], table.matrix[keep], model=table.model)


# Rows whose values the dry run reads and checks (outline_vectors): enough to find a file that is not what its
# name says, and few enough to take no time at any size.
OUTLINE_SAMPLE_ROWS = 1000


def outline_vectors(path, format=None, *, sample=OUTLINE_SAMPLE_ROWS, keep_first_duplicate=False, allow_nan=False,
                    replace_bad_utf8=False, progress=None) -> VectorsOutline:
    """A vectors file's words and shape, its matrix not loaded: every row's word as load_vectors reads it (a
    repeated word an error, or its later rows left out with ``keep_first_duplicate``), and the values of the
    first ``sample`` rows only, checked as load_vectors checks them (NaN or infinity an error unless
    ``allow_nan``). A fastText model's matrices stay mapped from the file; the sample's vectors are the only
    ones computed. Memory: the words, a read buffer and the sample, whatever the file's size."""
    if format is not None:
        fmt = get_format(format)
    with open_source(path) as source:
        if format is None:
            fmt = FORMATS[_detect(source)]
        model = None
        if fmt.name == "word2vec-binary":
            words, matrix, first_row = read_binary_outline(source, sample=sample, replace_bad_utf8=replace_bad_utf8,
                                                           progress=progress)
        elif fmt.rows_are_lines:
            # only the sample's values are parsed: never worth numba's load (text/parse.py's takes_compiled)
            reader = TextOutline(source, header=fmt.name != "glove", replace_bad_utf8=replace_bad_utf8,
                                 progress=progress, parallel=False, compiled=False)
            words, matrix, first_row = reader.outline(sample)
        else:   # a fastText model: its dictionary read, no word's vector computed but the sample's
            _, _, first_row, model = fmt.read(source, 0, replace_bad_utf8, progress)
            words = model.words
            k = np.arange(min(sample, len(words)), dtype=np.int64)
            matrix = model.word_vectors(model.hashed_words(k), k)
        size = source.size
    table = Table(source.name, fmt.name, words, matrix, first_row, fmt.rows_are_lines, model)
    if not allow_nan:
        bad = _nonfinite_rows(matrix)
        if bad.size:
            raise nonfinite_error(path, table, int(bad[0]), matrix[int(bad[0])])
    outline = VectorsOutline(words, int(matrix.shape[1]), matrix, size, model=model)
    if len(outline.index) == len(words):
        return outline
    duplicates = find_duplicates(words)
    if not keep_first_duplicate:
        row, first = duplicates[0]
        raise duplicate_error(table, words[row], row, first)
    keep = np.ones(len(words), bool)
    keep[[row for row, _ in duplicates]] = False
    return VectorsOutline([w for w, k in zip(words, keep) if k], outline.dim, matrix[keep[:len(matrix)]], size,
                          model=model)


def nonfinite_error(path, table: Table, row: int, values: np.ndarray) -> EmbedtuneError:
    """The error for row ``row`` (0-based) of ``table``, whose ``values`` hold NaN or infinity."""
    col = int(np.flatnonzero(~np.isfinite(values))[0])
    value = values[col]
    written = _written_value(path, table, row, col, len(values)) if np.isinf(value) else None
    if written is not None:
        return table.error(row, f"value {col + 1} is {written}, beyond float32's range (largest "
                                f"{np.finfo(np.float32).max:.8g}); --allow-nan accepts it (as {value})")
    return table.error(row, f"value {col + 1} is {value} (expected a finite number; --allow-nan accepts such rows)")


def duplicate_error(table: Table, word: str, row: int, first: int) -> EmbedtuneError:
    """The error for row ``row`` (0-based) of ``table``, whose ``word`` row ``first`` had."""
    where = f"line {table.first_row + first}" if table.rows_are_lines else f"record {first + 1}"
    return table.error(row, f"duplicate word '{word}' (first on {where}; --keep-first-duplicate keeps the first)")


def without_nonfinite(vectors: Vectors) -> tuple[Vectors, list]:
    """``vectors`` without its rows holding NaN or infinity, and the words of those rows: what
    training and init read with --allow-nan (such a row cannot train, and as a context it would
    turn every row it touches into NaN)."""
    bad = _nonfinite_rows(vectors.matrix)
    if not bad.size:
        return vectors, []
    keep = np.ones(len(vectors), bool)
    keep[bad] = False
    kept = Vectors([w for w, k in zip(vectors.words, keep) if k], vectors.matrix[keep], model=vectors.model)
    return kept, [vectors.words[int(r)] for r in bad]


def _written_value(path, table: Table, row: int, col: int, dim: int) -> str | None:
    """Value ``col`` of text row ``row`` as the file spells it, when that is a finite number that
    float32 rounds to infinity (1e39); None otherwise. Reads the file again up to that line: only
    on this error path, and never a pipe (standard input, a FIFO: it cannot be read twice)."""
    if not table.rows_are_lines or str(path) == "-" or not os.path.isfile(path):
        return None
    target, number, line, pending = table.first_row + row, 1, None, b""
    try:
        with Source(path) as source:
            while line is None:
                block = source.read(1 << 20)
                pending += block
                while number < target and (cut := pending.find(b"\n")) >= 0:
                    pending, number = pending[cut + 1:], number + 1
                if number < target:
                    pending = b""          # the middle of a line before the target: not needed
                elif b"\n" in pending or not block:
                    line = pending.split(b"\n", 1)[0]
                if not block:
                    break
    except (OSError, EmbedtuneError):
        return None
    if line is None:
        return None
    values = line.rsplit(None, dim)[1:]
    try:
        text = values[col].decode("ascii")
        return text if math.isfinite(float(text)) else None
    except (IndexError, UnicodeDecodeError, ValueError):
        return None


def _nonfinite_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows holding NaN or infinity; checked a few MB at a time (no matrix-sized temporary)."""
    bad = []
    step = max(1, (1 << 22) // max(1, matrix.shape[1]))
    for start in range(0, len(matrix), step):
        finite = np.isfinite(matrix[start:start + step]).all(axis=1)
        if not finite.all():
            bad.append(np.flatnonzero(~finite) + start)
    return np.concatenate(bad) if bad else np.empty(0, np.intp)


def find_duplicates(words) -> list:
    """[(row, first_row)] for every row whose word appeared earlier (0-based rows)."""
    if len(set(words)) == len(words):
        return []
    first = {}
    return [(row, seen) for row, word in enumerate(words) if (seen := first.setdefault(word, row)) != row]


# -- saving ------------------------------------------------------------------------------------

def render_ahead(vectors: Vectors, format: str, source: str | None = None,
                 source_format: str | None = None, held: bool = False) -> RenderedAhead | None:
    """The lines of ``vectors`` as ``format`` writes them, rendered from now on a thread of their own, for a
    later save_vectors(ahead=...) of the same rows (or of them changed in part: those lines are rendered
    again); None when the format is not text, or its text is too big to hold (text/write.py AHEAD_MAX_BYTES).
    ``source``: the file ``vectors`` were read from, in ``source_format``: when that is a text format, its
    lines that are the very text the writer would render are copied instead (text/verbatim.py). ``held``: the
    rendering waits for the returned object's ``go()``."""
    matrix = vectors.matrix
    if not rendered_ahead_bytes(*matrix.shape, format) or matrix.dtype != np.float32 or not matrix.flags.c_contiguous:
        return None
    lines = None
    if source is not None and source_format in FORMATS and FORMATS[source_format].renders_ahead \
            and os.path.isfile(source):
        from embedtune.formats.text.verbatim import InputLines

        lines = InputLines(source, header=source_format != "glove")
    return RenderedAhead(vectors.words, matrix, lines, held)


def rendered_ahead_bytes(n: int, dim: int, format: str) -> int:
    """About the memory render_ahead's lines of n rows of dim values hold until the write (0: none made)."""
    if not get_format(format).renders_ahead or not RenderedAhead.fits(n, dim):
        return 0
    return RenderedAhead.expected_bytes(n, dim)


def save_vectors(vectors, path, format, *, progress=None, on_written=None, check_rows=None,
                 ahead: RenderedAhead | None = None) -> None:
    """Write `vectors` (words + float32 matrix [n, dim]) to `path` in `format`.

    vectors : Vectors, or a PatchedVectors (what training returns), read a block of rows at a time.
    path : file name ('.gz' / '.bz2' compress), '-' for standard output. A regular file is written
    to a temporary file in the same folder and renamed into place, so a failure leaves nothing.
    progress : called as progress(rows_written, total_rows) after each block.
    on_written : called as on_written(start, stop, rows) after each block with its rows read back from
    the bytes written (float32 [stop - start, dim]); raising there leaves no output file.
    check_rows : bool [<= n], the rows on_written needs (None: every row): a block with none of them
    is not read back, and on_written is not called for it (the read-back was a third of a text
    write: a run with no frozen row needs none).
    ahead : render_ahead's lines (for this format), stopped here: the same bytes, less work left to do.
    """
    fmt = get_format(format)
    name = "<stdout>" if str(path) == "-" else str(path)
    with open_target(path) as out:
        if ahead is not None and fmt.renders_ahead:
            fmt.write(vectors, out, name, progress, on_written, check_rows, ahead=ahead)
        else:
            if ahead is not None:
                ahead.stop()
            fmt.write(vectors, out, name, progress, on_written, check_rows)
