"""sgns's compiled step with a lazy optimizer or the cap (embedtune/kernels/sgns_lazy.py) against TensorFlow's step.

Both take the same batches (the host-drawn negatives, the same seed) from the same split tables: after several
steps the tables and the optimizer's state must agree within float32 rounding (adam, adagrad, sgd with the cap;
per-pair and shared negatives); frozen rows are never written and get no state; the bits do not depend on the
thread count; a checkpoint holds adam's slots and a resumed trainer continues bit for bit; such a run never
imports TensorFlow; adam's update of a row is TensorFlow's to the bit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit

from embedtune import kernels
from embedtune.config import resolve
from embedtune.corpus import Corpus
from embedtune.kernels.common import ADAM, _update, adam_rate
from embedtune.plan.rules import make_plan
from embedtune.training.optimizers import Adam
from embedtune.training.trainer import Trainer

from test_classify_kernel import assert_adam_steps_as_tensorflow, run_steps, state
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS, bits, glove, make_config, sample_lines

LINES = sample_lines(60)
FROZEN = ("the", "to", "of", "and", "a", "in", "said", "is")   # frequent: frozen centers in every batch
FREEZE_TOP = 200   # GloVe's 200 most frequent words frozen, FROZEN among them


def make_trainer(kernel: bool, monkeypatch, negatives: str = "per-pair", threads: int = 2, deterministic=True,
                 **train) -> tuple:
    """A trainer over the sample ("police" left out of GloVe: a new row), FROZEN frozen, no step taken; its
    step the compiled one with ``kernel``, else TensorFlow's."""
    monkeypatch.setattr(kernels, "KERNEL", kernel)
    vectors = glove(20000, drop=("police",))
    config = resolve(make_config({"freeze_top": FREEZE_TOP}, batch_size=512, sample=0.0, negatives=negatives, seed=3,
                                 context_init="word", threads=threads, deterministic=deterministic, **train))
    corpus = Corpus(LINES)
    counts, _, _ = corpus.count()
    trainer = Trainer(vectors.matrix, make_plan(vectors, ["police"], config.vocab), counts, config, corpus=corpus)
    assert set(FROZEN) <= {trainer.plan.words[r] for r in trainer.rows[trainer.n_trainable:]}
    assert trainer.uses_kernel == kernel
    assert kernel == (type(trainer.kernel).__name__ == "SgnsLazyKernel")
    return trainer, corpus, vectors


def batches_of(trainer, corpus, n: int) -> list[dict]:
    """The first n - 1 batches of the first chunk and its last one (padded), negatives drawn on the host."""
    objective = trainer.objective
    chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
    made = list(objective.batches(*objective.units(chunk, trainer.rng)))
    assert len(made) >= n and made[-1]["pairs"] < objective.batch_size and "negatives" in made[0]
    return made[: n - 1] + [made[-1]]


CASES = {
    "adam": dict(optimizer="adam", lr=0.01),
    "adam-shared-capped": dict(optimizer="adam", lr=0.01, clip_norm=0.05, negatives="shared"),
    "adagrad": dict(optimizer="adagrad", lr=0.1),
    "sgd-capped": dict(optimizer="sgd", lr=0.05, clip_norm=0.05),
}


