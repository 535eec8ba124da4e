"""Run by tests/test_distribute.py in a process of its own: ParameterServerStrategy on loopback, 1
coordinator (this process, the "chief") + 2 parameter servers + 1 worker, every server on one thread.

The project's own Trainer (embedtune/train.py, unchanged) is built under the strategy's scope with a row
partitioner, so its trainable table, its context table and its lazy Adagrad state become ShardedVariables
split over the two servers (the optimizer state on the same server as its rows). Real sgns batches of
the sample corpus (made by the same Trainer's host side, frozen rows gathered on the host) are
scheduled on the worker through ClusterCoordinator.schedule, one step at a time: the step gathers the
rows it reads from the shards, merges the slices, drops frozen rows and padding (sink rows) and updates
only the batch's rows, shard by shard (gather and scatter_* on the ShardedVariables). The same batches
go through a plain Trainer in one process. Prints one JSON line: where the shards live, the largest
difference between the two runs' tables, and whether the rows no batch touched kept their bits.
The design this is part of is in docs/scale-out.md, section 4.
"""

import json
import os
import socket
import subprocess
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# One thread each: 4 servers and this process share 2 cores.
SERVER = """
import json, sys
import tensorflow as tf
cluster, kind, index = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2, intra_op_parallelism_threads=1)
tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=kind, task_index=index, protocol="grpc",
                     config=config).join()
"""
STEPS = 6


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def setup_run(vectors, corpus, config):
    from embedtune.training.checkpoints import Checkpoints
    from embedtune.training.loop import setup

    return setup(vectors, corpus, config, Checkpoints(None, 0))


def compare(strategy, coordinator, vectors, lines, config):
    """STEPS batches through a plain Trainer and, one at a time, through one built under ``strategy``."""
    import numpy as np

    from embedtune._tf import tf
    from embedtune.checkpoint import Position
    from embedtune.corpus import Corpus
    from embedtune.training.batches import epoch_batches

    single = setup_run(vectors, Corpus(lines), config).trainer
    with strategy.scope():
        sharded = setup_run(vectors, Corpus(lines), config).trainer
    start = single.trainable.numpy()
    batches = []
    for batch in epoch_batches(single, Corpus(lines), Position(), 0):
        batches.append(batch.tensors)
        if len(batches) == STEPS:
            break
    lr = tf.constant(0.05, tf.float32)
    touched = set()
    for tensors in batches:
        single.step.step(tensors, lr)
        coordinator.schedule(sharded.step.step, args=(tensors, lr))
        coordinator.join()   # in order, one at a time: the one-process order of updates
        real = tensors["weight"].numpy() > 0
        touched.update(int(i) for i in tensors["center"].numpy()[real] if i < single.n_trainable)

    def whole(var):
        return np.concatenate([v.numpy() for v in var.variables])

    got, want = whole(sharded.trainable), single.trainable.numpy()
    untouched = np.array(sorted(set(range(single.n_trainable)) - touched))
    return {
        "table": type(sharded.trainable).__name__,
        "table_shards": [v.device for v in sharded.trainable.variables],
        "state_shards": [v.device for v in sharded.word_opt.accumulator.variables],
        "side_shards": [v.device for v in sharded.side.variables],
        "shard_rows": [int(v.shape[0]) for v in sharded.trainable.variables],
        "rows": int(single.n_trainable + 1),
        "table_rows": int(sharded.trainable.shape[0]),   # trainable words and the sink: no frozen row
        "frozen_rows_read": int(sharded.n_frozen),   # gathered on the host from the input matrix
        "context_ids_shape": list(single.objective.side_ids(batches[0], None, batches[0]["weight"] > 0,
                                                            single.side_rows).shape),
        "steps": len(batches),
        "trained_rows": len(touched),
        "max_diff": float(np.abs(got - want).max()),
        "side_max_diff": float(np.abs(whole(sharded.side) - single.side.numpy()).max()),
        "state_max_diff": float(np.abs(whole(sharded.word_opt.accumulator)
                                       - single.word_opt.accumulator.numpy()).max()),
        "moved": float(np.abs(want - start).max()),
        "untouched_bit_identical": bool(np.array_equal(got[untouched], start[untouched])),
    }


def main():
    ports = free_ports(4)
    cluster = {"chief": [f"localhost:{ports[0]}"], "ps": [f"localhost:{ports[1]}", f"localhost:{ports[2]}"],
               "worker": [f"localhost:{ports[3]}"]}
    servers = [subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(cluster), kind, str(index)],
                                stderr=subprocess.DEVNULL) for kind, index in (("ps", 0), ("ps", 1), ("worker", 0))]
    try:
        from embedtune._tf import tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(2)
        import sharded as sharding
        from embedtune.config import Config, TrainConfig, VocabConfig, resolve
        from train_fixtures import SAMPLE_CORPUS, glove

        vectors = glove(3000)
        lines = open(SAMPLE_CORPUS, encoding="utf-8").read().splitlines()[:20]
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
        # Tables and their optimizer state in 2 shards of rows; the sparse_read fix (rows in the ids'
        # order, ids of any shape: per-pair negatives' [B, 1 + K]) from the library.
        strategy = sharding.parameter_server_strategy(resolver, shards=2)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        report = {}
        for negatives in ("per-pair", "shared"):
            config = resolve(Config(train=TrainConfig(objective="sgns", optimizer="adagrad", negatives=negatives,
                                                      batch_size=256, epochs=1, lr=0.05, seed=3),
                                    vocab=VocabConfig(freeze_top=1000, init="context-mean", min_count=3)))
            report[negatives] = compare(strategy, coordinator, vectors, lines, config)
        print(json.dumps(report))
    finally:
        for server in servers:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
