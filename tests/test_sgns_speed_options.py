"""The sgns speed options: shared or per-pair negatives, --threads, the id cache.

Each training is one or two epochs over 20-60 lines of the sample corpus with small batches.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from embedtune._tf import tf
from embedtune.config import resolve, train_config
from embedtune.corpus import Corpus, IdChunk
from embedtune.objectives.rows import LocalRows
from embedtune.objectives.sgns import SkipGram
from embedtune.training import train

from train_fixtures import SAMPLE_CORPUS, bits, glove, make_config, run, sample_lines, write_glove_text

LINES = sample_lines(20)
EVERY_BATCH = ("the", "to", "of", "and", "a", "in")   # in every batch of 512 pairs (see test_train.py)


# The shared cases to one test process (with test_threads_and_negatives_are_accepted's): their sgd runs
# step through the lock-free shared kernel, which no other test compiles (tests/warm_kernels.py warms
# --deterministic's strict twin); on a cold cache the two test processes compiled it at once, each paying.
@pytest.mark.parametrize("negatives", [pytest.param("shared", marks=pytest.mark.xdist_group("sgns-shared-kernel")),
                                       "per-pair"])
@pytest.mark.parametrize("optimizer, threads", [("sgd", 1), ("sgd", 2), ("adagrad", 2)],
                         ids=["sgd-no-merge", "sgd-two-threads", "adagrad-merged"])
def test_both_negatives_train_and_keep_frozen_rows_bit_identical(negatives, optimizer, threads):
    vectors = glove(20000)
    vectors.matrix[vectors.index["the"], 0] = -0.0   # equal to 0.0 as a number, not as bits
    before = vectors.matrix.copy()
    with tempfile.TemporaryDirectory() as folder:
        freeze_list = Path(folder) / "frozen.txt"
        freeze_list.write_text("\n".join(EVERY_BATCH) + "\n", encoding="utf-8")
        config = make_config({"freeze_list": str(freeze_list), "freeze_top": 2000}, epochs=2, batch_size=512,
                             sample=0.0, optimizer=optimizer, lr=0.1, context_init="word",
                             negatives=negatives, threads=threads)
        result = train(vectors, Corpus(LINES), config)
    frozen = np.flatnonzero(result.plan.frozen[: len(vectors)])
    assert len(frozen) >= 2000 and {vectors.index[w] for w in EVERY_BATCH} <= set(frozen)
    np.testing.assert_array_equal(bits(result.vectors.matrix[frozen]), bits(before[frozen]))
    assert result.stats["max_frozen_change"] == 0.0
    trainable = np.flatnonzero(~result.plan.frozen[: len(vectors)])
    moved = (result.vectors.matrix[trainable] != before[trainable]).any(axis=1).sum()
    assert moved >= 100 and result.stats["trained_rows"] >= 100
    assert result.stats["loss_last"] < result.stats["loss_first"]


def _rows(n: int, dim: int, rng) -> LocalRows:
    start = rng.standard_normal((n, dim)).astype(np.float32)
    return LocalRows(np.arange(n, 0, -1), n, np.ones(n, bool), lambda ids: start[ids], {}, dim)


def test_the_shared_loss_is_word2vecs_loss_with_one_draw_of_negatives_per_group():
    rng = np.random.default_rng(0)
    rows = _rows(50, 8, rng)
    sgns = SkipGram(rows, train_config(window=5, negative=3, batch_size=40, negatives="shared"))
    assert sgns.group == 16 and sgns.batch_size == 48   # the batch is padded to whole groups
    centers = rng.standard_normal((48, 8)).astype(np.float32)
    side = rng.standard_normal((48 + 3 * 3, 8)).astype(np.float32)
    weight = np.r_[np.ones(40), np.zeros(8)].astype(np.float32)
    loss = float(sgns.loss([tf.constant(centers)], tf.constant(side), {"weight": tf.constant(weight)}))

    expected = 0.0
    for b in range(40):
        negatives = side[48 + 3 * (b // 16): 48 + 3 * (b // 16) + 3]
        expected += np.logaddexp(0, -centers[b] @ side[b]) + np.logaddexp(0, negatives @ centers[b]).sum()
    assert loss == pytest.approx(expected, rel=1e-5)


def test_side_ids_route_padding_to_the_sink_and_draw_one_set_of_negatives_per_group():
    rows = _rows(50, 8, np.random.default_rng(0))
    sgns = SkipGram(rows, train_config(window=5, negative=3, batch_size=32, negatives="shared"))
    context = np.arange(32, dtype=np.int32)
    real = np.arange(32) < 20
    batch = next(sgns.batches(context[:20], context[:20], seed=1))
    assert batch["negatives"].shape == (2, 3)   # one draw of 3 per group of 16
    ids = sgns.side_ids({k: tf.constant(v) for k, v in batch.items()}, None, tf.constant(real), sink=50).numpy()
    assert ids.shape == (32 + 2 * 3,)
    np.testing.assert_array_equal(ids[:32], np.where(real, context, 50))
    np.testing.assert_array_equal(ids[32:], batch["negatives"].ravel())
    assert ((ids[32:] >= 0) & (ids[32:] < 50)).all()

    per_pair = SkipGram(rows, train_config(window=5, negative=3, batch_size=32, negatives="per-pair"))
    batch = next(per_pair.batches(context[:20], context[:20], seed=1))
    assert batch["negatives"].shape == (32, 3)
    ids = per_pair.side_ids({k: tf.constant(v) for k, v in batch.items()}, None, tf.constant(real), sink=50).numpy()
    assert ids.shape == (32, 4) and (ids[~real] == 50).all() and (ids[real, 0] == context[real]).all()
    np.testing.assert_array_equal(ids[real, 1:], batch["negatives"][real])


def test_a_chunks_negatives_follow_from_its_random_state():
    # A resumed run restores the chunk's random state and makes its batches again: the same negatives.
    rows = _rows(500, 8, np.random.default_rng(0))
    sgns = SkipGram(rows, train_config(window=5, negative=5, batch_size=64))
    chunk = IdChunk(np.random.default_rng(1).integers(0, 500, 2000).astype(np.int32), np.zeros(2000, np.int32), 2000)

    def negatives(state):
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        return np.concatenate([b["negatives"] for b in sgns.batches(*sgns.units(chunk, rng))])

    state = np.random.default_rng(7).bit_generator.state
    first = negatives(state)
    assert first.shape[0] >= 2000 and len(np.unique(first)) > 100
    np.testing.assert_array_equal(negatives(state), first)
    assert not np.array_equal(negatives(np.random.default_rng(8).bit_generator.state), first)


class OnePass:
    """A corpus that can be read once only."""

    def __init__(self, lines):
        self.lines, self.reads = lines, 0

    def __iter__(self):
        self.reads += 1
        if self.reads > 1:
            raise AssertionError("the corpus was read again")
        return iter(self.lines)


def test_later_epochs_take_the_corpus_ids_from_the_first():
    vectors = glove(5000)
    corpus = Corpus(LINES)
    config = make_config(epochs=3, window=5)
    sgns = SkipGram(_rows(1, 50, np.random.default_rng(0)), resolve(config).train)   # objectives get resolved configs
    index = {w: i for i, w in enumerate(vectors.words)}
    corpus.sentences = OnePass(LINES)
    first = list(sgns.chunks(corpus, index))
    again = list(sgns.chunks(corpus, index))
    assert corpus.sentences.reads == 1 and len(first) == len(again)
    for a, b in zip(first, again):
        assert a is b


DETERMINISTIC_RUNS = """
import numpy as np
from embedtune.corpus import Corpus, IdChunk
from embedtune.training import train
from train_fixtures import bits, glove, make_config, sample_lines

