"""Data-parallel training on several workers: tf.distribute.MultiWorkerMirroredStrategy under TF_CONFIG.

The cluster. TF_CONFIG (TensorFlow's standard description, JSON) names the workers' host:port and this
process's place among them; a "chief" entry, if any, counts as worker 0. Worker 0 is the chief: it alone
locks and writes checkpoints, the TensorBoard log, the summary and the output; the others write nothing.
`embedtune train ... --workers N` (``launch``) starts N such processes on loopback ports.

The split. Every worker holds the whole (trainable) table and makes the same global batches of
``--batch-size`` B (same corpus, same seed: the host side is repeated on every worker, only the step is
split); a global batch is N host batches of B / N pairs, and worker k trains the k-th. Host batches
carry their negatives, drawn in order from the chunk's random state (objectives/sgns.py), so the N
host batches of a global batch draw the numbers one batch of B draws in a single process. Each step, every worker
computes the loss and the sparse gradients of its slice, the slices of all workers are gathered
(all-gather of the IndexedSlices' ids and values: static shapes, so no padding is needed), and every
worker merges, drops frozen rows, caps and applies the same update with the same lazy optimizer: only
gradients are exchanged, and the tables stay identical. The merged update is the single-process update
over the same global batch, up to the order of float32 sums.

Resume. A checkpoint's position counts host batches, at the end of a global batch, so a resumed run
starts at a whole global batch; the number of workers is part of the fingerprint. Every worker restores
the chief's checkpoint (a folder all of them can read).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune.errors import EmbedtuneError

ENV_LAUNCHED = "EMBEDTUNE_LAUNCHED"    # "1" in a worker started by `--workers`: the launcher reports its failures
ENV_THREADS = "EMBEDTUNE_WORKER_THREADS"   # TensorFlow threads of a launched worker (cores // N)
# A collective that waits longer than this for a peer fails the step (a dead machine in a real cluster;
# the launcher stops its own workers as soon as one exits). Generous: the first step waits for the
# slowest worker to load its vectors and count the corpus.
ENV_TIMEOUT = "EMBEDTUNE_COLLECTIVE_TIMEOUT"
COLLECTIVE_TIMEOUT = 1800.0
# Debugging and tests: each worker writes worker-K.json (a hash of its tables) into this folder at the end.
ENV_TABLE_HASH = "EMBEDTUNE_DEBUG_TABLE_HASH"
# Tests: "K:S" makes worker K kill itself with SIGKILL before its step S.
ENV_DIE_AT = "EMBEDTUNE_DEBUG_DIE_AT"
PEER_LOST = 3   # exit code of a worker whose peer went away (the launcher reports the peer, not it)
SETTLE = 1.0   # seconds the launcher waits, after a worker fails, for the others to fail on their own


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


def batch_part(batch_size: int, workers: int, shared: bool) -> int:
    """Each worker's part of a global batch; an error unless the parts are equal (and, with shared
    negatives, whole groups), as the single-process equivalence needs."""
    if batch_size % workers:
        raise EmbedtuneError(f"--batch-size {batch_size} does not split evenly over {workers} workers")
    part = batch_size // workers
    if not shared:
        return part
    from embedtune.objectives.sgns import SHARED_GROUP   # imports TensorFlow: only when asked

    if part % SHARED_GROUP:
        raise EmbedtuneError(f"--negatives shared: each worker's part of the batch ({batch_size} / {workers} = "
                             f"{part}) must be a multiple of {SHARED_GROUP}")
    return part


class Worker:
    """One worker's part: the strategy, the split of the batches and the gathered step."""

    def __init__(self, cluster: Cluster, threads: int | None = None):
        self.index, self.size = cluster.index, cluster.size
        self.chief = cluster.chief
        self.threads = threads   # None: every core (one worker per machine)
        self.strategy = None
        self.steps = 0
        die = os.environ.get(ENV_DIE_AT, "")
        self.die_at = int(die.split(":")[1]) if die and int(die.split(":")[0]) == self.index else None

    @classmethod
    def from_env(cls) -> Worker | None:
        cluster = cluster_from_env()
        if cluster is None:
            return None
        threads = os.environ.get(ENV_THREADS)
        return cls(cluster, int(threads) if threads else None)

    def start(self):
        """Join the cluster. Before any TensorFlow variable exists: the strategy sets up the runtime."""
        from embedtune._tf import tf

        timeout = float(os.environ.get(ENV_TIMEOUT, COLLECTIVE_TIMEOUT))
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout, implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.device = self.strategy.extended.worker_devices[0]

    def split(self, config):
        """The config each worker's trainer runs with: a host batch of B / N pairs."""
        t = config.train
        part = batch_part(t.batch_size, self.size, shared=t.objective == "sgns" and t.negatives == "shared")
        return dataclasses.replace(config, train=dataclasses.replace(t, batch_size=part))

    def settings(self, settings: dict) -> dict:
        """The resume fingerprint's settings: the batch split depends on the number of workers."""
        return {**settings, "workers": self.size}

    def attach(self, trainer) -> None:
        """Make ``trainer`` a worker: sliced negatives, gathered gradients, a step under the strategy,
        and batches prepared only for its own slice (see ``batches``)."""
        from embedtune._tf import tf

        own_gradients, device = trainer.gradients, self.device

        def gathered_gradients(batch):
            loss, *slices = own_gradients(batch)
            # all_gather needs tensors placed on the worker's device (an unplaced one inside a
            # tf.function fails with "destinations can not be empty").
            with tf.device(device):
                parts = [tf.identity(x) for x in (tf.reshape(loss, [1]), *slices)]
            loss, *slices = tf.distribute.get_replica_context().all_gather(parts, axis=0)
            return (tf.reduce_sum(loss), *slices)

        trainer.gradients = gathered_gradients
        trainer.fused = trainer.grouped = False   # the step goes through gradients, a batch a call
        trainer.distinct = False   # the workers' slices can hold the same row: merge them
        strategy, step = self.strategy, trainer._step
        compiled = tf.function(lambda batch, lr: strategy.run(step, args=(batch, lr)), autograph=False)
        lost = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
                tf.errors.AbortedError, tf.errors.InternalError, tf.errors.UnknownError)

        def worker_step(batch, lr):
            self.steps += 1
            if self.die_at is not None and self.steps >= self.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            try:
                return compiled(batch, lr)
            except lost as err:
                raise PeerLost(f"worker {self.index}: a collective step failed ({type(err).__name__}: "
                               f"{err.message.splitlines()[0] if err.message else ''})") from None

        trainer.step = worker_step
        self.prepare = trainer.prepare
        trainer.prepare = lambda batch: batch   # epoch_batches hands raw batches to self.batches

    def batches(self, items: Iterator) -> Iterator:
        """Global batches from ``items`` (epoch_batches' host batches, unprepared): each group of N
        consecutive batches of a chunk is one step; this worker prepares its own, the k-th (a batch of
        padding when the chunk ended first). The position is the group's end, on every worker."""
        group: list = []
        for item in items:
            if group and (item.chunk != group[0].chunk or (item.batch - 1) % self.size == 0):
                yield self._global(group)
                group = []
            group.append(item)
        if group:
            yield self._global(group)

    def _global(self, group: list):
        first = group[0].batch - (group[0].batch - 1) % self.size   # number of the group's first batch
        mine = [b for b in group if b.batch == first + self.index]
        if mine:
            raw = mine[0].tensors
        else:
            raw = dict(group[0].tensors, weight=np.zeros_like(group[0].tensors["weight"]), pairs=0)
        return dataclasses.replace(group[-1], tensors=self.prepare(raw), pairs=sum(b.pairs for b in group),
                                   batch=first + self.size - 1)

    def finish(self, trainer) -> None:
        """Debugging and tests: the hash of this worker's tables, when ENV_TABLE_HASH names a folder."""
        folder = os.environ.get(ENV_TABLE_HASH)
        if not folder:
            return
        digest = hashlib.sha256()
        tables = {"trainable": trainer.trainable, "side": trainer.side, "rng": trainer.tf_rng.state}
        for side, opt in (("word", trainer.word_opt), ("side", trainer.side_opt)):
            tables.update({f"{side}_{name}": var for name, var in opt.variables().items()})
        for name, var in sorted(tables.items()):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(var.numpy()).tobytes())
        with open(os.path.join(folder, f"worker-{self.index}.json"), "w") as f:
            json.dump({"worker": self.index, "steps": self.steps, "sha256": digest.hexdigest()}, f)



