"""The cluster TF_CONFIG describes (TensorFlow's standard description, JSON): the workers' host:port and
this process's place among them; a "chief" entry, if any, counts as worker 0. Worker 0 is the chief:
it alone locks and writes checkpoints, the TensorBoard log, the summary and the output."""

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


def cluster_from_env(environ=os.environ) -> Cluster | None:
    """This process's place in the cluster TF_CONFIG describes; None without one or with one worker."""
    raw = environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        spec = json.loads(raw)
        cluster, task = spec["cluster"], spec.get("task", {})
        chiefs, workers = list(cluster.get("chief", [])), list(cluster.get("worker", []))
        kind, index = task.get("type", "worker"), int(task.get("index", 0))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise EmbedtuneError(f"TF_CONFIG is not a cluster description ({err})") from None
    others = sorted(set(cluster) - {"chief", "worker"})
    if others:
        raise EmbedtuneError(f"TF_CONFIG: only chief and worker tasks are supported, not {', '.join(others)} "
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
    cluster = cluster_from_env()
    return cluster is None or cluster.chief