@pytest.mark.parametrize("case", CASES)
def test_the_kernel_steps_as_tensorflows_step_within_float32_rounding(case, monkeypatch):
    """Six steps, the last batch padded, the rate changing (the loop's decay). Measured on this sample: the
    losses agree to 2e-7, the moments to 3e-7 of their values, adagrad's rows to 1e-6 of their moves; adam's
    moves to 2e-5 where a value's m is far below sqrt(v) (its rounding is then a large part of m), which
    ``assert_adam_steps_as_tensorflow`` bounds by what the moments' differences carry."""
    train = CASES[case]
    tf_trainer, corpus, _ = make_trainer(False, monkeypatch, **train)
    batches = batches_of(tf_trainer, corpus, 6)
    k_trainer, _, vectors = make_trainer(True, monkeypatch, **train)
    before = state(k_trainer)
    lrs = [train["lr"] * f for f in (1.0, 0.9, 0.8, 1.0, 0.5, 1.0)]
    if train["optimizer"] == "adam":
        assert_adam_steps_as_tensorflow(k_trainer, tf_trainer, batches, lrs)
    else:
        np.testing.assert_allclose(run_steps(k_trainer, batches, lrs), run_steps(tf_trainer, batches, lrs), rtol=2e-6)
        k_state, tf_state = state(k_trainer), state(tf_trainer)
        assert k_state.keys() == tf_state.keys()
        for name, value in k_state.items():
            # The change from the start, so that the step's rounding shows; the sinks apart.
            np.testing.assert_allclose((value - before[name])[:-1], (tf_state[name] - before[name])[:-1],
                                       rtol=1e-4, atol=1e-6, err_msg=name)
    k_state, tf_state = state(k_trainer), state(tf_trainer)
    tables = [name for name in k_state if k_state[name].ndim]   # adam's step counts apart
    for name in tables:
        # The same rows moved (a row a batch touched moves, and gets state, even where its gradient is zero).
        np.testing.assert_array_equal((k_state[name] != before[name]).any(axis=-1)[:-1],
                                      (tf_state[name] != before[name]).any(axis=-1)[:-1], err_msg=name)
    assert (k_state["trainable"] != before["trainable"]).any(axis=1).sum() > 400
    # The sinks: TensorFlow's step routes frozen words' and padding's slices there and drops them; the kernel
    # writes nothing there.
    for name in tables:
        np.testing.assert_array_equal(k_state[name][-1], before[name][-1], err_msg=name)
    # Frozen words were centers in every batch, yet their rows kept their bits; the word table (and its state)
    # holds the trainable rows only.
    frozen = [vectors.index[w] for w in FROZEN]
    np.testing.assert_array_equal(bits(vectors.matrix[frozen]), bits(glove(20000, drop=("police",)).matrix[frozen]))
    assert len(k_trainer.kernel.words) == k_trainer.n_trainable + 1
    assert all(len(v) == k_trainer.n_trainable + 1 for v in k_trainer.kernel.word_state.values() if v.ndim)


@pytest.mark.parametrize("deterministic", [True, False], ids=["strict", "fastmath"])
def test_the_kernels_bits_do_not_depend_on_its_threads(deterministic, monkeypatch):
    results = []
    for threads in (1, 2, 3):
        trainer, corpus, _ = make_trainer(True, monkeypatch, threads=threads, deterministic=deterministic,
                                          optimizer="adam", lr=0.01)
        losses = run_steps(trainer, batches_of(trainer, corpus, 4), [0.01] * 4)
        results.append((losses, {name: bits(value) for name, value in state(trainer).items()}))
    for losses, tables in results[1:]:
        assert losses == results[0][0]
        for name, value in tables.items():
            np.testing.assert_array_equal(value, results[0][1][name], err_msg=name)


def test_a_checkpoint_holds_adams_slots_and_a_resumed_trainer_continues_bit_for_bit(monkeypatch, tmp_path):
    trainer, corpus, _ = make_trainer(True, monkeypatch, optimizer="adam", lr=0.01)
    batches = batches_of(trainer, corpus, 4)
    run_steps(trainer, batches[:2], [0.01, 0.01])
    saved = trainer.tf_checkpoint().write(str(tmp_path / "ckpt"))
    at_save = {name: value.copy() for name, value in state(trainer).items()}
    assert at_save["word_iterations"] == 2 and (at_save["word_v"] != 0).any()
    run_steps(trainer, batches[2:], [0.01, 0.01])
    after = state(trainer)

    other, _, _ = make_trainer(True, monkeypatch, optimizer="adam", lr=0.01)
    other.tf_checkpoint().read(saved).assert_consumed()
    other.restored()
    kernel = other.kernel
    restored = {"trainable": kernel.words, "side": kernel.side,
                **{f"word_{k}": v for k, v in kernel.word_state.items()},
                **{f"side_{k}": v for k, v in kernel.side_state.items()}}
    for name, value in restored.items():
        np.testing.assert_array_equal(bits(np.asarray(value)), bits(at_save[name]), err_msg=name)
    run_steps(other, batches[2:], [0.01, 0.01])
    for name, value in state(other).items():
        np.testing.assert_array_equal(bits(value), bits(after[name]), err_msg=name)


