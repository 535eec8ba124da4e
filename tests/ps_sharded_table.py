"""Run by tests/test_distribute.py in a process of its own: 1 coordinator (this process) + 2 parameter
servers + 1 worker on loopback, ParameterServerStrategy. A table and its lazy Adagrad state
(embedtune.sparse, unchanged) are row-sharded over the two servers (ShardedVariable); a step scheduled on
the worker merges repeated ids, drops the sink row and updates only the batch's rows, shard by shard,
through gather and scatter_*. Prints one JSON line: where the shards live and the largest difference
from the same update computed with numpy. The design this probes is in docs/scale-out.md.
"""

import json
import os
import socket
import subprocess
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

SERVER = """
import json, sys
import tensorflow as tf
cluster, kind, index = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=kind, task_index=index, protocol="grpc").join()
"""


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def main():
    ports = free_ports(4)
    cluster = {"chief": [f"localhost:{ports[0]}"], "ps": [f"localhost:{ports[1]}", f"localhost:{ports[2]}"],
               "worker": [f"localhost:{ports[3]}"]}
    servers = [subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(cluster), kind, str(index)],
                                stderr=subprocess.DEVNULL) for kind, index in (("ps", 0), ("ps", 1), ("worker", 0))]
    try:
        import numpy as np
        from embedtune._tf import tf
        from embedtune.sparse import make_optimizer, merge_rows

        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
        strategy = tf.distribute.experimental.ParameterServerStrategy(
            resolver, variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(2))
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        rows, dim, sink, lr = 10, 4, 9, 0.5
        start = np.arange(rows * dim, dtype=np.float32).reshape(rows, dim)
        with strategy.scope():
            table = tf.Variable(start, name="trainable_words")
            optimizer = make_optimizer("adagrad", table)

        @tf.function
        def step(ids, grads):
            def replica(ids, grads):
                merged_rows, merged = merge_rows(tf.IndexedSlices(grads, ids), sink=sink)
                optimizer.apply(merged_rows, merged, tf.constant(lr))
                return tf.reduce_sum(merged)
            return strategy.run(replica, args=(ids, grads))

        ids, grads = np.array([1, 7, 1, 9, 3], np.int32), np.arange(20, dtype=np.float32).reshape(5, dim) / 10
        coordinator.schedule(step, args=(tf.constant(ids), tf.constant(grads)))
        coordinator.join()
        got = np.concatenate([v.numpy() for v in table.variables])
        want, acc = start.copy(), np.full((rows, dim), 0.1, np.float32)
        for row in (1, 7, 3):   # 9 is the sink: dropped
            g = grads[ids == row].sum(axis=0)
            acc[row] += g * g
            want[row] -= lr / (np.sqrt(acc[row]) + 1e-7) * g
        print(json.dumps({"table": type(table).__name__,
                          "table_shards": [v.device for v in table.variables],
                          "state_shards": [v.device for v in optimizer.accumulator.variables],
                          "shard_rows": [int(v.shape[0]) for v in table.variables],
                          "max_diff": float(np.abs(got - want).max()),
                          "untouched_bit_identical": bool(np.array_equal(got[[0, 2, 4, 5, 6, 8, 9]],
                                                                         start[[0, 2, 4, 5, 6, 8, 9]]))}))
    finally:
        for server in servers:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
