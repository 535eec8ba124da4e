"""The compiled sgns steps (embedtune/kernels/sgns.py).

The batch-synchronous kernel (--deterministic) against TensorFlow's fused step on the same batches:
both are plain sgd over the same split tables: the kernel's tables after a few steps must equal the
TF path's within float32 rounding, frozen rows never written, the bits the same whatever the thread
count, and a checkpoint saved from one restoring into the other. The lock-free kernel (per-pair
negatives without --deterministic): on one thread word2vec's sequential loop (a plain Python
reference), on two frozen rows untouched and the loss falling.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from embedtune import kernels
from embedtune.config import resolve
from embedtune.corpus import Corpus
from embedtune.plan.rules import make_plan
from embedtune.training.checkpoints import state
from embedtune.training.step import TensorFlowStep
from embedtune.training.trainer import Trainer

from train_fixtures import bits, glove, make_config, sample_lines

LINES = sample_lines(60)
FROZEN = ("the", "to", "of", "and", "a", "in", "said", "is")   # frequent: frozen centers in every batch
FREEZE_TOP = 200   # GloVe's 200 most frequent words frozen, FROZEN among them


def make_trainer(kernel: bool, negatives: str, monkeypatch, threads: int = 2, drop=("police",),
                 deterministic: bool = True, **changes) -> tuple:
    """A trainer over the sample (``drop`` left out of GloVe: new rows), FROZEN frozen. Deterministic
    unless asked: the batch-synchronous kernel, the TF step's arithmetic (otherwise per-pair
    negatives take the lock-free kernel)."""
    monkeypatch.setattr(kernels, "KERNEL", kernel)
    vectors = glove(20000, drop=drop)
    config = resolve(make_config({"freeze_top": FREEZE_TOP}, batch_size=512, sample=0.0, lr=0.05, negatives=negatives, seed=3,
                                 context_init="word", threads=threads, deterministic=deterministic, **changes))
    corpus = Corpus(LINES)
    counts, _, _ = corpus.count()
    trainer = Trainer(vectors.matrix, make_plan(vectors, list(drop), config.vocab), counts, config, corpus=corpus)
    assert set(FROZEN) <= {trainer.plan.words[r] for r in trainer.rows[trainer.n_trainable:]}
    assert trainer.plan.words[trainer.rows[trainer.n_trainable - 1]] in drop   # the new words train
    assert trainer.uses_kernel == kernel
    return trainer, corpus, vectors


def batches_of(trainer, corpus, n: int) -> list[dict]:
    objective = trainer.objective
    chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
    made = list(objective.batches(*objective.units(chunk, trainer.rng)))
    assert len(made) >= n and made[-1]["pairs"] < objective.batch_size   # the last one is padded
    return made[: n - 1] + [made[-1]]


def run_steps(trainer, batches, lrs) -> list[float]:
    return [float(loss) for loss in trainer.run([trainer.prepare(b) for b in batches], lrs)]


@pytest.mark.parametrize("negatives", ["per-pair", "shared"])
def test_the_kernel_steps_as_tensorflows_fused_step_within_float32_rounding(negatives, monkeypatch):
    tf_trainer, corpus, _ = make_trainer(False, negatives, monkeypatch)
    assert tf_trainer.step.fused
    batches = batches_of(tf_trainer, corpus, 6)
    k_trainer, _, vectors = make_trainer(True, negatives, monkeypatch)
    lrs = [0.05, 0.04, 0.03, 0.05, 0.02, 0.05]
    before_words, before_side = k_trainer.trainable.numpy().copy(), k_trainer.side.numpy().copy()
    tf_losses = run_steps(tf_trainer, batches, lrs)
    k_losses = run_steps(k_trainer, batches, lrs)
    np.testing.assert_allclose(k_losses, tf_losses, rtol=1e-5)
    tf_words, k_words = tf_trainer.trainable.numpy(), k_trainer.trainable.numpy()
    tf_side, k_side = tf_trainer.side.numpy(), k_trainer.side.numpy()
    # Rows moved, and by the same amounts: compared as the change from the start, so that the test
    # sees the step's rounding, not the size of the rows. The sinks (last rows) are apart.
    assert (k_words != before_words).any(axis=1).sum() > 100 and (k_side != before_side).any(axis=1).sum() > 100
    np.testing.assert_allclose((k_words - before_words)[:-1], (tf_words - before_words)[:-1], rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose((k_side - before_side)[:-1], (tf_side - before_side)[:-1], rtol=1e-4, atol=2e-6)
    # The sinks: the TF path writes frozen words' and padding's slices there; the kernel nothing.
    np.testing.assert_array_equal(k_words[-1], 0)
    np.testing.assert_array_equal(k_side[-1], before_side[-1])
    # Frozen words were centers in every batch, yet their rows in the matrix kept their bits.
    frozen = [vectors.index[w] for w in FROZEN]
    np.testing.assert_array_equal(bits(vectors.matrix[frozen]), bits(glove(20000, drop=("police",)).matrix[frozen]))


@pytest.mark.parametrize("negatives", ["per-pair", "shared"])
def test_the_kernels_bits_do_not_depend_on_its_threads(negatives, monkeypatch):
    results = []
    for threads in (1, 2, 3):
        trainer, corpus, _ = make_trainer(True, negatives, monkeypatch, threads=threads)
        losses = run_steps(trainer, batches_of(trainer, corpus, 4), [0.05] * 4)
        results.append((losses, bits(trainer.trainable.numpy()), bits(trainer.side.numpy())))
    for losses, words, side in results[1:]:
        assert losses == results[0][0]
        np.testing.assert_array_equal(words, results[0][1])
        np.testing.assert_array_equal(side, results[0][2])


@pytest.mark.parametrize("deterministic, threads", [(True, 2), (False, 1)], ids=["synchronous", "lockfree"])
def test_a_checkpoint_holds_the_kernels_tables_and_restores_into_them(deterministic, threads, monkeypatch, tmp_path):
    # The lock-free kernel on one thread is sequential, so its continuation can be compared bit for bit.
    def make_trainer_(*args):
        return make_trainer(*args, threads=threads, deterministic=deterministic)
    trainer, corpus, _ = make_trainer_(True, "per-pair", monkeypatch)
    assert trainer.kernel.lockfree == (not deterministic)
    batches = batches_of(trainer, corpus, 4)
    run_steps(trainer, batches[:2], [0.05, 0.05])
    saved = trainer.tf_checkpoint().write(str(tmp_path / "ckpt"))
    words, side = trainer.kernel.words.copy(), trainer.kernel.side.copy()
    run_steps(trainer, batches[2:], [0.05, 0.05])
    after = trainer.kernel.words.copy(), trainer.kernel.side.copy()
    assert not np.array_equal(after[0], words)

    other, _, _ = make_trainer_(True, "per-pair", monkeypatch)
    other.tf_checkpoint().read(saved).assert_consumed()
    other.restored()
    np.testing.assert_array_equal(bits(other.kernel.words), bits(words))
    np.testing.assert_array_equal(bits(other.kernel.side), bits(side))
    run_steps(other, batches[2:], [0.05, 0.05])
    np.testing.assert_array_equal(bits(other.kernel.words), bits(after[0]))
    np.testing.assert_array_equal(bits(other.kernel.side), bits(after[1]))


def test_steps_other_than_plain_sgd_take_the_lazy_kernel_or_tensorflow_and_say_why_once(monkeypatch):
    """The step is chosen once, at set-up: plain sgd these kernels, an optimizer's state or a cap
    kernels/sgns_lazy.py's (tests/test_sgns_lazy_kernel.py); a config that rules out a compiled step (an
    anchor) says so once, naming the option; EMBEDTUNE_KERNEL=0 (KERNEL False) chooses TensorFlow's step
    without a note."""
    vectors = glove(2000)
    corpus = Corpus(LINES)
    counts, _, _ = corpus.count()
    for kernel, changes, why in ((True, {"optimizer": "adagrad"}, None), (True, {"clip_norm": 1.0}, None),
                                 (True, {"anchor": 0.1}, "--anchor"), (False, {}, None), (True, {}, None)):
        monkeypatch.setattr(kernels, "KERNEL", kernel)
        config = resolve(make_config({}, batch_size=512, **changes))
        notes = []
        trainer = Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus,
                          note=notes.append)
        assert trainer.uses_kernel == (kernel and why is None), changes
        assert (trainer.kernel is None) == (not trainer.uses_kernel)
        assert type(trainer.kernel).__name__ == ("SgnsKernel" if kernel and not changes else
                                                 "SgnsLazyKernel" if trainer.uses_kernel else "NoneType"), changes
        if why is None:
            assert notes == [], changes
        else:
            assert notes == [f"{why}: sgns steps through TensorFlow's step, not its compiled one"], notes


@pytest.mark.parametrize("negatives", ["per-pair", "shared"])
def test_the_loss_stays_tensorflows_where_logits_are_far_below_zero(negatives, monkeypatch):
    """Context rows grown large (here: minus 10 times the words' vectors, logits about -200) give a
    large finite loss, as TensorFlow's softplus does, not an overflow read as divergence."""
    tf_trainer, corpus, _ = make_trainer(False, negatives, monkeypatch)
    k_trainer, _, _ = make_trainer(True, negatives, monkeypatch)
    far = -10 * tf_trainer.side.numpy()
    tf_trainer.side.assign(far)
    k_trainer.kernel.side[...] = far
    batches = batches_of(tf_trainer, corpus, 2)
    tf_losses = run_steps(tf_trainer, batches, [0.0, 0.0])
    k_losses = run_steps(k_trainer, batches, [0.0, 0.0])
    assert np.isfinite(k_losses).all() and k_losses[0] > 50 * batches[0]["pairs"]
    np.testing.assert_allclose(k_losses, tf_losses, rtol=1e-5)


def splitmix_negatives(table, mix, size, negative) -> np.ndarray:
    """The lock-free kernel's draws in plain Python integers: the n-th draw of a batch is splitmix64 of its
    seed mix + n * GAMMA (n from 1), its top 32 bits scaled to the table's length."""
    mask, out = (1 << 64) - 1, np.empty((size, negative), np.int64)
    for place in range(size):
        for k in range(negative):
            z = (int(mix) + (place * negative + k + 1) * 0x9E3779B97F4A7C15) & mask
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            z ^= z >> 31
            out[place, k] = table[((z >> 32) * len(table)) >> 32]
    return out


def sequential_sgns(words, side, frozen, n_trainable, batches, lrs, table=None, negative=None):
    """word2vec's loop in plain numpy, a pair at a time in batch order: score the true context and
    the negatives against the center, update each context row as it is scored, then the center
    (trainable ones only); padding skipped. A batch without its negatives (the lock-free kernel's) has
    them drawn from ``table`` by its seed (``splitmix_negatives``). Returns each batch's summed loss."""
    losses = []
    for batch, lr in zip(batches, lrs):
        lr, total = np.float32(lr), 0.0
        drawn = batch["negatives"] if "negatives" in batch else splitmix_negatives(
            table, batch["seed"], len(batch["center"]), negative)
        for c, o, negatives, wt in zip(batch["center"], batch["context"], drawn, batch["weight"]):
            if wt == 0:
                continue
            w = words[c] if c < n_trainable else frozen[c - n_trainable]
            grad = np.zeros_like(w)
            for k, r in enumerate([o, *negatives]):
                x = float(np.dot(w, side[r]))
                label = 1.0 if k == 0 else 0.0
                d = np.float32(wt * (1 / (1 + np.exp(-x)) - label))
                total += wt * (np.logaddexp(0, -x) if k == 0 else np.logaddexp(0, x))
                grad += d * side[r]
                side[r] -= lr * (d * w)
            if c < n_trainable:
                words[c] -= lr * grad
        losses.append(total)
    return losses


def test_the_lockfree_kernel_on_one_thread_is_word2vecs_sequential_loop(monkeypatch):
    trainer, corpus, vectors = make_trainer(True, "per-pair", monkeypatch, threads=1, deterministic=False)
    assert trainer.kernel.lockfree
    batches = batches_of(trainer, corpus, 3)
    lrs = [0.05, 0.04, 0.03]
    words, side = trainer.kernel.words.copy(), trainer.kernel.side.copy()
    frozen = vectors.matrix[trainer.frozen_rows]
    assert all("negatives" not in b and "seed" in b for b in batches)   # the kernel draws them
    expected = sequential_sgns(words, side, frozen, trainer.n_trainable, batches, lrs, trainer.objective.table,
                               trainer.objective.negative)
    before_words, before_side = trainer.kernel.words.copy(), trainer.kernel.side.copy()
    # Two batches in one call (a group), then the padded one alone.
    losses = run_steps(trainer, batches[:2], lrs[:2]) + run_steps(trainer, batches[2:], lrs[2:])
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    k_words, k_side = trainer.trainable.numpy(), trainer.side.numpy()
    assert (k_words != before_words).any(axis=1).sum() > 100
    np.testing.assert_allclose(k_words - before_words, words - before_words, rtol=1e-3, atol=2e-6)
    np.testing.assert_allclose(k_side - before_side, side - before_side, rtol=1e-3, atol=2e-6)
    # Padding (center and context 0, weight 0) wrote nothing: the sinks as they were.
    np.testing.assert_array_equal(k_words[-1], before_words[-1])
    np.testing.assert_array_equal(k_side[-1], before_side[-1])


def test_the_lockfree_kernel_on_two_threads_keeps_frozen_rows_and_lowers_the_loss(monkeypatch):
    trainer, corpus, vectors = make_trainer(True, "per-pair", monkeypatch, threads=2, deterministic=False)
    assert trainer.kernel.lockfree and trainer.kernel.threads == 2
    batches = batches_of(trainer, corpus, 6)
    pairs = sum(b["pairs"] for b in batches)
    before_side = trainer.kernel.side.copy()
    means = []
    for _ in range(5):   # the same batches again and again: the loss per pair must fall
        means.append(sum(run_steps(trainer, batches, [0.05] * len(batches))) / pairs)
    assert means[-1] < 0.8 * means[0], means
    frozen = [vectors.index[w] for w in FROZEN]
    np.testing.assert_array_equal(bits(vectors.matrix), bits(glove(20000, drop=("police",)).matrix))
    assert all(trainer.local_index[w] >= trainer.n_trainable for w in FROZEN) and len(frozen) == len(FROZEN)
    np.testing.assert_array_equal(trainer.kernel.words[-1], 0)
    np.testing.assert_array_equal(trainer.kernel.side[-1], before_side[-1])


def test_the_lockfree_kernels_negatives_follow_the_unigram_table_and_the_batch_alone():
    from embedtune.kernels.sgns import lockfree_negatives, seed_mix
    from embedtune.objectives.sgns import unigram_table

    counts = np.array([1000, 300, 60, 8, 1, 0, 200])
    table = unigram_table(counts)
    drawn = lockfree_negatives(table, seed_mix(7), 40_000, 5)
    assert drawn.shape == (40_000, 5) and drawn.dtype == np.int32
    np.testing.assert_array_equal(drawn[:50], splitmix_negatives(table, seed_mix(7), 50, 5))
    # Each row drawn in proportion to count^0.75 (a word never seen, never), within sampling noise.
    share = np.bincount(drawn.ravel(), minlength=len(counts)) / drawn.size
    expected = counts ** 0.75 / np.sum(counts ** 0.75)
    np.testing.assert_allclose(share, expected, atol=0.004)
    assert share[5] == 0
    # Another seed, other draws; a batch's first pairs draw the same whatever its length.
    assert (lockfree_negatives(table, seed_mix(8), 1000, 5) != drawn[:1000]).mean() > 0.5
    np.testing.assert_array_equal(lockfree_negatives(table, seed_mix(7), 10, 5), drawn[:10])


def test_only_per_pair_negatives_without_deterministic_are_lockfree(monkeypatch):
    for negatives, deterministic, lockfree in (("per-pair", False, True), ("per-pair", True, False),
                                               ("shared", False, False)):
        trainer, _, _ = make_trainer(True, negatives, monkeypatch, deterministic=deterministic)
        assert trainer.kernel.lockfree == lockfree, (negatives, deterministic)
        assert trainer.objective.pairs_in_order == lockfree


def test_pairs_are_shuffled_unless_the_lockfree_kernel_takes_them(monkeypatch):
    """The lock-free kernel takes a chunk's pairs as made; a batch-synchronous step (here a
    multi-worker run's, TensorFlow's) gets the same pairs shuffled."""
    trainer, corpus, _ = make_trainer(True, "per-pair", monkeypatch, deterministic=False)
    objective = trainer.objective
    chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
    state = trainer.rng.bit_generator.state
    in_order = objective.units(chunk, trainer.rng)
    # A multi-worker run's step is TensorFlow's, chosen at set-up: the objective builds no kernel.
    counts, _, _ = corpus.count()
    worker_like = Trainer(trainer.matrix, trainer.plan, counts, trainer.config, corpus=corpus,
                          make_step=lambda tr, words, side, note: TensorFlowStep(tr, fused=False, grouped=False,
                                                                                 distinct=False))
    assert not worker_like.uses_kernel and not worker_like.objective.pairs_in_order
    worker_like.rng.bit_generator.state = state
    shuffled = worker_like.objective.units(chunk, worker_like.rng)
    assert in_order[2] == shuffled[2]   # the same seed of negatives
    assert not np.array_equal(in_order[0], shuffled[0])
    pairs = [sorted(zip(units[0].tolist(), units[1].tolist())) for units in (in_order, shuffled)]
    assert pairs[0] == pairs[1] and len(pairs[0]) > 1000
    # In order: the first offset's pairs first, each center before the next in the text.
    ids = chunk.ids
    assert in_order[0][0] == ids[0] and in_order[1][0] == ids[1]


def masked_pairs(ids, line, reach, window):
    """The pairs as numpy masks make them, offset by offset: the centers that see ``offset`` ahead, then
    the centers ``offset`` ahead that see back, each in text order, never across a line."""
    centers, contexts = [np.empty(0, ids.dtype)], [np.empty(0, ids.dtype)]
    for offset in range(1, min(window, len(ids) - 1) + 1):
        same_line = line[offset:] == line[:-offset]
        ahead = same_line & (reach[:-offset] >= offset)
        behind = same_line & (reach[offset:] >= offset)
        centers += [ids[:-offset][ahead], ids[offset:][behind]]
        contexts += [ids[offset:][ahead], ids[:-offset][behind]]
    return np.concatenate(centers), np.concatenate(contexts)


@pytest.mark.parametrize("window", [1, 2, 5, 10])
def test_the_compiled_window_pairs_are_the_masks_pairs_in_their_order(window):
    from embedtune.kernels.sgns import window_pairs

    rng = np.random.default_rng(window)
    for n in (0, 1, 2, 3, 17, 5000):
        ids = rng.integers(0, 300, n).astype(np.int32)
        line = np.sort(rng.integers(0, max(n // 7, 1), n)).astype(np.int32)   # lines of about 7 tokens
        reach = rng.integers(1, window + 1, n, dtype=np.int32)
        made, expected = window_pairs(ids, line, reach, window), masked_pairs(ids, line, reach, window)
        for got, want in zip(made, expected):
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want)
        assert n < 100 or len(made[0]) > n   # a real chunk's pairs, not an edge case


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_checkpoint_of_either_step_restores_into_the_other_every_table_and_state(optimizer, monkeypatch, tmp_path):
    """A compiled step's checkpoint is its own arrays (tables.npz: no TensorFlow), TensorFlow's step's a
    tf.train.Checkpoint (tables.index, tables.data-*); each step restores the other's form (EMBEDTUNE_KERNEL=0
    switches the step, not the settings), every table and optimizer state bit for bit, and a compiled step's
    variables, read after its archive was restored, hold what it restored. TensorFlow's form cut or its index
    spoilt is damaged, naming the file (the command's runs: tests/test_resume.py, on the archive)."""
    fp = {"rows": "r", "corpus": {}, "settings": {}}
    compiled, corpus, _ = make_trainer(True, "per-pair", monkeypatch, optimizer=optimizer)
    run_steps(compiled, batches_of(compiled, corpus, 2), [0.05, 0.05])
    os.mkdir(tmp_path / "arrays")
    state.write(str(tmp_path / "arrays"), compiled, state.Position(steps=2), fp)
    assert sorted(os.listdir(tmp_path / "arrays")) == ["state.json", "tables.npz"]
    saved = {name: value.copy() for name, value in compiled.checkpoint_arrays().items()}
    assert set(saved) == {"trainable", "side"} | ({"word_m", "word_v", "word_iterations", "side_m", "side_v",
                                                   "side_iterations"} if optimizer == "adam" else set())

    stepped, _, _ = make_trainer(False, "per-pair", monkeypatch, optimizer=optimizer)
    assert state.load(str(tmp_path / "arrays"), stepped, fp).steps == 2
    for name, var in stepped.checkpoint_variables().items():
        np.testing.assert_array_equal(bits(var.numpy()), bits(saved[name]), err_msg=name)
    run_steps(stepped, batches_of(stepped, corpus, 2), [0.05, 0.05])
    os.mkdir(tmp_path / "tensorflow")
    state.write(str(tmp_path / "tensorflow"), stepped, state.Position(steps=4), fp)
    assert "tables.index" in os.listdir(tmp_path / "tensorflow")
    after = {name: var.numpy() for name, var in stepped.checkpoint_variables().items()}
    for spoilt, damage in (("tables.data-00000-of-00001", lambda b: b[: len(b) // 2]), ("tables.index", lambda b: b"x")):
        folder = tmp_path / f"spoilt-{spoilt}"
        shutil.copytree(tmp_path / "tensorflow", folder)
        (folder / spoilt).write_bytes(damage((folder / spoilt).read_bytes()))
        with pytest.raises(state.DamagedCheckpoint) as found:
            state.load(str(folder), make_trainer(True, "per-pair", monkeypatch, optimizer=optimizer)[0], fp)
        assert found.value.path == str(folder / spoilt) and found.value.message.startswith("damaged ("), found.value

    again, _, _ = make_trainer(True, "per-pair", monkeypatch, optimizer=optimizer)
    assert state.load(str(tmp_path / "tensorflow"), again, fp).steps == 4
    for name, value in again.checkpoint_arrays().items():
        np.testing.assert_array_equal(bits(value), bits(after[name]), err_msg=name)
    assert state.load(str(tmp_path / "arrays"), again, fp).steps == 2
    for name, var in again.checkpoint_variables().items():   # synced from the restored arrays when read
        np.testing.assert_array_equal(bits(var.numpy()), bits(saved[name]), err_msg=name)
