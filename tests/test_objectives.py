"""The objective contract (embedtune/objectives/base.py): an objective is one class and one registry
line; the config's defaults, the loop, checkpoints, checks and summary come with it.

``Adjacent`` (tests/toy_objective.py) is the smallest objective that trains: each pair of neighbouring
words on a line should score 2, with a bias per word as its own table.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from embedtune.config import Config, TrainConfig, find_key, learning_rate, resolve, validate
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.objectives import OBJECTIVES, Objective, objective_class
from embedtune.errors import TrainingInterrupted
from embedtune.training import no_pairs_message, train

import toy_objective
from train_fixtures import bits, glove, make_config, sample_lines


class Adjacent(toy_objective.Adjacent):
    """The shared toy, with a hint and a figure of its own in the summary."""

    @classmethod
    def no_pairs_hint(cls, train):
        return " (pairs are neighbouring known words of one line)"

    def summary(self):
        return {"adjacent_pairs": self.pairs_made}


@pytest.fixture
def adjacent(monkeypatch):
    """Adjacent registered: the one line a new objective adds to embedtune/objectives/__init__.py."""
    monkeypatch.setitem(OBJECTIVES, "adjacent", Adjacent)
    return Adjacent


LINES = sample_lines(60)


def test_the_config_defaults_come_from_the_objective_classes(adjacent):
    for name, cls in OBJECTIVES.items():
        resolved = resolve(make_config(objective=name)).train
        for key, value in cls.defaults.items():
            assert resolved.value(find_key("train", key)) == value, (name, key)
    t = resolve(make_config(objective="adjacent")).train
    assert (t.window, t.optimizer, t.anchor, t.epochs) == (1, "adagrad", 0.0, 2)
    assert learning_rate(t) == 0.2
    assert learning_rate(dataclasses.replace(t, optimizer="sgd")) == 0.025   # the optimizer's own
    assert learning_rate(dataclasses.replace(t, lr=0.7)) == 0.7              # given wins
    # What was in config.py before the objectives owned it.
    assert objective_class("glove").defaults == {"window": 10, "optimizer": "adagrad", "anchor": 8.0, "epochs": 5}
    assert learning_rate(resolve(make_config(objective="glove")).train) == 0.1
    validate(Config(train=TrainConfig(objective="adjacent")))   # a registered name is a valid train.objective


def test_an_objective_declaring_its_keys_the_old_way_is_an_error_naming_it(monkeypatch):
    """Keys are an OwnKeys dataclass now (embedtune.config.keys); a tuple of Key records, as before issue 36, says so."""
    from embedtune import config
    from embedtune.config import load
    from embedtune.config.keys import Key

    class Old(Adjacent):
        name = "old"
        keys = (Key("target", float, 2.0),)

    monkeypatch.setattr(load, "_built", {})   # gathered again, with this registry
    monkeypatch.setitem(OBJECTIVES, "old", Old)
    with pytest.raises(EmbedtuneError, match=r"objective old: keys holds Key\(name='target'.*OwnKeys"):
        config.all_keys()


def test_an_unregistered_objective_is_an_error_naming_the_registered_ones():
    with pytest.raises(EmbedtuneError) as err:
        validate(Config(train=TrainConfig(objective="adjacent")))
    assert "auto, sgns, glove, retrofit" in str(err.value) and "'adjacent'" in str(err.value)


def test_the_cli_offers_the_registry_names():
    from embedtune.cli.train_cmd import train_cmd as train_command

    option = next(p for p in train_command.params if p.name == "objective")
    assert list(option.type.choices) == ["auto", *OBJECTIVES]


def test_a_registered_objective_trains_through_train_with_frozen_rows_bit_identical(adjacent):
    vectors = glove(20000)
    before = vectors.matrix.copy()
    result = train(vectors, Corpus(LINES), make_config({"freeze_top": 300}, objective="adjacent", batch_size=256))
    s = result.stats
    frozen = np.flatnonzero(result.plan.frozen)
    assert len(frozen) == 300
    out = result.vectors.matrix[: len(vectors)]
    np.testing.assert_array_equal(bits(out[frozen]), bits(before[frozen]))
    assert s["max_frozen_change"] == 0.0
    assert (s["objective"], s["optimizer"], s["lr"], s["epochs"]) == ("adjacent", "adagrad", 0.2, 2)
    assert s["loss_history"][0] > s["loss_history"][-1]   # it learns
    assert s["adjacent_pairs"] == s["pairs"] > 0           # its summary figures reach the stats
    used = {vectors.index[w] for line in LINES for w in line.split() if w in vectors.index} - set(frozen)
    moved = np.array(sorted(used))
    assert (out[moved] != before[moved]).any(axis=1).mean() > 0.9


def test_an_objective_check_stops_the_run_before_the_first_step(adjacent, monkeypatch):
    def refuse(self, corpus):
        raise EmbedtuneError("adjacent: refused", corpus.path)

    monkeypatch.setattr(Adjacent, "check", refuse)
    reports = []
    with pytest.raises(EmbedtuneError, match="adjacent: refused"):
        train(glove(20000), Corpus(LINES), make_config(objective="adjacent"), progress=reports.append)
    assert reports == []


def test_the_no_pairs_error_carries_the_objectives_hint(adjacent):
    vectors = glove(20000)
    lines = ["the zzqxv", "zzqxv of"] * 3   # one known word a line
    with pytest.raises(EmbedtuneError) as err:
        train(vectors, Corpus(lines), make_config({"min_count": 1000}, objective="adjacent"))
    assert "no training pairs" in str(err.value) and "(pairs are neighbouring known words of one line)" in str(err.value)
    sgns = resolve(make_config(objective="sgns", sample=1e-3))
    assert "try --sample 0 (it was 0.001)" in no_pairs_message(sgns, 10, 2)
    glove_config = resolve(make_config(objective="glove"))
    assert no_pairs_message(glove_config, 10, 2).endswith("within --window (10) of each other")


def test_a_stopped_and_resumed_run_gives_the_bits_of_an_uninterrupted_one(adjacent, tmp_path):
    config = make_config(objective="adjacent", batch_size=64, deterministic=True, checkpoint_every=5)
    whole = train(glove(20000), Corpus(LINES), config)
    steps = []

    def stop():
        steps.append(1)
        return len(steps) == 2   # polled after each call of the step: groups end at checkpoint_every

    folder = dataclasses.replace(config, train=dataclasses.replace(config.train, checkpoint_dir=str(tmp_path / "ck")))
    with pytest.raises(TrainingInterrupted) as stopped:
        train(glove(20000), Corpus(LINES), folder, stop=stop)
    assert stopped.value.position.steps == 10 and stopped.value.checkpoint.endswith("ckpt-10")
    resumed = train(glove(20000), Corpus(LINES), folder, resume=True)
    assert resumed.stats["resumed"] and resumed.stats["steps"] == whole.stats["steps"] > 7
    np.testing.assert_array_equal(bits(resumed.vectors.matrix), bits(whole.vectors.matrix))


def test_an_objective_that_does_not_pad_a_workers_batch_says_so_only_when_asked():
    """padding_batch is declared, not found: an objective without one trains in one process (the tests
    above), and a run on several workers, the only one that asks, gets an error naming the option."""
    class Unpadded(Adjacent):
        padding_batch = Objective.padding_batch

    with pytest.raises(EmbedtuneError, match="--workers: the adjacent objective runs in one process"):
        Unpadded.__new__(Unpadded).padding_batch()
    padding = Adjacent.__new__(Adjacent)
    padding.batch_size, padding.pairs_made = 4, 0
    batch = padding.padding_batch()
    assert batch["pairs"] == 0 and not batch["weight"].any() and batch["left"].shape == (4,)


def test_retrofit_is_registered_and_routed_to_its_closed_form():
    cls = objective_class("retrofit")
    assert cls.closed_form and not objective_class("sgns").closed_form
    assert resolve(make_config(objective="retrofit")).train.anchor == cls.defaults["anchor"] == 1.0


def test_the_registry_imports_no_tensorflow():
    import subprocess
    import sys

    code = ("import sys, embedtune.objectives as o\nfrom embedtune.config import resolve, Config, TrainConfig\n"
            "resolve(Config(train=TrainConfig(objective='glove')))\nprint(sorted(o.OBJECTIVES), 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['classify', 'glove', 'retrofit', 'sgns'] False"


def test_glove_adds_its_fitted_scale_to_the_summary():
    result = train(glove(20000), Corpus(LINES), make_config({"freeze_top": 300}, objective="glove", epochs=1))
    assert result.stats["glove_fit_pairs"] > 0 and result.stats["glove_scale"] > 0


def test_the_dry_runs_memory_estimate_asks_each_objective_for_its_own_part(adjacent):
    # The base class's part (a bias a word, nothing on the host) for an objective that says nothing,
    # and each registered objective's own: sgns keeps a context vector a word, glove a bias.
    t = resolve(make_config(objective="adjacent")).train
    assert objective_class("adjacent").memory(t, 50, 999, 10**6, 10**4) == (1000 * 4, 0)
    for name, cls in OBJECTIVES.items():
        if cls.closed_form:
            continue
        side, batches = cls.memory(resolve(make_config(objective=name)).train, 50, 999, 10**6, 10**4)
        assert isinstance(side, int) and isinstance(batches, int) and side > 0 and batches >= 0, name
    assert objective_class("sgns").memory(resolve(make_config(objective="sgns")).train, 50, 999, 10**6, 10**4)[0] \
        == 1000 * 50 * 4


# ---------------------------------------------------------------------------------------------
# what the registry and the command line take from the objectives' declarations


def test_auto_is_declared_by_the_objectives():
    from embedtune.objectives import auto_objective

    assert [name for name, cls in OBJECTIVES.items() if cls.auto_default] == ["sgns"]
    assert auto_objective("glove") == "glove" and auto_objective("word2vec") == auto_objective(None) == "sgns"
    assert resolve(make_config(objective="auto")).train.objective == "sgns"


def test_train_offers_each_declared_key_as_an_option_in_its_objectives_section():
    from embedtune.cli.options import objective_section
    from embedtune.cli.train_cmd import train_cmd as train_command
    from embedtune.config import all_keys, owners

    params = {p.name: p for p in train_command.params}
    for key in all_keys():
        if not key.option:   # a key of the file only, or an argument or option written by hand
            continue
        option = params[key.name]
        assert option.opts == [key.flag], key.name
        owner = owners().get((key.table, key.name))
        assert option.section == (objective_section(owner) if owner else key.section), key.name


def test_the_library_and_the_command_layer_around_the_objectives_name_none_of_them():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in (*sorted((root / "embedtune" / "config").glob("*.py")), root / "cli" / "options.py"):
        text = path.read_text(encoding="utf-8").lower()
        assert not [name for name in OBJECTIVES if name in text], path


def test_the_objectives_and_the_plan_never_import_the_config():
    # config reads the registry (the objectives' keys): an import the other way, even inside a function or
    # under `if TYPE_CHECKING:`, would close a circle; they take the classes from embedtune.config.schema.
    # (tests/test_layout.py checks the whole package for circles the same way.)
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "embedtune"
    for path in [root / "plan" / "rules.py", root / "config" / "schema.py", root / "config" / "keys.py",
                 *sorted((root / "objectives").rglob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        modules += [a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names]
        assert not {"embedtune.config", "embedtune.config.load", "embedtune.config.options"} & set(modules), path
