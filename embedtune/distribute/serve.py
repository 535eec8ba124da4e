"""The tasks of a parameter-server cluster other than the chief, and what the mode refuses.

Every task runs the same `embedtune train` command with its own TF_CONFIG. A "ps" or "worker" task
starts TensorFlow's server (``serve``): a parameter server holds its shard of the tables, a worker runs
the steps the chief schedules on it. Neither reads the corpus or the vectors. A task serves until the
chief it has seen is gone (its port closed: the run ended, or the chief failed; the chief reports
which), then ends with 0; a chief that never comes within the wait is an error. ``wait_for`` is the
same probe run by the chief for its peers before it builds the strategy: a missing peer is one line,
not a hang.
"""

from __future__ import annotations

import json
import socket
import time

from embedtune.distribute.cluster import ServerCluster
from embedtune.errors import EmbedtuneError

POLL = 0.25   # seconds between probes
GONE = 4      # failed probes in a row after which a chief seen once counts as gone
SEE = "see docs/scale-out.md, section 5"


def task_config(spec: dict, kind: str, index: int) -> str:
    """TF_CONFIG of task ``kind`` ``index`` of cluster ``spec``."""
    return json.dumps({"cluster": spec, "task": {"type": kind, "index": index}})


def answers(address: str, timeout: float = 1.0) -> bool:
    """Something listens at host:port (a TCP connection opens)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def wait_for(cluster: ServerCluster, wait: float) -> None:
    """Return once every ps and worker task of ``cluster`` answers; an error naming the first that does
    not within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    for kind in ("ps", "worker"):
        for index, address in enumerate(cluster.spec[kind]):
            while not answers(address):
                if time.monotonic() > deadline:
                    raise EmbedtuneError(f"{kind} task {index} at {address} did not answer within {wait:g} s "
                                         f"(start every task of TF_CONFIG; --peer-timeout sets the wait; {SEE})")
                time.sleep(POLL)


def serve(cluster: ServerCluster, threads: int, wait: float) -> str:
    """Run this ps or worker task's server until the chief is gone; returns what to say then.
    ``threads``: TensorFlow's intra-op threads (inter-op: at least 2, a step calls nested functions);
    ``wait``: seconds to wait for the chief to come (--peer-timeout, as workers wait for each other)."""
    from embedtune._tf import tf

    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=max(2, threads))
    try:
        tf.distribute.Server(tf.train.ClusterSpec(cluster.spec), job_name=cluster.kind, task_index=cluster.index,
                             protocol="grpc", config=config, start=True)
    except (tf.errors.OpError, ValueError) as err:
        raise EmbedtuneError(f"{cluster.kind} task {cluster.index} could not serve at {cluster.address}: "
                             f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    chief = cluster.spec["chief"][0]
    deadline = time.monotonic() + wait
    seen, missed = False, 0
    while True:
        if answers(chief):
            seen, missed = True, 0
        elif seen:
            missed += 1
            if missed >= GONE:
                return f"{cluster.kind} task {cluster.index}: the chief at {chief} is gone; stopped serving"
        elif time.monotonic() > deadline:
            raise EmbedtuneError(f"{cluster.kind} task {cluster.index}: the chief at {chief} did not come within "
                                 f"{wait:g} s (--peer-timeout sets the wait; {SEE})")
        time.sleep(POLL)


def check_server_run(config, resume: bool, workers: int, cluster: ServerCluster) -> None:
    """What a parameter-server run does not build, refused in one line by every task before it starts
    (the same command runs in each: a ps task refuses what its chief would)."""
    from embedtune.objectives import AUTO, auto_objective, objective_class, registered

    t = config.train
    refused = None
    objective = auto_objective(config.format) if t.objective == AUTO else t.objective   # as the run will resolve it
    if not objective_class(objective).modes.parameter_servers:
        able = [name for name, cls in registered().items() if cls.modes.parameter_servers]
        refused = f"--objective {t.objective} ({' and '.join(able)} train on parameter servers)"
    elif resume or t.checkpoint_dir:
        refused = "--checkpoint-dir and --resume (checkpoints of the servers' shards are not built)"
    elif workers > 1:
        refused = "--workers (every task of TF_CONFIG is started on its own)"
    elif t.logdir:
        refused = "--logdir"
    elif t.deterministic and len(cluster.spec["worker"]) > 1:
        refused = "--deterministic with more than one worker task (their steps interleave at the servers)"
    if refused:
        raise EmbedtuneError(f"TF_CONFIG names ps tasks: a parameter-server run does not take {refused}; {SEE}")
