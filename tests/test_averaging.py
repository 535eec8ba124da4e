"""The workers' periodic averaging (embedtune/distribute/averaging.py, the default of --workers): the sync's
arithmetic in one process with simulated workers, the rounds' lengths, and one real run on 2 workers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import debug_worker
from embedtune.cli.main import cli
from embedtune.distribute.averaging import HEADER, Averaging, Tables, round_length
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS


def kernel_tables(words: np.ndarray, side: np.ndarray, state: np.ndarray, steps: np.ndarray) -> Tables:
    """The tables of a compiled step (numpy arrays it updates in place)."""
    kernel = SimpleNamespace(words=words, side=side, word_state={"m": state, "iterations": steps}, side_state={})
    return Tables(SimpleNamespace(compiled=True, kernel=kernel), None)


def variable_tables(words: np.ndarray, side: np.ndarray, state: np.ndarray, steps: np.ndarray) -> Tables:
    """The tables of TensorFlow's step (the trainer's variables)."""
    from embedtune._tf import tf

    variables = {"m": tf.Variable(state), "iterations": tf.Variable(steps)}
    trainer = SimpleNamespace(trainable_variable=tf.Variable(words), side_variable=tf.Variable(side),
                              word_opt=SimpleNamespace(variables=lambda: variables),
                              side_opt=SimpleNamespace(variables=dict))
    return Tables(SimpleNamespace(compiled=False), trainer)


def test_a_sync_gives_every_worker_the_same_bits_and_sends_only_changed_rows():
    """Three workers from the same tables (one on variables, as TensorFlow's step keeps them): a row one
    worker changed gets its change, a row several changed the mean of theirs, a row none changed keeps
    its bits and is not sent; afterwards every worker's tables are the same bits, and the next sync
    sends nothing."""
    rng = np.random.default_rng(0)
    start = [rng.standard_normal((6, 3)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32),
             rng.random(6).astype(np.float32), np.array(40, np.int64)]
    makers = [kernel_tables, kernel_tables, variable_tables]
    tables = [make(*(a.copy() for a in start)) for make in makers]
    workers = []
    for t in tables:
        averaging = Averaging(t, None)
        averaging.snapshot()
        workers.append(averaging)
    changed = {0: {"words": [1, 2], "side": [0]}, 1: {"words": [2, 4], "side": []}, 2: {"words": [], "side": [7]}}
    moves = {}
    for k, t in enumerate(tables):
        arrays = t.read()
        for i, name in enumerate(("words", "side")):
            rows = changed[k][name]
            move = rng.standard_normal((len(rows), 3)).astype(np.float32)
            moves[k, name] = move
            t.write(i, np.array(rows, np.int64), arrays[i][rows] + move, arrays[i])
        stepped = np.array(changed[k]["words"], np.int64)   # the optimizer's state of the rows it stepped
        t.write(2, stepped, arrays[2][stepped] + 1.0, arrays[2])
        t.write(3, np.zeros(1, np.int64), arrays[3][:1] + 2 * (k + 1), arrays[3])   # adam's step count: 2, 4, 6 steps
    headers = [np.arange(HEADER, dtype=np.int64) + 10 * k for k in range(3)]
    payloads = [w.payload(h, t.read()) for w, h, t in zip(workers, headers, tables)]
    # int64 words: the header, 4 tables' counts, the ids of its 2 + 0 + 2 + 1 rows, their float32 changes
    # (2 x 3, 0, 2 and 1 floats), each table's padded to a whole word.
    assert payloads[1].nbytes == 8 * (HEADER + 4 + (2 + 0 + 2 + 1) + (3 + 0 + 1 + 1))
    for w, t in zip(workers, tables):
        np.testing.assert_array_equal(w.combine(payloads, t.read()), np.stack(headers))
    after = [t.read() for t in tables]
    for k in (1, 2):
        for a, b in zip(after[0], after[k]):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))   # the same bits everywhere
    words, side, state, steps = after[0]
    assert steps.dtype == np.int64 and steps[0, 0] == 40 + 4   # the mean of 2, 4 and 6 steps
    untouched = [0, 3, 5]
    assert np.array_equal(words[untouched].view(np.uint32), start[0][untouched].view(np.uint32))
    np.testing.assert_allclose(words[1], start[0][1] + moves[0, "words"][0], rtol=1e-6)       # worker 0 alone
    np.testing.assert_allclose(words[4], start[0][4] + moves[1, "words"][1], rtol=1e-6)       # worker 1 alone
    np.testing.assert_allclose(words[2], start[0][2] + (moves[0, "words"][1] + moves[1, "words"][0]) / 2, rtol=1e-6)
    np.testing.assert_allclose(side[[0, 7]], start[1][[0, 7]] + np.stack([moves[0, "side"][0], moves[2, "side"][0]]),
                               rtol=1e-6)
    np.testing.assert_allclose(state[:, 0], start[2] + np.array([0, 1, 1, 0, 1, 0]), rtol=1e-6)   # row 2: mean of 1, 1
    # Nothing changed since: the next sync sends no row.
    assert [w.payload(h, t.read()).nbytes for w, h, t in zip(workers, headers, tables)] == [8 * HEADER + 4 * 8] * 3


def test_a_round_is_sync_every_steps_unless_a_limit_ends_sooner():
    train = SimpleNamespace(sync_every=100, max_steps=0, max_words=0)
    assert round_length(train, 0, 0, 0.0) == 100
    assert round_length(SimpleNamespace(sync_every=100, max_steps=250, max_words=0), 200, 0, 0.0) == 50
    # --max-words: at the last round's words a step (the same figures on every worker), at least one step
    limited = SimpleNamespace(sync_every=100, max_steps=0, max_words=10_000)
    assert round_length(limited, 0, 0, 0.0) == 100   # no rate yet
    assert round_length(limited, 100, 9_000, 40.0) == 25
    assert round_length(limited, 100, 10_000, 40.0) == 1


ROWS, FROZEN, LINES = 3000, 1000, 20
ARGS = ["--objective", "sgns", "--deterministic", "--epochs", "2", "--batch-size", "256", "--freeze-top", str(FROZEN),
        "--init", "context-mean", "--min-count", "3", "-q", "--sync-every", "5"]


def load(path) -> tuple[list[str], np.ndarray]:
    lines = open(path, encoding="utf-8").read().splitlines()
    return lines, np.array([[float(x) for x in line.split()[1:]] for line in lines], np.float32)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory) -> SimpleNamespace:
    """One run on 2 workers for both tests below: syncing every 5 steps, a checkpoint every 10 (all kept), each
    worker's tables hashed at its end, and worker 1 stopped 2 s (SIGSTOP) before its step 10."""
    tmp_path = tmp_path_factory.mktemp("averaging")
    vectors, corpus = tmp_path / "vectors.txt", tmp_path / "corpus.txt"
    with open(SAMPLE_VECTORS, encoding="utf-8") as f:
        vectors.write_text("".join(next(f) for _ in range(ROWS)), encoding="utf-8")
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        corpus.write_text("".join(next(f) for _ in range(LINES)), encoding="utf-8")
    hashes, out, ckpt = tmp_path / "hashes", tmp_path / "two.txt", tmp_path / "ckpt"
    hashes.mkdir()
    args = [str(vectors), str(corpus), *ARGS, "--workers", "2", "--checkpoint-dir", str(ckpt),
            "--checkpoint-every", "10", "--json", "-"]
    run = subprocess.run([sys.executable, debug_worker.__file__, "train", *args, "-o", str(out), "--keep-checkpoints"],
                         capture_output=True, text=True, timeout=180,
                         env={**os.environ, debug_worker.ENV_TABLE_HASH: str(hashes), debug_worker.ENV_STALL_AT: "1:10:2"})
    return SimpleNamespace(folder=tmp_path, vectors=vectors, corpus=corpus, hashes=hashes, out=out, ckpt=ckpt, args=args,
                           run=run)


def test_averaging_workers_end_with_the_same_tables_and_train_as_one_process_does(two_workers):
    """2 workers, each on its share with the single process's compiled step, syncing every 5 steps: both
    end with the same bits, frozen rows are the input's bytes, every corpus word is done once an epoch,
    and what the rows learnt points the way one process's does. Resumed from a checkpoint of the middle
    of the run (written after a sync: every worker's tables alike, each share's position), the workers
    write the uninterrupted run's output byte for byte (one thread a worker: deterministic; worker 1's
    stop in the run changes no bit)."""
    vectors, corpus, hashes, two, ckpt = (two_workers.vectors, two_workers.corpus, two_workers.hashes, two_workers.out,
                                          two_workers.ckpt)
    one = two_workers.folder / "one.txt"
    run = two_workers.run
    assert run.returncode == 0, run.stderr
    s2 = json.loads(run.stdout)
    result = CliRunner().invoke(cli, ["train", str(vectors), str(corpus), *ARGS, "-o", str(one), "--json", "-"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    s1 = json.loads(result.stdout)
    reports = [json.loads((hashes / f"worker-{k}.json").read_text()) for k in range(2)]
    assert reports[0]["sha256"] == reports[1]["sha256"]
    assert reports[0]["steps"] == reports[1]["steps"] == s2["steps"]
    given, start = load(vectors)
    written, trained = load(two)
    assert written[:FROZEN] == given[:FROZEN]   # byte for byte
    assert s2["max_frozen_change"] == 0.0 and s2["workers"] == 2 and s2["sync_every"] == 5
    assert s2["steps"] % 5 == 0 and s2["syncs"] == s2["steps"] // 5 and s2["sync_rows_sent"] > 0
    assert s2["words_done"] == s1["words_done"] == 2 * s2["corpus_words"]
    # A step is a batch of each worker's: about half one process's steps (the larger share's, in rounds of 5).
    assert s1["steps"] / 2 <= s2["steps"] <= 0.7 * s1["steps"]
    assert abs(s2["pairs"] - s1["pairs"]) < 0.05 * s1["pairs"]   # each share subsamples with its own draws
    _, alone = load(one)
    moved, moved_alone = trained[FROZEN:ROWS] - start[FROZEN:], alone[FROZEN:ROWS] - start[FROZEN:]   # pretrained rows
    cosine = np.sum(moved * moved_alone) / np.linalg.norm(moved) / np.linalg.norm(moved_alone)
    assert cosine > 0.5, cosine
    # The oldest checkpoint kept (the 3 newest are: steps 10 apart, the last at the end) is mid-run.
    saved = sorted((name for name in os.listdir(ckpt) if name.startswith("ckpt-")), key=lambda n: int(n[5:]))
    assert len(saved) == 3 and 0 < int(saved[0][5:]) < s2["steps"] and int(saved[0][5:]) % 5 == 0, saved
    for name in saved[1:]:
        shutil.rmtree(ckpt / name)
    resumed = two_workers.folder / "resumed.txt"
    run = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "train", *two_workers.args, "-o", str(resumed),
                          "--resume"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    s3 = json.loads(run.stdout)
    assert s3["resumed"] is True and s3["steps"] == s2["steps"] and s3["syncs"] == (s2["steps"] - int(saved[0][5:])) // 5
    assert resumed.read_bytes() == two.read_bytes()


def test_a_stalled_worker_is_waited_for(two_workers):
    """A worker that stops (SIGSTOP, as a process starved on a loaded machine) and goes on is waited for: the
    launcher ends the run itself when a worker exits. When averaging workers exchanged through TensorFlow, its
    coordination service declared one dead after 10 s without a heartbeat and aborted the chief's collective
    ("Error: worker 0 exited (lost its peers)", a CI run of the suite); their connections (distribute/mesh.py)
    have no heartbeat, and the workers of the gathered step through TensorFlow, which keep it, are given 120 s
    (collectives.LAUNCHED_HEARTBEAT; tests/test_adapters.py). (The run is the module's: worker 1 stops 2 s
    before its step 10.)"""
    run = two_workers.run
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["steps"] > 10 and two_workers.out.exists()


def test_steps_without_pairs_add_no_loss_figure():
    """An averaging worker whose share has ended steps without pairs until the last sync: a loss window of
    such steps alone gives no figure (it gave a loss of 0, which the summary showed as the last loss)."""
    from embedtune.training.checkpoints.state import Position
    from embedtune.training.progress import LossLog

    pos = Position()
    log = LossLog(pos, 0.025, 1000, None, None)
    log.add(np.float32(6.0), 3, 0.025)
    log.flush()
    for _ in range(2):
        log.add(np.float32(0.0), 0, 0.025)
    log.flush()
    assert pos.loss_history == [2.0]
