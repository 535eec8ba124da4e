"""Reading a corpus: compression known by content, a byte-order mark, pipes, the spool file."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedtune.corpus import Corpus, fast, files, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

TEXT = "the cat sat\non the mat\n"
LINES = [["the", "cat", "sat"], ["on", "the", "mat"]]


def lines_of(path) -> list[list[str]]:
    with Corpus(str(path)) as corpus:
        return list(corpus.lines())


@pytest.mark.parametrize("name, data", [
    ("plain.txt", TEXT.encode()),
    ("plain-named.gz", TEXT.encode()),          # a plain file with a compressed name
    ("plain-named.bz2", TEXT.encode()),
    ("gzip-unnamed.txt", gzip.compress(TEXT.encode())),
    ("bzip2-unnamed", bz2.compress(TEXT.encode())),
    ("named.gz", gzip.compress(TEXT.encode())),
    ("named.bz2", bz2.compress(TEXT.encode())),
], ids=lambda x: x if isinstance(x, str) else "")
def test_compression_is_known_by_content_not_by_name(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    assert lines_of(path) == LINES


def test_a_text_line_starting_like_bzip2_is_text(tmp_path):
    path = tmp_path / "c.txt"
    path.write_bytes(b"BZh9 is a word\n")
    assert lines_of(path) == [["BZh9", "is", "a", "word"]]


def test_an_empty_bzip2_stream_is_an_empty_corpus(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(bz2.compress(b""))
    assert lines_of(path) == []


def test_xz_is_refused_with_a_hint(tmp_path):
    path = tmp_path / "c.txt.xz"
    path.write_bytes(lzma.compress(TEXT.encode()))
    with pytest.raises(EmbedtuneError, match=r"c.txt.xz: is xz-compressed; .*gzip and bzip2"):
        lines_of(path)


@pytest.mark.parametrize("compress", [bytes, gzip.compress], ids=["plain", "gzip"])
def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, compress):
    path = tmp_path / "bom.txt"
    path.write_bytes(compress(b"\xef\xbb\xbf" + TEXT.encode()))
    with Corpus(str(path)) as corpus:
        assert list(corpus.lines()) == LINES
        assert corpus.count()[0]["the"] == 2


def test_a_byte_order_mark_later_in_the_file_is_left_alone(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"a\n\xef\xbb\xbfb\n")
    assert lines_of(path) == [["a"], ["\ufeffb"]]


def test_a_named_pipe_is_read_once_and_then_from_a_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.mkdir(tmp_path / "tmp")
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(gzip.compress(TEXT.encode())))
    writer.start()
    with Corpus(str(fifo)) as corpus:
        writer.join()
        assert list(corpus.lines()) == LINES
        assert list(corpus.lines()) == LINES    # the second pass too: the pipe was spooled
        assert len(os.listdir(tmp_path / "tmp")) == 1
    assert os.listdir(tmp_path / "tmp") == []


def test_an_interrupted_spool_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def sentences():
        yield "the cat"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Corpus(sentences())
    assert os.listdir(tmp_path) == []


def test_count_is_made_once(tmp_path):
    """count() reads the corpus once; a later call gives the same figures and digest without reading
    it again (here the file is gone), and the counts it returns are the caller's own copy."""
    path = tmp_path / "c.txt"
    path.write_text("a b a\n\nc a\n", encoding="utf-8")
    corpus = Corpus(str(path))
    counts, total, n_lines = corpus.count()
    digest = corpus.digest
    assert (dict(counts), total, n_lines) == ({"a": 3, "b": 1, "c": 1}, 5, 2)
    counts["a"] = 100
    path.unlink()
    again, total2, lines2 = corpus.count()
    assert (dict(again), total2, lines2) == ({"a": 3, "b": 1, "c": 1}, 5, 2) and corpus.digest == digest


# --- check_start: the first bytes' errors, before the vectors load (issue 24) ---

