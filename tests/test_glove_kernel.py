"""glove's compiled steps (embedtune/kernels/glove.py) against TensorFlow's step.

The batch-synchronous kernel (--deterministic) and TensorFlow's step take the same batches from the same
tables: after a few steps the tables and the optimizer's state must agree within float32 rounding, for
each optimizer, with and without the cap and the anchor; frozen rows and frozen words' biases are never
written; the bits do not depend on the thread count. The lock-free kernel (without --deterministic): on
one thread glove.c's sequential per-pair loop (a plain Python reference), for each optimizer; on two, frozen rows untouched
and the loss over all pairs falling.
"""

from __future__ import annotations

import numpy as np
import pytest

from embedtune import kernels
from embedtune.config import resolve
from embedtune.corpus import Corpus
from embedtune.plan.rules import make_plan
from embedtune.training.optimizers import ADAGRAD_INITIAL_ACCUMULATOR, ADAM_BETA_1, ADAM_BETA_2, EPSILON
from embedtune.training.trainer import Trainer

from test_classify_kernel import state   # the tables and every optimizer variable, synced
from test_kernel import batches_of, run_steps   # a few of an epoch's batches, the last one padded; steps run
from train_fixtures import bits, glove, make_config, sample_lines

LINES = sample_lines(60)
FREEZE_TOP = 200   # GloVe's 200 most frequent words frozen: a frozen end in most batches
DROP = ("police",)   # left out of GloVe: a new row


def make_trainer(kernel: bool, monkeypatch, threads: int = 2, deterministic: bool = True, **train) -> Trainer:
    monkeypatch.setattr(kernels, "KERNEL", kernel)
    vectors = glove(20000, drop=DROP)
    config = resolve(make_config({"freeze_top": FREEZE_TOP}, objective="glove", batch_size=512, seed=3,
                                 threads=threads, deterministic=deterministic, **train))
    corpus = Corpus(LINES)
    counts, _, _ = corpus.count()
    trainer = Trainer(vectors.matrix, make_plan(vectors, list(DROP), config.vocab), counts, config, corpus=corpus)
    assert trainer.uses_kernel == kernel
    assert trainer.plan.words[trainer.rows[trainer.n_trainable - 1]] in DROP   # the new word trains
    return trainer


LRS = [0.1, 0.08, 0.05, 0.1, 0.02, 0.1]
CASES = {
    "adagrad-anchored": dict(),   # glove's defaults: adagrad at 0.1, the anchor 8
    "adagrad-capped-anchored": dict(clip_norm=0.05),
    "sgd-capped": dict(optimizer="sgd", lr=0.05, clip_norm=0.01, anchor=0.0),
    "adam-anchored": dict(optimizer="adam", lr=0.01, anchor=2.0),
}


@pytest.mark.parametrize("case", CASES)
def test_the_kernel_steps_as_tensorflows_step_within_float32_rounding(case, monkeypatch):
    tf_trainer = make_trainer(False, monkeypatch, **CASES[case])
    batches = batches_of(tf_trainer, None, len(LRS))
    k_trainer = make_trainer(True, monkeypatch, **CASES[case])
    before = state(k_trainer)
    n_trainable = k_trainer.n_trainable
    np.testing.assert_allclose(run_steps(k_trainer, batches, LRS), run_steps(tf_trainer, batches, LRS), rtol=2e-5)
    k_state, tf_state = state(k_trainer), state(tf_trainer)
    assert k_state.keys() == tf_state.keys()
    for name in k_state:
        if name.endswith("iterations"):
            assert k_state[name] == tf_state[name] == len(LRS)
            continue
        # Compared as the change from the start, so that the test sees the step's rounding, not the size
        # of the values; the sinks (last rows) apart: the TF path writes frozen and padding slices there.
        k_moved, tf_moved = (k_state[name] - before[name])[:-1], (tf_state[name] - before[name])[:-1]
        np.testing.assert_allclose(k_moved, tf_moved, rtol=1e-3, atol=2e-6, err_msg=name)
        assert (tf_moved != 0).any(axis=1).sum() > 500, name
    # Frozen words' biases (the side table from n_trainable on) are read, never written.
    np.testing.assert_array_equal(bits(k_state["side"][n_trainable:]), bits(before["side"][n_trainable:]))
    np.testing.assert_array_equal(k_state["trainable"][-1], before["trainable"][-1])


