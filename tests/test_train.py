"""embedtune.training on GloVe 6B 50d rows and the Lee news corpus: frozen rows, caps, loss, new words.

Each training here is one epoch over a few lines with small batches, so each takes a second or two.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.training import train
from embedtune.vectors import Vectors, is_lowercase_vocabulary

from train_fixtures import (HIDDEN, SAMPLE_CORPUS, bits, glove, make_config, sample_lines, true_ranks,
                            write_glove_text)

OPTIMIZERS = ["sgd", "adagrad", "adam"]
# Words of every batch: with subsampling off they are ~12% of the sample's tokens, so a batch of 512
# pairs without one of them as center, context or negative has a probability below 1e-25.
EVERY_BATCH = ("the", "to", "of", "and", "a", "in")


def corpus_words(lines) -> list[str]:
    return sorted({w for line in lines for w in line.split()})


# ---------------------------------------------------------------------------------------------
# frozen rows


LINES = sample_lines(20)


def known_words(lines) -> list[str]:
    """The lines' words that GloVe's first 20,000 rows hold, less EVERY_BATCH. One index for all of them: glove()
    makes a fresh copy each call, and a call a word (1,487) cost every process that collects this module seconds
    of CPU before its first test."""
    index = glove(20000).index
    return [w for w in corpus_words(lines) if w in index and w not in EVERY_BATCH]


IN_VOCAB = known_words(LINES)


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(frozen_words=st.sets(st.sampled_from(IN_VOCAB), max_size=200), freeze_top=st.integers(0, 3000),
       anchor=st.sampled_from([0.0, 1.0]))
def test_frozen_rows_stay_bit_identical_even_when_in_every_batch(optimizer, frozen_words, freeze_top, anchor):
    vectors = glove(20000)
    vectors.matrix[vectors.index["the"], 0] = -0.0   # equal to 0.0 as a number, not as bits
    before = vectors.matrix.copy()
    # Large steps: a leak would show. (sgd at 0.5 diverged, loss 68 -> 1.1e7 by step 20, now an error.)
    lr = {"sgd": 0.25, "adagrad": 0.5, "adam": 0.05}[optimizer]
    with tempfile.TemporaryDirectory() as folder:
        freeze_list = Path(folder) / "frozen.txt"
        freeze_list.write_text("\n".join(sorted(frozen_words) + list(EVERY_BATCH)) + "\n", encoding="utf-8")
        config = make_config({"freeze_list": str(freeze_list), "freeze_top": freeze_top},
                             epochs=1, batch_size=512, sample=0.0, optimizer=optimizer, lr=lr,
                             context_init="word", anchor=anchor)
        result = train(vectors, Corpus(LINES), config)

    frozen = {vectors.index[w] for w in frozen_words | set(EVERY_BATCH)} | set(range(freeze_top))
    frozen = np.array(sorted(frozen))
    assert np.flatnonzero(result.plan.frozen).tolist() == frozen.tolist()
    out = result.vectors.matrix[: len(vectors)]
    np.testing.assert_array_equal(bits(out[frozen]), bits(before[frozen]))
    assert result.stats["max_frozen_change"] == 0.0
    # Trainable rows the corpus never uses are not touched either (lazy updates) ...
    used = {vectors.index[w] for w in corpus_words(LINES) if w in vectors.index}
    unused = np.array([r for r in range(len(vectors)) if r not in used])
    np.testing.assert_array_equal(bits(out[unused]), bits(before[unused]))
    # ... while the trainable rows it uses did move, or this test would prove nothing.
    moved = np.array(sorted(used - set(frozen.tolist())))
    assert (out[moved] != before[moved]).any(axis=1).mean() > 0.9


def test_training_with_everything_in_the_corpus_frozen_is_an_error():
    config = make_config({"freeze_pretrained": True, "min_count": 1000}, epochs=1)
    with pytest.raises(EmbedtuneError, match=r"nothing to train: the rules \(freeze_pretrained True\) freeze every corpus word"):
        train(glove(20000), Corpus(LINES), config)


def test_a_freeze_rule_matching_a_new_word_stops_training_before_it_starts():
    with pytest.raises(EmbedtuneError, match="a new word cannot be frozen"):
        train(glove(20000), Corpus(["zzword " * 6]), make_config({"freeze_pattern": "^zz"}, epochs=1))


# ---------------------------------------------------------------------------------------------
# the cap


def one_step(clip_norm, lr=1000.0, deterministic=False):
    """Train one step on three lines; returns (start, trained) rows of the corpus words."""
    lines = sample_lines(3)
    vectors = glove(20000)
    config = make_config({"min_count": 10**6}, epochs=1, batch_size=100_000, sample=0.0, lr=lr,
                         clip_norm=clip_norm, context_init="word",   # word contexts: words get a gradient
                         deterministic=deterministic)
    result = train(vectors, Corpus(lines), config)
    assert result.stats["steps"] == 1 and result.stats["new"] == 0
    rows = [vectors.index[w] for w in corpus_words(lines) if w in vectors.index]
    return vectors.matrix[rows].astype(np.float64), result.vectors.matrix[rows].astype(np.float64)


def test_one_step_with_a_huge_learning_rate_moves_no_row_further_than_lr_times_the_cap():
    lr, cap = 1000.0, 1.0
    start, trained = one_step(cap, lr)
    movement = np.linalg.norm(trained - start, axis=1)
    assert movement.max() <= lr * cap * (1 + 1e-5)
    # The cap bound: most rows (a row repeated in the batch included) got a gradient beyond it.
    assert (movement > 0.99 * lr * cap).mean() > 0.5


def test_without_the_cap_the_same_step_moves_rows_further():
    # Batch-synchronous like the capped step (--deterministic: not the lock-free kernel, whose pairs
    # come one at a time, so that the first saturates the sigmoids and the later ones hardly move).
    # Uncapped, the step takes a row past 100x the longest input row (1,412, more than lr x the cap above
    # from any start): the run stops as diverged (issue 45), where the capped one above ends.
    with pytest.raises(EmbedtuneError, match=r"training diverged: a trained row's length reached .* over 100x"):
        one_step(0.0, 1000.0, deterministic=True)


# ---------------------------------------------------------------------------------------------
# learning


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_loss_falls_over_an_epoch_of_the_sample(optimizer):
    result = train(glove(20000), Corpus(sample_lines()),
                   make_config({"freeze_top": 5000}, epochs=1, batch_size=2048, optimizer=optimizer))
    s = result.stats
    assert len(s["loss_history"]) >= 3 and all(np.isfinite(s["loss_history"]))
    assert s["loss_first"] == s["loss_history"][0] and s["loss_last"] == s["loss_history"][-1]
    assert s["loss_first"] > s["loss_last"]




def test_a_new_word_ends_near_its_true_vector():
    # Take eight frequent words of the sample out of GloVe; they come back as new words trained
    # against frozen GloVe rows. A random start ranks its true vector ~10,000th of 20,000 by cosine.
    vectors = glove(20000, drop=HIDDEN)
    config = make_config({"freeze_pretrained": True}, epochs=1, optimizer="adagrad", lr=0.2)
    result = train(vectors, Corpus(sample_lines()), config)
    assert result.stats["trainable"] == 0 and set(HIDDEN) <= set(result.plan.words[len(vectors):])

    ranks = true_ranks(result.vectors)
    assert np.median(ranks) < 50 and max(ranks) < 1000, ranks


# ---------------------------------------------------------------------------------------------
# new words, the result, reproducibility


def test_new_words_are_unknown_corpus_words_seen_min_count_times_most_frequent_first():
    lines = ["zzrare police"] * 4 + ["zzmid fire"] * 5 + ["zzoften zzoften sydney"] * 3 + ["the police"] * 5
    vectors = glove(1000)
    # No subsampling: on 37 tokens it leaves no pair, an error since issue 11.
    result = train(vectors, Corpus(lines), make_config({"min_count": 5}, epochs=1, batch_size=64, sample=0.0))
    assert result.plan.words[len(vectors):] == ["zzoften", "zzmid"]
    assert result.vectors.words[: len(vectors)] == vectors.words
    assert result.stats["new"] == 2 and len(result.vectors) == len(vectors) + 2

    capped = train(vectors, Corpus(lines), make_config({"min_count": 5, "max_new": 1}, epochs=1, batch_size=64,
                                                      sample=0.0))
    assert capped.plan.words[len(vectors):] == ["zzoften"]


def test_the_summary_counts_rows_and_words():
    vectors = glove(20000)
    result = train(vectors, Corpus(LINES), make_config({"freeze_top": 1000}, epochs=2, batch_size=512))
    s = result.stats
    assert (s["frozen"], s["trainable"]) == (1000, 19000)
    assert s["frozen"] + s["trainable"] + s["new"] == len(result.vectors)
    assert s["corpus_words"] == sum(len(line.split()) for line in LINES) and s["corpus_lines"] == len(LINES)
    assert s["epochs"] == 2 and s["steps"] > 0 and s["pairs"] > 0 and s["words_per_second"] > 0
    assert s["max_frozen_change"] == 0.0


def test_progress_reaches_the_total_and_the_plan_comes_first():
    events = []
    train(glove(20000), Corpus(LINES), make_config(epochs=2, batch_size=256),
          progress=lambda p: events.append(("progress", p)), on_plan=lambda plan: events.append(("plan", plan)))
    assert events[0][0] == "plan" and [kind for kind, _ in events[1:]] == ["progress"] * (len(events) - 1)
    done = [p.words_done for _, p in events[1:]]
    assert done == sorted(done) and done[-1] == events[-1][1].words_total == 2 * sum(len(x.split()) for x in LINES)
    assert {p.epoch for _, p in events[1:]} == {1, 2}


DETERMINISTIC_RUNS = """
import sys
import numpy as np
from embedtune.corpus import Corpus
from embedtune.training import train
from train_fixtures import bits, glove, make_config, sample_lines

