"""The bad-input catalogue's shared pieces (issue 5): a case's folder, the folder's snapshot, and the check
every case must pass. The cases themselves sit in one file per input kind: tests/test_bad_vectors.py,
test_bad_corpora.py, test_bad_freeze_rules.py, test_bad_configs.py, test_bad_options.py and
test_bad_outputs.py.

Each case runs the real `embedtune train` command on a small folder and must give exactly one `Error:` line
naming the file (and the line, where there is one) or the option at fault, a non-zero exit code and nothing
on standard output; afterwards the folder holds the very files it held before, byte for byte and with the
same mtimes: no output, no temporary file, no checkpoint folder, no input rewritten.

The files are tiny (the first 200 rows of the GloVe sample, a few corpus lines) so that the cases which do
reach training stay fast.
"""

from __future__ import annotations

import hashlib
import os
import textwrap
from pathlib import Path

import pytest

from test_cli_train import assert_one_error_line, run
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

N_WORDS = 200
GLOVE_LINES = SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:N_WORDS]
VOCABULARY = [line.split(b" ", 1)[0].decode("utf-8") for line in GLOVE_LINES]
# Sample lines cut down to vocabulary words: the corpus brings no new word, so freezing
# every row leaves nothing to train.
CORPUS_LINES = [" ".join(w for w in line.lower().split() if w in frozenset(VOCABULARY))
                for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:5]]
FAST = ["--epochs", "1", "--batch-size", "512"]
# The input kinds, one test file each (test_bad_<kind>.py).
KINDS = ("vectors", "corpora", "freeze_rules", "configs", "options", "outputs")


class Folder:
    """A case's folder: the vectors file, the corpus, and where the output would go."""

    def __init__(self, path: Path):
        self.path = path
        self.vectors = self.path / "glove.txt"
        self.corpus = self.path / "corpus.txt"
        self.output = self.path / "tuned.txt"
        self.vectors.write_bytes(b"".join(GLOVE_LINES))
        self.corpus.write_text("\n".join(CORPUS_LINES) + "\n", encoding="utf-8")

    def file(self, name: str, data: str | bytes) -> Path:
        path = self.path / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    def args(self, *options, vectors=None, corpus=None, output=None) -> list:
        return ["train", self.vectors if vectors is None else vectors, self.corpus if corpus is None else corpus,
                "-o", self.output if output is None else output, *FAST, *options]

    def glove_with_line(self, number: int, line: bytes) -> Path:
        """The vectors file with line ``number`` (1-based) replaced."""
        lines = list(GLOVE_LINES)
        lines[number - 1] = line.rstrip(b"\n") + b"\n"
        return self.file("glove.txt", b"".join(lines))

    def config(self, text: str) -> Path:
        """A config file ``run.toml`` holding ``text`` (dedented)."""
        return self.file("run.toml", textwrap.dedent(text).lstrip())


def glove_line(number: int) -> bytes:
    return GLOVE_LINES[number - 1].rstrip(b"\n")


def long_line(megabytes: float) -> bytes:
    """Unknown words (zz0000qqq ...) on one line of about ``megabytes`` MB, no newline."""
    words = (" ".join(f"zz{i:04d}" + "q" * 93 for i in range(2000)) + " ").encode("ascii")
    return (words * (int(megabytes * 2**20) // len(words) + 1))[: int(megabytes * 2**20)].rstrip() + b" "


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too): relative path -> (sha256, mtime in ns)."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root) / name
            if path.is_dir():
                files[str(path.relative_to(folder))] = "folder"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                files[str(path.relative_to(folder))] = (digest, path.stat().st_mtime_ns)
    return files


class Catalogue:
    """One input kind's cases. Each case takes a Folder, may write files into it, and returns the command's
    arguments and what the error line must say: its start (``Error: FILE line N:``), then any parts it must
    contain. ``params`` parametrises the kind's test, one test id per case name."""

    def __init__(self):
        self.params = []

    def case(self, name: str, bug: str | None = None):
        """Register a case; ``bug`` (what happens now) marks it as a known failure until it is fixed."""
        marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []

        def register(build):
            self.params.append(pytest.param(build, id=name, marks=marks))
            return build
        return register


def assert_refused(tmp_path: Path, build) -> None:
    """Run a case in ``tmp_path``: one error line as the case says, a non-zero exit, nothing on standard
    output, the folder as it was."""
    folder = Folder(tmp_path)
    args, parts = build(folder)
    before = snapshot(tmp_path)
    result = run(args)
    assert result.exit_code != 0, result.stderr
    assert result.stdout == ""
    assert_one_error_line(result.stderr, *parts[1:])
    assert result.stderr.strip().splitlines()[-1].startswith(parts[0]), result.stderr
    assert snapshot(tmp_path) == before
