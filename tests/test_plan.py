"""Freeze rules -> plan: each of the four rules of embedtune.plan.rules, their precedence, missing list words."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedtune.config import VocabConfig
from embedtune.errors import EmbedtuneError, python_names
from embedtune.plan.rules import MISSING_SHOWN, make_plan, read_word_list
from embedtune.vectors import Vectors

# Pretrained words in "frequency order", as a GloVe file would hold them.
PRETRAINED = ["the", "of", "and", "2001", "police", "fire", "bushfire", "sydney", "canberra", "1999"]
NEW = ["canyoning", "tora", "bora"]  # corpus words the vectors lack


def vectors(words=PRETRAINED) -> Vectors:
    return Vectors(list(words), np.arange(len(words) * 3, dtype=np.float32).reshape(-1, 3))


def word_list(tmp_path, words, name="words.txt") -> str:
    path = tmp_path / name
    path.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    return str(path)


def frozen_words(plan) -> set[str]:
    return {w for w, f in zip(plan.words, plan.frozen) if f}


def plan_for(new=NEW, **rules):
    return make_plan(vectors(), list(new), VocabConfig(**rules))


# ---------------------------------------------------------------------------------------------
# the shape of a plan


def test_new_words_follow_the_pretrained_ones_in_file_order():
    plan = plan_for()
    assert plan.words == PRETRAINED + NEW
    assert (plan.n_pretrained, plan.n_new) == (10, 3)
    assert plan.frozen.dtype == bool and plan.frozen.shape == (13,)


def test_no_rule_trains_everything():
    plan = plan_for()
    assert not plan.frozen.any()
    assert plan.summary() == {"frozen": 0, "trainable": 10, "new": 3, "missing_list_words": {}}


# ---------------------------------------------------------------------------------------------
# rule 1: new words train; a freeze rule naming one is an error


@pytest.mark.parametrize("rules", [
    {"freeze_pretrained": True},
    {"freeze_top": 1000},
    {"freeze_pattern": "^(the|police)$"},
    {"train_list": None, "train_pattern": "^fire$"},
])
def test_new_words_train_whatever_the_other_rules_say(rules):
    plan = plan_for(**rules)
    assert not plan.frozen[plan.n_pretrained:].any()


def test_freeze_pretrained_freezes_every_pretrained_row_and_no_new_one():
    plan = plan_for(freeze_pretrained=True)
    assert frozen_words(plan) == set(PRETRAINED)
    assert plan.summary()["trainable"] == 0 and plan.summary()["new"] == 3


def test_a_freeze_list_naming_a_new_word_is_an_error_with_file_and_line(tmp_path):
    path = word_list(tmp_path, ["police", "fire", "", "tora"])
    with pytest.raises(EmbedtuneError) as info:
        plan_for(freeze_list=path)
    assert info.value.path == path and info.value.line == 4
    assert str(info.value).startswith(f"{path} line 4: 'tora' is not in the vectors but is a new word")


def test_a_freeze_pattern_matching_a_new_word_is_an_error_naming_it():
    # named as the user wrote it: the command's flag, or the Python keyword (the Keras layer's python_names)
    with pytest.raises(EmbedtuneError, match=r"^--freeze-pattern '\^t' matches 1 new corpus word \(e.g. 'tora'\)"):
        plan_for(freeze_pattern="^t")
    with python_names(), pytest.raises(EmbedtuneError, match=r"^freeze_pattern '\^t' matches 1 new corpus word"):
        plan_for(freeze_pattern="^t")


@pytest.mark.parametrize("key", ["freeze_pattern", "train_pattern"])
def test_an_empty_pattern_from_python_is_an_error_not_no_rule(key):
    # A VocabConfig made in Python is checked as it is made (issue 45: the declaration's check, which the
    # config's had been only): "" would match every word.
    with pytest.raises(EmbedtuneError, match=f"VocabConfig.{key} is an empty pattern"):
        plan_for(**{key: ""})


def test_a_train_list_may_name_a_new_word(tmp_path):
    plan = plan_for(train_list=word_list(tmp_path, ["police", "tora"]))
    assert frozen_words(plan) == set(PRETRAINED) - {"police"}
    assert plan.missing == []


# ---------------------------------------------------------------------------------------------
# rule 2: freeze rules freeze, and win over train rules


def test_freeze_top_freezes_the_first_rows_of_the_file():
    assert frozen_words(plan_for(freeze_top=3)) == {"the", "of", "and"}


def test_freeze_list_freezes_its_words(tmp_path):
    assert frozen_words(plan_for(freeze_list=word_list(tmp_path, ["sydney", "police"]))) == {"sydney", "police"}


def test_freeze_pattern_freezes_matching_words_by_search():
    assert frozen_words(plan_for(freeze_pattern="[0-9]")) == {"2001", "1999"}


def test_a_freeze_rule_wins_over_a_train_rule(tmp_path):
    plan = plan_for(freeze_list=word_list(tmp_path, ["police"], "freeze.txt"),
                    train_list=word_list(tmp_path, ["police", "fire"], "train.txt"),
                    freeze_pattern="^19", train_pattern="^(19|bush)")
    assert frozen_words(plan) == set(PRETRAINED) - {"fire", "bushfire"}


def test_freeze_top_wins_over_a_train_pattern():
    plan = plan_for(freeze_top=2, train_pattern="^(the|of|and)$")
    assert frozen_words(plan) == set(PRETRAINED) - {"and"}


# ---------------------------------------------------------------------------------------------
# rules 3 and 4: a train rule means "only these move"


def test_a_train_list_trains_its_words_and_freezes_every_other_pretrained_one(tmp_path):
    plan = plan_for(train_list=word_list(tmp_path, ["fire", "bushfire"]))
    assert frozen_words(plan) == set(PRETRAINED) - {"fire", "bushfire"}


def test_a_train_pattern_trains_matching_words_and_freezes_the_rest():
    plan = plan_for(train_pattern="fire")
    assert frozen_words(plan) == set(PRETRAINED) - {"fire", "bushfire"}


def test_without_a_train_rule_unfrozen_words_train():
    plan = plan_for(freeze_top=4)
    assert frozen_words(plan) == {"the", "of", "and", "2001"}


def test_an_invalid_pattern_is_an_error_naming_the_key():
    with pytest.raises(EmbedtuneError, match=r"VocabConfig.train_pattern '\(fire' is not a valid regular expression"):
        plan_for(train_pattern="(fire")


# ---------------------------------------------------------------------------------------------
# list words missing from the vocabulary


def test_list_words_missing_from_the_vocabulary_are_counted_with_the_first_few(tmp_path):
    absent = [f"absent{i}" for i in range(8)]
    freeze = word_list(tmp_path, ["police", *absent[:2]], "freeze.txt")
    train = word_list(tmp_path, ["fire", *absent], "train.txt")
    plan = plan_for(freeze_list=freeze, train_list=train)
    assert [(m.path, m.count, m.first) for m in plan.missing] == [
        (freeze, 2, absent[:2]), (train, 8, absent[:MISSING_SHOWN])]
    assert plan.summary()["missing_list_words"] == {
        freeze: {"count": 2, "first": absent[:2]}, train: {"count": 8, "first": absent[:MISSING_SHOWN]}}
    assert frozen_words(plan) == set(PRETRAINED) - {"fire"}


def test_strict_lists_make_a_missing_word_an_error_with_file_and_line(tmp_path):
    path = word_list(tmp_path, ["police", "fire", "absent"])
    with pytest.raises(EmbedtuneError) as info:
        plan_for(freeze_list=path, strict_lists=True)
    assert str(info.value) == f"{path} line 3: 'absent' is not in the vocabulary"


def test_a_missing_list_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(EmbedtuneError, match="no such word-list file"):
        plan_for(train_list=str(tmp_path / "nope.txt"))


def test_word_lists_skip_blank_lines_and_strip_ascii_spaces_and_line_ends(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes(b"\n \t\r\n  police \r\nfire\n")
    assert read_word_list(str(path)) == [(3, "police"), (4, "fire")]


def test_every_non_empty_line_of_a_word_list_is_a_word_even_one_starting_with_hash(tmp_path):
    # GloVe 6B has '#' and '#39'; Twitter GloVe has hashtags: a list cut from a vectors file
    # must keep them (they were read as comments and silently left trainable).
    path = tmp_path / "w.txt"
    path.write_bytes("#\n#hashtag\n# two words\n".encode())
    assert read_word_list(str(path)) == [(1, "#"), (2, "#hashtag"), (3, "# two words")]
    plan = make_plan(vectors(["the", "#", "#hashtag", "of"]), [], VocabConfig(freeze_list=str(path)))
    assert frozen_words(plan) == {"#", "#hashtag"}


def test_a_word_list_keeps_spaces_that_are_not_ascii(tmp_path):
    # U+00A0 and U+3000 are not what the vectors readers split on: they belong to a word.
    path = tmp_path / "w.txt"
    path.write_bytes("\u00a0\n\u3000x\n".encode())
    assert read_word_list(str(path)) == [(1, "\u00a0"), (2, "\u3000x")]


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes(b"\xef\xbb\xbfpolice\nfire\n")
    assert read_word_list(str(path)) == [(1, "police"), (2, "fire")]
    plan = plan_for(freeze_list=str(path), strict_lists=True)
    assert frozen_words(plan) == {"police", "fire"}


def test_a_word_list_that_is_not_utf8_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes(b"police\ncaf\xe9\n")
    with pytest.raises(EmbedtuneError, match=r"w.txt line 2: not valid UTF-8"):
        read_word_list(str(path))


# ---------------------------------------------------------------------------------------------
# the rules as stated, word by word, against make_plan on random rule sets


def expected_frozen(word, row, is_new, rules, freeze_set, train_set) -> bool:
    """The docstring of embedtune.plan.rules, one word at a time: the first rule that applies decides."""
    if is_new:
        return False                                                          # rule 1
    if (rules["freeze_pretrained"] or row < rules["freeze_top"] or word in freeze_set
            or (rules["freeze_pattern"] and re.search(rules["freeze_pattern"], word))):
        return True                                                           # rule 2
    if word in train_set or (rules["train_pattern"] and re.search(rules["train_pattern"], word)):
        return False                                                          # rule 3
    return rules["train_list"] or bool(rules["train_pattern"])               # rule 4


PATTERNS = st.sampled_from([None, "^[0-9]+$", "fire", "^(the|of)$", "a"])


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    freeze_pretrained=st.booleans(),
    freeze_top=st.integers(0, 12),
    freeze_set=st.none() | st.sets(st.sampled_from(PRETRAINED + ["absent"])),
    train_set=st.none() | st.sets(st.sampled_from(PRETRAINED + NEW + ["absent"])),
    freeze_pattern=PATTERNS,
    train_pattern=PATTERNS,
)
def test_every_rule_set_gives_the_documented_plan(freeze_pretrained, freeze_top, freeze_set, train_set,
                                                  freeze_pattern, train_pattern):
    # "a" matches the new words 'canyoning', 'tora' and 'bora': as a freeze pattern it is an error.
    with tempfile.TemporaryDirectory() as folder:
        rules = dict(freeze_pretrained=freeze_pretrained, freeze_top=freeze_top, freeze_pattern=freeze_pattern,
                     train_pattern=train_pattern, freeze_list=None, train_list=None)
        if freeze_set is not None:
            rules["freeze_list"] = word_list(Path(folder), sorted(freeze_set), "freeze.txt")
        if train_set is not None:
            rules["train_list"] = word_list(Path(folder), sorted(train_set), "train.txt")
        if freeze_pattern == "a":
            with pytest.raises(EmbedtuneError, match="a new word cannot be frozen"):
                plan_for(**rules)
            return
        plan = plan_for(**rules)
    freeze_set, train_set = freeze_set or set(), train_set or set()
    rules["train_list"] = rules["train_list"] is not None
    want = [expected_frozen(w, i, i >= len(PRETRAINED), rules, freeze_set, train_set)
            for i, w in enumerate(plan.words)]
    assert plan.frozen.tolist() == want
    assert plan.n_frozen == sum(want)
    assert [m.count for m in plan.missing] == [1] * (("absent" in freeze_set) + ("absent" in train_set))


def test_row_counts_are_made_once_for_the_same_counts_and_cannot_be_changed():
    from collections import Counter

    plan = plan_for()
    counts = Counter({"the": 3, "tora": 2, "unseen": 9})
    first = plan.row_counts(counts)
    assert plan.row_counts(counts) is first   # the run's checks and its tables ask twice
    assert first.tolist() == [3] + [0] * 9 + [0, 2, 0]
    with pytest.raises(ValueError):
        first[0] = 1
    other = Counter({"of": 1})
    assert plan.row_counts(other) is not first and plan.row_counts(other)[1] == 1