# --- the launcher: N local workers on loopback ports --------------------------------------------------

def free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("localhost", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_threads(workers: int, cores: int) -> int:
    """TensorFlow threads per local worker: the cores shared out, at least one, so N workers on fewer
    cores take turns instead of each waiting on a pool the others have filled."""
    return max(1, cores // workers)


@dataclass
class Launch:
    code: int               # the exit code the launcher should end with
    failure: str | None     # the one line to report, when a worker other than the chief failed first


def launch(command: list[str], workers: int, threads: int) -> Launch:
    """Run ``command`` (an `embedtune train` command line) as ``workers`` local workers and wait.

    Worker 0 (the chief) keeps this process's standard output and error; the others' output is
    dropped and their error kept for the report. The first worker to fail stops the others (SIGKILL);
    a SIGINT or SIGTERM to the launcher is passed to the chief, which stops after its
    step with a checkpoint, as a single process does.
    """
    ports = free_ports(workers)
    hosts = [f"localhost:{port}" for port in ports]
    procs: list[subprocess.Popen] = []
    logs = []
    forwarded = {}

    def forward(signum, frame):
        if procs and procs[0].poll() is None:
            procs[0].send_signal(signum)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                forwarded[sig] = signal.signal(sig, forward)
            except ValueError:   # not the main thread
                pass
        for k in range(workers):
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": hosts},
                                                          "task": {"type": "worker", "index": k}}))
            env[ENV_LAUNCHED] = "1"
            env[ENV_THREADS] = str(threads)
            # A dead peer makes TensorFlow log gRPC errors on every survivor; the launcher's one line says it.
            env["TF_CPP_MIN_LOG_LEVEL"] = "3"
            log = None if k == 0 else tempfile.TemporaryFile()
            logs.append(log)
            # Own sessions: a Ctrl-C at the terminal reaches the launcher only, which passes it on.
            procs.append(subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                          stdout=None if k == 0 else subprocess.DEVNULL,
                                          stderr=None if k == 0 else log, start_new_session=True))
        while True:
            codes = [p.poll() for p in procs]
            if all(c == 0 for c in codes):
                return Launch(0, None)
            if any(c not in (None, 0) for c in codes):
                break
            time.sleep(0.05)
        # The others often fail on their own a moment later (the same bad input, or a lost peer):
        # then the chief's own error line, already printed, is the one line to show.
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        codes = [p.poll() for p in procs]
        failed = [k for k, c in enumerate(codes) if c not in (None, 0)]
        causes = [k for k in failed if codes[k] != PEER_LOST] or failed
        culprit = causes[0]
        _stop(procs)
        code = codes[culprit]
        if culprit == 0 and code > 0 and code != PEER_LOST:
            return Launch(code, None)   # the chief said why itself (its error, or an interruption)
        return Launch(code if code > 0 else 1, f"worker {culprit} exited ({_why(code, logs[culprit])})")
    finally:
        _stop(procs)
        for sig, handler in forwarded.items():
            signal.signal(sig, handler)
        for log in logs:
            if log is not None:
                log.close()


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGKILL, not SIGTERM: a worker asked to stop would wait in its step's collective for the
    worker that is gone, and print; a run stopped this way resumes from the chief's last checkpoint."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _why(code: int, log) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    last = ""
    if log is not None:
        log.seek(0)
        lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        if last.startswith("Error: "):
            last = last[len("Error: "):]
    if code == PEER_LOST:
        return f"lost its peers: {last}" if last else "lost its peers"
    return f"exit code {code}: {last}" if last else f"exit code {code}"


def worker_command(argv: list[str]) -> list[str]:
    """The command line of a worker: this same `embedtune` command, run by this Python."""
    return [sys.executable, "-m", "embedtune.cli.main", *argv]
