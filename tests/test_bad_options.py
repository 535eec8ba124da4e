"""The bad-input catalogue (issue 5), command-line options: a number out of range or not a number, an
unknown format, --resume or --checkpoint-dir without what they need, a learning rate that makes training
diverge. Each is one error line naming the option, and the folder is left as it was (tests/bad_inputs.py);
bad options and missing inputs are refused before the vectors are read."""

from __future__ import annotations

import importlib

import pytest

from bad_inputs import KINDS, Catalogue, Folder, assert_refused
from test_cli_train import assert_one_error_line, run

cases = Catalogue()


@cases.case("epochs-0")
def _(f):
    return f.args("--epochs", "0"), ["Error: --epochs must be at least 1, got 0"]


@cases.case("negative-0")
def _(f):
    return f.args("--negative", "0"), ["Error: --negative must be at least 1, got 0"]


@cases.case("batch-size-0")
def _(f):
    return f.args("--batch-size", "0"), ["Error: --batch-size must be at least 1, got 0"]


@cases.case("resume-without-checkpoint-dir")
def _(f):
    return f.args("--resume"), ["Error: ", "--resume needs --checkpoint-dir"]


@cases.case("resume-from-a-folder-that-does-not-exist")
def _(f):
    folder = f.path / "checkpoints"   # never created: resuming must not create it either
    return f.args("--checkpoint-dir", folder, "--resume"), [f"Error: {folder}:", "no such folder"]


@cases.case("resume-without-a-checkpoint")
def _(f):
    folder = f.path / "checkpoints"
    folder.mkdir()
    return f.args("--checkpoint-dir", folder, "--resume"), [f"Error: {folder}:", "no checkpoint"]


@cases.case("batch-size-10-to-the-12")
def _(f):
    return f.args("--batch-size", str(10**12)), ["Error: --batch-size must be at most 1,048,576, got 1000000000000"]


@cases.case("batch-size-written-1e12")
def _(f):
    return f.args("--batch-size", "1e12"), ["Error: ", "--batch-size", "'1e12' is not a valid integer"]


@cases.case("seed-negative")
def _(f):
    return f.args("--seed", "-1"), ["Error: --seed must be 0 or positive, got -1"]


@cases.case("lr-nan")
def _(f):
    return f.args("--lr", "nan"), ["Error: --lr must be a finite number, got nan"]


@cases.case("lr-beyond-float32")
def _(f):
    return f.args("--lr", "1e39"), ["Error: --lr is beyond float32's range", "1e+39"]


@cases.case("window-1000")
def _(f):
    return f.args("--window", "1000"), ["Error: --window must be at most 100, got 1000"]


@cases.case("checkpoint-dir-is-a-device")
def _(f):
    return f.args("--checkpoint-dir", "/dev/null"), ["Error: /dev/null: --checkpoint-dir: not a folder"]


@cases.case("learning-rate-so-large-that-training-diverges")
def _(f):
    # Rows become NaN: a file that `embedtune train` itself refuses to read must not be written.
    return f.args("--lr", "1e30"), ["Error: ", "--lr"]


@cases.case("checkpoint-dir-is-a-file")
def _(f):
    return f.args("--checkpoint-dir", f.corpus), ["Error: ", "--checkpoint-dir", str(f.corpus)]


@cases.case("unknown-output-format")
def _(f):
    return f.args("--to", "xml"), ["Error: --to: unknown format 'xml'"]


@cases.case("unknown-input-format")
def _(f):
    return f.args("--format", "glove-binary"), ["Error: --format: unknown format 'glove-binary'"]


@pytest.mark.parametrize("build", cases.params)
def test_a_bad_option_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    assert_refused(tmp_path, build)


def test_the_catalogue_holds_at_least_25_cases():
    """Over all its input kinds (a file each)."""
    files = [importlib.import_module(f"test_bad_{kind}") for kind in KINDS]
    assert sum(len(file.cases.params) for file in files) >= 25


@pytest.mark.parametrize("where", ["seed", "batch-size", "corpus-missing", "freeze-list-missing",
                                   "train-list-is-a-folder", "resume-folder-missing", "format"])
def test_bad_options_and_missing_inputs_are_refused_before_the_vectors_are_read(tmp_path, monkeypatch, where):
    import embedtune.formats

    def must_not_load(*args, **kwargs):
        raise AssertionError("the vectors were read although an option or input is bad")

    monkeypatch.setattr(embedtune.formats, "load_vectors", must_not_load)
    monkeypatch.setattr(embedtune.formats, "detect_format", must_not_load)
    folder = Folder(tmp_path)
    options = {"seed": ["--seed", "-1"], "batch-size": ["--batch-size", str(2**21)],
               "corpus-missing": [], "freeze-list-missing": ["--freeze-list", tmp_path / "none.txt"],
               "train-list-is-a-folder": ["--train-list", tmp_path],
               "resume-folder-missing": ["--checkpoint-dir", tmp_path / "none", "--resume"],
               "format": ["--format", "glove6b"]}[where]
    corpus = tmp_path / "none.txt" if where == "corpus-missing" else None
    result = run(folder.args(*options, corpus=corpus))
    assert result.exit_code == (2 if where in ("seed", "batch-size", "format") else 1)   # usage errors: 2
    assert_one_error_line(result.stderr)
