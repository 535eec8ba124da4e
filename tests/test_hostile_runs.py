"""Hostile inputs and runs (issue 35, part B): benchmark files that scipy cannot correlate, a vectors
line far past any dimension, regexes that backtrack without end, TF_CONFIG that makes no sense, and
signals at every moment of a `--workers 2` run. Each gives one `Error:` line (or 130/143), never a
traceback, a warning or a hang."""

from __future__ import annotations

import warnings

import pytest

from train_fixtures import SAMPLE_VECTORS, one_error_line, run

# ---------------------------------------------------------------------------------------------
# eval and report: a similarity file scipy cannot correlate


def _pairs(tmp_path, text: str):
    path = tmp_path / "pairs.tsv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_a_score_that_is_not_finite_names_the_file_and_line(tmp_path, score):
    pairs = _pairs(tmp_path, f"king\tqueen\t8\nman\twoman\t{score}\nfrance\tspain\t7\n")
    result = run(["eval", SAMPLE_VECTORS, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, f"{pairs} line 2", "not a finite number")


@pytest.mark.parametrize("command", ["eval", "report"])
def test_one_usable_pair_says_a_correlation_needs_two(tmp_path, command):
    pairs = _pairs(tmp_path, "the\tof\t3\n")
    args = ([SAMPLE_VECTORS] if command == "eval" else [SAMPLE_VECTORS, SAMPLE_VECTORS, "-o", tmp_path / "r.html"])
    result = run([command, *args, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, str(pairs), "at least 2")
    assert not (tmp_path / "r.html").exists()


def test_constant_scores_are_one_error_and_no_scipy_warning(tmp_path):
    pairs = _pairs(tmp_path, "king\tqueen\t5\nman\twoman\t5\nfrance\tspain\t5\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # scipy's ConstantInputWarning would fail the test
        result = run(["eval", SAMPLE_VECTORS, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, str(pairs), "same score (5)")
