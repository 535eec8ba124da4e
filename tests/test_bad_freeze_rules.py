"""The bad-input catalogue (issue 5), freeze and train rules: a word list that is missing, not UTF-8 or
names a new word, a pattern that is empty or not a regular expression, rules that leave nothing to train.
Each is one error line naming the list (and its line) or the option, and the folder is left as it was
(tests/bad_inputs.py)."""

from __future__ import annotations

import pytest

from bad_inputs import CORPUS_LINES, VOCABULARY, Catalogue, assert_refused

cases = Catalogue()


@cases.case("freeze-list-freezes-everything")
def _(f):
    frozen = f.file("frozen.txt", "\n".join(VOCABULARY) + "\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen}", "nothing to train"]


@cases.case("freeze-pretrained-and-no-new-word")
def _(f):
    return f.args("--freeze-pretrained"), ["Error: ", "nothing to train"]


@cases.case("freeze-list-missing")
def _(f):
    missing = f.path / "frozen.txt"
    return f.args("--freeze-list", missing), [f"Error: {missing}: no such word-list file"]


@cases.case("train-list-missing")
def _(f):
    missing = f.path / "train-words.txt"
    return f.args("--train-list", missing), [f"Error: {missing}: no such word-list file"]


@cases.case("freeze-list-names-a-new-word")
def _(f):
    f.file("corpus.txt", "\n".join(CORPUS_LINES + ["the zzfresh of"] * 6) + "\n")
    frozen = f.file("frozen.txt", "the\nzzfresh\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen} line 2:", "'zzfresh'", "new word"]


@cases.case("freeze-list-bad-utf8")
def _(f):
    frozen = f.file("frozen.txt", b"the\ncaf\xe9\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen} line 2:", "UTF-8"]


@cases.case("freeze-pattern-invalid-regex")
def _(f):
    return f.args("--freeze-pattern", "^(the"), ["Error: ", "freeze", "pattern", "not a valid regular expression"]


@cases.case("freeze-list-empty-name")
def _(f):
    return f.args("--freeze-list", ""), ["Error: --freeze-list: empty file name"]


@cases.case("freeze-pattern-empty")
def _(f):   # re.search finds "" in every word: it must not freeze all, nor be taken as no rule
    return f.args("--freeze-pattern", ""), ["Error: --freeze-pattern is an empty pattern (it would match every word)"]


@cases.case("train-pattern-empty")
def _(f):
    return f.args("--train-pattern", ""), ["Error: --train-pattern is an empty pattern"]


@cases.case("freeze-pattern-empty-in-the-config")
def _(f):
    config = f.file("run.toml", '[vocab]\nfreeze_pattern = ""\n')
    return f.args("--config", config), [f"Error: {config}: key 'vocab.freeze_pattern' is an empty pattern"]


@pytest.mark.parametrize("build", cases.params)
def test_a_bad_freeze_or_train_rule_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    assert_refused(tmp_path, build)
