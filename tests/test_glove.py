"""The glove objective: co-occurrence counts, the fitted scale and biases, and training with it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from embedtune._tf import tf
from embedtune.config import Config, merge, resolve
from embedtune.corpus import Corpus, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.objectives.glove import cooccurrence, fit_scale_and_biases, weights
from embedtune.training import train
from train_fixtures import HIDDEN, bits, glove, make_config, sample_lines, true_ranks

# ---------------------------------------------------------------------------------------------
# counts


def brute_force_counts(lines: list[list[str]], vocab: dict[str, int], window: int) -> dict:
    """X[min(j, k), max(j, k)] += 1 / distance for every pair of known words on one line."""
    counts = {}
    for line in lines:
        ids = [vocab[w] for w in line if w in vocab]   # unknown words are dropped before windows
        for p, q in itertools.combinations(range(len(ids)), 2):
            if q - p <= window:
                key = (min(ids[p], ids[q]), max(ids[p], ids[q]))
                counts[key] = counts.get(key, 0.0) + 1.0 / (q - p)
    return counts


@pytest.mark.parametrize("window", [1, 3, 10])
@pytest.mark.parametrize("chunk_tokens, block_pairs", [(5, 7), (5, 1 << 25), (10**6, 1 << 25)])
def test_counts_match_a_brute_force_count(window, chunk_tokens, block_pairs, monkeypatch):
    from embedtune.kernels import cooccur

    monkeypatch.setattr(cooccur, "BLOCK_PAIRS", block_pairs)   # (5, 7): a block a chunk, merged in turn
    rng = np.random.default_rng(window)
    words = ["a", "b", "c", "d", "e", "unknown"]
    lines = [list(rng.choice(words, size=rng.integers(0, 14))) for _ in range(40)]
    lines += [["a", "a", "a"], ["b"], []]   # a word next to itself; a line too short for a pair
    vocab = {w: i for i, w in enumerate(words[:-1])}
    chunks = id_chunks(Corpus([" ".join(line) for line in lines]), vocab, chunk_tokens=chunk_tokens)
    counted, raw = cooccurrence(chunks, len(vocab), window)

    assert raw == sum(len(line) for line in lines)
    assert (counted.row <= counted.col).all()
    got = {(int(j), int(k)): x for j, k, x in zip(counted.row, counted.col, counted.data)}
    expected = brute_force_counts(lines, vocab, window)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12)


def test_counts_never_cross_a_line():
    counted, _ = cooccurrence(id_chunks(Corpus(["a b", "c d"]), {"a": 0, "b": 1, "c": 2, "d": 3}), 4, window=10)
    assert sorted(zip(counted.row.tolist(), counted.col.tolist())) == [(0, 1), (2, 3)]


def test_the_weight_of_a_count_is_glove_s():
    np.testing.assert_allclose(weights(np.array([1.0, 50.0, 100.0, 1e4]), 100.0),
                               [0.01 ** 0.75, 0.5 ** 0.75, 1.0, 1.0])


def test_the_scale_and_biases_of_exact_data_are_found():
    rng = np.random.default_rng(0)
    n = 30
    rows, cols = np.triu_indices(n)
    products = rng.normal(size=len(rows))
    true_bias = rng.normal(size=n)
    target = 0.3 * products + true_bias[rows] + true_bias[cols]
    a, b = fit_scale_and_biases(rows, cols, target, rng.uniform(0.1, 1, len(rows)), products, n, rounds=200)
    assert a == pytest.approx(0.3, abs=1e-6)
    np.testing.assert_allclose(b, true_bias, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# training


def glove_config(vocab: dict | None = None, **train_options) -> Config:
    return make_config(vocab, objective="glove", **train_options)


def test_glove_training_leaves_frozen_rows_bit_identical():
    vectors = glove(20000)
    before = vectors.matrix.copy()
    result = train(vectors, Corpus(sample_lines()),
                   glove_config({"freeze_top": 5000}, epochs=2, batch_size=1024, x_max=3.0, anchor=0.0, lr=0.5))
    s = result.stats
    assert s["objective"] == "glove" and s["optimizer"] == "adagrad" and s["window"] == 10
    assert len(s["loss_history"]) >= 3 and all(np.isfinite(s["loss_history"]))
    out = result.vectors.matrix[: len(vectors)]
    np.testing.assert_array_equal(bits(out[:5000]), bits(before[:5000]))
    assert s["max_frozen_change"] == 0.0
    used = sorted({vectors.index[w] for line in sample_lines() for w in line.split() if w in vectors.index})
    trainable_used = [r for r in used if r >= 5000]
    assert (out[trainable_used] != before[trainable_used]).any(axis=1).mean() > 0.9


def glove_trainer(vectors, lines, config, monkeypatch):
    """A trainer on TensorFlow's step (the compiled one against it: tests/test_glove_kernel.py)."""
    from embedtune import kernels
    from embedtune.plan.rules import make_plan
    from embedtune.training.trainer import Trainer

    monkeypatch.setattr(kernels, "KERNEL", False)
    corpus = Corpus(lines)
    counts, _, _ = corpus.count()
    config = resolve(config)
    return Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus), corpus