def full_read_error(path, reader=Corpus):
    with pytest.raises(EmbedtuneError) as err:
        with reader(str(path)) as corpus:
            corpus.count()
    return str(err.value)


def labelled_corpus():
    from embedtune.corpus.labelled import LabelledCorpus

    return LabelledCorpus


HEAD = 1 << 16
START_CASES = {
    "binary junk": bytes(range(256)) * 64,
    "nul bytes": b"the cat\nsat \x00 on\n",
    "bad utf-8 on line 3": b"the year\nof the\ncaf\xe9 the\n",
    "latin-1 after a byte order mark": b"\xef\xbb\xbfthe\ncaf\xe9\n",
    "gzip of bad utf-8": gzip.compress(b"the cat\ncaf\xe9\n"),
    "bzip2 of nul bytes": bz2.compress(b"the cat\x00\n"),
    "damaged gzip": gzip.compress(b"the cat sat\n" * 100)[:-30] + b"\x00" * 30,
    # the damage some 30 KB into the stream: a full read meets the bad line first
    "bad utf-8, then a damaged gzip": gzip.compress(b"the cat\ncaf\xe9\n" + "".join(
        hashlib.sha256(b"%d" % i).hexdigest() + "\n" for i in range(2000)).encode())[:30_000],
    "xz": lzma.compress(b"the cat\n"),
    "bad byte just inside the head": b"a" * (HEAD - 1) + b"\xff\n",
}


@pytest.mark.parametrize("case", START_CASES)
def test_check_start_raises_what_a_full_read_raises(tmp_path, case):
    path = tmp_path / "c.txt"
    path.write_bytes(START_CASES[case])
    expected = full_read_error(path)
    with pytest.raises(EmbedtuneError) as err:
        Corpus.check_start(str(path))
    assert str(err.value) == expected


@pytest.mark.parametrize("case", ["binary junk", "bad utf-8 on line 3", "latin-1 after a byte order mark"])
def test_check_start_of_labelled_lines_raises_what_their_full_read_raises(tmp_path, case):
    reader = labelled_corpus()
    path = tmp_path / "c.txt"
    path.write_bytes(START_CASES[case].replace(b"the", b"__label__a the"))
    expected = full_read_error(path, reader)
    with pytest.raises(EmbedtuneError) as err:
        reader.check_start(str(path))
    assert str(err.value) == expected


