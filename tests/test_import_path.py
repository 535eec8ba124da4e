"""A plain compiled run imports no TensorFlow (issue 26, item 2): what a run will use is said ahead
(training.step.runs_on), the trainer's TensorFlow side is made only when asked for, the loss is summed
as tf.add_n sums it without it, and the plan's rows get their corpus counts in time that follows the
corpus, not the vectors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from embedtune.config import Config, TrainConfig, resolve
from embedtune.objectives import objective_class
from embedtune.plan import Plan, make_plan
from embedtune.training.checkpoints import _sum
from embedtune.training.step import runs_on
from embedtune.vectors import Vectors

from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS


def test_a_plain_compiled_run_imports_no_tensorflow_and_sets_its_threads_when_it_does(tmp_path):
    """In a fresh interpreter: the default sgns run (the compiled step, lock-free) trains and writes
    without TensorFlow in sys.modules; the thread pools it asked for wait for TensorFlow's import
    (applied here to a stand-in, so that the test does not pay for the import)."""
    (tmp_path / "glove.txt").write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:3000]))
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:300]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = textwrap.dedent(f"""
        import json, sys, types
        from embedtune import _tf, fine_tune
        out = fine_tune({str(tmp_path / 'glove.txt')!r}, {str(tmp_path / 'corpus.txt')!r}, objective="sgns",
                        freeze_top=1000, epochs=1, threads=1, seed=1)
        asked = []
        threading = types.SimpleNamespace(set_intra_op_parallelism_threads=asked.append,
                                          set_inter_op_parallelism_threads=asked.append)
        pending = sorted(_tf._on_import)
        _tf._on_import["threads"](types.SimpleNamespace(config=types.SimpleNamespace(threading=threading)))
        print(json.dumps({{"tensorflow": "tensorflow" in sys.modules, "rows": len(out), "pending": pending,
                          "threads": asked}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"tensorflow": False, "rows": result["rows"], "pending": ["threads"], "threads": [1, 1]}
    assert result["rows"] > 3000


@pytest.mark.parametrize("objective, settings, expected", [
    ("sgns", {}, (True, False)),                                   # the plain compiled run
    ("sgns", {"deterministic": True}, (True, False)),              # the batch-synchronous kernel
    ("sgns", {"optimizer": "adam"}, (False, True)),                # TensorFlow's step
    ("sgns", {"checkpoint_dir": "ckpt"}, (True, True)),            # tf.train.Checkpoint
    ("sgns", {"logdir": "logs"}, (True, True)),                    # TensorBoard
    ("glove", {}, (False, True)),
])
def test_runs_on_says_ahead_what_a_run_uses(objective, settings, expected):
    train = resolve(Config(train=TrainConfig(objective=objective, **settings))).train
    assert runs_on(objective_class(objective), train) == expected
    assert runs_on(objective_class(objective), train, one_process=False) == (False, True)


def test_classify_whose_report_reads_its_tables_uses_tensorflow():
    train = resolve(Config(train=TrainConfig(objective="classify", optimizer="sgd"))).train
    assert runs_on(objective_class("classify"), train)[1] is True


def test_compiled_losses_are_summed_as_tf_add_n_sums_them():
    from embedtune._tf import tf

    rng = np.random.default_rng(0)
    for n in range(1, 42):
        losses = [np.float32(x) for x in rng.standard_normal(n) * 10.0 ** rng.integers(0, 7, n)]
        mine = _sum(losses)
        assert isinstance(mine, np.float32)
        assert mine.tobytes() == np.float32(tf.add_n(losses).numpy()).tobytes(), n


def test_row_counts_through_the_index_are_the_word_by_word_counts():
    words = [f"w{i}" for i in range(50)]
    vectors = Vectors(words, np.zeros((50, 2), np.float32))
    from embedtune.config import VocabConfig

    plan = make_plan(vectors, ["new1", "new2"], VocabConfig(freeze_top=10))
    counts = {"w3": 4, "w49": 1, "new2": 7, "absent": 9}
    expected = np.array([counts.get(w, 0) for w in plan.words], np.int64)
    assert np.array_equal(plan.row_counts(counts), expected)
    # Without an index (a plan made by hand), and with a word the vectors repeat: word by word.
    bare = Plan(words=plan.words, frozen=plan.frozen, n_pretrained=50)
    assert np.array_equal(bare.row_counts(counts), expected)
    repeated = Vectors(words[:-1] + ["w3"], np.zeros((50, 2), np.float32))
    plan = make_plan(repeated, [], VocabConfig())
    assert plan.row_counts(counts).tolist() == [counts.get(w, 0) for w in plan.words]
