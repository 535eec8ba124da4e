"""Reading a corpus: compression known by content, a byte-order mark, pipes, the spool file."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import tempfile
import threading

import pytest

from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError

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