@pytest.mark.parametrize("data", [
    TEXT.encode(),
    b"\xef\xbb\xbf" + TEXT.encode(),
    b"__label__x " + b"a" * (HEAD - 12) + "é".encode() + b"\n",   # a character cut by the end of the head
    b"__label__x " + b"a" * (HEAD + 10) + b"\n",                  # a first line longer than the head
    b"__label__x the cat\n" * (HEAD // 19 + 1) + b"caf\xe9\n",         # bad bytes beyond the head: the full read's
    b"",
], ids=["text", "bom", "cut character", "long line", "bad bytes later", "empty"])
def test_check_start_passes_what_begins_well(tmp_path, data):
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    Corpus.check_start(str(path))
    if not data.startswith((b"\xef", b"the")):
        labelled_corpus().check_start(str(path))


def test_check_start_leaves_standard_input_and_pipes_alone(tmp_path, monkeypatch):
    class Unreadable:
        def __getattr__(self, name):
            raise AssertionError("standard input was read")

    monkeypatch.setattr("sys.stdin", Unreadable())
    Corpus.check_start("-")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    Corpus.check_start(str(fifo))   # opening a FIFO with no writer would block: it is not opened


# --- the compiled reader (corpus/fast.py) against the reference (Corpus._numbered_lines) ---

# Every character str.split() splits at (29), the characters whose lower case is special (İ, Σ, final
# sigma, ß), punctuation the tokenizer cuts off, and the byte-order mark.
SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
LETTERS = "aAbBzZ09éÉßİıΣσςΑ中\u0301\u200b\ufeff"
MARKS = ".,;:!?\"'()-…«»😀$"
FAST_VOCABULARY = {"a", "ab", "u.s.", ".", ",", "(", ")", "e-mail", ":)", "...", "σας", "ab.", "\"a"}
WORDS = st.text(st.sampled_from(LETTERS + MARKS), max_size=6) | st.sampled_from(
    sorted(FAST_VOCABULARY) + ["AB", "A.", "(ab),", "Σ", "ΑΣ.", "İab"])
VECTORS = Vectors(sorted(FAST_VOCABULARY), np.zeros((len(FAST_VOCABULARY), 1), np.float32))
TEXTS = st.text(st.sampled_from(SPACES + LETTERS + MARKS), max_size=40) | st.lists(
    st.tuples(WORDS, st.text(st.sampled_from(SPACES), min_size=1, max_size=2)), max_size=12).map(
    lambda pairs: "".join(word + space for word, space in pairs))
BYTES = st.binary(max_size=40) | st.lists(st.sampled_from(
    [b"a", b" ", b"\n", b"\x00", b"\xff", b"\xc2", b"\xc2\xa0", b"\xe2\x80", b"\xef\xbb\xbf", b"\xed\xa0\x80"]),
    max_size=20).map(b"".join)


def test_a_file_under_the_small_bound_takes_the_references_passes_with_the_same_result(tmp_path, monkeypatch):
    """A corpus file of fewer than fast.SMALL_FILE bytes, plain or labelled (classify's), is read by the reference
    (its kernels not compiled on a fresh install: issue 48.1), one of that many or more by the compiled reader.
    Both give the same counts, ids, examples and the labelled lines' digest."""
    from embedtune.corpus.labelled import LabelledCorpus

    text = "the cat sat\n\non the mat, the end\n"
    monkeypatch.setattr(fast, "SMALL_FILE", len(text.encode()) + 1)
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    small = Corpus(str(path))
    assert not small.reads_compiled
    monkeypatch.setattr(fast, "SMALL_FILE", len(text.encode()))
    large = Corpus(str(path))
    assert large.reads_compiled
    counts = [corpus.count() for corpus in (small, large)]
    assert counts[0] == counts[1] and small.fast is None and large.fast is not None
    index = {w: i for i, w in enumerate(counts[0][0])}
    assert [c.ids.tolist() for c in id_chunks(small, index)] == [c.ids.tolist() for c in id_chunks(large, index)]

    labelled = "__label__a the Cat sat\n\n__label__b on the mat __label__c\n"
    path = tmp_path / "labelled.txt"
    path.write_text(labelled, encoding="utf-8")
    monkeypatch.setattr(fast, "SMALL_FILE", len(labelled.encode()) + 1)
    small = LabelledCorpus(str(path), lowercase=True)
    monkeypatch.setattr(fast, "SMALL_FILE", len(labelled.encode()))
    large = LabelledCorpus(str(path), lowercase=True)
    assert not small.reads_compiled and large.reads_compiled
    counts = [corpus.count() for corpus in (small, large)]
    assert counts[0] == counts[1] and small.fast is None and large.fast is not None
    assert small.line_ids({w: i for i, w in enumerate(counts[0][0])}) is None
    assert [(e.line, e.labels, e.tokens) for e in small.examples()] == [(e.line, e.labels, e.tokens)
                                                                       for e in large.examples()]
    assert small.digest == large.digest is not None


def read_all(path, compiled: bool, lowercase: bool, tokenize: str, vocabulary=FAST_VOCABULARY):
    """Everything a run takes from the corpus: counts in order, totals, digest, numbered id chunks; or
    the error's text."""
    corpus = Corpus(str(path), lowercase=lowercase, tokenize=tokenize, vocabulary=vocabulary)
    corpus.compiled = compiled
    try:
        counts, total, lines = corpus.count()
    except EmbedtuneError as err:
        return str(err)
    index = {word: i for i, word in enumerate(sorted(counts)) if i % 3}   # some words have no row
    chunks = [(c.ids.tolist(), c.line.tolist(), c.raw_tokens, c.numbers.tolist(), c.ids.dtype, c.line.dtype)
              for c in id_chunks(corpus, index, chunk_tokens=3, numbered=True)]
    return list(counts.items()), total, lines, corpus.digest, chunks


def same_as_reference(path, piece_bytes: int, block_bytes: int) -> None:
    saved = files.MAX_PIECE_BYTES, fast.MAX_PIECE_BYTES, fast.BLOCK_BYTES, fast.KEEP_TOKENS
    files.MAX_PIECE_BYTES = fast.MAX_PIECE_BYTES = piece_bytes   # long lines cut in pieces
    fast.BLOCK_BYTES = block_bytes   # lines across block ends
    if piece_bytes < 10:
        fast.KEEP_TOKENS = 4   # ids not kept past 4 tokens: each pass scans the file again
    try:
        for lowercase in (False, True):
            for tokenize in ("none", "auto"):
                expected = read_all(path, False, lowercase, tokenize)
                assert read_all(path, True, lowercase, tokenize) == expected, (lowercase, tokenize)
            # the vectors' own index (WordIndex: the compiled reader looks its tokens up together)
            assert read_all(path, True, lowercase, "auto", VECTORS.index) == expected, lowercase
    finally:
        files.MAX_PIECE_BYTES, fast.MAX_PIECE_BYTES, fast.BLOCK_BYTES, fast.KEEP_TOKENS = saved


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(TEXTS, max_size=6).map("\n".join), sizes=st.sampled_from([(1 << 20, 1 << 22), (8, 5), (3, 64)]))
def test_the_compiled_reader_reads_unicode_text_as_the_reference(text, sizes):
    """Random lines of every whitespace character, cased and uncased letters, punctuation: the same
    counts (in the same order), lines, digest and chunks of ids, whole lines or cut into pieces."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "c.txt")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8", "surrogatepass"))
        same_as_reference(path, *sizes)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(BYTES, max_size=5).map(b"\n".join), sizes=st.sampled_from([(1 << 20, 1 << 22), (6, 4)]))
def test_the_compiled_reader_reads_random_bytes_as_the_reference(data, sizes):
    """Random bytes (NUL, invalid UTF-8, surrogates, byte-order marks, split characters): the same
    error, or the same figures."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "c.txt")
        with open(path, "wb") as f:
            f.write(data)
        same_as_reference(path, *sizes)



