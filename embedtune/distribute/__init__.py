"""Data-parallel training on several workers: tf.distribute.MultiWorkerMirroredStrategy under TF_CONFIG.

``cluster.py``: the cluster TF_CONFIG describes (worker 0, the chief, alone writes checkpoints, logs,
the summary and the output). ``launch.py``: `embedtune train ... --workers N` starts N such processes on
loopback ports. ``shares.py``: each worker's share of the lines and of each global batch.
``collectives.py``: the all-gathers and sums the set-up needs. ``strategy.py``: the strategy the training
loop is given (``strategy_from_env``), with the step that gathers every worker's gradients (--sync-every 0).
``averaging.py``: the default, each worker on the single process's step, the rows averaged every K steps.

Nothing here names an objective: what a worker needs of one (how its batch splits, its padding, whether
its chunks come from the lines) the Objective base class declares. Importing this package imports no
TensorFlow; ``strategy_from_env`` does, when TF_CONFIG names several workers.
"""

from __future__ import annotations

import os

from embedtune.cores import local_cores
from embedtune.distribute.cluster import ENV_THREADS, Cluster, PeerLost, cluster_from_env, is_chief, launched
from embedtune.distribute.launch import PEER_LOST, Launch, free_ports, launch, worker_command, worker_threads
from embedtune.distribute.shares import CorpusShare, WorkerShare, batch_part, check_split, share_batches

__all__ = ["PEER_LOST", "Cluster", "CorpusShare", "Launch", "PeerLost", "WorkerShare", "batch_part", "check_split",
           "cluster_from_env", "free_ports", "is_chief", "launch", "launched", "local_cores", "share_batches",
           "strategy_from_env", "worker_command", "worker_threads"]


def strategy_from_env():
    """The training loop's strategy for this process: a Worker of the cluster TF_CONFIG describes, or
    None (one process) without one or with a single worker."""
    cluster = cluster_from_env()
    if cluster is None:
        return None
    from embedtune.distribute.strategy import Worker

    threads = os.environ.get(ENV_THREADS)
    return Worker(cluster, int(threads) if threads else None)
