"""A run whose loss or rows explode stops with one error and writes nothing, whatever the objective (issue 45,
item 8): a non-finite loss, a loss growing past its start, or a trained row longer than ROW_GROWTH times the
longest row the run started from (``check_rows``, which the loop and a closed-form fit both call)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import embedtune
from embedtune.cli.main import cli
from embedtune.errors import EmbedtuneError
from embedtune.training.progress import ROW_GROWTH, check_rows, longest_row

from train_fixtures import SAMPLE_VECTORS, one_error_line

SAMPLE_CORPUS = SAMPLE_VECTORS.parent / "lee_background.cor"


def test_longest_row_reads_every_block():
    matrix = np.ones((200_000, 2), np.float32)
    matrix[150_000] = [3, 4]   # in the third block
    assert longest_row(matrix, np.zeros((0, 2), np.float32)) == 5.0
    assert longest_row(np.zeros((0, 2))) == 0.0


@pytest.mark.parametrize("length, diverged", [(1.0, False), (ROW_GROWTH * 5.0, False), (ROW_GROWTH * 5.0 * 1.01, True),
                                              (np.nan, True), (np.inf, True)])
def test_check_rows_bounds_the_rows_by_the_longest_start(length, diverged):
    rows = np.zeros((3, 2), np.float32)
    rows[1, 0] = length
    if diverged:
        with pytest.raises(EmbedtuneError, match="^training diverged.*; lower it"):
            check_rows(rows, 5.0, "lower it")
    else:
        check_rows(rows, 5.0, "lower it")


def test_a_table_of_zeros_is_not_divided_by():
    check_rows(np.full((2, 2), 50.0, np.float32), 0.0, "")   # 70.7 < 100 x 1
    with pytest.raises(EmbedtuneError, match="diverged"):
        check_rows(np.full((2, 2), 80.0, np.float32), 0.0, "")


def test_glove_with_a_huge_learning_rate_stops_with_one_error_and_no_output(tmp_path):
    # It exited 0 with rows of length 7.7e6 (the input's longest: 14) and a loss of 1e21: the loss's own
    # check measured its start after the first step had already moved the rows.
    out = tmp_path / "out.txt"
    result = CliRunner().invoke(cli, ["-q", "train", str(SAMPLE_VECTORS), str(SAMPLE_CORPUS), "--objective", "glove",
                                      "--lr", "1e6", "--max-steps", "2", "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 1
    one_error_line(result, "training diverged: a trained row's length reached", "over 100x the longest input row's",
                   "lower --lr (it was 1e+06)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("objective", ["sgns", "glove"])
def test_healthy_runs_stay_far_inside_the_bound(objective):
    vectors = embedtune.load_vectors(str(SAMPLE_VECTORS))
    out = embedtune.fine_tune(vectors, str(SAMPLE_CORPUS), objective=objective)   # the defaults, the whole sample
    n = len(vectors)
    moved = np.flatnonzero((out.matrix[:n] != vectors.matrix).any(axis=1))
    trained = np.concatenate([out.matrix[moved], out.matrix[n:]])
    assert len(trained) > 1000
    # the longest trained row stays shorter than the longest input row: 100x under the bound
    assert longest_row(trained) < longest_row(vectors.matrix)
