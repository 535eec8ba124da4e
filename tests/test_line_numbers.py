"""Each text reader and the one it stands in front of name the same line for the same bad input: the
corpus's compiled reader (corpus/fast.py) and its Python reference (Corpus._numbered_lines); the vectors'
whole-block parser (formats/text/parse.py) and the per-line reader it hands odd blocks to (formats/text/read.py).
A line is counted as an editor shows it: a header is line 1, a byte-order mark is not a line, CRLF ends one
line, a blank line is a line."""

from __future__ import annotations

import itertools

import pytest

from embedtune.corpus.text import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.formats import load_vectors
from embedtune.formats.text import read as text

LAYOUTS = [dict(zip(("header", "bom", "blank", "crlf"), flags)) for flags in itertools.product((False, True), repeat=4)]


def layout_id(layout: dict) -> str:
    return "-".join(name for name, on in layout.items() if on) or "plain"


def file_bytes(lines: list[str], bom: bool, crlf: bool) -> bytes:
    newline = "\r\n" if crlf else "\n"
    data = (newline.join(lines) + newline).encode("utf-8", "surrogateescape")
    return (b"\xef\xbb\xbf" if bom else b"") + data


def error_line(read) -> int:
    with pytest.raises(EmbedtuneError) as info:
        read()
    return info.value.line


# --- the corpus: compiled and Python readers ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["w\udcff x", "w\x00x"], ids=["not-utf8", "nul"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=layout_id)
def test_both_corpus_readers_name_the_bad_line_as_an_editor_counts_it(tmp_path, layout, bad):
    lines = [f"the cat sat on mat {i}" for i in range(300)]
    if layout["blank"]:   # blank lines are lines of a corpus, with no tokens
        lines[10:10] = ["", "  ", ""]
    if layout["header"]:
        lines.insert(0, f"{len(lines)} 3")
    bad_at = 250
    lines[bad_at - 1] = bad
    path = tmp_path / "corpus.txt"
    path.write_bytes(file_bytes(lines, layout["bom"], layout["crlf"]))
    for compiled in (True, False):
        corpus = Corpus(str(path), lowercase=False, tokenize="none", vocabulary=set())
        corpus.compiled = compiled
        assert error_line(corpus.count) == bad_at, f"compiled={compiled}"


# --- the vectors: the whole-block parser and the per-line reader ----------------------------------------------

ROWS = [f"w{i} " + " ".join(f"0.{(i * 7 + j) % 10}" for j in range(3)) for i in range(300)]
BAD_ROWS = {"not-a-number": "wx 0.1 zz 0.3", "too-few": "wx 0.1 0.2", "too-many": "wx 0.1 0.2 0.3 0.4",
            "not-utf8": "w\udcff 0.1 0.2 0.3"}


def per_line(monkeypatch) -> None:
    """Blocks of a few lines, each that fails read line by line, in one process."""
    monkeypatch.setattr(text, "BLOCK_BYTES", 64)
    monkeypatch.setattr(text, "SLOW_LINES", 1)
    monkeypatch.setattr(text, "PARALLEL_MIN_BYTES", 1 << 40)


@pytest.mark.parametrize("bad", BAD_ROWS)
@pytest.mark.parametrize("layout", [pytest.param(layout, id=layout_id(layout)) for layout in LAYOUTS])
def test_both_vectors_readers_name_the_first_bad_line_as_an_editor_counts_it(tmp_path, monkeypatch, layout, bad):
    """A blank line among the rows is an error itself, so with blank lines that is the line named."""
    lines = list(ROWS)
    bad_at = 250   # of the rows
    lines[bad_at - 1] = BAD_ROWS[bad]
    expected = bad_at
    if layout["blank"]:
        lines[10:10] = [""]
        expected = 11
    if layout["header"]:
        lines.insert(0, f"{len(ROWS)} 3")
        expected += 1
    path = tmp_path / "v.txt"
    path.write_bytes(file_bytes(lines, layout["bom"], layout["crlf"]))
    kind = "word2vec" if layout["header"] else "glove"
    whole = error_line(lambda: load_vectors(str(path), format=kind))
    per_line(monkeypatch)
    assert (whole, error_line(lambda: load_vectors(str(path), format=kind))) == (expected, expected)
