"""The bad-input catalogue (issue 5), outputs: an output, report or summary that cannot be written (a full
disk, a missing folder, a folder, an empty name) or that would overwrite an input, however it is spelled or
linked. Each is one error line naming the path and the option, and the folder is left as it was
(tests/bad_inputs.py); an output that cannot be written is refused before training."""

from __future__ import annotations

import os

import pytest

from bad_inputs import Catalogue, Folder, assert_refused
from test_cli_train import assert_one_error_line, run

cases = Catalogue()


@cases.case("output-on-a-full-disk")
def _(f):
    return f.args(output="/dev/full"), ["Error: /dev/full: -o: cannot write: No space left on device"]


@cases.case("output-folder-missing")
def _(f):
    target = f.path / "results" / "tuned.txt"
    return f.args(output=target), [f"Error: {target}:", "does not exist"]


@cases.case("output-is-a-folder")
def _(f):
    folder = f.path / "results"
    folder.mkdir()
    return f.args(output=folder), [f"Error: {folder}:", "is a folder"]


@cases.case("output-is-the-vectors-file")
def _(f):
    return f.args(output=f.vectors), [f"Error: {f.vectors}: output would overwrite an input"]


@cases.case("output-is-the-vectors-file-spelled-another-way")
def _(f):
    other = f"{f.path}/./{f.vectors.name}"
    return f.args(output=other), [f"Error: {other}: output would overwrite an input"]


@cases.case("output-is-the-freeze-list")   # issue 35: any input, not only the vectors
def _(f):
    words = f.file("frozen.txt", "the\n")
    return f.args("--freeze-list", words, output=words), [f"Error: {words}: output would overwrite an input"]


@cases.case("report-is-the-freeze-list-through-a-symlink")
def _(f):
    words = f.file("frozen.txt", "the\n")
    (f.path / "page.html").symlink_to(words)
    return f.args("--freeze-list", words, "--report", f.path / "page.html"), [
        f"Error: {f.path / 'page.html'}: output would overwrite an input; choose another --report"]


@cases.case("json-is-the-train-list-through-a-hard-link")
def _(f):
    words = f.file("train.txt", "the\n")
    os.link(words, f.path / "summary.json")
    return f.args("--train-list", words, "--json", f.path / "summary.json"), [
        f"Error: {f.path / 'summary.json'}: output would overwrite an input; choose another --json"]


@cases.case("output-is-the-config")
def _(f):
    config = f.file("run.toml", "[train]\nepochs = 1\n")
    return f.args("--config", config, output=config), [f"Error: {config}: output would overwrite an input"]


@cases.case("output-is-the-new-words-list-named-by-the-config")
def _(f):
    words = f.file("new.txt", "zorblax\n")
    config = f.file("run.toml", f'[vocab]\nnew_words = "{words}"\n')
    return f.args("--config", config, output=f"{f.path}/./new.txt"), [
        f"Error: {f.path}/./new.txt: output would overwrite an input"]


@cases.case("output-empty-name-in-a-dry-run")
def _(f):
    return f.args("--dry-run", output=""), ["Error: -o: empty file name"]


@cases.case("json-summary-into-a-missing-folder")
def _(f):
    summary = f.path / "reports" / "summary.json"
    return f.args("--json", summary), [f"Error: {summary}:", "does not exist"]


@pytest.mark.parametrize("build", cases.params)
def test_a_bad_output_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    assert_refused(tmp_path, build)


@pytest.mark.parametrize("where", ["missing-folder", "folder", "json-missing-folder"])
def test_an_output_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch, where):
    import embedtune.training

    def must_not_train(*args, **kwargs):
        raise AssertionError("training started although the output cannot be written")

    monkeypatch.setattr(embedtune.training, "train", must_not_train)
    folder = Folder(tmp_path)
    output = {"missing-folder": ["-o", tmp_path / "results" / "tuned.txt"],
              "folder": ["-o", tmp_path],
              "json-missing-folder": ["--json", tmp_path / "reports" / "summary.json"]}[where]
    result = run([*folder.args(), *output])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "does not exist" if "missing" in where else "is a folder")
