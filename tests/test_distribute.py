"""Training on several workers (embedtune/distribute/): the real command with --workers 2 on
loopback ports, each worker reading its own share of the lines, against one process training the same
global batches (EMBEDTUNE_DEBUG_SHARES=2). Parameter servers: tests/test_ps.py.

The runs are small (3,000 GloVe rows, 20 lines of the Lee corpus, two epochs, a few seconds of training
each). sgns's and glove's workers exchange their parts of each batch and step the joined batch through the
compiled step, with no TensorFlow (distribute/gathered.py); classify's gather gradients through TensorFlow,
whose start is most of those runs' time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import debug_worker
from embedtune import distribute
from embedtune.cli.main import cli
from embedtune.distribute import Cluster, cluster_from_env
from embedtune.errors import EmbedtuneError
from embedtune.corpus import Corpus
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

ROWS, FROZEN, LINES = 3000, 1000, 20
# Two epochs of ~35 steps each; the batch splits into 2 x 128 pairs. The gathered step (--sync-every 0):
# every step's update is every worker's, which one process can make too (the emulation of the shares).
ARGS = ["--objective", "sgns", "--deterministic", "--epochs", "2", "--batch-size", "256",
        "--freeze-top", str(FROZEN), "--init", "context-mean", "--min-count", "3", "-q", "--sync-every", "0"]
CHECKPOINT = re.compile(r"ckpt-\d+")   # a complete checkpoint's folder (ckpt-N.partial: one being written)


def embedtune(*args: str, env: dict | None = None, timeout: float = 120):
    """The command, with the test-only hooks of tests/debug_worker.py (their environment variables).
    A run of one process (plain, or the emulation of the shares) runs in this one: its own process would
    prove nothing more and cost a TensorFlow start. A run of several workers is real processes."""
    if "--workers" in args or set(env or {}) - {debug_worker.ENV_SHARES}:
        return subprocess.run([sys.executable, debug_worker.__file__, "train", *args], capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **(env or {})})
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        patch.setattr(distribute, "strategy_from_env", debug_worker.strategy_from_env)
        result = CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


def load_text(path) -> tuple[list[str], list[str], np.ndarray]:
    lines = open(path, encoding="utf-8").read().splitlines()
    words = [line.split(" ", 1)[0] for line in lines]
    return words, lines, np.array([[float(x) for x in line.split()[1:]] for line in lines], np.float32)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("distribute")
    vectors, corpus = folder / "vectors.txt", folder / "corpus.txt"
    with open(SAMPLE_VECTORS, encoding="utf-8") as f:
        vectors.write_text("".join(next(f) for _ in range(ROWS)), encoding="utf-8")
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        corpus.write_text("".join(next(f) for _ in range(LINES)), encoding="utf-8")
    return SimpleNamespace(folder=folder, vectors=str(vectors), corpus=str(corpus))


def polled_workers(args: list, env: dict, ckpt, early_at: int) -> SimpleNamespace:
    """``train args --workers 2`` (through tests/debug_worker.py), a checkpoint in ``ckpt`` every ``early_at``
    steps; its exit code, output and each worker's number of threads at the first poll that finds a complete
    checkpoint (``early``: the runtime's own threads have started) and at most, polled through /proc while it runs.
    Any complete checkpoint, not ckpt-{early_at} alone: only the newest three are kept, and a run that steps
    fast (the gathered step without TensorFlow) deleted that one between two polls on a busy machine."""
    streams = {name: ckpt.parent / f"{ckpt.name}.{name}" for name in ("stdout", "stderr")}
    with open(streams["stdout"], "w") as stdout, open(streams["stderr"], "w") as stderr:
        run = subprocess.Popen([sys.executable, debug_worker.__file__, "train", *args, "--workers", "2",
                                "--checkpoint-dir", str(ckpt), "--checkpoint-every", str(early_at),
                                "--keep-checkpoints"], stdout=stdout, stderr=stderr, env={**os.environ, **env})
        early, most = None, {}
        try:
            while run.poll() is None:
                counts = thread_counts(run.pid)
                most.update({pid: max(n, most.get(pid, 0)) for pid, n in counts.items()})
                if early is None and ckpt.is_dir() and any(CHECKPOINT.fullmatch(n) for n in os.listdir(ckpt)):
                    early = counts
                time.sleep(0.01)   # the first checkpoint comes shortly before the end: log/distribute_speed.md
        finally:
            run.kill()
        code = run.wait()
    return SimpleNamespace(returncode=code, stdout=streams["stdout"].read_text(), stderr=streams["stderr"].read_text(),
                           threads_early=early, threads_most=most)


def assert_threads_flat(run, steps: int) -> None:
    """TensorFlow times a collective with a thread that sleeps the whole timeout: with a timeout set
    (EMBEDTUNE_COLLECTIVE_TIMEOUT=1800), each step of the gathered step through TensorFlow left threads behind
    (a run grew from 631 threads a worker at step 20 to 3,184 at its end; without, 125 to 126) until a worker
    could start no more and aborted (SIGABRT, "Resource temporarily unavailable") minutes into a long run."""
    early, most = run.threads_early, run.threads_most
    assert early and steps >= 20, (early, steps)
    grown = {pid: most[pid] - early[pid] for pid in early}
    assert max(grown.values()) < 100, (early, most)


@pytest.fixture(scope="module")
def two_workers(inputs):
    """The run on 2 workers, each writing a hash of its tables at the end, and its workers' threads."""
    out, hashes = inputs.folder / "two.txt", inputs.folder / "hashes"
    hashes.mkdir()
    run = polled_workers([inputs.vectors, inputs.corpus, *ARGS, "-o", str(out), "--json",
                          str(inputs.folder / "two.json")], {debug_worker.ENV_TABLE_HASH: str(hashes)},
                         inputs.folder / "two-ckpt", 20)
    assert run.returncode == 0, run.stderr
    return SimpleNamespace(output=out, hashes=hashes, summary=json.loads((inputs.folder / "two.json").read_text()),
                           stderr=run.stderr, threads=run)


def test_two_workers_equal_one_process_over_the_same_global_batches(inputs, two_workers):
    """Each worker reads its own share of the lines; one process training the two shares' batches
    concatenated (debug_worker.Shares) makes the same global batches, so the tables agree."""
    one = inputs.folder / "one.txt"
    run = embedtune(inputs.vectors, inputs.corpus, *ARGS, "-o", str(one), "--json", str(inputs.folder / "one.json"),
                    env={debug_worker.ENV_SHARES: "2"})
    assert run.returncode == 0, run.stderr
    words, _, single = load_text(one)
    words2, _, split = load_text(two_workers.output)
    assert words == words2
    # Every worker steps the joined global batch through the compiled step the emulation takes: the same bits.
    np.testing.assert_array_equal(split, single)
    assert not np.array_equal(split[FROZEN:ROWS], load_text(inputs.vectors)[2][FROZEN:]), "nothing trained"
    s, one_summary = two_workers.summary, json.loads((inputs.folder / "one.json").read_text())
    assert s["workers"] == 2 and s["epochs"] == 2 and s["steps"] > 50 and s["max_frozen_change"] == 0.0
    # Each step the chief sent its part of the batch (128 pairs: ids, negatives, weights, and a header) once.
    assert s["sync_every"] == 0 and 128 * (4 + 4 + 5 * 4 + 4) * s["steps"] <= s["exchange_bytes_sent"]
    assert s["exchange_bytes_sent"] < 2 * 128 * (4 + 4 + 5 * 4 + 4) * s["steps"] and s["exchange_seconds"] > 0
    for key in ("steps", "pairs", "words_done", "loss_history"):
        assert s[key] == pytest.approx(one_summary[key], rel=1e-6), key
    # Not the whole corpus in order: a plain one-process run makes other batches.
    plain = inputs.folder / "plain.txt"
    run = CliRunner().invoke(cli, ["train", inputs.vectors, inputs.corpus, *ARGS, "-o", str(plain)],
                             catch_exceptions=False)   # one process, no hook: this one suffices
    assert run.exit_code == 0, run.stderr
    assert np.abs(load_text(plain)[2] - split).max() > 1e-3


def test_a_worker_whose_share_ends_first_trains_padding_until_the_others_end(inputs):
    """Worker 1's share (every odd line) is single words, so it has no pair: it steps with padding
    while worker 0 trains its share, and both end the epoch together, as the one-process emulation.
    The run is stopped by killing worker 1 and resumed: what it writes is the emulation's (the same
    global batches, as if never interrupted)."""
    lopsided = inputs.folder / "lopsided.txt"
    lines = open(inputs.corpus, encoding="utf-8").read().splitlines()
    lopsided.write_text("".join(f"{line}\n{line.split()[0]}\n" for line in lines), encoding="utf-8")
    emulated = inputs.folder / "lop-one.txt"
    run = embedtune(inputs.vectors, str(lopsided), *ARGS, "-o", str(emulated), "--json", "-",
                    env={debug_worker.ENV_SHARES: "2"})
    assert run.returncode == 0, run.stderr
    s1 = json.loads(run.stdout)
    # Worker 1 killed in the second epoch: one line, no output, the chief's checkpoints only; one process
    # cannot take the run over (the batch split depends on the number of workers); resumed on 2 workers,
    # worker 1's ended share stays ended and worker 0's goes on from its own position.
    out, ckpt = inputs.folder / "lop-killed.txt", inputs.folder / "lop-ckpt"
    one = [inputs.vectors, str(lopsided), *ARGS, "-o", str(out), "--checkpoint-dir", str(ckpt), "--checkpoint-every", "5"]
    die_at = s1["steps"] // 2 + 7
    run = embedtune(*one, "--workers", "2", env={debug_worker.ENV_DIE_AT: f"1:{die_at}"})   # kill -9s itself
    assert (run.returncode, run.stdout, run.stderr) == (1, "", "Error: worker 1 exited (killed by SIGKILL)\n")
    assert not out.exists()
    newest = (die_at - 1) // 5 * 5
    saved = sorted(os.listdir(ckpt))
    assert saved[0] == ".lock" and f"ckpt-{newest}" in saved, saved   # the chief's; worker 1 wrote none
    assert all(name.startswith("ckpt-") and int(name[5:]) <= newest for name in saved[1:]), saved
    state = json.loads((ckpt / f"ckpt-{newest}" / "state.json").read_text())["position"]
    assert state["epoch"] == 2 and state["shares"][1] == [0, 0, 0, 0] and state["shares"][0][3] == 1
    run = CliRunner().invoke(cli, ["train", *one, "--resume"], catch_exceptions=False)   # refused: in-process
    assert run.exit_code == 1
    assert run.stderr.count("\n") == 1 and "workers: 2 then, unset (default) now" in run.stderr, run.stderr
    run = embedtune(*one, "--workers", "2", "--resume", "--json", "-")
    assert run.returncode == 0, run.stderr
    s2 = json.loads(run.stdout)
    assert s2["resumed"] is True
    np.testing.assert_array_equal(load_text(out)[2], load_text(emulated)[2])
    assert s2["steps"] == s1["steps"] and s2["pairs"] == s1["pairs"] and s2["words_done"] == s1["words_done"]
    # Worker 0's pairs alone fill each step's 128-pair half (the last of each epoch partly): worker 1
    # brought only padding, and the epoch lasted as long as worker 0's share.
    assert s2["pairs"] > 0 and s2["pairs"] / 128 <= s2["steps"] < s2["pairs"] / 128 + 2
    assert s2["words_done"] == 2 * s2["corpus_words"]


def test_frozen_rows_bit_identical_and_workers_tables_identical(inputs, two_workers):
    _, written, _ = load_text(two_workers.output)
    _, given, _ = load_text(inputs.vectors)
    assert written[:FROZEN] == given[:FROZEN]   # byte for byte: float32 text round-trips exactly
    reports = [json.loads((two_workers.hashes / f"worker-{k}.json").read_text()) for k in range(2)]
    assert reports[0]["steps"] == reports[1]["steps"] == two_workers.summary["steps"]
    assert reports[0]["sha256"] == reports[1]["sha256"]
    # The parts of each batch were exchanged over the mesh and stepped by the compiled step (gathered.py).
    assert reports[0]["tensorflow"] is reports[1]["tensorflow"] is False
    # Each counted its share of the lines; the gathered counts are the whole corpus's, in its order.
    words = load_text(inputs.vectors)[0]
    corpus = Corpus(inputs.corpus, lowercase=True, tokenize="auto", vocabulary=set(words))   # as train reads it
    counts, total, n_lines = corpus.count()
    assert reports[0]["counts"] == reports[1]["counts"] == debug_worker.counts_digest(counts, total, n_lines)
    assert reports[0]["own_tokens"] + reports[1]["own_tokens"] == total == two_workers.summary["corpus_words"]
    assert 0 < reports[1]["own_tokens"] < total
    assert reports[0]["counted_whole"] is reports[1]["counted_whole"] is False   # no whole pass before it
    assert sorted(os.listdir(inputs.folder / "hashes")) == ["worker-0.json", "worker-1.json"]


# A stand-in worker for the launcher's tests (no TensorFlow): the chief says why it lost its peers through
# distribute.tell_launcher and exits as a launched worker does (PEER_LOST); worker 1 stays up, as a stalled
# worker did (its heartbeats late: TensorFlow's coordination service declared it dead and aborted the
# chief's collective while it lived on).
LOST_CHIEF = """
import json, os, sys, time
from embedtune import distribute
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
    distribute.tell_launcher("worker 0: a collective step failed (UnavailableError: task 1 stopped sending heartbeats)")
    sys.exit(distribute.PEER_LOST)
time.sleep(60)
"""


def test_the_launcher_names_why_a_worker_lost_its_peers():
    """The chief's standard error is the user's, so the launcher could not read its reason there: the line
    said only "worker 0 exited (lost its peers)" (a CI run's one clue). The worker leaves it in a file."""
    began = time.monotonic()
    run = distribute.launch([sys.executable, "-c", LOST_CHIEF], 2, 1)
    assert (run.code, run.failure) == (distribute.PEER_LOST, "worker 0 exited (lost its peers: worker 0: a collective "
                                       "step failed (UnavailableError: task 1 stopped sending heartbeats))")
    assert time.monotonic() - began < 30   # worker 1 ended by the launcher, not waited for


def thread_counts(parent: int) -> dict[int, int]:
    """The number of threads of each child process of ``parent`` (from /proc)."""
    counts = {}
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
            if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                counts[int(entry)] = len(os.listdir(f"/proc/{entry}/task"))
        except (OSError, ValueError, IndexError):   # gone meanwhile, or not a process
            pass
    return counts


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_a_workers_threads_do_not_grow_with_its_steps(two_workers):
    """Read off the run the other tests check: the gathered step of joined batches, an exchange every step
    over the mesh (a sender thread a peer each time, joined before the step goes on). The gathered step
    through TensorFlow's collectives: the --anchor run's test (assert_threads_flat)."""
    assert two_workers.summary["steps"] >= 60
    assert_threads_flat(two_workers.threads, two_workers.summary["steps"])


def test_the_gathered_step_through_tensorflow_equals_one_process_and_keeps_its_threads(inputs):
    """With --anchor (no compiled step) the workers gather their gradient slices through TensorFlow's
    collectives and each applies the merged update with TensorFlow's step: one process training the same
    global batches, up to the order of float32 sums; the tables alike on both; the threads flat."""
    args = [inputs.vectors, inputs.corpus, *ARGS, "--anchor", "1", "--json", "-"]
    hashes = inputs.folder / "anchor-hashes"
    hashes.mkdir()
    two = polled_workers([*args, "-o", str(inputs.folder / "anchor-two.txt")],
                         {debug_worker.ENV_TABLE_HASH: str(hashes)}, inputs.folder / "anchor-ckpt", 20)
    assert two.returncode == 0, two.stderr
    one = embedtune(*args, "-o", str(inputs.folder / "anchor-one.txt"), env={debug_worker.ENV_SHARES: "2"})
    assert one.returncode == 0, one.stderr
    split, single = (load_text(inputs.folder / f"anchor-{n}.txt")[2] for n in ("two", "one"))
    np.testing.assert_allclose(split, single, rtol=0, atol=1e-6)
    assert not np.array_equal(split[FROZEN:ROWS], load_text(inputs.vectors)[2][FROZEN:]), "nothing trained"
    reports = [json.loads((hashes / f"worker-{k}.json").read_text()) for k in range(2)]
    assert reports[0]["sha256"] == reports[1]["sha256"] and reports[0]["tensorflow"] is True
    if os.path.isdir("/proc/self/task"):   # (counted through /proc)
        assert_threads_flat(two, json.loads(two.stdout)["steps"])


@pytest.mark.parametrize("extra, message", [
    (["--batch-size", "255", "--sync-every", "0"], "Error: --batch-size 255 does not split evenly over 2 workers"),
    (["--batch-size", "40", "--negatives", "shared", "--sync-every", "0"],
     "Error: --negatives shared: each worker's part of the batch (40 / 2 = 20) must be a multiple of 16"),
])
def test_what_the_workers_cannot_split_is_refused_before_any_starts(inputs, extra, message):
    result = CliRunner().invoke(cli, ["train", inputs.vectors, inputs.corpus, "-o", str(inputs.folder / "x.txt"),
                                      "--workers", "2", *extra])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == message
    assert not (inputs.folder / "x.txt").exists()


def test_the_launchers_batch_check_is_the_workers_own(inputs, glosses):
    """--negatives shared groups sgns's pairs only: classify's lines split in any equal parts, before the
    launch (the dry run's check) as in the workers."""
    result = CliRunner().invoke(cli, ["train", inputs.vectors, glosses.train, "-o", str(inputs.folder / "x.txt"),
                                      "--objective", "classify", "--workers", "2", "--batch-size", "40",
                                      "--negatives", "shared", "--dry-run"])
    assert result.exit_code == 0, result.output


def test_workers_need_files_not_standard_input(inputs):
    result = CliRunner().invoke(cli, ["train", inputs.vectors, "-", "-o", str(inputs.folder / "x.txt"),
                                      "--workers", "2"], input="a b c\n")
    assert result.exit_code == 1
    assert "Error: --workers: every worker reads CORPUS, so it must be a file, not standard input" in result.output


def test_word_ngrams_with_workers_is_refused_before_any_worker_starts(inputs):
    out = inputs.folder / "x.txt"
    result = CliRunner().invoke(cli, ["train", inputs.vectors, str(SAMPLE_VECTORS.parent / "wordnet-glosses.train.txt"), "-o", str(out),
                                      "--objective", "classify", "--word-ngrams", "2", "--workers", "2"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: --workers: --word-ngrams runs in one process (the workers would need the n-gram rows' list "
        "gathered as the labels are; not built)")
    assert "Starting" not in result.output and not out.exists()


def test_cluster_from_tf_config():
    hosts = ["localhost:1", "localhost:2", "localhost:3"]
    spec = {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": 2}}
    assert cluster_from_env({"TF_CONFIG": json.dumps(spec)}) == Cluster(2, 3)
    spec = {"cluster": {"chief": hosts[:1], "worker": hosts[1:]}, "task": {"type": "worker", "index": 0}}
    assert cluster_from_env({"TF_CONFIG": json.dumps(spec)}) == Cluster(1, 3)   # the chief is worker 0
    assert cluster_from_env({}) is None
    assert cluster_from_env({"TF_CONFIG": json.dumps({"cluster": {"worker": hosts[:1]}})}) is None
    with pytest.raises(EmbedtuneError, match="only chief, worker and ps tasks are supported, not evaluator"):
        cluster_from_env({"TF_CONFIG": json.dumps({"cluster": {"worker": hosts[:2], "evaluator": hosts[2:]},
                                                   "task": {"type": "worker", "index": 0}})})
    with pytest.raises(EmbedtuneError, match="task worker 5 is not in the cluster"):
        cluster_from_env({"TF_CONFIG": json.dumps({"cluster": {"worker": hosts}, "task": {"index": 5}})})
    with pytest.raises(EmbedtuneError, match="TF_CONFIG is not a cluster description"):
        cluster_from_env({"TF_CONFIG": "{"})


def test_a_share_is_every_nth_line_and_the_others_are_not_decoded(tmp_path):
    path = tmp_path / "corpus.txt"
    # Line 2 (worker 1's of 2) is not UTF-8: worker 0 never decodes it; worker 1 names it.
    path.write_bytes(b"a b\n\xff\xfe c\n\ne f\ng h\n")
    corpus = Corpus(str(path))
    assert list(distribute.CorpusShare(corpus, 0, 2).lines()) == [["a", "b"], ["g", "h"]]   # lines 1, 3 (empty), 5
    with pytest.raises(EmbedtuneError) as err:
        list(distribute.CorpusShare(corpus, 1, 2).lines())
    assert err.value.line == 2
    shares = [list(Corpus([["a"], ["b"], ["c"], ["d"], ["e"]]).lines(share=(k, 3))) for k in range(3)]
    assert shares == [[["a"], ["d"]], [["b"], ["e"]], [["c"]]]


def test_a_workers_share_of_a_file_through_the_compiled_reader_is_the_reference_readers(tmp_path, monkeypatch):
    """A worker counts its share of a file and reads it again (training, glove, the new words' contexts)
    through the compiled reader (compiled_share): the reference's ShareCount (words, order, first lines,
    lines) and id chunks (ids, lines, numbers, tokens), a long line cut into pieces and auto tokenizing
    included; a corpus the compiled reader does not read keeps the reference's passes."""
    from embedtune.corpus import fast, files, id_chunks
    from embedtune.distribute.compiled_share import count_share, reads_compiled

    for module in (fast, files):   # lines of 4 KB or more come in pieces (else 1 MB: slow to read here)
        monkeypatch.setattr(module, "MAX_PIECE_BYTES", 4096)
    lines = open(SAMPLE_CORPUS, encoding="utf-8").read().splitlines()[:60]
    lines[5:5] = ["", "   ", "Ünïcode wörds, \u00e9 (end). " + lines[0], " ".join(["long"] * 3000)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocabulary = {w for line in lines for w in line.lower().split()}
    n = 3
    for k in range(n):
        reference = Corpus(str(path), lowercase=True, tokenize="auto", vocabulary=vocabulary)
        reference.compiled = False   # the reference's passes, as EMBEDTUNE_COMPILED_READER=0 makes them
        compiled = Corpus(str(path), lowercase=True, tokenize="auto", vocabulary=vocabulary)
        assert reads_compiled(compiled) and not reads_compiled(reference)
        want, got = reference.count_share((k, n)), count_share(compiled, (k, n))
        assert list(got.counts.items()) == list(want.counts.items()) and got.n_lines == want.n_lines
        np.testing.assert_array_equal(got.first_line, want.first_line)
        assert compiled.digest == reference.digest
        index = {w: i for i, w in enumerate(want.counts) if i % 3}   # some words without a row
        shares = [distribute.CorpusShare(c, k, n) for c in (reference, compiled)]
        assert shares[0].fast is None and shares[1].fast is not None
        for numbered in (False, True):
            a, b = (list(id_chunks(share, index, 500, numbered=numbered)) for share in shares)
            assert len(a) == len(b) > 1
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x.ids, y.ids)
                np.testing.assert_array_equal(x.line, y.line)
                assert x.raw_tokens == y.raw_tokens
                if numbered:
                    np.testing.assert_array_equal(x.numbers, y.numbers)
        assert compiled.reads[(k, n)] == 2 and compiled.reads[None] == 1   # the compiled count's scan


@pytest.mark.parametrize("source", ["file", "sentences"])
def test_counts_of_the_shares_merged_are_the_whole_corpus_count(source):
    """What each worker ends with (Worker.count, Shares.count): the shares' counts, sent as bytes and
    merged, equal one pass over the whole corpus: counts, their words' order, tokens, lines, digest."""
    from embedtune.corpus import ShareCount, merge_counts

    lines = open(SAMPLE_CORPUS, encoding="utf-8").read().splitlines()
    lines[5:5] = ["", "   ", "Ünïcode wörds \u00e9 " + lines[0]]   # empty lines are counted in the shares
    corpus = Corpus(SAMPLE_CORPUS if source == "file" else lines, lowercase=True)
    whole = corpus.count()
    digest = corpus.digest
    for n in (2, 3):
        parts = [corpus.count_share((k, n)) for k in range(n)]
        assert corpus.digest == digest   # every line hashed, the share's or not
        assert all(0 < sum(p.counts.values()) < whole[1] for p in parts)
        counts, total, n_lines = merge_counts([ShareCount.from_bytes(p.to_bytes()) for p in parts])
        assert list(counts.items()) == list(whole[0].items())
        assert (total, n_lines) == whole[1:]
        assert debug_worker.Shares(n).count(corpus) == (counts, total, n_lines)


def test_glove_pair_counts_of_the_shares_summed_are_the_whole_corpus_counts():
    """What each glove worker ends with (glove.count_pairs on a WorkerShare): every share's
    co-occurrence cells, sent as bytes and summed, are the whole corpus's, cell for cell."""
    from embedtune.objectives.glove import cells_bytes, cooccurrence, sum_pairs
    from embedtune.corpus import id_chunks

    corpus = Corpus(SAMPLE_CORPUS, lowercase=True)
    counts, _, _ = corpus.count()
    index = {w: i for i, w in enumerate(counts)}
    whole, raw = cooccurrence(id_chunks(corpus, index), len(index), 10)
    for n in (2, 3):
        parts = [cooccurrence(id_chunks(distribute.CorpusShare(corpus, k, n), index), len(index), 10) for k in range(n)]
        assert all(0 < part.nnz < whole.nnz for part, _ in parts)
        summed, summed_raw = sum_pairs([cells_bytes(*part) for part in parts], len(index))
        assert summed_raw == raw
        np.testing.assert_array_equal(summed.row, whole.row)
        np.testing.assert_array_equal(summed.col, whole.col)
        np.testing.assert_allclose(summed.data, whole.data, rtol=1e-12)   # float64 sums in another order


def test_glove_two_workers_count_their_shares_and_equal_one_process(inputs):
    """glove on 2 workers, each counting the co-occurrences of its own lines and the new words' contexts
    in them, against one process training the same global batches from the whole corpus's counts."""
    args = [inputs.vectors, inputs.corpus, *ARGS, "--objective", "glove", "--epochs", "3"]
    outputs = []
    hashes = inputs.folder / "glove-hashes"
    hashes.mkdir()
    # The workers count the sample corpus with the compiled reader too (a small file takes the reference's
    # passes: corpus/fast.py); this process's run does so already (tests/conftest.py).
    workers_env = {debug_worker.ENV_TABLE_HASH: str(hashes), "EMBEDTUNE_COMPILED_READER": "1"}
    for name, extra, env in (("glove-two", ["--workers", "2"], workers_env),
                             ("glove-one", [], {debug_worker.ENV_SHARES: "2"})):
        out = inputs.folder / f"{name}.txt"
        run = embedtune(*args, *extra, "-o", str(out), "--json", "-", env=env)
        assert run.returncode == 0, run.stderr
        outputs.append((load_text(out)[2], json.loads(run.stdout)))
    (two, s2), (one, s1) = outputs
    np.testing.assert_array_equal(two, one)
    assert not np.array_equal(two[FROZEN:], load_text(inputs.vectors)[2][FROZEN:]), "nothing trained"
    for key in ("steps", "pairs", "words_done", "corpus_words", "glove_scale", "glove_fit_pairs"):
        assert s2[key] == s1[key], key
    # Each worker read only its own lines for the co-occurrences (and for the counts).
    reports = [json.loads((hashes / f"worker-{k}.json").read_text()) for k in range(2)]
    assert reports[0]["sha256"] == reports[1]["sha256"]
    assert reports[0]["tensorflow"] is reports[1]["tensorflow"] is False
    for key in ("objective_tokens", "own_tokens"):
        assert reports[0][key] + reports[1][key] == s2["corpus_words"] and 0 < reports[1][key] < s2["corpus_words"]
    # The new words' starts: each worker sums the contexts over its own lines, the sums added up over the
    # workers (the emulation's start is one process's, from the whole corpus; the rows above compare them).
    for key in ("new", "new_from_context", "new_too_few_contexts"):
        assert s2[key] == s1[key], key
    assert s2["new_from_context"] > 10
    # The file was scanned whole once (the compiled count, corpus/fast.py); every later pass a worker
    # began (the context pass, the co-occurrences) was over its own share.
    for k, report in enumerate(reports):
        assert set(report["reads"]) == {"None", f"({k}, 2)"} and report["reads"]["None"] == 1, report["reads"]
        assert report["reads"][f"({k}, 2)"] >= 2


@pytest.mark.parametrize("source", ["file", "sentences"])
def test_context_sums_of_the_shares_add_up_to_the_whole_corpus_with_sampled_occurrences(source):
    """What each worker's context pass adds up (init.context_sums on a share): every share's sums,
    weights and contexts summed are the whole corpus's, the same occurrences kept where ``keep``
    samples them (each occurrence's draw is its own, not the next of a stream)."""
    from embedtune.newwords.contexts import context_sums, sif_weights
    from train_fixtures import glove

    vectors = glove(3000)
    corpus = Corpus(SAMPLE_CORPUS if source == "file" else open(SAMPLE_CORPUS, encoding="utf-8").read().splitlines(),
                    lowercase=True)
    counts = corpus.count()[0]
    targets = [w for w, _ in counts.most_common(40) if w in vectors.index] + ["unseen-word"]
    keep = np.full(len(targets), 0.3)
    weights = sif_weights(vectors, counts)
    whole = context_sums(vectors, corpus, targets, 5, weights, keep, seed=3, vocabulary=counts)
    assert 0 < whole.contexts[0] < 0.5 * counts[targets[0]]   # sampled
    for n in (2, 3):
        parts = [context_sums(vectors, distribute.CorpusShare(corpus, k, n), targets, 5, weights, keep, seed=3,
                              vocabulary=counts) for k in range(n)]
        assert all(0 < p.contexts.sum() < whole.contexts.sum() for p in parts)
        np.testing.assert_array_equal(sum(p.contexts for p in parts), whole.contexts)
        np.testing.assert_allclose(sum(p.mass for p in parts), whole.mass, rtol=1e-12)
        # Within a chunk the products are summed in float32 (init.context_sums): the 40 most frequent
        # words' sums, of thousands of products each, agree to the order of those sums (2e-5 of a value,
        # 1e-7 of the largest where values cancel).
        np.testing.assert_allclose(sum(p.sums for p in parts), whole.sums, rtol=1e-4, atol=1e-6 * np.abs(whole.sums).max())


GLOSSES = SAMPLE_VECTORS.parent / "wordnet-glosses.train.txt"
GLOSSES_VALID = SAMPLE_VECTORS.parent / "wordnet-glosses.valid.txt"


@pytest.fixture(scope="module")
def glosses(inputs):
    """200 labelled lines (24 labels) and 60 validation lines of the shipped WordNet glosses."""
    train, valid = inputs.folder / "glosses.txt", inputs.folder / "glosses-valid.txt"
    train.write_text("".join(open(GLOSSES, encoding="utf-8").readlines()[:200]), encoding="utf-8")
    valid.write_text("".join(open(GLOSSES_VALID, encoding="utf-8").readlines()[:60]), encoding="utf-8")
    return SimpleNamespace(train=str(train), valid=str(valid))


def classify_on_two_workers(inputs, glosses, name: str, init: str) -> tuple[list, list]:
    """classify on 2 workers and its one-process emulation: (outputs, summaries), and the workers' reports."""
    args = [inputs.vectors, glosses.train, "--objective", "classify", "--deterministic", "--epochs", "2",
            "--batch-size", "16", "--freeze-top", str(FROZEN), "--init", init, "--min-count", "2", "-q",
            "--valid", glosses.valid, "--sync-every", "0"]
    hashes = inputs.folder / f"{name}-hashes"
    hashes.mkdir()
    outputs = []
    for run_name, extra, env in ((f"{name}-two", ["--workers", "2"], {debug_worker.ENV_TABLE_HASH: str(hashes)}),
                                 (f"{name}-one", [], {debug_worker.ENV_SHARES: "2"})):
        out = inputs.folder / f"{run_name}.txt"
        run = embedtune(*args, *extra, "-o", str(out), "--json", "-", env=env)
        assert run.returncode == 0, run.stderr
        outputs.append((out, json.loads(run.stdout)))
    return outputs, [json.loads((hashes / f"worker-{k}.json").read_text()) for k in range(2)]


def test_classify_two_workers_read_their_shares_and_equal_one_process(inputs, glosses):
    """Each classify worker reads, counts and holds only its own labelled lines; the label index, the
    lines and the batch budgets are gathered, the classifier-alone fit sums every share's loss and
    gradient at each iteration; each step's parts are joined, their words merged (Classify.join), and stepped
    by every worker: the run is, bit for bit, one process training the same global batches."""
    from embedtune.corpus.labelled import LabelledCorpus

    ((two, s2), (one, s1)), reports = classify_on_two_workers(inputs, glosses, "classify", "random")
    words, written, split = load_text(two)
    _, given, start = load_text(inputs.vectors)
    assert words == load_text(one)[0]
    np.testing.assert_array_equal(split, load_text(one)[2])
    assert written[:FROZEN] == given[:FROZEN]   # byte for byte
    assert not np.array_equal(split[FROZEN:ROWS], start[FROZEN:]), "nothing trained"
    assert reports[0]["sha256"] == reports[1]["sha256"]   # tables, classifier and optimizer state alike
    assert reports[0]["tensorflow"] is reports[1]["tensorflow"] is False
    for key in ("steps", "pairs", "words_done", "labels", "loss_kind", "train_lines", "train_lines_no_known_word",
                "lines_per_batch", "corpus_words", "corpus_lines"):
        assert s2[key] == s1[key], key
    assert s2["labels"] == 24 and s2["train_lines"] + s2["train_lines_no_known_word"] == 200 and s2["steps"] > 20
    assert s2["loss_history"] == s1["loss_history"]
    # The fitted classifier is the same (the "before" figure, on the chief), and so is what training made of it.
    assert s2["valid"]["before"] == s1["valid"]["before"] and s2["valid"]["after"] == s1["valid"]["after"]
    # The shares' counts (labels removed) merged are the whole corpus's count, in its order.
    words = set(load_text(inputs.vectors)[0])
    with LabelledCorpus(glosses.train, lowercase=True, tokenize="auto", vocabulary=words) as corpus:
        whole = corpus.count()
    assert reports[0]["counts"] == reports[1]["counts"] == debug_worker.counts_digest(*whole)
    # No worker began a pass over the whole corpus, nor over the other's share.
    assert reports[0]["reads"] == {"(0, 2)": 1} and reports[1]["reads"] == {"(1, 2)": 1}
    assert reports[0]["own_tokens"] + reports[1]["own_tokens"] == whole[1] and 0 < reports[1]["own_tokens"] < whole[1]


def test_labelled_shares_are_every_nth_line_and_the_others_are_not_decoded(tmp_path):
    from embedtune.corpus.labelled import LabelledCorpus

    path = tmp_path / "labelled.txt"
    # Line 2 (share 1 of 2) is not UTF-8 and line 4 has no label: share 0 decodes neither; share 1 names them.
    path.write_bytes(b"__label__a x y\n\xff __label__b\n\nno label\n__label__a w\n__label__c z\n")
    corpus = LabelledCorpus(str(path))
    assert [(e.line, e.labels, e.tokens) for e in corpus.examples((0, 2))] == [
        (1, ["__label__a"], ["x", "y"]), (5, ["__label__a"], ["w"])]   # line 3 is blank
    assert list(corpus.lines(share=(0, 2))) == [["x", "y"], ["w"]]
    with pytest.raises(EmbedtuneError) as err:
        list(corpus.examples((1, 2)))
    assert err.value.line == 2
    assert [e.line for e in corpus.examples((2, 3))] == [6]
    assert corpus.reads == {(0, 2): 1, (1, 2): 1, (2, 3): 1}   # the second pass over share 0 came from the cache


def test_share_batches_split_the_epoch_and_resume_from_a_position():
    """Two shares of the sample corpus's lines together hold every line's pairs once; a share restarted
    from a position makes the rest of its batches again, the same."""
    from embedtune.objectives.sgns import SkipGram
    from embedtune.config import Config, resolve, train_config
    from embedtune.objectives.rows import LocalRows

    lines = open(SAMPLE_CORPUS, encoding="utf-8").read().splitlines()[:60]
    corpus = Corpus(lines)
    words = sorted({w for line in lines for w in line.split()})
    index = {w: i for i, w in enumerate(words)}
    counts = np.ones(len(words), np.int64)
    t = resolve(Config(train=train_config(objective="sgns", batch_size=64, sample=0, window=1))).train

    def batches(k, start=None):
        # An objective a share, as on the workers: sgns keeps the chunks it read for the next epochs.
        objective = SkipGram(LocalRows(counts, len(words), np.ones(len(words), bool), None, index, 4), t)
        return list(distribute.share_batches(objective, corpus, index, 7, 1, k, 2, start, lambda raw: raw))

    shares = [batches(0), batches(1)]
    assert all(len(b) > 3 for b in shares)
    words_of = [sum(len(lines[i].split()) for i in range(k, len(lines), 2)) for k in range(2)]
    assert [b[-1].words_done for b in shares] == words_of   # each share's words, all of them
    # Window 1, no subsampling: every two neighbours of a line make two pairs, each in one share only.
    made = sorted((int(c), int(o)) for b in shares[0] + shares[1] for c, o, w in
                  zip(b.tensors["center"], b.tensors["context"], b.tensors["weight"]) if w)
    ids = [[index[w] for w in line.split()] for line in lines]
    assert made == sorted(pair for line in ids for a, b in zip(line, line[1:]) for pair in ((a, b), (b, a)))
    again = batches(1, [shares[1][1].chunk, shares[1][1].batch, 0, 1])
    assert len(again) == len(shares[1]) - 2
    for a, b in zip(again, shares[1][2:]):
        assert all(np.array_equal(a.tensors[key], b.tensors[key]) for key in ("center", "context", "negatives"))


def test_training_never_imports_distribute_and_the_layers_import_alone():
    """The loop takes a strategy and never imports embedtune.distribute; no import circle (top-level or
    inside functions) runs through training/, distribute/ or kernels/; each imports alone without TensorFlow."""
    import ast
    from pathlib import Path

    root = Path(__file__).parent.parent / "embedtune"
    imports = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        imports[name] = found
    for name, found in imports.items():
        if name.startswith("embedtune.training"):
            assert not any(m.startswith("embedtune.distribute") for m in found), name
    layers = ("embedtune.training", "embedtune.distribute", "embedtune.kernels")
    # A module naming its own package (``from embedtune.training import batches``) is no circle: the
    # packages' __init__ import their modules lazily or not at all.
    graph = {name: {m for m in found if m in imports and m != name and not name.startswith(m + ".")}
             for name, found in imports.items()}

    def reaches(start, goal, seen):
        for m in graph.get(start, ()):
            if m == goal or (m not in seen and (seen.add(m) or reaches(m, goal, seen))):
                return True
        return False

    assert [name for name in graph if name.startswith(layers) and reaches(name, name, set())] == []
    for module in ("embedtune.training", "embedtune.distribute", "embedtune.kernels", "embedtune.training.optimizers"):
        check = subprocess.run([sys.executable, "-c", f"import sys, {module}; print('tensorflow' in sys.modules)"],
                               capture_output=True, text=True, timeout=120)
        assert check.stdout.split() == ["False"], (module, check.stderr[-500:])