def epoch_batches(trainer, corpus):
    objective = trainer.objective
    chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
    return list(objective.batches(*objective.units(chunk, trainer.rng)))


def test_glove_loss_over_all_pairs_falls(monkeypatch):
    # The loss of every batched pair, summed without updating, before and after three epochs: the
    # per-step losses the summary reports vary more from batch to batch than they fall.
    trainer, corpus = glove_trainer(glove(20000), sample_lines(),
                                    glove_config({"freeze_top": 5000}, batch_size=1024, x_max=3.0, anchor=0.0),
                                    monkeypatch)
    batches = [trainer.prepare(b) for b in epoch_batches(trainer, corpus)]

    def total_loss():
        return sum(float(trainer.step.gradients(b)[0]) for b in batches)

    losses = [total_loss()]
    for _ in range(3):
        for batch in batches:
            trainer.step.step(batch, tf.constant(0.1))
        losses.append(total_loss())
    assert all(later < earlier for earlier, later in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.98 * losses[0], losses


def test_glove_keeps_the_fitted_biases_of_frozen_words(monkeypatch):
    trainer, corpus = glove_trainer(glove(5000), sample_lines(300),
                                    glove_config({"freeze_top": 1000}, batch_size=256), monkeypatch)
    fitted = trainer.side.numpy().copy()
    assert 0.01 < trainer.objective.scale < 1 and trainer.objective.fit_pairs > 1000
    for batch in epoch_batches(trainer, corpus):
        trainer.step.step(trainer.prepare(batch), tf.constant(0.5))
    after = trainer.side.numpy()
    t = trainer.n_trainable
    np.testing.assert_array_equal(bits(after[t:]), bits(fitted[t:]))   # frozen words' biases (and the sink)
    assert (after[:t] != fitted[:t]).mean() > 0.5


def test_glove_with_the_anchor_converges_to_the_minimiser_of_the_loss_as_written():
    # One new word ("police", deleted from GloVe) among frozen rows: its loss per epoch is
    #   1/2 sum f (a w.w_k + b + b_k - log X)^2 + anchor/2 |w - start|^2,
    # whose minimiser scipy finds. Trained long enough with adagrad, the word must end there: the
    # anchor, a proximal step, weighs the same as that term (and not, say, sqrt(accumulator) times it).
    import scipy.optimize

    from embedtune.newwords.methods import initial_vectors
    from embedtune.plan.rules import make_plan
    from embedtune.training.trainer import Trainer

    vectors = glove(20000, drop=("police",))
    known = set(vectors.words)
    lines = [" ".join(t for t in line.split() if t in known or t == "police") for line in sample_lines()]
    corpus = Corpus(lines)
    # deterministic: the one moving row is every pair's; lock-free threads would race on it, and the
    # distance to the minimiser would follow the machine's load (it crossed the bound once in a full suite)
    config = glove_config({"freeze_pretrained": True}, epochs=50, batch_size=256, deterministic=True)
    result = train(vectors, corpus, config)
    assert result.plan.words[len(vectors):] == ["police"]

    # The objective's pairs, fitted scale and biases, and the start, as train() made them.
    counts, _, _ = corpus.count()
    start = initial_vectors(vectors, corpus, ["police"], counts=counts, seed=1).matrix[0].astype(np.float64)
    config = resolve(config)
    trainer = Trainer(vectors.matrix, make_plan(vectors, ["police"], config.vocab), counts, config,
                      new_start=start[None].astype(np.float32), corpus=corpus)
    o = trainer.objective
    other = np.where(o.row == 0, o.col, o.row)
    itself = other == 0
    partner = trainer.matrix[trainer.frozen_rows[np.maximum(other - 1, 0)]].astype(np.float64)
    f, target, rho = o.weight.astype(np.float64), o.target.astype(np.float64), config.train.anchor

    def loss(x):
        w, b = x[:-1], x[-1]
        predicted = np.where(itself, o.scale * w @ w + 2 * b, o.scale * partner @ w + b + o.bias[other])
        return 0.5 * np.sum(f * (predicted - target) ** 2) + 0.5 * rho * np.sum((w - start) ** 2)

    best = scipy.optimize.minimize(loss, np.append(start, o.bias[0]), method="L-BFGS-B",
                                   options={"maxiter": 10000, "gtol": 1e-10}).x[:-1]
    trained = result.vectors["police"].astype(np.float64)
    assert np.linalg.norm(best - start) > 0.1   # the optimum is not the start, or this would prove little
    assert np.linalg.norm(trained - best) < 0.03 * np.linalg.norm(best - start)


def test_glove_with_a_huge_anchor_keeps_trainable_rows_at_their_start():
    vectors = glove(20000)
    result = train(vectors, Corpus(sample_lines(200)), glove_config(epochs=1, anchor=1e9, lr=0.5))
    moved = np.abs(result.vectors.matrix[: len(vectors)] - vectors.matrix).max()
    assert moved < 1e-5
    free = train(vectors, Corpus(sample_lines(200)), glove_config(epochs=1, anchor=0.0, lr=0.5))
    assert np.abs(free.vectors.matrix[: len(vectors)] - vectors.matrix).max() > 1e-2




def test_glove_brings_deleted_words_back_near_their_true_vectors_from_a_generator():
    # The corpus comes from a generator, read more than once (counts, init, co-occurrence).
    vectors = glove(20000, drop=HIDDEN)
    lines = sample_lines()
    result = train(vectors, Corpus(line.split() for line in lines),
                   glove_config({"freeze_pretrained": True}, epochs=3))
    assert result.stats["new_from_context"] >= len(HIDDEN)
    ranks = true_ranks(result.vectors)
    assert np.median(ranks) < 20 and max(ranks) < 500, ranks


def test_glove_without_a_pair_of_known_words_is_an_error_that_says_what_to_do():
    vectors = glove(1000)
    with pytest.raises(EmbedtuneError, match="no two words of the vectors file occur within the window.*"
                                             "use --objective sgns"):
        train(vectors, Corpus(["zzword police"] * 6 + ["fire zzother"] * 6), glove_config(epochs=1))


def test_auto_picks_glove_for_glove_files_and_sgns_otherwise():
    assert resolve(Config(format="glove")).train.objective == "glove"
    assert resolve(Config(format="word2vec")).train.objective == "sgns"
    assert resolve(Config()).train.objective == "sgns"
    chosen = resolve(merge(Config(format="glove"), {"window": 4, "objective": "sgns"})).train
    assert (chosen.objective, chosen.window, chosen.optimizer, chosen.anchor) == ("sgns", 4, "sgd", 0.0)
    glove_defaults = resolve(Config(format="glove")).train
    assert (glove_defaults.window, glove_defaults.optimizer) == (10, "adagrad")


def test_glove_set_up_reports_its_phases_to_the_progress_callback():
    # The command shows a bar for each set-up phase that lasts (cli/train_cmd.py): the new words' context
    # pass and the co-occurrence count report their units as they go to on_phase, and end at their totals;
    # the progress callback gets only the loop's Progress.
    from embedtune.phases import Phase
    from embedtune.training.progress import Progress

    reports = []
    vectors = glove(20000, drop=HIDDEN)
    train(vectors, Corpus(sample_lines(400)), glove_config({"freeze_top": 5000}, epochs=1), progress=reports.append,
          on_phase=reports.append)
    phases = [r for r in reports if isinstance(r, Phase) and r.name != "checking the trained rows"]
    names = list(dict.fromkeys(p.name for p in phases))
    assert names == ["new words: contexts", "glove: counting pairs"]
    for name in names:
        mine = [p for p in phases if p.name == name]
        assert [p.done for p in mine] == sorted(p.done for p in mine) and mine[0].done == 0
        assert mine[-1].finished and mine[-1].done == mine[-1].total > 0
        assert len(mine) >= 3   # the start, a chunk at least, the end
    # Then the loop's own progress, after every set-up phase; then the trained rows' checks, a phase that counts
    # nothing (its start closes the loop's bar on a terminal: the bar's rate is the loop's).
    checks = [r for r in reports if isinstance(r, Phase) and r.name == "checking the trained rows"]
    assert [(p.finished, p.unit, p.total) for p in checks] == [(False, "", 0), (True, "", 0)]
    last_progress = max(i for i, r in enumerate(reports) if isinstance(r, Progress))
    assert reports.index(phases[-1]) < last_progress < reports.index(checks[0]) and reports[-1] is checks[1]


def test_the_count_s_bits_do_not_depend_on_how_its_work_is_split():
    """The pair count cut into 4 or 32 parts (1 or 8 runs of positions bucketed at once) and merged in 1 or 8
    parts gives the same bits: each row is still summed in corpus order. The parts are cut at equal work, not
    equal rows: on Zipf ids the first rows hold most pairs."""
    from embedtune.kernels import cooccur

    rng = np.random.default_rng(3)
    n_words = 3000
    p = 1.0 / np.arange(1, n_words + 1)
    blocks = []
    for _ in range(2):
        ids = rng.choice(n_words, 40_000, p=p / p.sum()).astype(np.int32)
        line = np.repeat(np.arange(4000, dtype=np.int32), 10)
        blocks.append((ids, line))
    one = [cooccur.count_block(ids, line, n_words, 5, 4) for ids, line in blocks]
    many = [cooccur.count_block(ids, line, n_words, 5, 32) for ids, line in blocks]
    for a, b in zip(one, many):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    merged_one = cooccur.merge_rows(*one[0], *one[1], 1)
    merged_many = cooccur.merge_rows(*one[0], *one[1], 8)
    for x, y in zip(merged_one, merged_many):
        assert x.tobytes() == y.tobytes()
    # The sums are not all alike, so an order changed would show in the bits.
    assert len(np.unique(merged_one[2])) > 20
    # Each row's columns strictly increase in a block's counts, whether read off in order (the frequent rows)
    # or sorted (the rare ones): both ways are taken here.
    indptr, cols, _ = one[0]
    sizes = np.diff(indptr)
    row_of = np.repeat(np.arange(n_words), sizes)
    assert (np.diff(cols)[row_of[1:] == row_of[:-1]] > 0).all()
    present = np.flatnonzero(sizes)
    read_off = cols[indptr[present + 1] - 1] - present < cooccur.SCAN_SPAN * sizes[present]
    assert read_off.any() and (~read_off).any()   # both ways taken
    indptr = merged_one[0]
    bounds = cooccur._even_parts(indptr, 8)
    work = np.diff(indptr[bounds])
    assert work.max() <= 2 * indptr[-1] / 8 + np.diff(indptr).max()
    assert np.diff(indptr)[: n_words // 8].sum() > indptr[-1] / 2   # equal rows would have been this uneven


def test_a_bucketed_pair_packs_its_partner_and_distance_in_int32_or_int64_with_the_same_counts(monkeypatch):
    """The bucket holds each pair's partner and distance in one number (kernels.cooccur._buckets): int32 while
    every id fits, int64 past that; both give the brute-force counts' keys and the same bits, up to the
    largest window the config allows (100, the distance's DISTANCE_BITS)."""
    import dataclasses

    from embedtune.config.schema import TrainConfig
    from embedtune.kernels import cooccur

    window = next(f for f in dataclasses.fields(TrainConfig) if f.name == "window").metadata["key"]["range"]
    assert window.high == 100 < 1 << cooccur.DISTANCE_BITS
    assert cooccur.packed_like(2**24).dtype == np.int32 and cooccur.packed_like(2**24 + 1).dtype == np.int64
    rng = np.random.default_rng(5)
    n_words = 50
    ids = rng.integers(0, n_words, 3000).astype(np.int32)
    line = np.repeat(np.arange(10, dtype=np.int32), 300)
    narrow = cooccur.count_block(ids, line, n_words, 100, 4)
    monkeypatch.setattr(cooccur, "packed_like", lambda n: np.zeros(0, np.int64))
    wide = cooccur.count_block(ids, line, n_words, 100, 4)
    for x, y in zip(narrow, wide):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    indptr, cols, values = narrow
    rows = np.repeat(np.arange(n_words), np.diff(indptr))
    expected = {}
    for start in range(0, len(ids), 300):
        one = ids[start:start + 300].tolist()
        for p in range(len(one)):
            for q in range(p + 1, min(p + 101, len(one))):
                key = (min(one[p], one[q]), max(one[p], one[q]))
                expected[key] = expected.get(key, 0.0) + 1.0 / (q - p)
    got = dict(zip(zip(rows.tolist(), cols.tolist()), values.tolist()))
    assert got.keys() == expected.keys()
    assert all(got[key] == pytest.approx(value, rel=1e-12) for key, value in expected.items())


def test_a_small_corpus_is_counted_by_numpy_or_the_serial_twin_with_the_same_bits(monkeypatch):
    """A corpus of few pairs is counted in numpy (no kernel compiled, issue 48.1); one of one small block, or a
    count on one thread, by count_block_serial (count_block's kernels on one thread); both with count_block's
    bits; a larger one by count_block."""
    from embedtune.kernels import cooccur
    from embedtune.kernels.common import kernel_threads

    rng = np.random.default_rng(4)
    n_words = 2000
    p = 1.0 / np.arange(1, n_words + 1)
    ids = rng.choice(n_words, 30_000, p=p / p.sum()).astype(np.int32)
    line = np.repeat(np.arange(3000, dtype=np.int32), 10)
    parallel = cooccur.count_block(ids, line, n_words, 5, 8)
    assert len(np.unique(parallel[2])) > 20   # sums not all alike: an order changed would show in the bits
    called = {"count_block": [], "count_block_serial": []}
    serial = cooccur.count_block_serial
    for name in called:
        monkeypatch.setattr(cooccur, name, lambda *args, name=name: called[name].append(args) or parallel)
    assert len(ids) * 5 <= cooccur.NUMPY_PAIRS
    for threads in (1, 2):
        small = cooccur.count([(ids, line)], n_words, 5, threads)
        assert not called["count_block"] and not called["count_block_serial"]
        for x, y in zip(small, parallel):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    monkeypatch.setattr(cooccur, "NUMPY_PAIRS", len(ids) * 5 - 1)
    monkeypatch.setattr(cooccur, "count_block_serial", serial)
    for threads in (1, 2):
        small = cooccur.count([(ids, line)], n_words, 5, threads)
        assert not called["count_block"]
        for x, y in zip(small, parallel):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    monkeypatch.setattr(cooccur, "SERIAL_POSITIONS", len(ids))
    cooccur.count([(ids, line)], n_words, 5, 2)
    assert len(called["count_block"]) == (1 if kernel_threads(2) > 1 else 0)


@pytest.mark.parametrize("window", [1, 2, 10, 100])
def test_the_numpy_count_is_count_blocks_bit_for_bit(window):
    """count_block_numpy (a small corpus's count) gives count_block's CSR, bit for bit: the same cells, each
    summed in corpus order; lines of one word, an empty block and a block of one word included."""
    from embedtune.kernels import cooccur

    rng = np.random.default_rng(window)
    n_words = 700
    p = 1.0 / np.arange(1, n_words + 1)
    ids = rng.choice(n_words, 20_000, p=p / p.sum()).astype(np.int32)
    line = np.sort(rng.integers(0, 900, len(ids))).astype(np.int32)   # lines of 0 to ~60 words
    cases = [(ids, line), (ids[:0], line[:0]), (ids[:1], line[:1]), (ids[:3], np.arange(3, dtype=np.int32))]
    for case_ids, case_line in cases:
        expected = cooccur.count_block(case_ids, case_line, n_words, window, 4)
        got = cooccur.count_block_numpy(case_ids, case_line, n_words, window)
        for x, y in zip(got, expected):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    full = cooccur.count_block_numpy(ids, line, n_words, window)
    assert len(np.unique(full[2])) > (2 if window == 1 else 20)   # sums not all alike: an order would show


def test_the_new_words_biases_have_the_bits_of_the_numpy_reference(monkeypatch):
    """The start of the new words' biases, compiled or in numpy (few pairs), gives numpy's bits: a new word with pretrained partners on
    either side of its pairs, one whose partners are all new (bias 0), pairs of two pretrained or two new words
    (left out), and pretrained words' biases kept."""
    from embedtune.kernels import cooccur
    from embedtune.kernels.cooccur import new_word_biases

    rng = np.random.default_rng(5)
    n, pairs = 400, 20_000
    rows, cols = np.sort(rng.integers(0, n, (2, pairs)), axis=0).astype(np.int32)
    new = rng.random(n) < 0.3
    new[[7, 8]] = True
    keep = ~(np.isin(rows, [7, 8]) ^ np.isin(cols, [7, 8])) | (new[rows] & new[cols])   # 7, 8: new partners only
    rows, cols = rows[keep], cols[keep]
    weight = rng.uniform(0.01, 1, len(rows)).astype(np.float32)
    target = rng.normal(size=len(rows)).astype(np.float32)
    products = rng.normal(size=len(rows))
    bias = rng.normal(size=n)
    # fewer pairs than NUMPY_PAIRS: numpy's (what objectives/glove.py computed before the kernel), no kernel
    # compiled (issue 48.1); more: the kernel's, the same bits
    kernel = cooccur._new_word_biases
    monkeypatch.setattr(cooccur, "_new_word_biases", lambda *args: pytest.fail("compiled for few pairs"))
    got = new_word_biases(rows, cols, weight, target, products, 0.37, bias, new)
    monkeypatch.setattr(cooccur, "_new_word_biases", kernel)
    out = bias.copy()
    kernel(rows, cols, weight, target, products, 0.37, bias, new, out, np.zeros((4, n)))
    assert out.tobytes() == got.tobytes()
    monkeypatch.setattr(cooccur, "NUMPY_PAIRS", len(rows))
    assert new_word_biases(rows, cols, weight, target, products, 0.37, bias, new).tobytes() == got.tobytes()
    assert got[7] == 0 and got[8] == 0 and (got[~new] == bias[~new]).all()
    assert (got[new] != bias[new]).sum() > 0.9 * (new.sum() - 2)


def test_few_pairs_dot_products_are_the_parallel_kernels_bits_from_its_serial_twin(monkeypatch):
    """Under cooccur.SERIAL_PAIRS pairs (the quickstart's), the dot products are taken by the serial twin, whose
    compile a cold run pays instead of the parallel kernel's: the same sums, bit for bit."""
    from embedtune.kernels import cooccur

    rng = np.random.default_rng(5)
    table = rng.normal(size=(500, 50)).astype(np.float32)
    rows, cols = (rng.integers(0, 500, 20_000).astype(np.int32) for _ in range(2))
    parallel = np.empty(len(rows), np.float64)
    cooccur._pair_dots(table, rows, cols, parallel)
    called = []
    monkeypatch.setattr(cooccur, "_pair_dots", lambda *args: called.append(args))
    small = cooccur.pair_dots(table, rows, cols)
    assert not called and small.dtype == parallel.dtype and small.tobytes() == parallel.tobytes()
    monkeypatch.setattr(cooccur, "SERIAL_PAIRS", len(rows))
    cooccur.pair_dots(table, rows, cols)
    assert len(called) == 1