def test_the_compiled_reader_reads_a_line_of_thousands_of_tokens_as_the_reference(tmp_path):
    """A line that may hold more than kernels.tokens.LONG_TOKENS tokens has them counted first (``_count_tokens``,
    its multi-byte whitespace read as the scan reads it): the same figures as the reference."""
    from embedtune.kernels.tokens import LONG_TOKENS

    words = [LETTERS[i % len(LETTERS)] + MARKS[i % len(MARKS)] for i in range(3 * LONG_TOKENS)]
    spaces = SPACES.replace("\n", "")   # every other whitespace character, the line's end apart
    line = "".join(word + spaces[i % len(spaces)] for i, word in enumerate(words))
    assert len(line.encode("utf-8")) // 2 + 1 > LONG_TOKENS
    path = tmp_path / "c.txt"
    path.write_text("a b\n" + line + "\n" + line[:-1] + "\u3000\n", encoding="utf-8")
    same_as_reference(path, 1 << 20, 1 << 22)

def read_labelled(path, compiled: bool, lowercase: bool, tokenize: str):
    """What classify takes from labelled lines: counts in order, totals, digest, each line's word ids (and how many
    words it had), labels as written; from the compiled reader's kept lines, or the reference's examples; or the
    error's text."""
    corpus = labelled_corpus()(str(path), lowercase=lowercase, tokenize=tokenize, vocabulary=FAST_VOCABULARY)
    corpus.compiled = compiled
    try:
        counts, total, n_lines = corpus.count()
    except EmbedtuneError as err:
        return str(err)
    index = {word: i for i, word in enumerate(sorted(counts)) if i % 3}   # some words have no row
    if compiled:
        lines = corpus.line_ids(index)
        if lines is None:   # not kept (KEEP_TOKENS): classify reads the examples
            lines = read_labelled(path, False, lowercase, tokenize)[4:]
        else:
            lines = (lines.rows.tolist(), lines.kept.tolist(), lines.pieces.tolist(),
                     [lines.names[i] for i in lines.labels.tolist()], lines.n_labels.tolist())
    else:
        lines = ([], [], [], [], [])
        for example in corpus.examples():
            known = [index[t] for t in example.tokens if t in index]
            for part, value in zip(lines, (known, [len(known)], [len(example.tokens)], example.labels,
                                           [len(example.labels)])):
                part.extend(value)
    return (list(counts.items()), total, n_lines, corpus.digest, *lines)


