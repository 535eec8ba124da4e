"""`embedtune inspect` and `embedtune convert` run as commands on small real files."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune import Vectors, load_vectors, save_vectors
from embedtune.cli.main import cli

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"


def run(*args, input=None, quiet=True):
    result = CliRunner().invoke(cli, (["-q"] if quiet else []) + [str(a) for a in args], input=input)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def assert_one_line_error(result, *fragments, code=1):
    assert result.exit_code == code
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def sample_bytes():
    return SAMPLE.read_bytes()


# -- inspect -----------------------------------------------------------------------------------

def test_inspect_reports_the_sample():
    result = run("inspect", SAMPLE)
    assert result.exit_code == 0
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"file        {SAMPLE}"
    assert lines[1:4] == ["format      glove", "words       20000", "dimension   50"]
    assert lines[4].startswith("norm        min 2.359  median 4.858  max 14.12")
    assert lines[5:] == ["nan/inf     none", "duplicates  none"]


def test_inspect_json_names_problem_rows(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"4 2\na 3 4\nb nan 1\na 0 1\nc 1 0\n")
    result = run("inspect", "--json", path)
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["format"] == "word2vec"
    assert (report["count"], report["dim"]) == (4, 2)
    assert report["nonfinite"] == [{"word": "b", "line": 3}]
    assert report["duplicates"] == [{"word": "a", "line": 4, "first_line": 2}]
    human = run("inspect", path).stdout
    assert "nan/inf     1 row: line 3 'b'" in human
    assert "duplicates  1 row: 'a' on line 4 (first on line 2)" in human


def test_inspect_reads_standard_input(sample_bytes):
    head = sample_bytes[:sample_bytes.index(b"\n", 200000) + 1]
    result = run("inspect", "--json", "-", input=gzip.compress(head))
    report = json.loads(result.stdout)
    assert (report["file"], report["format"], report["dim"]) == ("<stdin>", "glove", 50)


# -- convert -----------------------------------------------------------------------------------

def test_convert_glove_to_word2vec_and_back_is_byte_identical(tmp_path, sample_bytes):
    w2v = tmp_path / "s.w2v.txt.gz"
    result = run("convert", SAMPLE, w2v, "--to", "word2vec", quiet=False)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"wrote 20000 vectors of dimension 50 to {w2v} as word2vec\n"
    assert gzip.decompress(w2v.read_bytes()) == b"20000 50\n" + sample_bytes
    back = run("convert", w2v, tmp_path / "back.txt", "--to", "glove")
    assert back.exit_code == 0 and back.stderr == ""
    assert (tmp_path / "back.txt").read_bytes() == sample_bytes


def test_convert_keeps_the_input_format_and_limit(tmp_path, sample_bytes):
    binary = tmp_path / "s.bin"
    assert run("convert", SAMPLE, binary, "--to", "word2vec-binary", "--limit", 1000).exit_code == 0
    assert run("convert", binary, tmp_path / "copy.bin").exit_code == 0
    assert (tmp_path / "copy.bin").read_bytes() == binary.read_bytes()
    vectors = load_vectors(binary)
    assert len(vectors) == 1000
    assert np.array_equal(vectors.matrix, load_vectors(SAMPLE, limit=1000).matrix)


def test_convert_through_a_pipe(sample_bytes):
    head = sample_bytes[:sample_bytes.index(b"\n", 100000) + 1]
    result = run("convert", "-", "-", "--to", "word2vec", "--limit", "3", input=head)
    assert result.exit_code == 0
    lines = sample_bytes.split(b"\n")[:3]
    assert result.stdout_bytes == b"3 50\n" + b"\n".join(lines) + b"\n"


def test_convert_options_accept_what_is_otherwise_an_error(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"a 1 2\nb\xff nan 4\na 5 6\n")
    assert run("convert", path, tmp_path / "out.txt").exit_code == 1
    result = run("convert", path, tmp_path / "out.txt", "--keep-first-duplicate", "--allow-nan", "--replace-bad-utf8")
    assert result.exit_code == 0
    assert (tmp_path / "out.txt").read_bytes() == "a 1 2\nb\ufffd nan 4\n".encode()


def test_no_tensorflow_and_no_output_noise(tmp_path):
    code = (
        "import sys\n"
        "from embedtune.cli.main import main\n"
        f"sys.argv = ['embedtune', 'convert', {str(SAMPLE)!r}, {str(tmp_path / 'o.txt')!r}, '--limit', '10']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # standard error is not a terminal here: no progress bar, just the closing message
    assert done.stderr == f"wrote 10 vectors of dimension 50 to {tmp_path / 'o.txt'} as glove\n"
    assert done.stdout == ""


def test_help_shows_examples():
    for command in ("inspect", "convert"):
        result = run(command, "--help")
        assert result.exit_code == 0
        assert "Example:" in result.stdout and f"embedtune {command} " in result.stdout


# -- bad input: one line, exit code 1, no output file, input untouched ---------------------------

BAD = [
    ("header larger", b"3 2\na 1 2\nb 3 4\n", "line 4: file ends early (expected 3 rows as the header says, got 2)"),
    ("header smaller", b"1 2\na 1 2\nb 3 4\n", "line 3: more rows than the header says (expected 1, got at least 2)"),
    ("wrong count", b"a 1 2\nb 3 4 5\n", "line 2: wrong number of values (expected 2 as on line 1, got 3)"),
    ("not a number", b"a 1 2\nb 3 four\n", "line 2: value 2 is not a number (expected a number, got 'four')"),
    ("nan", b"a 1 2\nb nan 4\n", "line 2: value 1 is nan (expected a finite number; --allow-nan accepts such rows)"),
    ("inf", b"a 1 inf\n", "line 1: value 2 is inf"),
    ("empty", b"", "line 1: empty file (expected vectors)"),
    ("duplicate", b"a 1 2\nb 3 4\na 5 6\n", "line 3: duplicate word 'a' (first on line 1; --keep-first-duplicate"),
    ("bad utf-8", b"a 1 2\n\xc3( 3 4\n", "line 2: word is not valid UTF-8 (byte 0xc3 at column 1; --replace-bad-utf8"),
    ("truncated binary", b"2 2\na " + np.float32([1, 2]).tobytes() + b"\nb " + np.float32([3]).tobytes()[:3],
     ": record 2: file ends inside the record (expected 8 bytes of vector, got 3"),
]


@pytest.mark.parametrize("case,data,message", BAD, ids=[c[0] for c in BAD])
def test_bad_input(tmp_path, case, data, message):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    out = tmp_path / "out.txt"
    for command in (["convert", path, out, "--to", "word2vec"], ["inspect", path]):
        if command[0] == "inspect" and case in ("nan", "inf", "duplicate"):
            continue  # inspect reports these instead of stopping
        result = run(*command)
        assert_one_line_error(result, f"Error: {path}", message)
    assert path.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_bad_requests(tmp_path):
    save_vectors(Vectors(["new york"], np.ones((1, 2), np.float32)), tmp_path / "in.txt", "glove")
    cases = [
        (["convert", tmp_path / "in.txt", tmp_path / "out.bin", "--to", "word2vec-binary"],
         f"Error: {tmp_path / 'out.bin'}: cannot write word 'new york' (row 1) in word2vec binary"),
        (["convert", tmp_path / "in.txt", tmp_path / "out", "--to", "text"],
         "Error: --to: unknown format 'text' (expected one of word2vec, word2vec-binary, glove, fasttext, fasttext-model)"),
        (["convert", tmp_path / "in.txt", tmp_path / "out", "--format", "vec"], "Error: --format: unknown format 'vec'"),
        (["inspect", tmp_path / "in.txt", "--format", "vec"], "Error: --format: unknown format 'vec'"),
        (["convert", tmp_path / "missing.txt", tmp_path / "out"], f"Error: {tmp_path / 'missing.txt'}: no such file"),
        (["convert", tmp_path / "in.txt", tmp_path / "no" / "out.txt"],
         f"Error: {tmp_path / 'no' / 'out.txt'}: folder {tmp_path / 'no'} does not exist"),
        (["convert", tmp_path / "in.txt", tmp_path / "in.txt"], "output would overwrite an input; choose another OUT"),
        (["convert", tmp_path / "in.txt", "/dev/full"], "Error: /dev/full: cannot write: No space left on device"),
        (["inspect", tmp_path], f"Error: {tmp_path}: is a folder, expected a vectors file"),
    ]
    before = (tmp_path / "in.txt").read_bytes()
    for args, message in cases:   # an unknown format name is a usage error (exit 2, docs/ci.md)
        assert_one_line_error(run(*args), message, code=2 if "unknown format" in message else 1)
    assert (tmp_path / "in.txt").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_progress_bar_goes_to_standard_error_after_a_second(monkeypatch, capsys):
    import time

    from embedtune.cli import common

    monkeypatch.setattr(common, "show_progress", lambda: True)
    with common.ProgressBar("reading big.txt", "B") as bar:
        bar(10, 100)
        time.sleep(1.1)  # tqdm(delay=1): nothing shows for work that ends within a second
        bar(100, 100)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "reading big.txt" in captured.err and "100/100" in captured.err
    monkeypatch.setattr(common, "show_progress", lambda: False)
    with common.ProgressBar("reading big.txt", "B") as bar:
        bar(100, 100)
    assert capsys.readouterr().err == ""


def test_an_open_bar_shows_before_the_first_report_and_is_redrawn_while_the_library_is_silent(monkeypatch, capsys):
    # Issue 48.7: a reader reports once a chunk (after a fastText model's dictionary, a text file's range), and a
    # chunk takes seconds at real sizes on a loaded machine; the terminal must not go still meanwhile.
    import time

    from embedtune.cli import common

    monkeypatch.setattr(common, "show_progress", lambda: True)
    monkeypatch.setattr(common, "REDRAW_EVERY", 0.1)
    with common.ProgressBar("reading big.txt", "B") as bar:
        time.sleep(1.5)   # past tqdm's delay of a second, and no report yet
        assert "reading big.txt" in capsys.readouterr().err
        bar(10, 100)
        capsys.readouterr()
        time.sleep(1.0)   # the library busy between two reports
        assert capsys.readouterr().err.count("10.0/100") >= 2
        bar(100, 100)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.endswith("\r")   # cleared as the block ends


def test_group_help_lists_the_commands():
    result = run("--help")
    assert "inspect" in result.stdout and "convert" in result.stdout