vectors = glove(20000)
runs = [train(vectors, Corpus(sample_lines(30)), make_config(
            {"freeze_top": 100}, epochs=2, batch_size=512, seed=5, deterministic=True, threads=threads,
            negatives=negatives)).vectors.matrix
        for negatives in ("shared", "per-pair") for threads in (2, 2, 1)]
print(*(np.array_equal(bits(runs[i]), bits(runs[j])) for i, j in ((0, 1), (0, 2), (3, 4), (3, 5))))
"""


def test_deterministic_runs_with_either_negatives_and_any_threads_give_the_same_bits(deterministic_runs):
    assert deterministic_runs[0].split() == ["True"] * 4


GROUPED_RUNS = """
import embedtune.training.batches as batches
import embedtune.training as training

def run(group, **settings):
    batches.GROUP = group
    result = training.train(vectors, Corpus(sample_lines(30)), make_config(
        {"freeze_top": 100}, epochs=2, batch_size=256, seed=5, deterministic=True, **settings))
    return bits(result.vectors.matrix), result.stats["steps"], result.stats["loss_history"]
for settings in ({"negatives": "per-pair"}, {"negatives": "shared"}, {"objective": "glove"}):
    (a, steps, losses), (b, _, losses_b) = run(10, **settings), run(10**9, **settings)
    print(steps > 20, np.array_equal(a, b), losses == losses_b)
