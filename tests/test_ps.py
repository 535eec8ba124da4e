"""Parameter servers (TF_CONFIG naming ps tasks; embedtune/distribute/ps.py and serve.py): a loopback
cluster of real `embedtune train` processes trains as one process does, every task ends on its own,
and what the mode does not build or a peer that is not there is one line, never a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune import kernels
from embedtune.cli.main import cli
from embedtune.distribute import free_ports, server_cluster_from_env
from embedtune.distribute.cluster import cluster_from_env
from embedtune.distribute.serve import task_config
from embedtune.errors import EmbedtuneError

from loopback import loopback_cluster
from train_fixtures import SAMPLE_CORPUS, bits, glove, read_text_vectors, seconds_to_stop, write_glove_text

FROZEN = 1000
# adagrad, TensorFlow's unfused step: the one process compared with takes it too (EMBEDTUNE_KERNEL=0; its
# compiled steps would give other bits).
ARGS = ["--objective", "sgns", "--optimizer", "adagrad", "--epochs", "1", "--seed", "3", "--threads", "1",
        "--batch-size", "256", "--freeze-top", str(FROZEN), "-q"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ps")
    vectors, corpus = folder / "glove.3k.txt", folder / "news.txt"
    write_glove_text(glove(3000), vectors)
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:40]) + "\n", encoding="utf-8")
    return vectors, corpus


def start(args, tf_config, wait="60"):
    env = dict(os.environ, TF_CONFIG=tf_config, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", "train", *map(str, args),
                             "--peer-timeout", wait], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs, timeout=240):
    """Each process's (exit code, stderr); any still running after ``timeout`` is killed and fails the test."""
    ended = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=timeout)
            ended.append((proc.returncode, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return ended


def one_error_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert "Traceback" not in text and [line for line in lines if line.startswith("Error:")] == lines[-1:], text
    return lines[-1]


def test_a_loopback_cluster_trains_the_rows_one_process_trains(files, tmp_path, monkeypatch):
    """2 ps + 1 worker + the chief, each `embedtune train` with its TF_CONFIG on one thread: the tables live
    sharded on the two servers, the chief writes a file identical to one process's (one worker: the
    steps run in the one process's order; adagrad, TensorFlow's unfused step both ways), frozen rows
    bit-identical, and every server ends by itself once the chief is gone."""
    vectors, corpus = files
    spec = loopback_cluster(ps=2, workers=1)
    out, summary = tmp_path / "ps.txt", tmp_path / "ps.json"
    procs = [start([vectors, corpus, *ARGS, "-o", out, "--json", summary], task_config(spec, kind, index))
             for kind, index in (("ps", 0), ("ps", 1), ("worker", 0), ("chief", 0))]
    try:
        one = tmp_path / "one.txt"   # meanwhile, one process in this one, on TensorFlow's step
        monkeypatch.setattr(kernels, "KERNEL", False)
        result = CliRunner().invoke(cli, ["train", str(vectors), str(corpus), *ARGS, "-o", str(one)],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
    finally:
        ended = finish(procs)
    assert ended[3][0] == 0, ended[3][1][-3000:]
    for (code, err), name in zip(ended[:3], ("ps task 0", "ps task 1", "worker task 0")):
        assert code == 0 and not err.strip(), (name, err[-2000:])   # -q: nothing to say
    s = json.loads(summary.read_text())
    assert s["parameter_servers"] == 2 and s["ps_workers"] == 1 and s["frozen"] == FROZEN
    assert set(s["ps_shard_devices"]) == {f"/job:ps/replica:0/task:{k}/device:CPU:0" for k in (0, 1)}
    assert sum(s["ps_shard_rows"]) == s["trained_rows"] + 1 and min(s["ps_shard_rows"]) > 1   # the sink too
    assert out.read_bytes() == one.read_bytes()
    got, start_rows = read_text_vectors(out), read_text_vectors(vectors)
    np.testing.assert_array_equal(bits(got.matrix[:FROZEN]), bits(start_rows.matrix[:FROZEN]))
    assert np.abs(got.matrix[FROZEN:3000] - start_rows.matrix[FROZEN:]).max() > 1e-3


def test_tf_config_of_a_parameter_server_cluster():
    spec = loopback_cluster(ps=2, workers=2)
    cluster = server_cluster_from_env({"TF_CONFIG": task_config(spec, "ps", 1)})
    assert (cluster.kind, cluster.index, cluster.address, cluster.chief) == ("ps", 1, spec["ps"][1], False)
    assert server_cluster_from_env({"TF_CONFIG": task_config(spec, "chief", 0)}).chief
    assert cluster_from_env({"TF_CONFIG": task_config(spec, "chief", 0)}) is None   # not a mirrored cluster
    assert server_cluster_from_env({"TF_CONFIG": task_config({"worker": spec["worker"]}, "worker", 0)}) is None
    # Other addresses than the cluster's own: two tasks at one address are refused first.
    others = [f"localhost:{port}" for port in free_ports(2)]
    for bad, words in (({**spec, "evaluator": others[:1]}, "not evaluator"),
                       ({**spec, "chief": others}, "a cluster has one chief, not 2"),
                       ({"chief": spec["chief"], "ps": spec["ps"]}, "it has 1, 2 and 0")):
        with pytest.raises(EmbedtuneError, match=words):
            server_cluster_from_env({"TF_CONFIG": task_config(bad, "chief", 0)})
    with pytest.raises(EmbedtuneError, match="needs one chief, at least one ps and at least one worker"):
        server_cluster_from_env({"TF_CONFIG": task_config({"ps": spec["ps"], "worker": spec["worker"]}, "ps", 0)})
    with pytest.raises(EmbedtuneError, match="task ps 2 is not in the cluster"):
        server_cluster_from_env({"TF_CONFIG": task_config(spec, "ps", 2)})


GLOSSES = SAMPLE_CORPUS.parent / "wordnet-glosses.train.txt"


@pytest.mark.parametrize("options, words", [
    (["--checkpoint-dir", "{tmp}/ckpt"], "--checkpoint-dir and --resume"),
    (["--objective", "classify", "--valid", str(GLOSSES)], "--objective classify"),
    (["--logdir", "{tmp}/log"], "--logdir"),
    (["--deterministic"], "--deterministic with more than one worker task"),
])
def test_what_is_not_built_is_refused_before_anything_loads(files, tmp_path, monkeypatch, options, words):
    vectors, corpus = files
    spec = loopback_cluster(ps=1, workers=2)
    monkeypatch.setenv("TF_CONFIG", task_config(spec, "ps", 0))   # a ps task refuses what its chief would
    options = [o.format(tmp=tmp_path) for o in options]
    corpus = GLOSSES if "classify" in options else corpus
    result = CliRunner().invoke(cli, ["train", str(vectors), str(corpus), "-o", str(tmp_path / "x.txt"), *options])
    assert result.exit_code == 1 and "Loading" not in result.output
    line = one_error_line(result.output)
    assert words in line and "a parameter-server run does not take" in line and "docs/scale-out.md" in line


def test_which_objectives_train_on_parameter_servers_is_their_declared_mode(monkeypatch):
    """serve.check_server_run reads each objective's ``modes``, not a list of names: auto (sgns or glove, by
    the vectors' format) passes, classify is refused naming those that declare the mode, and classify
    declaring it would pass."""
    from embedtune.config import Config, TrainConfig
    from embedtune.distribute.cluster import ServerCluster
    from embedtune.distribute.serve import check_server_run
    from embedtune.objectives.base import Modes
    from embedtune.objectives.classify import Classify

    cluster = ServerCluster(loopback_cluster(ps=1, workers=1), "chief", 0)
    for objective, format in (("auto", None), ("auto", "glove"), ("sgns", None), ("glove", None)):
        check_server_run(Config(format=format, train=TrainConfig(objective=objective)), False, 1, cluster)
    classify = Config(train=TrainConfig(objective="classify"))
    with pytest.raises(EmbedtuneError, match=r"--objective classify \(sgns and glove train on parameter servers\)"):
        check_server_run(classify, False, 1, cluster)
    monkeypatch.setattr(Classify, "modes", Modes(parameter_servers=True))
    check_server_run(classify, False, 1, cluster)


def test_a_chief_whose_servers_do_not_answer_stops_with_one_line(files, tmp_path, monkeypatch):
    vectors, corpus = files
    spec = loopback_cluster(ps=2, workers=1)   # nothing listens there
    monkeypatch.setenv("TF_CONFIG", task_config(spec, "chief", 0))
    result = CliRunner().invoke(cli, ["train", str(vectors), str(corpus), *ARGS, "-o", str(tmp_path / "x.txt"),
                                      "--peer-timeout", "0.5"])
    assert result.exit_code == 1 and not (tmp_path / "x.txt").exists()
    assert (f"ps task 0 at {spec['ps'][0]} did not answer within 0.5 s (start every task of TF_CONFIG; "
            "--peer-timeout sets the wait") in one_error_line(result.output)


def test_a_server_whose_chief_never_comes_ends_with_one_line(tmp_path):
    """A ps task reads neither the vectors nor the corpus (its machine need not have them): it serves."""
    vectors, corpus = tmp_path / "not-here.txt", tmp_path / "nor-here.txt"
    spec = loopback_cluster(ps=1, workers=1)
    (code, err), = finish([start([vectors, corpus, *ARGS, "-o", "x.txt"], task_config(spec, "ps", 0), wait="1")],
                          timeout=120)
    assert code == 1
    assert (f"ps task 0: the chief at {spec['chief'][0]} did not come within 1 s (--peer-timeout sets the wait"
            in one_error_line(err))


def test_sharded_gather_keeps_the_ids_order_and_shape_while_patched():
    """TensorFlow's ShardedVariable.sparse_read (what tf.gather calls in a tf.function) returns the
    rows shard after shard and takes 1-D ids only; inside ps.sparse_read_in_order, rows come in the ids'
    order for ids of any shape (per-pair negatives' [B, 1 + K]); TensorFlow's own is back after it."""
    from embedtune._tf import tf
    from embedtune.distribute import ps
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    matrix = np.arange(11 * 3, dtype=np.float32).reshape(11, 3)
    table = ShardedVariable([tf.Variable(matrix[:6]), tf.Variable(matrix[6:])])
    unsorted = np.array([7, 1, 3, 0, 10, 2, 7])
    with ps.sparse_read_in_order():
        gather = tf.function(lambda ids: tf.gather(table, ids), autograph=False)
        for ids in (unsorted, np.array([[7, 1, 3], [0, 10, 2]])):
            np.testing.assert_array_equal(gather(tf.constant(ids)).numpy(), matrix[ids])
    assert "sparse_read" not in ShardedVariable.__dict__   # inherited again, as TensorFlow has it
    own = tf.function(lambda ids: tf.gather(table, ids), autograph=False)
    np.testing.assert_array_equal(own(tf.constant(unsorted)).numpy(), matrix[[1, 3, 0, 2, 7, 10, 7]])
    partition = ps.row_partitioner(2)
    assert partition(tf.TensorShape([64, 50]), tf.float32) == [2, 1]
    assert partition(tf.TensorShape([63, 50]), tf.float32) == [1, 1]
    assert partition(tf.TensorShape([3]), tf.int64) == [1]   # the step's random generator's state


def test_the_gather_the_patch_replaces_is_tensorflows_as_it_was_checked(monkeypatch):
    """ps.sparse_read_in_order stands on TensorFlow's ShardedVariable as SPARSE_READ_VERSIONS have it:
    tf.gather calls its sparse_read(self, indices, name=None), which returns the rows shard after shard
    (wrong for ids out of order) and refuses ids that are not 1-D; ``variables`` holds the shards in
    order. Where the installed TensorFlow differs, this fails: check what the new one does, then widen
    SPARSE_READ_VERSIONS, change ``_sparse_read`` or drop it."""
    import inspect

    from embedtune._tf import tf
    from embedtune.distribute import ps
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    low, high = ps.SPARSE_READ_VERSIONS
    assert low <= ps.tensorflow_version(tf.__version__) <= high
    assert list(inspect.signature(ShardedVariable.sparse_read).parameters) == ["self", "indices", "name"]
    assert inspect.signature(ShardedVariable.sparse_read) == inspect.signature(ps._sparse_read)
    matrix = np.arange(11 * 3, dtype=np.float32).reshape(11, 3)
    shards = [tf.Variable(matrix[:6]), tf.Variable(matrix[6:])]
    table = ShardedVariable(shards)
    assert table.variables == shards
    gather = tf.function(lambda ids: tf.gather(table, ids), autograph=False)
    ids = np.array([7, 1, 3, 0, 10, 2, 7])
    np.testing.assert_array_equal(gather(tf.constant(ids)).numpy(), matrix[[1, 3, 0, 2, 7, 10, 7]])
    with pytest.raises(ValueError, match="must be 1D"):
        gather(tf.constant(ids[:6].reshape(2, 3)))
    called = []
    monkeypatch.setattr(ShardedVariable, "sparse_read", lambda self, indices, name=None: called.append(name) or 0,
                        raising=False)
    tf.gather(table, tf.constant(ids), name="rows")
    assert called == ["rows"]


def test_a_tensorflow_the_gather_was_not_checked_against_is_refused_and_nothing_patched(monkeypatch):
    from embedtune._tf import tf
    from embedtune.distribute import ps
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    assert ps.tensorflow_version("2.21.0") == (2, 21)
    assert ps.tensorflow_version("2.22.0rc1") == ps.tensorflow_version("2.22.0-dev20260101") == (2, 22)
    monkeypatch.setattr(ps, "SPARSE_READ_VERSIONS", ((2, 0), (2, 1)))
    with pytest.raises(EmbedtuneError) as refused:
        with ps.sparse_read_in_order():
            pytest.fail("entered")
    assert str(refused.value) == ("parameter servers: embedtune's sharded row gather is written for TensorFlow "
                                  f"2.0 to 2.1, not {tf.__version__}; install one of those for a run on parameter "
                                  "servers")
    assert "sparse_read" not in ShardedVariable.__dict__


def test_a_server_step_holds_the_anchors_tables_as_variables_and_steps_the_same(monkeypatch):
    """ServerStep's hook (TensorFlowStep.fixed_as_variables, read by Trainer.make_tensorflow_state): the
    anchor's start rows and slices are variables no optimizer sees, and the steps are the bits of the
    constants' (here in one process, the cluster's strategy aside)."""
    from embedtune import kernels
    from embedtune._tf import tf
    from embedtune.config import resolve
    from embedtune.corpus import Corpus
    from embedtune.plan.rules import make_plan
    from embedtune.training.step import TensorFlowStep
    from embedtune.training.trainer import Trainer

    from train_fixtures import make_config, sample_lines

    class Held(TensorFlowStep):
        fixed_as_variables = True

    monkeypatch.setattr(kernels, "KERNEL", False)
    vectors, corpus = glove(3000), Corpus(sample_lines(40))
    counts, _, _ = corpus.count()
    config = resolve(make_config({"freeze_top": FROZEN}, objective="sgns", optimizer="adagrad", anchor=1.0, seed=3,
                                 batch_size=256, threads=1))
    made = []
    for make_step in (None, lambda trainer, words, side, note: Held(trainer)):
        trainer = Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus,
                          make_step=make_step)
        objective = trainer.objective
        chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
        batches = [trainer.prepare(b) for b in list(objective.batches(*objective.units(chunk, trainer.rng)))[:3]]
        trainer.run(batches, [0.05] * len(batches))
        made.append(trainer)
    constants, held = made
    assert not isinstance(constants.start, tf.Variable)
    for name in ("start", "slices_per_epoch"):
        table = getattr(held, name)
        assert isinstance(table, tf.Variable) and not table.trainable
        np.testing.assert_array_equal(table.numpy(), getattr(constants, name).numpy())
    np.testing.assert_array_equal(bits(held.trained_matrix()), bits(constants.trained_matrix()))


def test_ctrl_c_ends_the_chiefs_wait_for_servers_that_are_other_programs(files, tmp_path):
    """The chief sees the servers' ports open (serve.wait_for) and then waits inside TensorFlow, which
    holds the interpreter: here another program holds each server's port, so that wait never ends, and
    Ctrl-C did nothing there. Now it ends the process at once (by the signal: a shell reports 130)."""
    import signal
    import socket
    import threading
    import time

    vectors, corpus = files
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    connected = threading.Event()

    def accept(server):   # keeps what connects, says nothing
        kept = []
        server.settimeout(0.2)
        while True:
            try:
                kept.append(server.accept()[0])
                connected.set()
            except socket.timeout:
                continue
            except OSError:   # closed by the test
                break
        for conn in kept:
            conn.close()

    for server in listeners:
        threading.Thread(target=accept, args=(server,), daemon=True).start()
    spec = {"chief": [f"127.0.0.1:{free_ports(1)[0]}"],
            "ps": [f"127.0.0.1:{listeners[0].getsockname()[1]}"],
            "worker": [f"127.0.0.1:{listeners[1].getsockname()[1]}"]}
    chief = start([vectors, corpus, "-o", tmp_path / "out.txt", *ARGS], task_config(spec, "chief", 0))
    try:
        assert connected.wait(120), "the chief never probed its servers"
        time.sleep(3)   # past its probes, in TensorFlow's wait by now
        assert chief.poll() is None, chief.communicate()[1]
        seconds = seconds_to_stop(chief)
    finally:
        if chief.poll() is None:
            chief.kill()
        _, err = chief.communicate()
        for server in listeners:
            server.close()
    assert chief.returncode in (-signal.SIGINT, 130), (chief.returncode, err[-2000:])
    assert seconds < 2, f"{seconds:.1f} s after SIGINT"
    assert "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "out.txt").exists()
