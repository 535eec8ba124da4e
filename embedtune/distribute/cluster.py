"""The cluster TF_CONFIG describes (TensorFlow's standard description, JSON): the workers' host:port and
this process's place among them; a "chief" entry, if any, counts as worker 0. Worker 0 is the chief:
it alone locks and writes checkpoints, the TensorBoard log, the summary and the output.

With "ps" tasks the cluster is a parameter-server one (``ServerCluster``, run by distribute/ps.py): one
chief that reads the corpus and writes, parameter servers that hold the tables' shards, workers that step."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from embedtune.errors import EmbedtuneError

ENV_LAUNCHED = "EMBEDTUNE_LAUNCHED"    # "1" in a worker started by `--workers`: the launcher reports its failures
ENV_THREADS = "EMBEDTUNE_WORKER_THREADS"   # TensorFlow threads of a launched worker (cores // N)


class PeerLost(Exception):
    """A collective failed: another worker died or cannot be reached."""


@dataclass(frozen=True)
class Cluster:
    index: int   # this worker; 0 is the chief
    size: int

    @property
    def chief(self) -> bool:
        return self.index == 0


@dataclass(frozen=True)
class ServerCluster:
    """A parameter-server cluster (TF_CONFIG naming "ps" tasks) and this process's task in it."""

    spec: dict    # {"chief": [host:port], "ps": [...], "worker": [...]}
    kind: str     # this task's: "chief", "ps" or "worker"
    index: int

    @property
    def chief(self) -> bool:
        return self.kind == "chief"

    @property
    def address(self) -> str:
        return self.spec[self.kind][self.index]


def _parse(environ) -> tuple[dict, str, int] | None:
    raw = environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        spec = json.loads(raw)
        cluster, task = spec["cluster"], spec.get("task", {})
        kind, index = task.get("type", "worker"), int(task.get("index", 0))
        cluster = {str(key): [str(host) for host in hosts] for key, hosts in cluster.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise EmbedtuneError(f"TF_CONFIG is not a cluster description ({err})") from None
    return cluster, kind, index


def server_cluster_from_env(environ=os.environ) -> ServerCluster | None:
    """This process's task in the parameter-server cluster TF_CONFIG describes; None without "ps" tasks."""
    parsed = _parse(environ)
    if parsed is None or "ps" not in parsed[0]:
        return None
    cluster, kind, index = parsed
    others = sorted(set(cluster) - {"chief", "ps", "worker"})
    if others:
        raise EmbedtuneError(f"TF_CONFIG: a parameter-server cluster has chief, ps and worker tasks, not "
                             f"{', '.join(others)} (see docs/scale-out.md)")
    counts = {key: len(cluster.get(key, [])) for key in ("chief", "ps", "worker")}
    if counts["chief"] != 1 or not counts["ps"] or not counts["worker"]:
        raise EmbedtuneError(f"TF_CONFIG: a parameter-server cluster needs one chief, at least one ps and at least "
                             f"one worker task (it has {counts['chief']}, {counts['ps']} and {counts['worker']}; "
                             "see docs/scale-out.md)")
    if kind not in cluster or not 0 <= index < len(cluster[kind]):
        raise EmbedtuneError(f"TF_CONFIG: task {kind} {index} is not in the cluster")
    return ServerCluster(cluster, kind, index)


def cluster_from_env(environ=os.environ) -> Cluster | None:
    """This process's place in the cluster TF_CONFIG describes; None without one, with one worker, or
    for a parameter-server cluster (``server_cluster_from_env``)."""
    parsed = _parse(environ)
    if parsed is None or "ps" in parsed[0]:
        return None
    cluster, kind, index = parsed
    chiefs, workers = cluster.get("chief", []), cluster.get("worker", [])
    others = sorted(set(cluster) - {"chief", "worker"})
    if others:
        raise EmbedtuneError(f"TF_CONFIG: only chief, worker and ps tasks are supported, not {', '.join(others)} "
                             "(see docs/scale-out.md)")
    size = len(chiefs) + len(workers)
    if size <= 1:
        return None
    if kind not in ("chief", "worker") or not 0 <= index < (len(chiefs) if kind == "chief" else len(workers)):
        raise EmbedtuneError(f"TF_CONFIG: task {kind} {index} is not in the cluster")
    return Cluster(index if kind == "chief" else len(chiefs) + index, size)


def launched() -> bool:
    return os.environ.get(ENV_LAUNCHED) == "1"


def is_chief() -> bool:
    """True on one process, and on the chief of a cluster."""
    cluster = cluster_from_env() or server_cluster_from_env()
    return cluster is None or cluster.chief


def distributed() -> bool:
    """TF_CONFIG describes a cluster this process is one task of (workers, or parameter servers)."""
    return cluster_from_env() is not None or server_cluster_from_env() is not None
