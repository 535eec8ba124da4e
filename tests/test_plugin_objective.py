"""An objective is one file, truly (issue 25, item 3): ``Adjacent`` below, with a key of its own
(``target``), is defined outside the package (here, on tests/toy_objective.py's toy), registered through
an entry point (no line of the package changes), and run by `embedtune train` from the command line,
from a config file and under --workers 2.

Each pair of neighbouring words on a line should score TARGET: loss = 1/2 sum (w_a . w_b + b_a + b_b -
target)^2, with a bias per word as its own table (the toy tests/test_objectives.py trains, with ``target`` an option).

This module is imported by the entry point inside `embedtune`, while the registry loads: it reads no
embedtune.config keys and imports no trainer at module level (the config's keys include the objectives',
this one's among them); its keys are a dataclass of its own (``AdjacentKeys``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import toy_objective
from embedtune.config.keys import FLOAT32_MAX, OwnKeys, Range, key

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SAMPLE_VECTORS = REPO / "data" / "sample" / "glove.6B.50d.20k.txt"
SAMPLE_CORPUS = REPO / "data" / "sample" / "lee_background.cor"


@dataclass(frozen=True)
class AdjacentKeys(OwnKeys):
    target: float = key(2.0, range=Range(0, FLOAT32_MAX, low_open=True),
                        help="The score each pair of neighbouring words should have.")


class Adjacent(toy_objective.Adjacent):
    help = "neighbouring words score --target"
    keys = (AdjacentKeys,)
    settings = ("window", "target")

    def __init__(self, rows, train, corpus=None):
        super().__init__(rows, train, corpus)
        self.target = train.keys_of(AdjacentKeys).target

    def summary(self) -> dict:
        """The target the run's objective trained to, in the run's --json: a worker's own reading of its key."""
        return {**super().summary(), "target": self.target}


# ---------------------------------------------------------------------------------------------
# registered as another package would: an entry point, found on the subprocess's path


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict:
    """The environment of a process that has ``Adjacent`` registered (a dist-info folder on its path)."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toy_objectives-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-objectives\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[embedtune.objectives]\nadjacent = {Path(__file__).stem}:Adjacent\n")
    path = os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:40]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def embedtune(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "embedtune.cli.main", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def trained(env, corpus, out: Path, *options):
    """Train Adjacent for a few deterministic steps; (the output's sha256, the --json summary)."""
    result = embedtune(env, "-q", "train", SAMPLE_VECTORS, corpus, "-o", out, "--objective", "adjacent",
                       "--freeze-top", 1000, "--batch-size", 64, "--deterministic", "--epochs", 1, "--json",
                       *options)
    assert result.returncode == 0, result.stderr
    return hashlib.sha256(out.read_bytes()).hexdigest(), json.loads(result.stdout)


def settings(env, corpus, out: Path, *options) -> dict:
    """The settings a dry run of Adjacent reports (its --json summary's)."""
    result = embedtune(env, "-q", "train", SAMPLE_VECTORS, corpus, "-o", out, "--freeze-top", 1000, "--dry-run",
                       "--json", *options)
    assert result.returncode == 0, result.stderr
    assert not out.exists()
    return json.loads(result.stdout)["settings"]


def test_its_option_is_listed_under_its_own_section_of_the_help(plugin):
    result = embedtune(plugin, "train", "--help")
    assert result.returncode == 0, result.stderr
    sections = result.stdout.split("\n\n")
    own = next(s for s in sections if s.startswith("--objective adjacent"))
    assert "neighbouring words score --target" in own and "--target FLOAT" in own and "[default: 2]" in own
    assert "adjacent" in next(s for s in sections if "--objective [" in s)   # one of --objective's choices


def test_a_bad_value_of_its_option_is_one_error_line(plugin, tmp_path, corpus):
    result = embedtune(plugin, "train", SAMPLE_VECTORS, corpus, "-o", tmp_path / "o.txt", "--objective", "adjacent",
                       "--target", "0")
    assert result.returncode == 2   # out of range: a usage error (docs/ci.md)
    assert result.stderr.splitlines() == ["Error: --target must be positive, got 0.0"]
    assert not (tmp_path / "o.txt").exists()


def test_its_option_changes_the_result_from_the_command_line_and_from_a_config_file(plugin, tmp_path, corpus):
    default, summary = trained(plugin, corpus, tmp_path / "default.txt")
    assert summary["objective"] == "adjacent" and summary["steps"] > 0 and summary["target"] == 2.0
    assert summary["loss_last"] < summary["loss_first"]   # it learns
    given, _ = trained(plugin, corpus, tmp_path / "given.txt", "--target", "1.5")
    assert given != default
    # The file's value reaches the run's settings as the option's does: compared by dry runs, which
    # resolve the same config a run trains with and start no TensorFlow (a third training run would).
    config = tmp_path / "run.toml"
    config.write_text('[train]\nobjective = "adjacent"\ntarget = 1.5\n', encoding="utf-8")
    planned = {how: settings(plugin, corpus, tmp_path / "o.txt", *options) for how, options in
               {"file": ["--config", config], "option": ["--objective", "adjacent", "--target", "1.5"],
                "default": ["--objective", "adjacent"]}.items()}
    assert planned["file"] == planned["option"] != planned["default"]
    assert planned["file"]["target"] == 1.5


def test_a_bad_value_in_a_config_file_names_the_key_and_the_file(plugin, tmp_path, corpus):
    config = tmp_path / "run.toml"
    config.write_text('[train]\nobjective = "adjacent"\ntarget = "high"\n', encoding="utf-8")
    result = embedtune(plugin, "train", SAMPLE_VECTORS, corpus, "-o", tmp_path / "o.txt", "--config", config)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"Error: {config}: key 'train.target' must be a number, got 'high'"]


def test_it_trains_under_two_workers(plugin, tmp_path, corpus):
    """The workers load the plugin and train it with the option given to the launcher: the chief's summary
    says the target its objective trained to. (Each worker runs the launcher's own arguments,
    launch.worker_command; that the option changes the result is the one-process test's check above: a
    second two-worker run at the default target, to compare bytes, cost three more processes.)"""
    _, summary = trained(plugin, corpus, tmp_path / "given.txt", "--workers", "2", "--target", "1.5")
    assert (summary["objective"], summary["workers"], summary["target"]) == ("adjacent", 2, 1.5)
    assert summary["loss_last"] < summary["loss_first"]


@pytest.mark.parametrize("module, why", [
    ("", "ModuleNotFoundError"),
    # the config's keys include the objectives', this module's among them (the config's classes are
    # static, embedtune.config.schema: importing them is fine)
    ("from embedtune.config import all_keys\nall_keys()\n", "must not read them at import"),
])
def test_an_entry_point_that_fails_to_load_is_an_error_naming_it(tmp_path, module, why):
    if module:
        (tmp_path / "broken_objective.py").write_text(module)
    info = tmp_path / "broken-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[embedtune.objectives]\nbroken = broken_objective:Broken\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    result = embedtune(env, "train", "--help")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: objective 'broken' (entry point broken_objective:Broken") and "failed to load" in line
    assert why in line