def test_only_an_anchor_leaves_sgns_to_tensorflow_and_says_so(monkeypatch):
    monkeypatch.setattr(kernels, "KERNEL", True)
    vectors = glove(2000)
    corpus = Corpus(LINES)
    counts, _, _ = corpus.count()
    notes = []
    config = resolve(make_config({}, batch_size=512, optimizer="adam", anchor=0.1))
    trainer = Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus,
                      note=notes.append)
    assert not trainer.uses_kernel and trainer.kernel is None
    assert notes == ["--anchor: sgns steps through TensorFlow's step, not its compiled one"]


@njit
def _adam_rows(rows, grads, m, v, lr, adam_lr):
    """common._update (adam, no cap) on each row, compiled without fastmath (as --deterministic's kernels)."""
    for i in range(len(rows)):
        _update(rows[i], grads[i].copy(), m[i], v[i], ADAM, lr, adam_lr, np.float32(0))


def test_adams_row_update_is_tensorflows_to_the_bit():
    """The moments' constants as TensorFlow's step makes them (1 - beta rounded once to float32, not
    float32(1) - float32(beta), 1.3e-5 off for the second moment), the bias correction by the table's step
    count: five steps of one row, the same bits."""
    from embedtune._tf import tf

    rng = np.random.default_rng(0)
    start = rng.normal(0, 0.3, (4, 50)).astype(np.float32)
    table = tf.Variable(start)
    adam = Adam(table)
    rows, kernel_state = start.copy(), Adam.initial_state(start.shape)
    for step in range(5):
        grads = rng.normal(0, 10.0 ** -step, start.shape).astype(np.float32)
        lr = np.float32(0.01 * (1 - step / 10))
        adam.apply(tf.range(4), tf.constant(grads), tf.constant(lr))
        _adam_rows(rows, grads, kernel_state["m"], kernel_state["v"], lr, adam_rate(kernel_state, ADAM, lr))
    assert kernel_state["iterations"] == adam.iterations.numpy() == 5
    for name, ours, theirs in (("m", kernel_state["m"], adam.m), ("v", kernel_state["v"], adam.v),
                               ("rows", rows, table)):
        np.testing.assert_array_equal(bits(ours), bits(theirs.numpy()), err_msg=name)


def test_an_adam_run_takes_the_compiled_step_and_never_imports_tensorflow(tmp_path):
    """In a fresh interpreter (the path is chosen at set-up, TensorFlow's import ahead of it by runs_on):
    sgns with adam, the default (fastmath) and --deterministic, trains its rows, keeps every frozen row's
    bits, and leaves no ``tensorflow`` in sys.modules."""
    (tmp_path / "glove.txt").write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:3000]))
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:200]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        from embedtune import fine_tune
        from embedtune.formats import load_vectors
        tmp = {str(tmp_path)!r}
        start = load_vectors(tmp + "/glove.txt")
        moved = []
        for deterministic in (False, True):
            out = fine_tune(tmp + "/glove.txt", tmp + "/corpus.txt", objective="sgns", optimizer="adam",
                            freeze_top=1000, epochs=1, threads=2, seed=1, deterministic=deterministic)
            rows = np.array([out.index[w] for w in start.words])
            trained = out.matrix[rows]
            assert trained[:1000].tobytes() == start.matrix[:1000].tobytes(), "a frozen row moved"
            moved.append(int((trained[1000:] != start.matrix[1000:]).any(axis=1).sum()))
        print(json.dumps({{"tensorflow": "tensorflow" in sys.modules, "moved": moved}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tensorflow"] is False
    assert min(result["moved"]) > 500, result