"""


@pytest.fixture(scope="module")
def deterministic_runs() -> list[str]:
    """The lines both scripts print, run one after the other in a process of their own: op determinism,
    once on, stays on for the whole process (GROUPED_RUNS changes the grouping only after the first)."""
    result = subprocess.run([sys.executable, "-c", DETERMINISTIC_RUNS + GROUPED_RUNS], capture_output=True,
                            text=True, cwd=Path(__file__).parent, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_batches_grouped_into_one_call_give_the_bits_of_one_call_per_batch(deterministic_runs):
    # GROUP batches per tf.function call, against one call per batch (a group never fills up):
    # the same updates in the same order, so the same bits and the same losses.
    assert " ".join(deterministic_runs[1:]).split() == ["True"] * 9


# ---------------------------------------------------------------------------------------------
# the command line


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("speed_options")
    vectors = folder / "glove.5k.txt"
    write_glove_text(glove(5000), vectors)
    corpus = folder / "news.txt"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:30]) + "\n", encoding="utf-8")
    return {"vectors": vectors, "corpus": corpus}


@pytest.mark.parametrize("options", [["--threads", "1", "--negatives", "per-pair"], ["--threads", "2"],
                                     pytest.param(["--threads", "0", "--negatives", "shared"],
                                                  marks=pytest.mark.xdist_group("sgns-shared-kernel"))])
def test_threads_and_negatives_are_accepted(files, tmp_path, options):
    out = tmp_path / "out.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", out, "--objective", "sgns", "--epochs", "1",
                  "--batch-size", "512", "--freeze-top", "1000", "--json", tmp_path / "summary.json", *options])
    assert result.exit_code == 0, result.stderr
    assert out.exists()


@pytest.mark.parametrize("options, message", [
    (["--threads", "-1"], "Error: --threads must be 0 (all cores) or positive, got -1"),
    (["--threads", "100000"], "Error: --threads must be at most 1,024, got 100000"),
])
def test_a_bad_thread_count_is_a_one_line_error(files, tmp_path, options, message):
    out = tmp_path / "out.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", out, *options])
    assert result.exit_code == 2 and result.stderr.strip().splitlines()[-1] == message   # out of range: usage
    assert not out.exists()


@pytest.mark.parametrize("args, part", [(["--threads", "two"], "'two' is not a valid integer"),
                                        (["--negatives", "some"], "'some' is not one of 'shared', 'per-pair'")])
def test_option_syntax_errors_are_usage_errors(files, tmp_path, args, part):
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", *args])
    assert result.exit_code == 2 and part in result.stderr


@pytest.mark.parametrize("text, message", [
    ('[train]\nthreads = -2\n', "'train.threads' must be 0 (all cores) or positive, got -2"),
    ('[train]\nnegatives = "all"\n', "'train.negatives' must be one of shared, per-pair, got 'all'"),
    ('[train]\nthreads = "many"\n', "key 'train.threads' must be an integer"),
])
def test_config_keys_are_checked(files, tmp_path, text, message):
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", "--config", config])
    assert result.exit_code == 1 and message in result.stderr, result.stderr
