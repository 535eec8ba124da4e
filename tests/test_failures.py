"""Every exception that reaches the command line is one `Error:` line (issue 45, deliver 5): a full disk, memory,
an overflow, a resource TensorFlow could not get, a decoding error, or a bug of ours, injected deep in each
command's path. Exit code 1 (docs/ci.md), no traceback, no output left; EMBEDTUNE_DEBUG=1 shows the traceback."""

from __future__ import annotations

import errno
import os

import pytest
from click.testing import CliRunner

from embedtune.cli.main import COMMANDS, cli
from embedtune.formats import io

from train_fixtures import SAMPLE_VECTORS, one_error_line

GLOVE_LINES = SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)


def _tf_resource_error():
    import tensorflow as tf

    return tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[400000,300]\nmore")


FAILURES = {   # name -> (the exception, a part of the line it must give)
    "overflow": (lambda: OverflowError("int too large to convert to C long"), "int too large to convert"),
    "disk-full": (lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out.txt"),
                  f"out.txt: {os.strerror(errno.ENOSPC)}"),
    "permission": (lambda: PermissionError(errno.EACCES, os.strerror(errno.EACCES)), os.strerror(errno.EACCES)),
    "memory": (lambda: MemoryError(), "out of memory"),
    "tensorflow-resource": (_tf_resource_error, "TensorFlow ran out of a resource (memory or disk): OOM when"),
    "decode": (lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
               "internal error (UnicodeDecodeError"),
    "bug": (lambda: KeyError("rows"), "internal error (KeyError: 'rows'); this is a bug in embedtune: rerun with "
                                      "EMBEDTUNE_DEBUG=1 for the traceback"),
}


@pytest.fixture
def files(tmp_path):
    vectors = tmp_path / "v.txt"
    vectors.write_bytes(b"".join(GLOVE_LINES[:200]))
    corpus = tmp_path / "c.txt"
    corpus.write_text("the of and to in a is that for it as was with be by on not he i this\n" * 20)
    wordnet = tmp_path / "wordnet"
    wordnet.mkdir()
    for part in ("noun", "verb", "adj", "adv"):
        (wordnet / f"data.{part}").write_bytes(b"")
    return {"v": vectors, "c": corpus, "wordnet": wordnet, "out": tmp_path / "out"}


def command_args(command, f):
    v, c, out = str(f["v"]), str(f["c"]), str(f["out"])
    return {
        "inspect": ["inspect", v],
        "convert": ["convert", v, out + ".txt"],
        "train": ["train", v, c, "-o", out + ".txt", "--objective", "glove", "--max-steps", "1"],
        "init": ["init", v, c, "-o", out + ".txt"],
        "diff": ["diff", v, v],
        "eval": ["eval", v],
        "neighbors": ["neighbors", v, "the"],
        "report": ["report", v, v, "-o", out + ".html"],
        "lexicon": ["lexicon", "wordnet", str(f["wordnet"]), "-o", out + ".txt"],
    }[command]


def inject(monkeypatch, command, error):
    """``error`` raised deep in the command's path: where the vectors file is opened (every command that
    reads one), or where WordNet's files are read (lexicon)."""
    def fail(*args, **kwargs):
        raise error

    if command == "lexicon":
        import embedtune.wordnet

        monkeypatch.setattr(embedtune.wordnet, "_data_lines", fail)
    else:
        monkeypatch.setattr(io.Source, "__init__", fail)


def test_every_command_is_in_the_table(files):
    assert {command: command_args(command, files) for command in COMMANDS}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_failure_in_each_command_is_one_error_line(monkeypatch, tmp_path, files, command, failure):
    monkeypatch.delenv("EMBEDTUNE_DEBUG", raising=False)
    make, part = FAILURES[failure]
    inject(monkeypatch, command, make())
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(cli, ["-q", *command_args(command, files)], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr   # -q: nothing but the one line
    one_error_line(result, part)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before   # no output, no temporary file left


@pytest.mark.parametrize("failure", ["disk-full", "memory", "bug"])
@pytest.mark.parametrize("command", ["convert", "init"])
def test_a_failure_while_the_output_is_written_leaves_no_output(monkeypatch, tmp_path, files, command, failure):
    make, part = FAILURES[failure]
    part = part.split(": ")[-1] if failure == "disk-full" else part   # the writer names the whole path itself
    writes = []

    def write(self, data):
        writes.append(len(data))
        raise make()

    monkeypatch.setattr(io._Sink, "write", write)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = CliRunner().invoke(cli, ["-q", *command_args(command, files)], catch_exceptions=False)
    assert writes, "the failure was injected where the output is written"
    assert result.exit_code == 1, result.output
    one_error_line(result, part)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_embedtune_debug_shows_the_traceback(monkeypatch, files):
    monkeypatch.setenv("EMBEDTUNE_DEBUG", "1")
    inject(monkeypatch, "inspect", KeyError("rows"))
    with pytest.raises(KeyError):
        CliRunner().invoke(cli, command_args("inspect", files), catch_exceptions=False)


def test_ctrl_c_and_the_library_errors_keep_their_own_codes(monkeypatch, files):
    from embedtune.errors import BadOption, EmbedtuneError

    for error, code in ((KeyboardInterrupt(), 130), (EmbedtuneError("damaged", "v.txt", 3), 1),
                        (BadOption("--x must be positive"), 2)):
        inject(monkeypatch, "inspect", error)
        result = CliRunner().invoke(cli, command_args("inspect", files), catch_exceptions=False)
        assert result.exit_code == code, (error, result.output)
        if code != 130:
            one_error_line(result)
