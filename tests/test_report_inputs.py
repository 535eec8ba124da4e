"""What the report's two ways in (``train --report``, ``embedtune report``) check and share: no page
written over a file the run reads or writes, a damaged run summary named in one line, and one
default for the words the page lists. Tiny files, in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune.checks import check_run
from embedtune.cli.main import cli
from embedtune.config import Config, merge
from embedtune.errors import EmbedtuneError
from embedtune.formats import save_vectors
from embedtune.vectors import Vectors

WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture
def files(tmp_path):
    """before.txt (40 words), after.txt (the same, one moved, and 30 new words), corpus.txt, a lexicon,
    a word-pair benchmark: the paths by name."""
    rng = np.random.default_rng(0)
    before = Vectors(list(WORDS), rng.normal(size=(40, 4)).astype(np.float32))
    new = [f"new{i}" for i in range(30)]
    after = Vectors(WORDS + new, np.vstack([before.matrix, rng.normal(size=(30, 4)).astype(np.float32)]))
    after.matrix[3] += 1
    paths = {name: tmp_path / f"{name}.txt" for name in ("before", "after", "corpus", "lexicon", "pairs")}
    save_vectors(before, str(paths["before"]), "glove")
    save_vectors(after, str(paths["after"]), "glove")
    paths["corpus"].write_text("w1 w2 w3\n", encoding="utf-8")
    paths["lexicon"].write_text("w1 w2\n", encoding="utf-8")
    paths["pairs"].write_text("w1\tw2\t5\nw3\tw4\t1\nw5\tw6\t3\n", encoding="utf-8")
    return {name: str(path) for name, path in paths.items()}


def test_train_report_may_not_overwrite_the_json_summary_or_an_objectives_input(files, tmp_path):
    out, summary = str(tmp_path / "out.txt"), str(tmp_path / "run.json")
    base = merge(Config(), {"vectors": files["before"], "corpus": files["corpus"], "output": out})
    with pytest.raises(EmbedtuneError, match=r"--report would overwrite the file of --json; choose another --report"):
        check_run(merge(base, {"report": summary}), json_out=summary)
    retrofit = merge(Config(), {"vectors": files["before"], "output": out, "objective": "retrofit",
                                "lexicon": files["lexicon"], "report": files["lexicon"]})
    with pytest.raises(EmbedtuneError, match=r"output would overwrite an input; choose another --report") as err:
        check_run(retrofit)
    assert err.value.path == files["lexicon"]
    for taken, message in ((out, "would overwrite the file of -o"), (files["before"], "would overwrite an input")):
        with pytest.raises(EmbedtuneError, match=message):
            check_run(merge(base, {"report": taken}))
    check_run(merge(base, {"report": str(tmp_path / "page.html")}), json_out=summary)   # apart: fine


def test_the_report_command_writes_no_page_over_a_file_it_reads(files, tmp_path):
    summary = tmp_path / "run.json"
    summary.write_text(json.dumps({"frozen": 1, "trainable": 2}), encoding="utf-8")
    for taken in (files["after"], str(summary), files["pairs"]):
        result = CliRunner().invoke(cli, ["report", files["before"], files["after"], "--run", str(summary),
                                          "--similarity", files["pairs"], "-o", taken, "-q"])
        assert result.exit_code == 1 and result.output == \
            f"Error: {taken}: output would overwrite an input; choose another -o\n"


@pytest.mark.parametrize("summary", [
    {"frozen": 1, "trainable": 2, "loss_history": 5},
    {"frozen": "many", "trainable": 2},
    {"frozen": 1, "trainable": 2, "seconds": ["loop", 3]},
    {"frozen": 1, "trainable": 2, "total_seconds": None},
])
def test_a_malformed_run_summary_is_one_error_line_naming_the_file(files, tmp_path, summary):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(summary), encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", files["before"], files["after"], "--run", str(path),
                                      "--similarity", files["pairs"], "-o", str(tmp_path / "page.html"), "-q"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: '") and result.output.count("\n") == 1, result.output
    assert not (tmp_path / "page.html").exists()


def test_report_and_train_report_list_as_many_new_words_by_default(files, tmp_path):
    from embedtune.formats import load_vectors
    from embedtune.report import build_report
    from embedtune.report.content import TOP_WORDS

    before, after = load_vectors(files["before"]), load_vectors(files["after"])
    page = tmp_path / "page.html"
    result = CliRunner().invoke(cli, ["report", files["before"], files["after"], "--similarity", files["pairs"],
                                      "-o", str(page), "-q"])
    assert result.exit_code == 0, result.output
    listed = build_report(before, after, similarity=[files["pairs"]], analogies=[]).new   # train --report's call
    assert len(listed) == TOP_WORDS < 30
    html = page.read_text(encoding="utf-8")
    assert all(f">{row.word}<" in html for row in listed) and f">new{TOP_WORDS}<" not in html
    help_text = CliRunner().invoke(cli, ["report", "--help"]).output
    assert f"[default: {TOP_WORDS}, as train --report lists]" in " ".join(help_text.split())
