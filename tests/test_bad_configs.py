"""The bad-input catalogue (issue 5), config files: missing, not TOML, an unknown key or table, a wrong
type or a value out of range. Each is one error line naming the file and the key, and the folder is left
as it was (tests/bad_inputs.py)."""

from __future__ import annotations

import pytest

from bad_inputs import Catalogue, assert_refused

cases = Catalogue()


@cases.case("config-not-toml")
def _(f):
    config = f.config("[train]\nepochs = = 3\n")
    return f.args("--config", config), [f"Error: {config}: not valid TOML", "line 2"]


@cases.case("config-unknown-key")
def _(f):
    config = f.config("[train]\nlearning_rate = 0.1\n")
    return f.args("--config", config), [f"Error: {config}: unknown key 'train.learning_rate'"]


@cases.case("config-unknown-table")
def _(f):
    config = f.config("[vocabulary]\nfreeze_top = 10\n")
    return f.args("--config", config), [f"Error: {config}: unknown key 'vocabulary'"]


@cases.case("config-wrong-type")
def _(f):
    config = f.config('[train]\nepochs = "3"\n')
    return f.args("--config", config), [f"Error: {config}: key 'train.epochs' must be an integer, got '3'"]


@cases.case("config-negative-learning-rate")
def _(f):
    config = f.config("[train]\nlr = -0.025\n")
    return f.args("--config", config), [f"Error: {config}: 'train.lr' must be positive, got -0.025"]


@cases.case("config-window-0")
def _(f):
    config = f.config("[train]\nwindow = 0\n")
    return f.args("--config", config), [f"Error: {config}: 'train.window' must be at least 1, got 0"]


@cases.case("config-unknown-optimizer")
def _(f):
    config = f.config('[train]\noptimizer = "rmsprop"\n')
    return f.args("--config", config), [
        f"Error: {config}: 'train.optimizer' must be one of sgd, adagrad, adam, got 'rmsprop'"]


@cases.case("config-unknown-objective")
def _(f):
    config = f.config('[train]\nobjective = "cbow"\n')
    return f.args("--config", config), [
        f"Error: {config}: 'train.objective' must be one of auto, sgns, glove, retrofit, classify, got 'cbow'"]


@cases.case("config-x-max-0")
def _(f):
    config = f.config("[train]\nx_max = 0\n")
    return f.args("--config", config), [f"Error: {config}: 'train.x_max' must be positive, got 0.0"]


@cases.case("config-missing")
def _(f):
    missing = f.path / "run.toml"
    return f.args("--config", missing), [f"Error: {missing}: no such config file"]


@cases.case("config-seed-beyond-range")
def _(f):
    config = f.config("[train]\nseed = 99999999999\n")
    return f.args("--config", config), [
        f"Error: {config}: 'train.seed' must be at most 4,294,967,295, got 99999999999"]


@cases.case("config-sample-inf")
def _(f):
    config = f.config("[train]\nsample = inf\n")
    return f.args("--config", config), [f"Error: {config}: 'train.sample' must be a finite number, got inf"]


@cases.case("config-unknown-format")
def _(f):
    config = f.config('format = "bogus"\n')
    return f.args("--config", config), [f"Error: {config}: 'format' must be one of word2vec, word2vec-binary, "
                                        "glove, fasttext, fasttext-model, got 'bogus'"]


@cases.case("config-is-a-folder")
def _(f):
    folder = f.path / "configs"
    folder.mkdir()
    return f.args("--config", folder), ["Error: ", "--config", "is a folder"]


@pytest.mark.parametrize("build", cases.params)
def test_a_bad_config_file_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    assert_refused(tmp_path, build)
