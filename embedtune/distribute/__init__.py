"""Data-parallel training on several workers under TF_CONFIG.

``cluster.py``: the cluster TF_CONFIG describes (worker 0, the chief, alone writes checkpoints, logs,
the summary and the output). ``launch.py``: `embedtune train ... --workers N` starts N such processes on
loopback ports. ``shares.py``: each worker's share of the lines and of each global batch.
``mesh.py``: the workers' all-gathers and sums, over TCP; ``collectives.py``: those of the gathered step
through tf.distribute.MultiWorkerMirroredStrategy. ``strategy.py``: the strategy the training
loop is given (``strategy_from_env``), with the gathered step (--sync-every 0): every worker's batches joined
and stepped by each (``gathered.py``: sgns, glove, classify), or every worker's gradients gathered through TensorFlow.
``averaging.py``: the default, each worker on the single process's step, the rows averaged every K steps.
``ps.py`` and ``serve.py``: a cluster with "ps" tasks, the tables sharded over parameter servers.

Nothing here names an objective: what a worker needs of one (how its batch splits, its padding, whether
its chunks come from the lines) the Objective base class declares. Importing this package imports no
TensorFlow, nor does ``strategy_from_env``: a worker of the gathered step through TensorFlow imports it once
its peers are met (``Worker.start``); any other worker only where its step is TensorFlow's.
"""

from __future__ import annotations

import os

from embedtune.cores import local_cores
from embedtune.distribute.cluster import (ENV_THREADS, Cluster, PeerLost, ServerCluster, cluster_from_env,
                                          distributed, is_chief, launched, server_cluster_from_env,
                                          steps_as_one_process, tell_launcher)
from embedtune.distribute.launch import PEER_LOST, Launch, free_ports, launch, worker_command, worker_threads
from embedtune.distribute.shares import CorpusShare, WorkerShare, batch_part, check_split, share_batches

__all__ = ["PEER_LOST", "Cluster", "CorpusShare", "Launch", "PeerLost", "ServerCluster", "WorkerShare", "batch_part",
           "check_split", "cluster_from_env", "distributed", "free_ports", "is_chief", "launch", "launched",
           "local_cores", "server_cluster_from_env", "share_batches", "steps_as_one_process", "strategy_from_env",
           "tell_launcher", "worker_command", "worker_threads"]


def strategy_from_env():
    """The training loop's strategy for this process: a Worker of the cluster TF_CONFIG describes, the
    chief of a parameter-server cluster (ps.ParameterServers), or None (one process) without one or
    with a single worker."""
    servers = server_cluster_from_env()
    if servers is not None:
        from embedtune.distribute.ps import ParameterServers
        from embedtune.errors import EmbedtuneError

        if not servers.chief:
            raise EmbedtuneError(f"TF_CONFIG: this is {servers.kind} task {servers.index}, which serves "
                                 "(`embedtune train` with this TF_CONFIG), not the chief that trains")
        return ParameterServers(servers)
    cluster = cluster_from_env()
    if cluster is None:
        return None
    from embedtune.distribute.strategy import Worker

    threads = os.environ.get(ENV_THREADS)
    return Worker(cluster, int(threads) if threads else None)
