"""The cluster TF_CONFIG describes (TensorFlow's standard description, JSON): the workers' host:port and
this process's place among them; a "chief" entry, if any, counts as worker 0. Worker 0 is the chief:
it alone locks and writes checkpoints, the TensorBoard log, the summary and the output.

With "ps" tasks the cluster is a parameter-server one (``ServerCluster``, run by distribute/ps.py): one
chief that reads the corpus and writes, parameter servers that hold the tables' shards, workers that step."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from embedtune.errors import EmbedtuneError

ENV_LAUNCHED = "EMBEDTUNE_LAUNCHED"    # "1" in a worker started by `--workers`: the launcher reports its failures
ENV_THREADS = "EMBEDTUNE_WORKER_THREADS"   # TensorFlow threads of a launched worker (cores // N)
# A file the launcher gives each worker: a launched worker that lost its peers writes why there (the
# chief's standard error is the user's, so the launcher could not read it from there).
ENV_REASON = "EMBEDTUNE_WORKER_REASON"


class PeerLost(Exception):
    """A collective failed: another worker died or cannot be reached."""


@dataclass(frozen=True)
class Cluster:
    index: int   # this worker; 0 is the chief
    size: int
    hosts: tuple[str, ...] = field(default=(), compare=False)   # every worker's host:port, the chief first

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


KINDS = ("chief", "worker", "ps")


def _parse(environ) -> tuple[dict, str, int] | None:
    """TF_CONFIG's (cluster, task type, task index), each checked: an environment that does not make
    sense is an error naming TF_CONFIG, never a run as one process (cli: a usage error, exit 2)."""
    raw = environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        spec = json.loads(raw)
    except ValueError as err:
        raise EmbedtuneError(f"TF_CONFIG is not a cluster description (not JSON: {err})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cluster"), dict):
        raise EmbedtuneError('TF_CONFIG is not a cluster description (expected {"cluster": {...}, "task": {...}})')
    cluster, task = spec["cluster"], spec.get("task", {})
    for key, hosts in cluster.items():
        if not isinstance(hosts, list) or not all(isinstance(host, str) and host for host in hosts):
            raise EmbedtuneError(f'TF_CONFIG: cluster "{key}" must be a list of "host:port" strings, got '
                                 f"{json.dumps(hosts)[:80]}")
    _check_addresses(cluster)
    if len(cluster.get("chief", [])) > 1:
        raise EmbedtuneError(f"TF_CONFIG: a cluster has one chief, not {len(cluster['chief'])} (name the others "
                             '"worker")')
    if "task" not in spec and sum(map(len, cluster.values())) > 1:
        # Every process would take itself for the first worker and wait for one that never comes.
        raise EmbedtuneError('TF_CONFIG names several tasks but not this process\'s ("task": {"type": ..., '
                             '"index": ...})')
    if not isinstance(task, dict):
        raise EmbedtuneError(f'TF_CONFIG: "task" must be {{"type": ..., "index": ...}}, got {json.dumps(task)[:80]}')
    kind, index = task.get("type", "worker"), task.get("index", 0)
    if not isinstance(kind, str) or kind not in KINDS:
        raise EmbedtuneError(f"TF_CONFIG: task type {json.dumps(kind)} is not one embedtune runs (chief, worker "
                             "or ps; see docs/scale-out.md)")
    if not isinstance(index, int) or isinstance(index, bool):
        raise EmbedtuneError(f"TF_CONFIG: task index {json.dumps(index)} is not a whole number")
    tasks = cluster.get(kind, [])
    if not 0 <= index < len(tasks):
        has = (f"its {kind} tasks are 0 to {len(tasks) - 1}" if len(tasks) > 1 else
               f"its one {kind} task is 0" if tasks else f"it has no {kind} task")
        raise EmbedtuneError(f"TF_CONFIG: task {kind} {index} is not in the cluster ({has})")
    return cluster, kind, index


def split_address(address: str) -> tuple[str, int]:
    """"host:port" (an IPv6 host in brackets) as (host, port); an error naming TF_CONFIG where it is not
    one a socket can take (a port out of range overflowed inside socket.bind)."""
    host, colon, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise EmbedtuneError(f"TF_CONFIG: {json.dumps(address)} is not host:port with a port from 1 to 65535")
    return host, int(port)


def _check_addresses(cluster: dict) -> None:
    """Every task's address well formed, and no two tasks at one (both would listen there, and each
    would meet itself for the other)."""
    seen = {}
    for kind, hosts in cluster.items():
        for index, address in enumerate(hosts):
            split_address(address)
            first = seen.setdefault(address.lower(), f"{kind} {index}")
            if first != f"{kind} {index}":
                raise EmbedtuneError(f"TF_CONFIG: {first} and {kind} {index} have the same address, {address}")


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
    hosts = tuple(chiefs + workers)
    return Cluster(index if kind == "chief" else len(chiefs) + index, size, hosts)


def launched() -> bool:
    return os.environ.get(ENV_LAUNCHED) == "1"


def tell_launcher(reason: str) -> None:
    """Leave ``reason`` (why this launched worker lost its peers) where the launcher reads it for its one
    line; nothing without a launcher's file."""
    path = os.environ.get(ENV_REASON)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(reason)
    except OSError:   # the launcher gone meanwhile (its folder with it): nobody is left to read it
        pass


def is_chief() -> bool:
    """True on one process, and on the chief of a cluster."""
    cluster = cluster_from_env() or server_cluster_from_env()
    return cluster is None or cluster.chief


def steps_as_one_process(train) -> bool:
    """Whether this process steps as one process does, without TensorFlow's strategy, under resolved [train]
    config ``train``: no cluster, or a worker of one that averages (--sync-every K > 0) or steps joined
    batches (gathered.joins_batches); both exchange over mesh.py's connections. Any other gathered step and
    a parameter-server cluster step through TensorFlow's."""
    from embedtune.distribute.gathered import joins_batches

    if server_cluster_from_env() is not None:
        return False
    return cluster_from_env() is None or train.sync_every > 0 or joins_batches(train)


def distributed() -> bool:
    """TF_CONFIG describes a cluster this process is one task of (workers, or parameter servers)."""
    return cluster_from_env() is not None or server_cluster_from_env() is not None