LABELS = st.sampled_from(["__label__a", "__label__B", "__label__é.", "__label__", "x__label__a"])
LABELLED = st.lists(st.lists(LABELS | WORDS, max_size=6).map(" ".join) | TEXTS, max_size=6).map("\n".join)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=LABELLED, sizes=st.sampled_from([(1 << 20, 1 << 22), (8, 5), (30, 64)]))
def test_the_compiled_reader_reads_labelled_lines_as_the_reference(text, sizes):
    """Labelled lines (labels anywhere, as written whatever the case, a word holding the prefix, lines without a
    label or a word, long lines): the same error, or the same counts, digest, lines' ids and labels."""
    saved = files.MAX_PIECE_BYTES, fast.MAX_PIECE_BYTES, fast.BLOCK_BYTES
    files.MAX_PIECE_BYTES = fast.MAX_PIECE_BYTES = sizes[0]
    fast.BLOCK_BYTES = sizes[1]
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "c.txt")
            with open(path, "wb") as f:
                f.write(text.encode("utf-8", "surrogatepass"))
            for lowercase in (False, True):
                for tokenize in ("none", "auto"):
                    expected = read_labelled(path, False, lowercase, tokenize)
                    assert read_labelled(path, True, lowercase, tokenize) == expected, (lowercase, tokenize)
    finally:
        files.MAX_PIECE_BYTES, fast.MAX_PIECE_BYTES, fast.BLOCK_BYTES = saved


@pytest.mark.parametrize("data", [
    b"__label__a the cat\nthe cat\n__label__b caf\xe9\n",     # no label, then bad UTF-8: the first's error
    b"__label__a the cat\ncaf\xe9\n__label__b\n",             # bad UTF-8, then labels only
    b"__label__a the cat\n__label__b __label__c\n",
    b"\xef\xbb\xbf__label__a the\n\n  \n__label__b cat __label__a\n",   # a byte-order mark, blank lines
])
def test_labelled_lines_errors_and_figures_are_the_references(tmp_path, data):
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    expected = read_labelled(path, False, True, "auto")
    assert read_labelled(path, True, True, "auto") == expected
    assert isinstance(expected, str) or expected[7] == ["__label__a", "__label__b", "__label__a"]


@pytest.mark.parametrize("data", [
    "".join(f"ab{c}A.{c}Σ{c}" for c in SPACES).encode() + "\n".join(SPACES).encode(),   # every space
    b"ab " * 40 + b"\n" + b"x" * 90 + b"\n" + b"a b\n",   # a token longer than 4 pieces: the error
    b"\xef\xbb\xbf" + b"ab " * 30 + b"\n",   # a byte-order mark before a long first line
    gzip.compress(b"ab (ab), u.s.\n" * 50)[:-12] ,   # a damaged gzip after good lines
], ids=["spaces", "long-token", "bom-long-line", "damaged-gzip"])
def test_the_compiled_reader_meets_long_lines_and_damage_as_the_reference(tmp_path, data):
    path = tmp_path / "c.txt"
    path.write_bytes(data)
    same_as_reference(path, 16, 10)
    same_as_reference(path, 1 << 20, 1 << 22)
