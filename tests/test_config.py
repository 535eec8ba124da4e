"""The config: TOML into frozen dataclasses, the files in configs/, errors that name key and file."""

from __future__ import annotations

import dataclasses
import re

import pytest

from embedtune.config import (Config, TrainConfig, VocabConfig, learning_rate, load_config, merge, resolve,
                              train_config)
from embedtune.errors import EmbedtuneError
from embedtune.objectives.classify import ClassifyFiles, ClassifyKeys
from embedtune.objectives.sgns import SkipGramKeys

from train_fixtures import CONFIGS, REPO

PATHS = ("vectors", "corpus", "output")


def write(tmp_path, text, name="run.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path) -> str:
    with pytest.raises(EmbedtuneError) as info:
        load_config(path)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# the files in configs/


def test_default_toml_holds_exactly_the_defaults():
    config = load_config(CONFIGS / "default.toml")
    assert dataclasses.replace(config, **{p: None for p in PATHS}) == Config()


def documented_keys(path) -> dict[str, dict[str, bool]]:
    """{table: {key: commented out?}} for every `key = ...` line, commented or not."""
    tables: dict[str, dict[str, bool]] = {"": {}}
    table = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^\[(\w+)\]", line):
            table = m.group(1)
            tables[table] = {}
        elif m := re.match(r"^(#\s*)?(\w+)\s*=", line):
            tables[table].setdefault(m.group(2), bool(m.group(1)))
    return tables


def test_default_toml_documents_every_key_and_comments_out_only_those_without_a_value():
    from embedtune.config import all_keys

    documented = documented_keys(CONFIGS / "default.toml")
    for table in ("", "vocab", "train"):
        keys = [k for k in all_keys() if k.table == table]   # the shared ones and the objectives' own
        assert set(documented[table]) == {k.name for k in keys}, f"[{table}] keys differ from the declared ones"
        # TOML has no null: exactly the keys whose default is None are commented out.
        commented = {k for k, c in documented[table].items() if c}
        assert commented == {k.name for k in keys if Config().value(k) is None}, table


def test_new_words_only_freezes_every_pretrained_row_and_nothing_else():
    config = load_config(CONFIGS / "new-words-only.toml")
    assert config.vocab == VocabConfig(freeze_pretrained=True)
    assert config.train == TrainConfig()


def test_quickstart_names_the_sample_files_relative_to_the_repository():
    config = load_config(CONFIGS / "quickstart.toml")
    assert (REPO / config.corpus).is_file()
    assert (REPO / config.vectors).is_file(), "data/sample/glove.6B.50d.20k.txt is missing"
    assert config.output == "quickstart-out.txt"
    assert config.vocab.freeze_top > 0


# ---------------------------------------------------------------------------------------------
# reading a file


def test_a_file_holds_only_what_differs_from_the_defaults(tmp_path):
    path = write(tmp_path, 'vectors = "v.txt"\n[vocab]\nfreeze_top = 7\n[train]\noptimizer = "adam"\nepochs = 2\n')
    config = load_config(path)
    assert config == Config(vectors="v.txt", vocab=VocabConfig(freeze_top=7),
                            train=TrainConfig(optimizer="adam", epochs=2))


def test_keys_may_be_spelled_with_dashes(tmp_path):
    config = load_config(write(tmp_path, "[vocab]\nfreeze-top = 3\n[train]\nbatch-size = 64\n"))
    assert config.vocab.freeze_top == 3 and config.train.batch_size == 64


def test_an_integer_is_accepted_where_a_number_is_expected(tmp_path):
    config = load_config(write(tmp_path, "[train]\nlr = 1\nsample = 0\n"))
    assert config.train.lr == 1.0 and type(config.train.lr) is float
    sample = config.train.keys_of(SkipGramKeys).sample
    assert sample == 0.0 and type(sample) is float


@pytest.mark.parametrize("text, key", [
    ("epoch = 5\n", "epoch"),
    ("[train]\nepoch = 5\n", "train.epoch"),
    ("[vocab]\nfreeze_tops = 5\n", "vocab.freeze_tops"),
    ("[training]\nepochs = 5\n", "training"),
])
def test_an_unknown_key_is_an_error_naming_the_key_and_the_file(tmp_path, text, key):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: ")
    assert f"unknown key '{key}'" in message


@pytest.mark.parametrize("text, key, expected", [
    ('[train]\nepochs = "5"\n', "train.epochs", "an integer"),
    ("[train]\nwindow = 2.5\n", "train.window", "an integer"),
    ("[train]\nlr = \"fast\"\n", "train.lr", "a number"),
    ("[train]\noptimizer = 1\n", "train.optimizer", "a string"),
    ("[vocab]\nfreeze_pretrained = 1\n", "vocab.freeze_pretrained", "true or false"),
    ("[vocab]\nfreeze_top = true\n", "vocab.freeze_top", "an integer"),
    ("[train]\ndeterministic = \"yes\"\n", "train.deterministic", "true or false"),
    ("vectors = 3\n", "vectors", "a string"),
])
def test_a_value_of_the_wrong_type_is_an_error_naming_the_key_and_the_file(tmp_path, text, key, expected):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: ")
    assert f"'{key}' must be {expected}" in message


def test_a_table_given_as_a_value_is_an_error(tmp_path):
    path = write(tmp_path, "train = 3\n")
    assert error_of(path) == f"{path}: 'train' must be a table ([train])"


@pytest.mark.parametrize("text, key", [
    ("[train]\nwindow = 0\n", "train.window"),
    ("[train]\nlr = -0.1\n", "train.lr"),
    ('[train]\noptimizer = "rmsprop"\n', "train.optimizer"),
    ("[train]\nepochs = 0\n", "train.epochs"),
    ("[train]\nclip_norm = -1.0\n", "train.clip_norm"),
    ('[vocab]\nlowercase = "sometimes"\n', "vocab.lowercase"),
    ("[vocab]\nmin_count = 0\n", "vocab.min_count"),
])
def test_a_value_out_of_range_is_an_error_naming_the_key_and_the_file(tmp_path, text, key):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: '{key}' ")


def test_a_file_that_is_not_toml_is_an_error_naming_the_file(tmp_path):
    path = write(tmp_path, "[train\nepochs = 5\n")
    assert error_of(path).startswith(f"{path}: not valid TOML")


def test_a_missing_config_file_is_an_error(tmp_path):
    assert error_of(tmp_path / "nope.toml") == f"{tmp_path / 'nope.toml'}: no such config file"


# ---------------------------------------------------------------------------------------------
# the command line over the file


def test_options_override_the_file_and_unset_options_leave_it(tmp_path):
    path = write(tmp_path, 'corpus = "a.txt"\n[vocab]\nfreeze_top = 100\nmin_count = 2\n'
                           '[train]\nepochs = 3\noptimizer = "adagrad"\n')
    config = merge(load_config(path), {"corpus": "b.txt", "vectors": None, "freeze_top": 5, "min_count": None,
                                       "epochs": 1, "optimizer": None, "window": None})
    assert config.corpus == "b.txt" and config.vectors is None
    assert config.vocab == VocabConfig(freeze_top=5, min_count=2)
    assert config.train == TrainConfig(epochs=1, optimizer="adagrad")


def test_an_option_out_of_range_is_an_error_naming_the_option():
    with pytest.raises(EmbedtuneError, match=r"^--window must be at least 1, got 0$"):
        merge(Config(), {"window": 0})
    with pytest.raises(EmbedtuneError, match=r"^--lr must be positive, got -1"):
        merge(Config(), {"lr": -1.0})


def test_a_bad_value_in_the_file_names_the_key_and_the_file_whatever_the_options(tmp_path):
    # Issue 45: a value is checked as the config is made, by its declaration, so a file with a value out of
    # range is refused even where an option would override it (as an unknown key or a wrong type is).
    path = write(tmp_path, "[train]\nwindow = 0\n")
    for options in ({}, {"window": 3}):
        with pytest.raises(EmbedtuneError, match=r"'train.window' must be at least 1, got 0") as err:
            merge(load_config(path, check_values=False), options, source=str(path))
        assert str(err.value).startswith(f"{path}: ")


def test_the_learning_rate_follows_the_optimizer_unless_given():
    assert [learning_rate(TrainConfig(optimizer=o)) for o in ("sgd", "adagrad", "adam")] == [0.025, 0.05, 0.001]
    assert learning_rate(TrainConfig(optimizer="adam", lr=0.5)) == 0.5
    assert learning_rate(TrainConfig(objective="glove", optimizer="adagrad")) == 0.1
    assert learning_rate(TrainConfig(objective="glove", optimizer="sgd")) == 0.025


# ---------------------------------------------------------------------------------------------
# the declarations: the dataclasses, their defaults and ranges come from the keys


def test_the_dataclasses_hold_exactly_the_declared_keys_with_their_defaults():
    from embedtune.config import all_keys, ranges

    for table, cls in (("", Config), ("vocab", VocabConfig), ("train", TrainConfig)):
        # one source of truth: the class's fields are its shared keys (apart from the tables and ``own``),
        # the objectives' keys are fields of their own classes, never of these
        declared = [k for k in all_keys() if k.table == table]
        names = [f.name for f in dataclasses.fields(cls) if f.name not in ("vocab", "train", "own")]
        assert names == [k.name for k in declared if k.holder is cls], table
        assert all(k.holder is cls or k.holder.__module__.startswith("embedtune.objectives") for k in declared)
        assert all(Config().value(k) == k.default for k in declared), table
    declared = {f"{k.table}.{k.name}": k.range for k in all_keys() if k.range is not None}
    assert {key: r for key, r in ranges().items() if not key.startswith("init.")} == declared


def test_each_objective_declares_its_own_keys_and_config_py_only_the_shared_ones():
    from embedtune.config import SHARED, owners
    from embedtune.config.keys import declared

    shared = {k.name for cls in SHARED for k in declared(cls)}
    assert not shared & {"negative", "negatives", "sample", "context_init", "x_max", "repel", "label_prefix",
                         "word_ngrams", "ngram_min_count", "lexicon", "antonyms", "valid", "save_classifier"}
    assert owners()[("train", "x_max")] == "glove" and owners()[("", "lexicon")] == "retrofit"
    assert owners()[("train", "word_ngrams")] == owners()[("", "valid")] == "classify"
    # typed attributes of each objective's own class, defaults where nothing was set
    assert TrainConfig().keys_of(ClassifyKeys).word_ngrams == 1 and Config().keys_of(ClassifyFiles).save_classifier is None



def test_the_flat_file_fills_each_objectives_own_instance_and_equal_values_make_equal_configs(tmp_path):
    path = write(tmp_path, 'valid = "v.txt"\n[train]\nobjective = "classify"\nword_ngrams = 2\nnegative = 7\n')
    config = load_config(path)
    assert config.keys_of(ClassifyFiles) == ClassifyFiles(valid="v.txt")
    assert config.train.keys_of(ClassifyKeys) == ClassifyKeys(word_ngrams=2)
    assert config.train.keys_of(SkipGramKeys) == SkipGramKeys(negative=7)
    assert config.train == TrainConfig(objective="classify", own=(SkipGramKeys(negative=7), ClassifyKeys(word_ngrams=2)))
    assert config.train == train_config(objective="classify", word_ngrams=2, negative=7)
    # values at their defaults are not held, however given: a config equals one built plainly
    assert train_config(negative=5, word_ngrams=1) == TrainConfig() and hash(TrainConfig()) == hash(train_config())
    with pytest.raises(TypeError):
        train_config(negativ=3)


def test_the_config_package_names_no_objective():
    for path in sorted((REPO / "embedtune" / "config").glob("*.py")):
        text = path.read_text(encoding="utf-8").lower()
        for name in ("sgns", "glove", "retrofit", "classify"):
            assert name not in text, (path.name, name)


@pytest.mark.parametrize("text, message", [
    ('[train]\nobjective = "sgns"\nword_ngrams = 2\n',
     "'train.word_ngrams' is used only by --objective classify (the objective here is sgns)"),
    ('valid = "v.txt"\n', "'valid' is used only by --objective classify (the objective here is auto)"),
    ('antonyms = "a.txt"\n[train]\nobjective = "glove"\n',
     "'antonyms' is read only by --objective retrofit (the objective here is glove)"),
])
def test_a_key_of_another_objective_is_an_error_where_its_objective_says_so(tmp_path, text, message):
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: {message}"


def test_keys_of_another_objective_that_it_does_not_refuse_are_left_alone(tmp_path):
    path = write(tmp_path, '[train]\nobjective = "classify"\nnegative = 7\nx_max = 3.0\nlabel_prefix = "#"\n')
    assert load_config(path).train.keys_of(SkipGramKeys).negative == 7


@pytest.mark.parametrize("objective", ["auto", "sgns", "glove", "classify", "retrofit"])
def test_a_resolved_config_is_the_one_object_downstream_reads(objective):
    """run.run resolves the config once; the trainer's entry points resolve again for callers that skip
    the run, and then get the very object they were given, not a copy that could drift from it."""
    once = resolve(dataclasses.replace(Config(), format="glove",
                                       train=dataclasses.replace(Config().train, objective=objective)))
    assert once.train.objective != "auto" and once.train.batch_size is not None
    assert resolve(once) is once
