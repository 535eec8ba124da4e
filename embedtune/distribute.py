"""Data-parallel training on several workers: tf.distribute.MultiWorkerMirroredStrategy under TF_CONFIG.

The cluster. TF_CONFIG (TensorFlow's standard description, JSON) names the workers' host:port and this
process's place among them; a "chief" entry, if any, counts as worker 0. Worker 0 is the chief: it alone
locks and writes checkpoints, the TensorBoard log, the summary and the output; the others write nothing.
`embedtune train ... --workers N` (``launch``) starts N such processes on loopback ports.

The shares. Worker k of N reads lines k, k + N, k + 2N, ... of the corpus (the others' lines are not
decoded; ``CorpusShare``) and makes its own pairs and batches of B / N pairs from them (``share_batches``):
the host side is split N ways. The counting pass before training is split the same way: each worker
counts its share of the lines and the counts are all-gathered (``Worker.count``), so every worker has
the whole corpus's counts, the same vocabulary, plan and new words. A chunk's random
state comes from (seed, N, epoch, chunk, k), so a share's batches depend on no other worker. An objective
whose chunks are not read from the lines (glove's co-occurrences, held in memory) makes the same chunks
on every worker, and worker k takes units k, k + N, ... of each. glove counts its co-occurrences by
shares too (``WorkerShare``: each worker its lines, the cells summed through an all-gather); classify
holds only its share's labelled lines and trains them as its own chunks, with the figures all workers
need alike (labels, batch budgets, the classifier-alone fit) combined over the shares. The new words'
context pass reads each worker's share and all-reduces the sums (``Worker.init_corpus``).

The step. Global step s is every worker's s-th batch. Each worker computes the loss and the sparse
gradients of its batch; the slices of all workers are gathered (all-gather of the IndexedSlices' ids and
values: static shapes, so no padding is needed), with each worker's position and pairs (5 int64), and
every worker merges, drops frozen rows, caps and applies the same update with the same lazy optimizer:
only gradients are exchanged, and the tables stay identical. Shares make different numbers of batches: a
worker whose share has ended steps with a batch of weight 0 (padding) until the gathered positions say
that no worker has a batch left, so all end the epoch on the same step. The learning rate of a step
follows the corpus words done by all shares before it (gathered), as one process's follows its own.

One process can make the same global batches: ``Shares`` (EMBEDTUNE_DEBUG_SHARES=N) trains the N shares'
batches concatenated, which the tests compare with N workers (equal up to the order of float32 sums).

Resume. A checkpoint's position holds every worker's position in its share (``Position.shares``: the
chunk and batch of its last batch, its words and whether it has more), gathered with each step and
written by the chief; on ``--resume`` every worker reads the chief's checkpoint (a folder all of them can
read) and continues its own share from its own position. The number of workers is part of the fingerprint.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from embedtune.corpus import ShareCount, merge_counts
from embedtune.errors import EmbedtuneError

ENV_LAUNCHED = "EMBEDTUNE_LAUNCHED"    # "1" in a worker started by `--workers`: the launcher reports its failures
ENV_THREADS = "EMBEDTUNE_WORKER_THREADS"   # TensorFlow threads of a launched worker (cores // N)
# Seconds after which a collective waiting for a peer fails the step; unset or 0: none. None by default:
# TensorFlow times each collective with a thread of its own that sleeps the whole timeout, so a step's
# collectives left thousands of sleeping threads a second until a worker could start no more (SIGABRT,
# "Resource temporarily unavailable"). A dead peer is still found: the launcher stops its own workers as
# soon as one exits, and in a cluster TensorFlow's coordination service reports a peer that stops.
ENV_TIMEOUT = "EMBEDTUNE_COLLECTIVE_TIMEOUT"
# Debugging and tests: each worker writes worker-K.json (a hash of its tables) into this folder at the end.
ENV_TABLE_HASH = "EMBEDTUNE_DEBUG_TABLE_HASH"
# Tests: "K:S" makes worker K kill itself with SIGKILL before its step S.
ENV_DIE_AT = "EMBEDTUNE_DEBUG_DIE_AT"
# Bytes a worker sends in one all-gather of its corpus counts (Worker.all_gather_bytes): a large
# vocabulary's counts go in several pieces, each well under gRPC's message limits.
GATHER_PIECE = 1 << 24
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


def batch_part(t, workers: int) -> int:
    """Each worker's part of the global batch of train config ``t``; an error unless the parts are equal
    (and, with sgns's shared negatives, whole groups), as the single-process equivalence needs. One rule
    for the launcher's early check and the workers' split."""
    batch_size, shared = t.batch_size, t.objective == "sgns" and t.negatives == "shared"
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


ENV_SHARES = "EMBEDTUNE_DEBUG_SHARES"   # tests: "N" makes one process train N workers' shares (Shares)

# A share's position, as Position.shares keeps one a worker: [chunk, batch, words, more]: the chunk and
# the batch in it (plus one) of its last batch trained, its corpus words done in the epoch, and 1 while
# it has a batch after that one. A step gathers these and its pairs from every worker.
CHUNK, BATCH, WORDS, MORE, PAIRS = range(5)


class CorpusShare:
    """Lines k, k + n, k + 2n, ... of a corpus: worker k's share of n."""

    def __init__(self, corpus, index: int, size: int):
        self.corpus, self.share = corpus, (index, size)
        self.path = corpus.path

    def lines(self):
        return self.corpus.lines(share=self.share)

    def numbered_lines(self):
        return self.corpus.numbered_lines(share=self.share)


class WorkerShare(CorpusShare):
    """Worker k's share of the lines, handed to an objective that reads the corpus before training
    (glove's co-occurrence count, classify's labelled lines): it reads its lines, then combines every
    worker's figures through ``all_gather_bytes`` / ``gather_bytes`` / ``sum_arrays`` (collectives:
    every worker calls them, in the same order). ``held`` lists the shares this process holds (its own);
    ``chief`` whether it writes the run's figures."""

    def __init__(self, corpus, worker):
        super().__init__(corpus, worker.index, worker.size)
        self.all_gather_bytes = worker.all_gather_bytes
        self.worker = worker
        self.held, self.size, self.chief = [worker.index], worker.size, worker.chief
        self.tokens_read = 0   # debugging and tests (ENV_TABLE_HASH): the share's tokens the objective read

    def lines(self):
        for tokens in super().lines():
            self.tokens_read += len(tokens)
            yield tokens

    def gather_bytes(self, items: list[bytes]) -> list[bytes]:
        """Every share's item, in share order, from this worker's own (``items``, one)."""
        return self.all_gather_bytes(items[0])

    def sum_arrays(self, items: list[np.ndarray]) -> np.ndarray:
        """The sum over every share of float64 arrays of one shape (this worker's own: ``items``, one),
        the same on every worker, bit for bit (Worker.sum_array)."""
        return self.worker.sum_array(np.asarray(items[0], np.float64))


class HeldShares:
    """All ``size`` shares of a corpus's lines held by one process (``Shares``, the one-process
    emulation of ``size`` workers), with WorkerShare's ways of combining them: the same figures, made
    the same way, as the workers make them."""

    chief = True

    def __init__(self, corpus, size: int):
        self.corpus, self.size, self.path = corpus, size, corpus.path
        self.held = list(range(size))

    def lines(self):
        return self.corpus.lines()

    def numbered_lines(self):
        return self.corpus.numbered_lines()

    def gather_bytes(self, items: list[bytes]) -> list[bytes]:
        return list(items)

    def sum_arrays(self, items: list[np.ndarray]) -> np.ndarray:
        return sum_in_order(np.stack([np.asarray(x, np.float64) for x in items]))


def sum_in_order(parts: np.ndarray) -> np.ndarray:
    """parts[0] + parts[1] + ... (float64): the emulation's sum over the shares. The workers' ring
    all-reduce adds the same terms in an order of its own: the same bits for 2 shares (a + b = b + a),
    equal up to the order of float64 sums for more."""
    total = parts[0].copy()
    for part in parts[1:]:
        total += part
    return total


def share_batches(objective, corpus, local_index: dict, seed: int, epoch: int, index: int, size: int,
                  start: list | None, prepare) -> Iterator:
    """Worker ``index`` of ``size``'s batches of epoch ``epoch``, after ``start`` (its share's
    position, or None for the epoch's start), each prepared by ``prepare``; a Batch's ``words_done`` is
    the share's corpus words done in the epoch.

    An objective that reads lines (``reads_lines``) gets the share's lines; any other one makes the same
    chunks on every worker, and the worker takes units index, index + size, ... of each chunk and
    the same part of its words. A chunk's random state is drawn from (seed, size, epoch, chunk and, for
    a share of lines, index), so a share's batches depend on nothing that another worker does, and a
    resumed worker makes them again from its position alone.
    """
    from embedtune.train import Batch

    lines = objective.reads_lines
    # An objective built from shares of the lines (classify from a WorkerShare / HeldShares) makes this
    # share's chunks from the lines it holds, as one that reads the lines does.
    own = lines or getattr(objective, "share_index", None) == index
    source = CorpusShare(corpus, index, size) if lines else corpus
    first, done_in_first = (start[CHUNK], start[BATCH]) if start else (0, 0)
    words = 0
    for number, chunk in enumerate(objective.chunks(source, local_index)):
        raw = chunk.raw_tokens if own else (chunk.raw_tokens * (index + 1)) // size - (chunk.raw_tokens * index) // size
        if number < first:   # resuming: already trained
            words += raw
            continue
        rng = np.random.default_rng([seed, size, epoch, number, index] if own else [seed, size, epoch, number])
        units = objective.units(chunk, rng)
        if not own:
            units = tuple(u[index::size] if isinstance(u, np.ndarray) else u for u in units)
        n_units = max(len(units[0]), 1)
        done = 0
        for batch_number, batch in enumerate(objective.batches(*units)):
            done += batch["pairs"]
            if number == first and batch_number < done_in_first:
                continue
            yield Batch(prepare(batch), batch["pairs"], number, batch_number + 1, None, words + raw * done // n_units)
        words += raw


def padding_batch(objective) -> dict:
    """A batch of the objective's shape with nothing in it (weight 0): what a worker trains while others
    finish the epoch. Made from one unit of zeros (local id 0)."""
    needed = [p for p in inspect.signature(objective.batches).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    batch = next(iter(objective.batches(*[np.zeros(1, np.int32) for _ in needed])))
    return dict(batch, weight=np.zeros_like(batch["weight"]), pairs=0)


def global_words(epoch: int, total_words: int, shares: list) -> int:
    """Corpus words done, all epochs, all shares: the learning rate's clock."""
    return (epoch - 1) * total_words + sum(int(s[WORDS]) for s in shares)


class Worker:
    """One worker's part: the strategy, its share of the lines, and the gathered step."""

    def __init__(self, cluster: Cluster, threads: int | None = None):
        self.index, self.size = cluster.index, cluster.size
        self.chief = cluster.chief
        self.threads = threads   # None: every core (one worker per machine)
        self.strategy = None
        self.steps = 0
        self.current = None   # the step's Batch, made global after the step (worker_step)
        self.counted = None   # the corpus count (count), kept for finish's report
        self.own_tokens = None   # the tokens of the lines this worker counted itself
        self.counted_whole = None   # whether the whole corpus had been counted in this process (tests)
        self.share = None   # the objective's corpus (objective_corpus), a WorkerShare
        self._gather_fn = self._sum_fn = None
        die = os.environ.get(ENV_DIE_AT, "")
        self.die_at = int(die.split(":")[1]) if die and int(die.split(":")[0]) == self.index else None

    @classmethod
    def from_env(cls) -> Worker | Shares | None:
        shares = os.environ.get(ENV_SHARES)
        if shares and int(shares) > 1:
            return Shares(int(shares))
        cluster = cluster_from_env()
        if cluster is None:
            return None
        threads = os.environ.get(ENV_THREADS)
        return cls(cluster, int(threads) if threads else None)

    def start(self):
        """Join the cluster. Before any TensorFlow variable exists: the strategy sets up the runtime."""
        from embedtune._tf import tf

        timeout = float(os.environ.get(ENV_TIMEOUT) or 0)
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout or None, implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.device = self.strategy.extended.worker_devices[0]
        # TensorFlow's coordination service puts its own C handler on SIGTERM (a preemption notice it
        # only records), so the command's handler never ran: the worker trained on. Put it back.
        try:
            signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
        except (ValueError, TypeError):   # not the main thread; or a handler not set from Python
            pass

    def count(self, corpus) -> tuple[Counter, int, int]:
        """``corpus.count()``'s result, each worker counting only its share of the lines: the shares'
        counts are all-gathered (serialised, ShareCount.to_bytes) and merged the same on every worker.
        A corpus whose lines cannot be shared (a Corpus subclass that makes them otherwise) is counted whole."""
        self.counted_whole = corpus.counted
        if not corpus.shares_lines:
            self.counted = corpus.count()
            return self.counted
        part = corpus.count_share((self.index, self.size))
        self.own_tokens = sum(part.counts.values())
        parts = [ShareCount.from_bytes(data) for data in self.all_gather_bytes(part.to_bytes())]
        self.counted = merge_counts(parts)
        return self.counted

    def objective_corpus(self, corpus):
        """What the objective's constructor reads (glove counts its pairs there, classify keeps its
        lines): this worker's share of the lines (WorkerShare); a corpus whose lines cannot be shared whole."""
        self.share = WorkerShare(corpus, self) if corpus.shares_lines else None
        return self.share if self.share is not None else corpus

    def init_corpus(self, corpus):
        """What the new words' context pass reads (embedtune.init.context_sums): this worker's share of
        the lines, whose sums are added up over all workers there (WorkerShare.sum_arrays)."""
        return WorkerShare(corpus, self) if corpus.shares_lines else corpus

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        """Every worker's ``data``, in worker order, on every worker (a collective: all must call it).
        The lengths are gathered first; then the bytes, padded to the longest, in pieces of at most
        GATHER_PIECE bytes, every piece of one shape (one trace, the same collectives everywhere), as
        int64 (the collectives take no uint8)."""
        from embedtune._tf import tf

        gather = self._gather()
        with _collective(self.index):
            lengths = gather(tf.constant([len(data)], tf.int64)).numpy()
            longest = -(-int(lengths.max()) // 8)   # in int64 words
            piece = max(1, min(GATHER_PIECE // 8, longest))
            padded = np.zeros(-(-longest // piece) * piece, np.int64)
            padded.view(np.uint8)[:len(data)] = np.frombuffer(data, np.uint8)
            gathered = [gather(tf.constant(padded[start:start + piece])).numpy().reshape(self.size, piece)
                        for start in range(0, len(padded), piece)]
        whole = np.ascontiguousarray(np.concatenate(gathered, axis=1)).view(np.uint8)
        return [whole[k, :lengths[k]].tobytes() for k in range(self.size)]

    def sum_array(self, x: np.ndarray) -> np.ndarray:
        """The sum of every worker's ``x`` (float64, of one shape on all): a ring all-reduce, in which each
        part of the sum is added up on one worker and handed round, so every worker has the same bits,
        and each sends and receives about 2 x its bytes whatever the number of workers (an all-gather:
        N - 1 times). In pieces of at most GATHER_PIECE bytes, all of one shape (one trace)."""
        from embedtune._tf import tf

        flat = np.ascontiguousarray(x, np.float64).reshape(-1)
        piece = max(1, min(GATHER_PIECE // 8, flat.size))
        padded = np.zeros(-(-flat.size // piece) * piece, np.float64)
        padded[:flat.size] = flat
        if self._sum_fn is None:
            self._sum_fn = self._collective_fn(lambda context, v: context.all_reduce(tf.distribute.ReduceOp.SUM, v))
        with _collective(self.index):
            parts = [self._sum_fn(tf.constant(padded[at:at + piece])).numpy() for at in range(0, len(padded), piece)]
        return np.concatenate(parts)[:flat.size].reshape(np.shape(x))

    def _gather(self):
        """The all-gather of a 1-D tensor along its axis, traced once a shape (the classifier's fit
        calls it a hundred times with one shape)."""
        if self._gather_fn is None:
            self._gather_fn = self._collective_fn(lambda context, x: context.all_gather(x, axis=0))
        return self._gather_fn

    def _collective_fn(self, collective):
        """A tf.function running ``collective(replica context, x)`` on this worker's replica."""
        from embedtune._tf import tf

        strategy, device = self.strategy, self.device

        def replica(x):
            with tf.device(device):   # as in attach: an unplaced input has no destination
                x = tf.identity(x)
            return collective(tf.distribute.get_replica_context(), x)

        return tf.function(lambda x: strategy.run(replica, args=(x,)), autograph=False)

    def split(self, config):
        """The config each worker's trainer runs with: a host batch of B / N pairs."""
        t = config.train
        part = batch_part(t, self.size)
        return dataclasses.replace(config, train=dataclasses.replace(t, batch_size=part))

    def settings(self, settings: dict) -> dict:
        """The resume fingerprint's settings: the shares and the batch split depend on the number of workers."""
        return {**settings, "workers": self.size}

    def attach(self, trainer) -> None:
        """Make ``trainer`` a worker: gathered gradients and positions, a step under the strategy."""
        from embedtune._tf import tf

        own_gradients, device, size = trainer.gradients, self.device, self.size
        self.seed = trainer.config.train.seed
        # The step goes through gradients, a batch a call (no fused sgd, no compiled kernel): set
        # before anything is prepared, as prepare hands the kernel its batches untouched.
        trainer.fused = trainer.grouped = False
        self.padding = trainer.prepare(padding_batch(trainer.objective))
        with tf.device(device):
            self.gathered = tf.Variable(tf.zeros([size, PAIRS + 1], tf.int64), trainable=False, name="shares")

        def gathered_gradients(batch):
            loss, *slices = own_gradients(batch)
            # all_gather needs tensors placed on the worker's device (an unplaced one inside a
            # tf.function fails with "destinations can not be empty").
            with tf.device(device):
                parts = [tf.identity(x) for x in (tf.reshape(loss, [1]), batch["share"], *slices)]
            loss, shares, *slices = tf.distribute.get_replica_context().all_gather(parts, axis=0)
            self.gathered.assign(tf.reshape(shares, [size, PAIRS + 1]))
            return (tf.reduce_sum(loss), *slices)

        trainer.gradients = gathered_gradients
        trainer.distinct = False   # the workers' slices can hold the same row: merge them
        strategy, step = self.strategy, trainer._step
        compiled = tf.function(lambda batch, lr: strategy.run(step, args=(batch, lr)), autograph=False)

        def worker_step(batch, lr):
            self.steps += 1
            if self.die_at is not None and self.steps >= self.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            with _collective(self.index):
                loss = compiled(batch, lr)
                shares = self.gathered.numpy()   # every worker's position after the step (a host sync)
            self.current.shares = shares[:, :PAIRS].tolist()
            self.current.pairs = int(shares[:, PAIRS].sum())
            self.current.words_done = global_words(self.epoch_number, self.total_words, self.current.shares)
            return loss

        trainer.step = worker_step

    def epoch(self, trainer, corpus, pos, total_words: int) -> Iterator:
        """This worker's batches of epoch ``pos.epoch`` from its position in ``pos`` on (prepared: they go
        to the batch thread)."""
        self.epoch_number, self.total_words = pos.epoch, total_words
        start = pos.shares[self.index] if pos.shares else None
        return share_batches(trainer.objective, corpus, trainer.local_index, self.seed, pos.epoch, self.index,
                             self.size, start, trainer.prepare)

    def groups(self, batches: Iterator, pos, train) -> Iterator[list]:
        """The steps of the epoch, one a call: this worker's own batches, then padding until no worker has
        a batch left. Whether one has is gathered with each step (``more``: a batch after this one), so
        the workers agree on the epoch's last step; the step's Batch gets the global pairs, words and
        every worker's position (worker_step)."""
        from embedtune._tf import tf
        from embedtune.train import Batch

        if pos.shares and not any(s[MORE] for s in pos.shares):
            return   # resumed after the epoch's last step
        mine = pos.shares[self.index] if pos.shares else [0, 0, 0, 1]
        step = 0
        current = next(batches, None)
        while True:
            following = next(batches, None) if current is not None else None
            if current is not None:
                mine = [current.chunk, current.batch, current.words_done, int(following is not None)]
            else:
                mine = [*mine[:MORE], 0]
            step += 1
            tensors = dict(current.tensors if current is not None else self.padding,
                           share=tf.constant([*mine, current.pairs if current is not None else 0], tf.int64))
            self.current = Batch(tensors, 0, 0, step, None, 0)
            yield [self.current]
            if not any(s[MORE] for s in self.current.shares):
                return
            current = following

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
            json.dump({"worker": self.index, "steps": self.steps, "sha256": digest.hexdigest(),
                       "counts": counts_digest(*self.counted), "own_tokens": self.own_tokens,
                       "counted_whole": self.counted_whole,
                       # every pass begun over the corpus's lines, by share ("None": the whole corpus)
                       "reads": {str(share): n for share, n in self.share.corpus.reads.items()} if self.share else None,
                       "objective_tokens": self.share and self.share.tokens_read}, f)


def counts_digest(counts: Counter, total_words: int, n_lines: int) -> str:
    """A hash of a corpus count, its words' order included (debugging and tests: ENV_TABLE_HASH)."""
    return hashlib.sha256(json.dumps([list(counts.items()), total_words, n_lines]).encode()).hexdigest()


@contextlib.contextmanager
def _collective(index: int):
    """A collective's failure (a peer died or cannot be reached) as PeerLost."""
    from embedtune._tf import tf

    lost = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
            tf.errors.AbortedError, tf.errors.InternalError, tf.errors.UnknownError)
    try:
        yield
    except lost as err:
        raise PeerLost(f"worker {index}: a collective step failed ({type(err).__name__}: "
                       f"{err.message.splitlines()[0] if err.message else ''})") from None


class Shares:
    """N workers' shares trained in one process, for tests (ENV_SHARES): each step's global batch is the
    N shares' batches (Worker's, B / N pairs each, padding for a share that has ended) concatenated,
    the step the single process's over B pairs; the multi-worker run gathers the same slices, so the two
    agree up to the order of float32 sums. Steps, learning rates and positions follow Worker's rules."""

    chief = True
    threads = None

    def __init__(self, size: int):
        self.size = size

    def start(self):
        pass

    def count(self, corpus) -> tuple[Counter, int, int]:
        """Worker.count's merge, in one process: each share counted, then merged."""
        if not corpus.shares_lines:
            return corpus.count()
        return merge_counts([ShareCount.from_bytes(corpus.count_share((k, self.size)).to_bytes())
                             for k in range(self.size)])

    def init_corpus(self, corpus):
        return corpus   # one process's context pass over the whole corpus: what the workers' summed shares make

    def objective_corpus(self, corpus):
        """All the shares, held here (glove reads the whole corpus's pair counts from it, which the
        workers' summed shares make; classify keeps each share's lines apart, as each worker does)."""
        return HeldShares(corpus, self.size) if corpus.shares_lines else corpus

    def split(self, config):
        t = config.train
        batch_part(t, self.size)
        return config   # the trainer steps over whole global batches

    def settings(self, settings: dict) -> dict:
        return {**settings, "workers": self.size}

    def attach(self, trainer) -> None:
        objective = trainer.objective
        part_of = getattr(objective, "part", None)   # classify: a share's lines and its batch shapes
        if part_of is None and not hasattr(objective, "batch_size"):
            raise EmbedtuneError(f"{ENV_SHARES}: the {objective.name} objective's batches cannot be concatenated")
        self.seed = trainer.config.train.seed
        self.prepare = trainer.prepare
        self.concatenate = getattr(objective, "concatenate", concatenate)
        trainer.distinct = False   # the shares' batches can hold the same row, as the workers' gathered slices
        # One copy of the objective a share: its own batch size (B / N) and its own cache of chunks.
        self.parts = []
        for k in range(self.size):
            if part_of is not None:
                self.parts.append(part_of(k))
                continue
            part = copy.copy(objective)
            part.batch_size = objective.batch_size // self.size
            self.parts.append(part)
        self.padding = padding_batch(self.parts[0])

    def epoch(self, trainer, corpus, pos, total_words: int) -> Iterator:
        from embedtune.train import Batch

        if pos.shares and not any(s[MORE] for s in pos.shares):
            return
        shares = [list(s) for s in pos.shares] if pos.shares else [[0, 0, 0, 1] for _ in range(self.size)]
        own = [share_batches(part, corpus, trainer.local_index, self.seed, pos.epoch, k, self.size,
                             pos.shares[k] if pos.shares else None, lambda raw: raw)
               for k, part in enumerate(self.parts)]
        current = [next(it, None) for it in own]
        step = 0
        while True:
            following = [next(it, None) if b is not None else None for it, b in zip(own, current)]
            for k, (b, after) in enumerate(zip(current, following)):
                shares[k] = [b.chunk, b.batch, b.words_done, int(after is not None)] if b is not None else [
                    *shares[k][:MORE], 0]
            batch = self.concatenate([b.tensors if b is not None else self.padding for b in current])
            step += 1
            positions = [list(s) for s in shares]
            yield Batch(self.prepare(batch), batch["pairs"], 0, step, None,
                        global_words(pos.epoch, total_words, positions), positions)
            if not any(s[MORE] for s in shares):
                return
            current = following

    def groups(self, batches: Iterator, pos, train) -> Iterator[list]:
        from embedtune.train import step_groups

        return step_groups(batches, pos.steps, train)

    def finish(self, trainer) -> None:
        pass


def concatenate(raws: list[dict]) -> dict:
    """The shares' batches as one global batch: each entry concatenated, the pairs summed."""
    batch = {key: np.concatenate([raw[key] for raw in raws]) for key in raws[0] if key != "pairs"}
    batch["pairs"] = sum(raw["pairs"] for raw in raws)
    return batch


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
    step with a checkpoint, as a single process does; the launcher then ends the others and exits
    130 for SIGINT, 143 for SIGTERM.
    """
    ports = free_ports(workers)
    hosts = [f"localhost:{port}" for port in ports]
    procs: list[subprocess.Popen] = []
    logs = []
    forwarded = {}
    stopped_by = []   # the signals passed on to the chief

    def forward(signum, frame):
        if procs and procs[0].poll() is None:
            stopped_by.append(signum)
            procs[0].send_signal(signum)
        elif callable(forwarded.get(signum)):   # no chief to stop (not started, or gone): as if not launching
            forwarded[signum](signum, frame)

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
        if stopped_by and codes[0] in (128 + stopped_by[0], -stopped_by[0]):
            # The chief stopped as asked (or, not yet running Python, was ended by the signal); the
            # others were left waiting for it. 130 for SIGINT, 143 for SIGTERM, as a shell reports them.
            _stop(procs)
            return Launch(128 + stopped_by[0], None)
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
