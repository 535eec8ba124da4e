"""A plain compiled run imports no TensorFlow (issue 26, item 2): what a run will use is said ahead
(training.step.runs_on), the trainer's TensorFlow side is made only when asked for, the compiled step's
optimizer state starts in numpy as TensorFlow's variables start, classify's report reads the step's numpy
tables, the loss is summed as tf.add_n sums it without it, and the plan's rows get their corpus counts in
time that follows the corpus, not the vectors. A command's help and its early errors import neither numba nor
TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from embedtune.config import Config, resolve, train_config
from embedtune.objectives import objective_class
from embedtune.plan.rules import Plan, make_plan
from embedtune.training.progress import _sum
from embedtune.training.step import runs_on
from embedtune.vectors import Vectors

from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

TESTS = Path(__file__).parent


def _classify(tmp: str, name: str, **options) -> list:
    """classify with adam (two state slots a row) on the files test_a_plain_compiled_run writes: its output,
    its classifier, its --valid scores after training and its steps."""
    import dataclasses

    from embedtune.config import from_options
    from embedtune.run import run

    config = from_options(dict(objective="classify", valid=f"{tmp}/valid.txt", freeze_top=1000, epochs=2, threads=1,
                                 optimizer="adam", save_classifier=f"{tmp}/{name}.cls", **options))
    config = dataclasses.replace(config, vectors=f"{tmp}/glove.txt", corpus=f"{tmp}/train.txt", output=f"{tmp}/{name}.txt")
    stats = run(config).stats
    files = [open(f"{tmp}/{name}.{ext}", "rb").read().hex() for ext in ("txt", "cls")]
    return [*files, stats["valid"]["after"], stats["steps"]]


def test_a_plain_compiled_run_imports_no_tensorflow_and_sets_its_threads_when_it_does(tmp_path):
    """In a fresh interpreter: the default sgns and glove runs (the compiled steps, lock-free; sgns writing
    TensorBoard's scalars, glove checkpoints, the step's own arrays) and a classify run with adam (its state, the classifier's report and
    --valid scores, --save-classifier) train and write without TensorFlow in sys.modules; the thread pools
    it asked for wait for TensorFlow's import (applied here to a stand-in, so that the test does not pay for
    the import). Then, here, classify again with checkpoints (its tables and adam's state written as
    they are, mid-run): the same bytes out."""
    (tmp_path / "glove.txt").write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:3000]))
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:300]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for part, n in (("train", 800), ("valid", 150)):
        glosses = (SAMPLE_VECTORS.parent / f"wordnet-glosses.{part}.txt").read_bytes().splitlines(keepends=True)
        (tmp_path / f"{part}.txt").write_bytes(b"".join(glosses[:n]))
    code = textwrap.dedent(f"""
        import json, sys, types
        sys.path.insert(0, {str(TESTS)!r})
        from embedtune import _tf, fine_tune
        from test_import_path import _classify
        tmp = {str(tmp_path)!r}
        out = fine_tune(tmp + "/glove.txt", tmp + "/corpus.txt", objective="sgns",
                        freeze_top=1000, epochs=1, threads=1, seed=1, logdir=tmp + "/logs")
        fine_tune(tmp + "/glove.txt", tmp + "/corpus.txt", objective="glove", freeze_top=1000, epochs=1, threads=1,
                  seed=1, checkpoint_dir=tmp + "/glove-checkpoints", checkpoint_every=2)
        plain = _classify(tmp, "plain")
        asked = []
        threading = types.SimpleNamespace(set_intra_op_parallelism_threads=asked.append,
                                          set_inter_op_parallelism_threads=asked.append)
        pending = sorted(_tf._on_import)
        _tf._on_import["threads"](types.SimpleNamespace(config=types.SimpleNamespace(threading=threading)))
        print(json.dumps({{"tensorflow": "tensorflow" in sys.modules, "rows": len(out), "pending": pending,
                          "threads": asked, "classify": plain}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    plain = result.pop("classify")
    assert result == {"tensorflow": False, "rows": result["rows"], "pending": ["threads"], "threads": [1, 1]}
    assert result["rows"] > 3000
    events = sorted((tmp_path / "logs").glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 500, events   # a point's five scalars, a record each
    saved = sorted((tmp_path / "glove-checkpoints").glob("ckpt-*"))
    assert saved and all(sorted(os.listdir(c)) == ["state.json", "tables.npz"] for c in saved), saved
    synced = _classify(str(tmp_path), "synced", checkpoint_dir=str(tmp_path / "checkpoints"), checkpoint_every=3)
    assert synced == plain
    assert plain[-1] > 3   # checkpoints were saved (the tables and adam's state as they were) before the end


@pytest.mark.parametrize("objective, settings, expected", [
    ("sgns", {}, (True, False)),                                   # the plain compiled run
    ("sgns", {"deterministic": True}, (True, False)),              # the batch-synchronous kernel
    ("sgns", {"optimizer": "adam"}, (True, False)),                # the lazy kernel, adam's state in numpy
    ("sgns", {"anchor": 0.5}, (False, True)),                      # TensorFlow's step
    ("sgns", {"checkpoint_dir": "ckpt"}, (True, False)),           # the step's own arrays (tables.npz)
    ("sgns", {"logdir": "logs"}, (True, False)),                   # TensorBoard's scalars (training/eventfile.py)
    ("glove", {}, (True, False)),                                  # the lock-free kernel, adagrad's state in numpy
    ("glove", {"deterministic": True, "optimizer": "adam"}, (True, False)),
    ("classify", {}, (True, False)),                               # adam's state in numpy, the report too
    ("classify", {"optimizer": "adagrad", "word_ngrams": 2}, (True, False)),
    ("classify", {"anchor": 0.5}, (False, True)),                  # TensorFlow's step
    ("classify", {"checkpoint_dir": "ckpt"}, (True, False)),
])
def test_runs_on_says_ahead_what_a_run_uses(objective, settings, expected):
    train = resolve(Config(train=train_config(objective=objective, **settings))).train
    assert runs_on(objective_class(objective), train) == expected
    assert runs_on(objective_class(objective), train, one_process=False) == (False, True)


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam"])
def test_the_compiled_steps_state_starts_as_tensorflows_variables(name):
    """Names, order, dtypes, shapes and bits: the numpy state a compiled step starts from, and the
    variables TensorFlow's step (or a checkpoint) makes."""
    from embedtune._tf import tf
    from embedtune.training.optimizers import OPTIMIZERS, make_optimizer

    shape = (7, 3)
    variables = make_optimizer(name, tf.Variable(np.ones(shape, np.float32), name="table")).variables()
    state = OPTIMIZERS[name].initial_state(shape)
    assert list(state) == list(variables)
    for key, var in variables.items():
        value = var.numpy()
        assert (state[key].dtype, state[key].shape) == (value.dtype, value.shape), key
        assert state[key].tobytes() == value.tobytes(), key


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


def test_keras_loads_only_with_embedtune_keras():
    """`import embedtune` (and its options, config and plan) imports neither Keras nor TensorFlow; the
    Keras layer and optimizer come with `import embedtune.keras` (the README's one line)."""
    code = textwrap.dedent("""
        import json, sys
        import embedtune
        from embedtune.config import from_options
        from_options({"freeze_top": 3})
        light = [m for m in ("keras", "tensorflow") if m in sys.modules]
        from embedtune.keras import Embedding, LazyRows
        print(json.dumps({"light": light, "keras": "keras" in sys.modules, "layer": Embedding.__module__}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"light": [], "keras": True,
                                                                 "layer": "embedtune.keras.layer"}


@pytest.mark.parametrize("args", [
    pytest.param(["train", "--help"], id="train-help"),
    pytest.param(["train", str(SAMPLE_VECTORS), "no-such-corpus.txt", "-o", "out.txt", "--freeze-top", "10"],
                 id="train-missing-corpus"),
    pytest.param(["init", str(SAMPLE_VECTORS), "no-such-corpus.txt", "-o", "out.txt"], id="init-missing-corpus"),
    pytest.param(["convert", "no-such-vectors.txt", "out.bin"], id="convert-missing-input"),
    pytest.param(["inspect", "no-such-vectors.txt"], id="inspect-missing-input"),
    pytest.param(["diff", str(SAMPLE_VECTORS), "no-such-vectors.txt"], id="diff-missing-input"),
    pytest.param(["eval", "no-such-vectors.txt"], id="eval-missing-input"),
    pytest.param(["neighbors", "no-such-vectors.txt", "king"], id="neighbors-missing-input"),
])
def test_help_and_early_errors_load_no_compiler(args, tmp_path):
    """A command's help and its errors before any work (a missing file) answer without numba or TensorFlow:
    importing those (numba brings llvmlite and scipy.linalg) would be most of the answer's time (fa91047's message).
    Every command's options read embedtune.objectives, so a kernel module imported at its top level, or at any
    other module the options or the config read, would undo this silently."""
    code = textwrap.dedent(f"""
        import atexit, json, sys
        atexit.register(lambda: sys.stderr.write("\\nLOADED " + json.dumps(
            [m for m in ("numba", "llvmlite", "tensorflow") if m in sys.modules]) + "\\n"))
        sys.argv = ["embedtune", *{args!r}]
        from embedtune.cli.main import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == (0 if "--help" in args else 1), done.stderr[-2000:]
    if "--help" not in args:
        assert done.stderr.startswith("Error: ") and "Traceback" not in done.stderr, done.stderr[-2000:]
    loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED ")]
    assert loaded and json.loads(loaded[-1][len("LOADED "):]) == [], done.stderr[-2000:]


def test_a_kernel_command_loads_numpys_f2py_and_testing_only_when_read():
    """`embedtune eval` runs compiled kernels, so numba loads scipy.linalg, whose copy of numpy's namespace reads
    numpy.f2py and numpy.testing (kernels/lean_start.py): their code must not run, and must run whole when read."""
    code = textwrap.dedent(f"""
        import atexit, json, sys

        def after():
            watched = ("scipy.linalg", "numpy.f2py.f2py2e", "numpy.testing._private.utils")
            before = [m for m in watched if m in sys.modules]
            import numpy
            numpy.testing.assert_array_equal(numpy.zeros(2), numpy.zeros(2))
            from numpy.f2py import run_main
            after = [m for m in watched[1:] if m in sys.modules]
            sys.stderr.write("\\nLOADED " + json.dumps([before, after]) + "\\n")

        atexit.register(after)
        sys.argv = ["embedtune", "eval", {str(SAMPLE_VECTORS)!r}]
        from embedtune.cli.main import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED ")]
    assert loaded and json.loads(loaded[-1][len("LOADED "):]) == [
        ["scipy.linalg"], ["numpy.f2py.f2py2e", "numpy.testing._private.utils"]], done.stderr[-2000:]
