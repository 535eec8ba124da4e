"""classify's compiled step (embedtune/kernels/classify.py) against TensorFlow's step.

Both take the same batches from the same tables: after a few steps the tables and the optimizer's
state must agree within float32 rounding, for each optimizer, with and without word n-grams and a cap,
softmax and one-vs-all; frozen rows are never written; the bits do not depend on the thread count;
an anchor (a proximal step the kernel has not) leaves the step to TensorFlow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedtune import kernels
from embedtune.config import resolve
from embedtune.corpus.labelled import LabelledCorpus
from embedtune.training.checkpoints import Checkpoints
from embedtune.training.loop import setup
from embedtune.training.step import TensorFlowStep
from embedtune.training.strategy import OneProcess

from train_fixtures import REPO, SAMPLE_VECTORS, bits, glove, make_config, run, with_paths

TRAIN = REPO / "data" / "sample" / "wordnet-glosses.train.txt"
FREEZE_TOP = 3000


def make_trainer(kernel: bool, monkeypatch, path=TRAIN, threads: int = 2, compiled: bool | None = None,
                 strategy=None, note=None, **train):
    """A classify trainer set up on the sample (GloVe's FREEZE_TOP most frequent rows frozen), no step taken;
    compiled steps on with ``kernel``, and its step the compiled one where ``compiled`` (default: ``kernel``)."""
    monkeypatch.setattr(kernels, "KERNEL", kernel)
    vectors = glove(20000)
    config = resolve(with_paths(make_config({"freeze_top": FREEZE_TOP, "min_count": 1000000}, objective="classify",
                                            batch_size=128, threads=threads, seed=4, **train), corpus=str(path)))
    with LabelledCorpus(str(path), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        trainer = setup(vectors, corpus, config, Checkpoints(None, 0), note=note, strategy=strategy).trainer
    assert trainer.uses_kernel == (kernel if compiled is None else compiled)
    return trainer, vectors


def some_batches(trainer, n: int) -> list[dict]:
    obj = trainer.objective
    made = list(obj.batches(np.random.default_rng(1).permutation(obj.n_lines)))
    assert len(made) > n and made[-1]["pairs"] < obj.lines_per_batch   # the last one is padded
    return made[: n - 1] + [made[-1]]


def run_steps(trainer, batches, lrs) -> list[float]:
    return [float(loss) for loss in trainer.run([trainer.prepare(b) for b in batches], lrs)]


def state(trainer) -> dict[str, np.ndarray]:
    """The tables and every optimizer variable, as the variables hold them (the kernel's synced)."""
    out = {"trainable": trainer.trainable.numpy(), "side": trainer.side.numpy()}
    for table, opt in (("word", trainer.word_opt), ("side", trainer.side_opt)):
        out.update({f"{table}_{name}": np.asarray(var.numpy()) for name, var in opt.variables().items()})
    return out


def assert_adam_steps_as_tensorflow(k_trainer, tf_trainer, batches, lrs) -> None:
    """Step both trainers a batch at a time: the losses and adam's moments must agree to float32 rounding,
    and each row's move as far as those moments allow.

    Adam moves a value by c * m / (sqrt(v) + eps), whatever the gradient's size. Where a value's gradients
    cancel across lines and steps (m far below sqrt(v)), the gradient's float32 rounding, which differs by
    machine (TensorFlow's vectorised sigmoid and sums; the kernel works in float64), is a large part of m,
    and so of the move. A fixed tolerance on the move held on one machine and not on another; what holds
    everywhere is that the moves differ by no more than the moments' differences carry through that
    formula (first order, with room for the float32 rounding of the update itself)."""
    before = state(k_trainer)
    allowed = {name: np.zeros_like(before[name]) for name in ("trainable", "side")}
    for t, (batch, lr) in enumerate(zip(batches, lrs), start=1):
        k_old, tf_old = state(k_trainer), state(tf_trainer)
        np.testing.assert_allclose(run_steps(k_trainer, [batch], [lr]), run_steps(tf_trainer, [batch], [lr]),
                                   rtol=2e-5)
        k_new, tf_new = state(k_trainer), state(tf_trainer)
        for table, opt in (("trainable", "word"), ("side", "side")):
            m, v = tf_new[f"{opt}_m"], tf_new[f"{opt}_v"]
            dm, dv = np.abs(k_new[f"{opt}_m"] - m), np.abs(k_new[f"{opt}_v"] - v)
            for name, value, diff in ((f"{opt}_m", m, dm), (f"{opt}_v", v, dv)):
                # The moments are sums of gradients (and their squares): no amplification there.
                assert (diff <= 2e-3 * np.abs(value) + 1e-5 * np.abs(value).max()).all(), (name, t, diff.max())
            assert k_new[f"{opt}_iterations"] == tf_new[f"{opt}_iterations"] == t
            opt_obj = tf_trainer.word_opt if opt == "word" else tf_trainer.side_opt
            c = lr * np.sqrt(1 - opt_obj.beta_2 ** t) / (1 - opt_obj.beta_1 ** t)
            root = np.sqrt(v) + opt_obj.epsilon
            stepped = (v != tf_old[f"{opt}_v"]) | (k_new[f"{opt}_v"] != k_old[f"{opt}_v"])
            carried = c * (dm / root + np.abs(m) * dv / (2 * np.maximum(np.sqrt(v), 1e-30) * root ** 2))
            allowed[table] += np.where(stepped, carried + 1e-6 * c, 0)
    k_state, tf_state = state(k_trainer), state(tf_trainer)
    for name in ("trainable", "side"):
        # The sinks apart (the TF path may write frozen words' and padding's slices there).
        k_moved, tf_moved = (k_state[name] - before[name])[:-1], (tf_state[name] - before[name])[:-1]
        # Each step also rounds the value it writes: half a unit in the last place of the value a step.
        written = len(batches) * np.spacing(np.maximum(np.abs(before[name]), np.abs(tf_state[name])))[:-1]
        excess = np.abs(k_moved - tf_moved) - (2 * allowed[name][:-1] + 2e-6 * np.abs(tf_moved) + written)
        assert (excess <= 0).all(), (name, np.unravel_index(np.argmax(excess), excess.shape), excess.max())
        assert (tf_moved != 0).any(axis=1).sum() >= 20, name


CASES = {
    "adam": dict(optimizer="adam", lr=0.01),
    "adam-ngrams": dict(optimizer="adam", lr=0.01, word_ngrams=2),
    "adagrad-capped": dict(optimizer="adagrad", lr=0.2, clip_norm=0.05),
    "sgd-ngrams": dict(optimizer="sgd", lr=0.05, word_ngrams=3),
}


@pytest.mark.parametrize("case", CASES)
def test_the_kernel_steps_as_tensorflows_step_within_float32_rounding(case, monkeypatch):
    train = CASES[case]
    tf_trainer, vectors = make_trainer(False, monkeypatch, **train)
    batches = some_batches(tf_trainer, 5)
    k_trainer, _ = make_trainer(True, monkeypatch, **train)
    before = state(k_trainer)
    lrs = [train["lr"] * f for f in (1.0, 0.9, 0.8, 1.0, 0.5)]
    if train["optimizer"] == "adam":
        assert_adam_steps_as_tensorflow(k_trainer, tf_trainer, batches, lrs)
    else:
        tf_losses = run_steps(tf_trainer, batches, lrs)
        np.testing.assert_allclose(run_steps(k_trainer, batches, lrs), tf_losses, rtol=2e-5)
        tf_state, k_state = state(tf_trainer), state(k_trainer)
        assert tf_state.keys() == k_state.keys()
        for name, value in k_state.items():
            # The change from the start, so that the step's rounding shows; the sinks apart.
            np.testing.assert_allclose((value - before[name])[:-1], (tf_state[name] - before[name])[:-1],
                                       rtol=2e-3, atol=2e-6, err_msg=name)
    k_state = state(k_trainer)
    moved = (k_state["trainable"] != before["trainable"]).any(axis=1)
    assert moved.sum() > 200 and (k_state["side"] != before["side"]).any(axis=1).sum() >= len(k_trainer.objective.labels)
    # The sinks: the TF path may write frozen words' and padding's slices there; the kernel nothing.
    np.testing.assert_array_equal(k_state["trainable"][-1], before["trainable"][-1])
    np.testing.assert_array_equal(k_state["side"][-1], before["side"][-1])
    # Frozen words were read in every batch, yet their rows kept their bits.
    np.testing.assert_array_equal(bits(vectors.matrix[:FREEZE_TOP]), bits(glove(20000).matrix[:FREEZE_TOP]))


def test_one_vs_all_steps_as_tensorflow(tmp_path, monkeypatch):
    """Lines with several labels: sigmoid cross-entropy a label (one-vs-all), the kernel as TensorFlow."""
    lines = TRAIN.read_text().splitlines()
    several = tmp_path / "several.txt"
    # Every third line also carries the next line's first label.
    several.write_text("\n".join(line if i % 3 else line.split()[0] + " " + lines[(i + 1) % len(lines)].split()[0]
                                 + " " + " ".join(line.split()[1:])
                                 for i, line in enumerate(lines)) + "\n")
    tf_trainer, _ = make_trainer(False, monkeypatch, path=several, optimizer="adam", lr=0.01)
    assert tf_trainer.objective.one_vs_all
    batches = some_batches(tf_trainer, 3)
    k_trainer, _ = make_trainer(True, monkeypatch, path=several, optimizer="adam", lr=0.01)
    assert_adam_steps_as_tensorflow(k_trainer, tf_trainer, batches, [0.01] * 3)


@pytest.mark.parametrize("deterministic", [False, True])
def test_the_kernels_bits_do_not_depend_on_its_threads_nor_on_its_form(monkeypatch, deterministic):
    """The parallel form (a large run's) on 1, 2 and 3 threads, and the serial twin a small run takes
    (kernels/classify.py, SERIAL_LINE_EPOCHS): the same losses, tables and state, bit for bit."""
    import embedtune.kernels.classify as kernel

    results = []
    for threads, serial in ((1, False), (2, False), (3, False), (2, True)):
        monkeypatch.setattr(kernel, "SERIAL_LINE_EPOCHS", 10 ** 12 if serial else 0)
        trainer, _ = make_trainer(True, monkeypatch, threads=threads, optimizer="adam", lr=0.01, word_ngrams=2,
                                  deterministic=deterministic)
        assert ("_serial" in trainer.kernel.step_fn.py_func.__name__) == serial
        losses = run_steps(trainer, some_batches(trainer, 4), [0.01] * 4)
        results.append((losses, {name: bits(value) for name, value in state(trainer).items()}))
    for losses, tables in results[1:]:
        assert losses == results[0][0]
        for name, value in tables.items():
            np.testing.assert_array_equal(value, results[0][1][name], err_msg=name)


def test_an_anchor_leaves_the_step_to_tensorflow_and_says_so(monkeypatch):
    notes = []
    trainer, _ = make_trainer(True, monkeypatch, compiled=False, note=notes.append, anchor=0.5)
    assert trainer.kernel is None and trainer.anchor == 0.5
    assert notes == ["--anchor: classify steps through TensorFlow's step, not its compiled one"]


class TensorFlowMerging(OneProcess):
    """A strategy whose batches can repeat a row (a multi-worker step's gathered slices): TensorFlow's step."""

    def make_step(self, trainer, words, side, note):
        return TensorFlowStep(trainer, fused=False, grouped=False, distinct=False)


def test_a_worker_steps_through_tensorflow(monkeypatch):
    """A strategy's own step is the run's, chosen at set-up: the step goes through TensorFlow, and batches are
    tensors; the objective's compiled step is never built."""
    trainer, _ = make_trainer(True, monkeypatch, compiled=False, strategy=TensorFlowMerging())
    assert not trainer.uses_kernel and trainer.kernel is None and not trainer.step.distinct
    assert not isinstance(trainer.prepare(some_batches(trainer, 2)[0])["word"], np.ndarray)


def test_workers_batches_join_into_one_of_distinct_rows_that_the_kernel_steps(monkeypatch):
    """Several workers' batches (the gathered step, and its emulation in tests/debug_worker.py) can hold the same
    word: joined (Classify.join), each word is one row of the batch and every token keeps its word and its
    line, so the kernel, which updates each of a batch's rows once, takes the joined batch. A part that is
    padding (a worker whose share has ended) adds no counted token and no line to the loss."""
    from debug_worker import Shares

    trainer, _ = make_trainer(True, monkeypatch, strategy=Shares(2))
    objective = trainer.objective
    parts = [objective.worker_part(k, 2) for k in range(2)]
    raws = [next(iter(part.batches(part.units(None, np.random.default_rng(k))[0]))) for k, part in enumerate(parts)]
    shared = set(raws[0]["word"][raws[0]["weight"] > 0]) & set(raws[1]["word"][raws[1]["weight"] > 0])
    assert len(shared) > 10   # the same words in both parts ("the", "of"): merged
    for batches in (raws, [raws[0], parts[1].padding_batch()]):
        joined = objective.join(batches)
        real = joined["word"][joined["weight"] > 0]
        assert (np.diff(real) > 0).all() and joined["weight"][-1] == 0   # distinct, sorted; padding last
        lines = len(batches[0]["targets"])
        assert joined["pairs"] == sum(b["pairs"] for b in batches) and len(joined["targets"]) == 2 * lines
        for k, batch in enumerate(batches):
            tokens = slice(k * len(batch["slot"]), (k + 1) * len(batch["slot"]))
            counted = batch["weight"][batch["slot"]] > 0
            np.testing.assert_array_equal(joined["word"][joined["slot"][tokens]][counted],
                                          batch["word"][batch["slot"]][counted])
            assert (joined["slot"][tokens][~counted] == len(joined["word"]) - 1).all()
            np.testing.assert_array_equal(joined["segment"][tokens][counted], batch["segment"][counted] + k * lines)
        assert len(real) == len(set(batches[0]["word"][batches[0]["weight"] > 0]) |
                                set(batches[1]["word"][batches[1]["weight"] > 0]))
        assert np.isfinite(trainer.run([trainer.prepare(joined)], [0.01])[0])


def test_the_dry_runs_memory_estimate_counts_the_kernels_copies():
    """The kernel steps numpy copies of the side table and of the optimizer's state (adam: two)."""
    def parts(*options):
        result = run(["train", SAMPLE_VECTORS, TRAIN, "-o", "-", "--objective", "classify", "--dry-run", "--json",
                      "--min-count", 1000000, "--optimizer", "adam", *options])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["memory_parts_bytes"]

    adam, anchored = parts(), parts("--anchor", "0.5")
    assert adam["optimizer_slots"] == 2 * (adam["trainable_rows"] // 2 + adam["side_table"])
    assert adam["compiled_step_copies"] == 3 * adam["side_table"] + adam["trainable_rows"]   # two slots of the rows
    assert anchored["compiled_step_copies"] == 0   # the anchor's step is TensorFlow's


@pytest.mark.parametrize("one_vs_all", [False, True])
def test_the_classifier_fits_loss_and_gradient_are_the_cross_entropys(one_vs_all):
    """The compiled loss and gradient of the classifier-alone fit against float64 numpy, whatever the
    threads (the same bits), and a fit by two shares against the fit of all the lines."""
    import numba

    from embedtune.kernels.classify import (SERIAL_LINES, classifier_scores, classifier_scores_serial, fit_kernel,
                                            fit_loss_grad, fit_loss_grad_serial, fit_loss_grad_serial_strict,
                                            fit_loss_grad_strict)
    from embedtune.objectives.classify.model import fit_classifier, fit_classifier_by_shares

    rng = np.random.default_rng(0)
    n, dim, L = 300, 7, 5
    X = rng.normal(size=(n, dim)).astype(np.float32)
    if one_vs_all:
        Y = (rng.random((n, L)) < 0.3).astype(np.float32)
    else:
        Y = np.zeros((n, L), np.float32)
        Y[np.arange(n), rng.integers(0, L, n)] = 1
    W, b = rng.normal(size=(L, dim)).astype(np.float32), rng.normal(size=L).astype(np.float32)
    Z = X.astype(np.float64) @ W.T.astype(np.float64) + b
    if one_vs_all:
        loss = np.sum(np.logaddexp(0, Z) - Y * Z)
        dz = 1 / (1 + np.exp(-Z)) - Y
    else:
        log_sum = np.log(np.exp(Z - Z.max(1, keepdims=True)).sum(1)) + Z.max(1)
        loss = np.sum(log_sum - (Y * Z).sum(1))
        dz = np.exp(Z - log_sum[:, None]) - Y
    got = []
    for threads in (1, 2):
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        got.append(fit_loss_grad(X, Y, W, b, one_vs_all))
    assert got[0][0] == got[1][0] and np.array_equal(got[0][1], got[1][1])
    # A small fit's serial twins (kernels/classify.py, SERIAL_LINES): the parallel forms' bits.
    for parallel, twin in ((fit_loss_grad, fit_loss_grad_serial), (fit_loss_grad_strict, fit_loss_grad_serial_strict)):
        a, c = parallel(X, Y, W, b, one_vs_all), twin(X, Y, W, b, one_vs_all)
        assert a[0] == c[0] and np.array_equal(a[1], c[1])
    assert fit_kernel(n, True) is fit_loss_grad_serial_strict and fit_kernel(SERIAL_LINES, False) is fit_loss_grad
    assert np.array_equal(classifier_scores(X, W, b), classifier_scores_serial(X, W, b))
    assert got[0][0] == pytest.approx(loss, rel=1e-5)
    np.testing.assert_allclose(got[0][1], np.concatenate([dz.T @ X, dz.sum(0)[:, None]], axis=1), rtol=1e-4, atol=1e-4)
    whole = fit_classifier(X, Y, one_vs_all, iterations=20)
    halves = fit_classifier_by_shares([(X[:100], Y[:100]), (X[100:], Y[100:])], one_vs_all, n,
                                      lambda arrays: np.sum(arrays, axis=0), iterations=20)
    for a, c in zip(whole, halves):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("one_vs_all", [False, True])
def test_the_classifier_fit_converges_within_its_iterations_on_inputs_far_from_zero(one_vs_all):
    """Pretrained rows' line means share a large common part beside their spread: the fit at its
    FIT_ITERATIONS reaches the loss of a fit run to convergence (within 0.2%), whatever that common part."""
    import scipy.special

    from embedtune.objectives.classify.model import FIT_ITERATIONS, FIT_L2, fit_classifier

    rng = np.random.default_rng(1)
    n, dim, L = 3000, 20, 6
    centres = rng.normal(size=(L, dim))
    gold = rng.integers(0, L, n)
    noise = rng.normal(size=(n, dim)) * 1.5
    if one_vs_all:
        Y = (rng.random((n, L)) < 0.1).astype(np.float32)
        Y[np.arange(n), gold] = 1
    else:
        Y = np.zeros((n, L), np.float32)
        Y[np.arange(n), gold] = 1

    def objective(X, W, b):
        Z = X.astype(np.float64) @ W.T + b
        if one_vs_all:
            loss = np.sum(np.logaddexp(0, Z) - Y * Z)
        else:
            loss = np.sum(scipy.special.logsumexp(Z, axis=1) - (Y * Z).sum(1))
        return loss / n + 0.5 * FIT_L2 * float(np.sum(W * W))

    for offset in (0.0, 6.0):   # a common part of the inputs as large as their spread, and none
        X = (0.4 * centres[gold] + noise + offset * rng.normal(size=dim)).astype(np.float32)
        quick = objective(X, *fit_classifier(X, Y, one_vs_all))
        converged = objective(X, *fit_classifier(X, Y, one_vs_all, iterations=20 * FIT_ITERATIONS))
        assert quick <= converged * 1.002, (offset, quick, converged)