def test_the_kernels_bits_do_not_depend_on_its_threads(monkeypatch):
    tables = []
    for threads in (1, 2, 3):
        trainer = make_trainer(True, monkeypatch, threads=threads, clip_norm=0.05)
        run_steps(trainer, batches_of(trainer, None, len(LRS)), LRS)
        tables.append((bits(trainer.trained_matrix()), bits(trainer.side_matrix())))
    for words, side in tables[1:]:
        np.testing.assert_array_equal(words, tables[0][0])
        np.testing.assert_array_equal(side, tables[0][1])


def glove_c_reference(trainer, batches, lrs, anchor, optimizer="adagrad") -> tuple[np.ndarray, np.ndarray]:
    """glove.c's sequential per-pair loop in plain Python (float64), with the anchor's proximal pull a slice and
    frozen ends read, never written: the lock-free kernel on one thread. glove.c's AdaGrad, or sgd, or adam (its
    bias-corrected rate from the batch's count, as training/optimizers.py's)."""
    n_trainable, objective = trainer.n_trainable, trainer.objective
    words = trainer.trained_matrix().astype(np.float64)
    frozen = trainer.matrix[trainer.frozen_rows].astype(np.float64)
    side = trainer.side_matrix()[:, 0].astype(np.float64)
    start = words.copy()
    first = ADAGRAD_INITIAL_ACCUMULATOR if optimizer == "adagrad" else 0.0
    m = {"word": np.full(words.shape, first), "side": np.full(len(side), first)}
    v = {"word": np.zeros(words.shape), "side": np.zeros(len(side))}
    slices = np.maximum(objective.slices, 1.0)

    def step_size(table, r, g, lr, t):
        """The optimizer's update of ``table``'s row r by g (its state moved); the step size per value."""
        if optimizer == "sgd":
            return lr
        if optimizer == "adagrad":
            m[table][r] += g * g
            return lr / (np.sqrt(m[table][r]) + EPSILON)
        m[table][r] = ADAM_BETA_1 * m[table][r] + (1 - ADAM_BETA_1) * g
        v[table][r] = ADAM_BETA_2 * v[table][r] + (1 - ADAM_BETA_2) * g * g
        rate = lr * np.sqrt(1 - ADAM_BETA_2 ** t) / (1 - ADAM_BETA_1 ** t)
        return rate / (np.sqrt(v[table][r]) + EPSILON)

    for t, (batch, lr) in enumerate(zip(batches, lrs), 1):
        for b in range(batch["pairs"]):
            j, k = int(batch["row"][b]), int(batch["col"][b])
            wj = words[j] if j < n_trainable else frozen[j - n_trainable]
            wk = words[k] if k < n_trainable else frozen[k - n_trainable]
            error = objective.scale * wj @ wk + side[j] + side[k] - batch["target"][b]
            c = batch["f"][b] * error
            grads = {j: c * objective.scale * wk, k: c * objective.scale * wj}
            for r, g in ((j, grads[j]), (k, grads[k])):
                if r >= n_trainable:
                    continue
                step = step_size("word", r, g, lr, t)
                words[r] -= step * (m["word"][r] if optimizer == "adam" else g)
                pull = step * anchor / slices[r]
                words[r] = (words[r] + pull * start[r]) / (1 + pull)
                step = step_size("side", r, c, lr, t)
                side[r] -= step * (m["side"][r] if optimizer == "adam" else c)
    return words, side


