"""Every number is checked where it enters, by its key's declaration (issue 45, deliver 4): the command line,
a config file, ``fine_tune``, the Keras layer and a config made by hand all refuse NaN, infinity, the wrong sign,
zero where it is not allowed and values too large, with one error naming the value as that entry point spells it
(the flag, the file and key, the Python name)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

import embedtune
from embedtune.cli.main import cli
from embedtune.config import all_keys, owners, train_config
from embedtune.config.keys import FLOAT32_MAX, INT64_MAX, Range, check_number
from embedtune.config.schema import TrainConfig, VocabConfig
from embedtune.errors import BadOption, EmbedtuneError

from train_fixtures import SAMPLE_VECTORS, one_error_line

NUMERIC = [key for key in all_keys() if key.type in (int, float) and key.range is not None]


def bad_values(key) -> list:
    """Values the key's range refuses: not finite, negative, zero where zero is not allowed, too large."""
    r = key.range
    values: list = []
    if key.type is float:
        values += [math.nan, math.inf, -math.inf, 1e39]   # 1e39: beyond float32
    if r.low >= 0:
        values.append(-1.0 if key.type is float else -1)
    if r.low_open or r.low > 0:
        values.append(0.0 if key.type is float else 0)
    if r.high < FLOAT32_MAX and r.high < INT64_MAX:
        values.append(r.high * 2 if key.type is float else int(r.high) + 1)
    if key.type is int:
        values.append(2**70)   # beyond int64
    return values


CASES = [(key, value) for key in NUMERIC for value in bad_values(key)]
IDS = [f"{key.name}={value!r}" for key, value in CASES]


def test_every_numeric_key_is_in_the_table():
    assert {key.name for key, _ in CASES} == {key.name for key in all_keys() if key.type in (int, float)}
    assert len(NUMERIC) >= 20


def _objective(key) -> list[str]:
    owner = owners().get((key.table, key.name))
    return ["--objective", owner] if owner else []


def _toml(value) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


@pytest.mark.parametrize("key, value", [c for c in CASES if c[0].option], ids=[i for c, i in zip(CASES, IDS)
                                                                                 if c[0].option])
def test_the_command_line_refuses_it_naming_the_flag(tmp_path, key, value):
    out = tmp_path / "out.txt"
    result = CliRunner().invoke(cli, ["train", str(SAMPLE_VECTORS), str(SAMPLE_VECTORS), "-o", str(out), "--dry-run",
                                      *_objective(key), key.flag, repr(value) if key.type is int else str(value)])
    assert result.exit_code == 2, result.output   # a usage error (docs/ci.md)
    line = one_error_line(result)
    assert line.startswith(f"Error: {key.flag} ") or f"'{key.flag}'" in line, line
    assert not out.exists()


@pytest.mark.parametrize("key, value", CASES, ids=IDS)
def test_a_config_file_refuses_it_naming_the_file_and_the_key(tmp_path, key, value):
    config = tmp_path / "c.toml"
    table = f"[{key.table}]\n" if key.table else ""
    config.write_text(f"{table}{key.name} = {_toml(value)}\n")
    out = tmp_path / "out.txt"
    result = CliRunner().invoke(cli, ["train", "--config", str(config), str(SAMPLE_VECTORS), str(SAMPLE_VECTORS),
                                      "-o", str(out), "--dry-run", *_objective(key)])
    assert result.exit_code == 1, result.output
    one_error_line(result, f"{config}: ", f"'{key.table}.{key.name}'" if key.table else f"'{key.name}'")
    assert not out.exists()


@pytest.mark.parametrize("key, value", CASES, ids=IDS)
def test_fine_tune_refuses_it_naming_the_python_name(key, value):
    vectors = embedtune.Vectors(["a", "b"], np.ones((2, 3), np.float32))
    with pytest.raises(BadOption) as err:
        embedtune.fine_tune(vectors, [["a", "b"]], **{key.name: value})
    assert str(err.value).startswith(f"{key.name} "), str(err.value)


@pytest.mark.parametrize("key, value", CASES, ids=IDS)
def test_a_config_made_by_hand_refuses_it(key, value):
    # No entry point skips the check: it is the config classes' own, as they are made.
    with pytest.raises(EmbedtuneError, match=f"{key.name} (must|is)"):
        if key.table == "vocab":
            VocabConfig(**{key.name: value})
        else:
            train_config(**{key.name: value})


def test_a_value_in_range_passes_everywhere():
    assert TrainConfig(lr=0.5, clip_norm=0.0).lr == 0.5
    assert train_config(x_max=1e30).keys_of(type(train_config(x_max=3.0).own[0])).x_max == 1e30


@pytest.mark.parametrize("value, message", [
    (math.nan, "learning_rate must be a finite number, got nan"),
    (-1.0, "learning_rate must be positive, got -1.0"),
    (1e39, "learning_rate is beyond float32's range"),
    ("1", "learning_rate must be a number, got '1'"),
    (None, "learning_rate must be a number, got None"),
])
def test_check_number_is_the_same_rule_for_a_number_that_is_not_a_key(value, message):
    with pytest.raises(ValueError, match=message):
        check_number("learning_rate", value, Range(0, FLOAT32_MAX, low_open=True))
    check_number("learning_rate", 0.1, Range(0, FLOAT32_MAX, low_open=True))


@pytest.mark.parametrize("pattern", ["a{4294967296}", "(", "[z-a]"])
@pytest.mark.parametrize("key", ["freeze_pattern", "train_pattern"])
def test_a_pattern_re_cannot_compile_is_one_error_everywhere(tmp_path, key, pattern):
    flag = "--" + key.replace("_", "-")
    result = CliRunner().invoke(cli, ["train", str(SAMPLE_VECTORS), str(SAMPLE_VECTORS), "-o",
                                      str(tmp_path / "o.txt"), "--dry-run", flag, pattern])
    assert result.exit_code == 2
    one_error_line(result, flag, "is not a valid regular expression")
    config = tmp_path / "c.toml"
    config.write_text(f"[vocab]\n{key} = '{pattern}'\n")
    result = CliRunner().invoke(cli, ["train", "--config", str(config), str(SAMPLE_VECTORS), str(SAMPLE_VECTORS),
                                      "-o", str(tmp_path / "o.txt"), "--dry-run"])
    assert result.exit_code == 1   # the file's own problem: it names the file, not an option
    line = one_error_line(result, f"{config}: 'vocab.{key}'", "is not a valid regular expression")
    assert flag not in line
    with pytest.raises(BadOption, match=f"^{key} .* is not a valid regular expression"):
        embedtune.fine_tune(embedtune.Vectors(["a"], np.ones((1, 2), np.float32)), [["a"]], **{key: pattern})