vectors = glove(20000)
runs = [train(vectors, Corpus(sample_lines(20)), make_config(
            {"freeze_top": 100}, epochs=1, batch_size=512, seed=seed, deterministic=True)).vectors.matrix
        for seed in (7, 7, 8)]
print(np.array_equal(bits(runs[0]), bits(runs[1])), np.array_equal(runs[0], runs[2]))
"""


def test_deterministic_runs_with_one_seed_give_the_same_bits_and_another_seed_does_not():
    # In a process of its own: op determinism, once on, stays on for the whole process.
    result = subprocess.run([sys.executable, "-c", DETERMINISTIC_RUNS], capture_output=True, text=True,
                            cwd=Path(__file__).parent, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]


def test_a_deterministic_run_leaves_the_processs_op_determinism_as_it_found_it():
    """--deterministic turns TensorFlow's op determinism on for its run only: after it a caller's
    unseeded random op runs (it raised: 'Random ops require a seed'), and a caller who had turned it
    on keeps it on."""
    from tensorflow.python.framework import config as tf_config

    from embedtune._tf import tf

    def deterministic_run():
        config = make_config({"freeze_top": 100}, objective="glove", epochs=1, batch_size=512, seed=1,
                             deterministic=True, max_steps=2)
        train(glove(2000), Corpus(sample_lines(5)), config)

    was = tf_config.is_op_determinism_enabled()
    try:
        tf_config.disable_op_determinism()
        deterministic_run()
        assert not tf_config.is_op_determinism_enabled()
        tf.random.uniform([2])   # unseeded: refused while determinism is on
        tf_config.enable_op_determinism()
        deterministic_run()
        assert tf_config.is_op_determinism_enabled()
    finally:
        (tf_config.enable_op_determinism if was else tf_config.disable_op_determinism)()


def test_a_dimension_other_than_the_files_is_an_error():
    """Checked once, where the run loads the vectors and resolves its config (embedtune.run)."""
    from embedtune.run import run

    with pytest.raises(EmbedtuneError, match="the vectors have 50 dimensions, but --dim says 300"):
        run(make_config(dim=300), vectors=glove(1000), sentences=LINES)


def test_an_empty_corpus_is_an_error():
    with pytest.raises(EmbedtuneError, match="the corpus has no words"):
        train(glove(1000), Corpus(["", "   "]), make_config(epochs=1))


def test_a_vocabulary_without_capitals_means_a_lower_cased_corpus():
    assert is_lowercase_vocabulary(glove(1000))
    assert not is_lowercase_vocabulary(Vectors(["the", "Sydney"], np.zeros((2, 3), np.float32)))


# ---------------------------------------------------------------------------------------------
# runs that cannot train, or that blow up, end with one line and write nothing


def run_train(*args):
    from click.testing import CliRunner

    from embedtune.cli.main import cli

    return CliRunner().invoke(cli, ["train", *map(str, args)], catch_exceptions=False)


@pytest.mark.parametrize("objective, lines, options, says", [
    ("sgns", ["the", "of", "and"] * 30, [], "no training pairs: every line holds a single word"),
    # Each word is half the corpus: subsampling keeps both words of a line about once in 450 (seeded).
    ("sgns", ["the of"] * 20, [], "subsampled; try --sample 0 (it was 0.001)"),
    ("glove", ["the", "of", "and"] * 30, [], "no two words of the vectors file occur within the window"),
])
def test_a_corpus_without_a_training_pair_is_a_one_line_error_and_writes_nothing(tmp_path, objective, lines,
                                                                                 options, says):
    from test_cli_train import assert_one_error_line

    vectors, corpus, output = tmp_path / "v.txt", tmp_path / "c.txt", tmp_path / "out.txt"
    write_glove_text(glove(300), vectors)
    corpus.write_text("\n".join(lines) + "\n")
    result = run_train(vectors, corpus, "-o", output, "--objective", objective, *options)
    assert result.exit_code == 1, result.output
    assert_one_error_line(result.stderr, f"Error: {corpus}: ", says)
    assert sorted(tmp_path.iterdir()) == sorted([vectors, corpus])


def small_vocabulary_run(tmp_path, *options):
    """sgns on the sample corpus with only the 300 most frequent GloVe words (no new words): each
    row is in almost every pair of a batch, so its summed step is large."""
    vectors, output = tmp_path / "v300.txt", tmp_path / "out.txt"
    write_glove_text(glove(300), vectors)
    return run_train(vectors, SAMPLE_CORPUS, "-o", output, "--objective", "sgns", "--min-count", "1000000",
                     "--epochs", "1", "--json", *options), output


def test_a_loss_that_grows_tenfold_is_divergence_and_says_which_option_to_lower(tmp_path):
    # At the default --lr the mean loss of the first 20 steps is 1.8e7 against 4.16 at the
    # first; before the rule the run went on to the end and exited 0.
    from test_cli_train import assert_one_error_line

    # The batch-synchronous step (--deterministic), whose summed steps are what diverges here; the
    # lock-free kernel applies the pairs one at a time and trains this run.
    result, output = small_vocabulary_run(tmp_path, "--deterministic")
    assert result.exit_code == 1, result.output
    assert_one_error_line(result.stderr, "Error: training diverged at step 20: loss ",
                          "over 10x the first step's 4.159", "lower --lr (it was 0.025)", "--clip-norm")
    assert not output.exists() and result.stdout == ""


def test_the_cap_the_divergence_message_names_lets_the_same_run_train(tmp_path):
    result, output = small_vocabulary_run(tmp_path, "--clip-norm", "1")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert max(summary["loss_history"]) < 10 * summary["loss_start"]
    assert summary["loss_last"] < summary["loss_start"]
    assert output.exists()