# Each optimizer has its own lock-free kernel (kernels/glove.py compiles only the run's): each against the loop.
@pytest.mark.parametrize("optimizer, lr", [("adagrad", 0.1), ("sgd", 0.05), ("adam", 0.01)])
def test_the_lockfree_kernel_on_one_thread_is_glove_cs_sequential_loop(optimizer, lr, monkeypatch):
    trainer = make_trainer(True, monkeypatch, threads=1, deterministic=False, optimizer=optimizer, lr=lr)
    assert trainer.kernel.lockfree
    batches = batches_of(trainer, None, 3)
    lrs = [lr, lr / 2, lr * 0.8]
    words, side = glove_c_reference(trainer, batches, lrs, trainer.config.train.anchor, optimizer)
    run_steps(trainer, batches, lrs)
    np.testing.assert_allclose(trainer.trained_matrix(), words, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(trainer.side_matrix()[:-1, 0], side[:-1], rtol=1e-4, atol=2e-5)


def all_pairs_loss(trainer) -> float:
    """GloVe's loss over every batched pair at the tables as they are (numpy, float64)."""
    objective = trainer.objective
    rows = np.concatenate([trainer.trained_matrix(), trainer.matrix[trainer.frozen_rows]]).astype(np.float64)
    side = trainer.side_matrix()[:, 0].astype(np.float64)
    j, k = objective.row, objective.col
    error = objective.scale * np.einsum("nd,nd->n", rows[j], rows[k]) + side[j] + side[k] - objective.target
    return float(0.5 * np.sum(objective.weight * error * error))


def test_the_lockfree_kernel_on_two_threads_keeps_frozen_rows_and_lowers_the_loss(monkeypatch):
    trainer = make_trainer(True, monkeypatch, threads=2, deterministic=False, anchor=0.0)
    matrix = trainer.matrix.copy()
    side_before = trainer.side_matrix().copy()
    losses = [all_pairs_loss(trainer)]
    objective = trainer.objective
    for _ in range(3):
        chunk = next(iter(objective.chunks(None, trainer.local_index)))
        batches = list(objective.batches(*objective.units(chunk, trainer.rng)))
        trainer.run([trainer.prepare(b) for b in batches], [0.1] * len(batches))
        losses.append(all_pairs_loss(trainer))
    # Every epoch lower, and as far as the batch-synchronous step (TensorFlow's arithmetic) goes on these
    # pairs in three epochs: to 0.989 of the first.
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.991 * losses[0], losses
    np.testing.assert_array_equal(bits(trainer.matrix), bits(matrix))
    np.testing.assert_array_equal(bits(trainer.side_matrix()[trainer.n_trainable:]),
                                  bits(side_before[trainer.n_trainable:]))



def in_turn(kernel, calls, threads):
    """A stand-in for the lock-free run's threads (kernels.common.on_threads): one call a thread, run one after
    another, thread 0's block first."""
    assert len(calls) == threads and [args[-1] for args in calls] == list(range(threads))
    for args in calls:
        kernel(*args)


def test_the_lockfree_kernel_is_one_call_a_thread_whose_blocks_in_turn_are_the_one_thread_loop(monkeypatch):
    """Each thread calls the plain (not parallel: numba's parallel passes were most of a cold run's compile)
    kernel for its own block of the group's pairs: run one after another, thread 0's first, the blocks are the
    sequential loop over the pairs, bit for bit."""
    from embedtune.kernels import glove as glove_kernels

    assert all("parallel" not in kernel.targetoptions for kernel in glove_kernels.GLOVE_HOGWILD.values())
    results = []
    for threads in (1, 2):
        trainer = make_trainer(True, monkeypatch, threads=threads, deterministic=False, clip_norm=0.05)
        assert trainer.kernel.lockfree and trainer.kernel.threads == threads
        monkeypatch.setattr(glove_kernels, "on_threads", in_turn)
        losses = run_steps(trainer, batches_of(trainer, None, len(LRS)), LRS)
        results.append((losses, bits(trainer.trained_matrix()), bits(trainer.side_matrix())))
    (one_losses, one_words, one_side), (two_losses, two_words, two_side) = results
    np.testing.assert_array_equal(two_words, one_words)
    np.testing.assert_array_equal(two_side, one_side)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-6)   # each thread's block summed apart
