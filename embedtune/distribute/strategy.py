"""Several workers as a strategy of the training loop (training/strategy.py's OneProcess, overridden) under
TF_CONFIG, each worker on its share of the lines, exchanging through the mesh's TCP connections (mesh.py:
averaging, and the gathered step of joined batches) or tf.distribute.MultiWorkerMirroredStrategy's
collectives (any other gathered step).

The counting pass before training is split the same way as the lines: each worker counts its share and
the counts are all-gathered (``Worker.count``), so every worker has the whole corpus's counts, the same
vocabulary, plan and new words. glove counts its co-occurrences by shares too (``WorkerShare``: each
worker its lines, the cells summed through an all-gather); classify holds only its share's labelled lines
and trains them as its own chunks, with the figures all workers need alike (labels, batch budgets, the
classifier-alone fit) combined over the shares. The new words' context pass reads each worker's share
and all-reduces the sums (``Worker.init_corpus``).

Two ways to combine the workers' training (``--sync-every K``). K > 0, the default: averaging
(averaging.py), each worker training its share with the single process's step and the rows each changed
averaged every K steps (``AveragedStep``, ``rounds``). K = 0: the gathered step. An objective whose batches
join and which has a compiled step (sgns, glove, classify) exchanges its batches over the mesh and steps the global
batch through that step on every worker (gathered.py: ``Worker.joined_steps``); any other (--anchor, a plugin's)
gathers gradients through TensorFlow, below.

The gathered step through TensorFlow (``GatheredStep``). Global step s is every worker's s-th batch. Each
worker computes the loss and
the sparse gradients of its batch; the slices of all workers are gathered (all-gather of the
IndexedSlices' ids and values: static shapes, so no padding is needed), with each worker's position and
pairs (5 int64), and every worker merges, drops frozen rows, caps and applies the same update with the
same lazy optimizer: only gradients are exchanged, and the tables stay identical. Shares make different
numbers of batches: a worker whose share has ended steps with a batch of weight 0 (padding) until the
gathered positions say that no worker has a batch left, so all end the epoch on the same step. The
learning rate of a step follows the corpus words done by all shares before it (gathered), as one
process's follows its own.

Resume. A checkpoint's position holds every worker's position in its share (``Position.shares``: the
chunk and batch of its last batch, its words and whether it has more), gathered with each step and
written by the chief; on ``--resume`` every worker reads the chief's checkpoint (a folder all of them can
read) and continues its own share from its own position. The number of workers is part of the fingerprint.
"""

from __future__ import annotations

import dataclasses
import importlib
import signal
import time
from collections.abc import Iterator

from embedtune._tf import lazy as tf

from embedtune import kernels
from embedtune.corpus import ShareCount, merge_counts
from embedtune.distribute import compiled_share
from embedtune.distribute.cluster import Cluster
from embedtune.distribute.compiled_share import reads_compiled
from embedtune.distribute.gathered import joins_batches, pack, unpack
from embedtune.distribute.averaging import AveragedStep, rounds
from embedtune.distribute.collectives import Collectives, collective
from embedtune.distribute.mesh import Mesh
from embedtune.distribute.peers import PEER_TIMEOUT, ctrl_c_ends_the_process, wait_for_peers
from embedtune.distribute.shares import (MORE, PAIRS, WorkerShare, batch_part, check_split, global_words,
                                         share_batches)
from embedtune.training.batches import Batch
from embedtune.training.step import CompiledStep, TensorFlowStep, choose_step
from embedtune.training.strategy import OneProcess


class GatheredStep(TensorFlowStep):
    """TensorFlow's step under the strategy, a batch a call: this worker's gradients, then every worker's
    slices (and positions) gathered, then the same merged, capped update on every worker."""

    def __init__(self, trainer, worker: Worker):
        # No fused sgd (the gradients are gathered between the dense part and the update) and one batch
        # a call; the workers' slices can hold the same row, so they are merged.
        super().__init__(trainer, fused=False, grouped=False, distinct=False)
        self.worker = worker
        device, strategy = worker.collectives.device, worker.collectives.strategy
        self.device = device
        self.padding = self.prepare(trainer.objective.padding_batch())
        with tf.device(device):
            self.gathered = tf.Variable(tf.zeros([worker.size, PAIRS + 1], tf.int64), trainable=False, name="shares")
        self.replicated = tf.function(lambda batch, lr: strategy.run(self._step, args=(batch, lr)), autograph=False)

    def gradients(self, batch):
        loss, *slices = self.own_gradients(batch)
        # all_gather needs tensors placed on the worker's device (an unplaced one inside a
        # tf.function fails with "destinations can not be empty").
        with tf.device(self.device):
            parts = [tf.identity(x) for x in (tf.reshape(loss, [1]), batch["share"], *slices)]
        loss, shares, *slices = tf.distribute.get_replica_context().all_gather(parts, axis=0)
        self.gathered.assign(tf.reshape(shares, [self.worker.size, PAIRS + 1]))
        return (tf.reduce_sum(loss), *slices)

    def run(self, batches, lrs):
        return [self.one(batch, tf.constant(lr, tf.float32)) for batch, lr in zip(batches, lrs)]

    def one(self, batch, lr):
        """One global step; the step's Batch (Worker.current) gets every worker's position and pairs."""
        worker = self.worker
        with collective(worker.index):
            loss = self.replicated(batch, lr)
            shares = self.gathered.numpy()   # every worker's position after the step (a host sync)
        current = worker.current
        current.shares = shares[:, :PAIRS].tolist()
        current.pairs = int(shares[:, PAIRS].sum())
        current.words_done = global_words(worker.epoch_number, worker.total_words, current.shares)
        return loss


class Worker(OneProcess):
    """One worker's part of a run: the cluster's collectives, its share of the lines, the gathered step."""

    def __init__(self, cluster: Cluster, threads: int | None = None):
        self.index, self.size = cluster.index, cluster.size
        self.hosts = cluster.hosts
        self.chief = cluster.chief
        self.threads = threads   # None: every core (one worker per machine)
        self.collectives: Collectives | Mesh = Collectives(self.index, self.size)   # a mesh for averaging (start)
        self.step: GatheredStep | None = None
        self.current: Batch | None = None   # the step's Batch, made global after the step (GatheredStep.one)
        self.epoch_number = self.total_words = 0
        self.sync_every = 0   # --sync-every (split): 0, the gathered step; else averaging every K steps
        self.joins = False    # the gathered step of joined batches, without TensorFlow (start; gathered.py)
        self.part = self.padding = None   # then: this worker's objective for its part of each batch, its padding
        self.exchange_bytes, self.exchange_seconds = 0, 0.0   # and what it sent, and its time in the exchanges
        self.round: list[Batch] = []   # averaging: the round the loop runs now, and this share's position after it
        self.mine: list[int] = []

    def start(self, train=None, note=None, stop=None):
        """Join the cluster, once every peer is up (peers.wait_for_peers: bounded, and stopped by
        ``stop``): averaging workers (``train``'s --sync-every K > 0) and those of the gathered step of
        joined batches through the mesh's connections, any other gathered step through TensorFlow's
        strategy, before any TensorFlow variable exists (the strategy sets up the runtime)."""
        seconds = train.peer_timeout if train is not None else PEER_TIMEOUT
        if self.hosts:
            wait_for_peers(self.hosts, self.index, seconds, note, stop)
        if self.hosts and train is not None and (train.sync_every or joins_batches(train)):
            # Each worker steps as one process and the workers only exchange bytes (mesh.py).
            self.joins = not train.sync_every
            self.collectives = Mesh(self.hosts, self.index)
            self.collectives.start(seconds, stop)
            return
        # TensorFlow only now (this module reads it lazily, and run.count_while_importing leaves it to a
        # worker): a worker whose peers never come, or that is stopped while it waits, never pays its
        # import. Imported before the strategy's start below, so that Ctrl-C during the import unwinds as
        # in any other import (cli/main.py's handler), not by SIGINT's default action.
        importlib.import_module("embedtune._tf").tf
        with ctrl_c_ends_the_process():
            self.collectives.start()
        # TensorFlow's coordination service puts its own C handler on SIGTERM (a preemption notice it
        # only records), so the command's handler never ran: the worker trained on. Put it back.
        try:
            signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
        except (ValueError, TypeError):   # not the main thread; or a handler not set from Python
            pass

    def close(self) -> None:
        """The mesh's connections closed, however the run ended (a library caller's process goes on)."""
        if isinstance(self.collectives, Mesh):
            self.collectives.close()

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        return self.collectives.all_gather_bytes(data)

    def all_gather_words(self, words):
        return self.collectives.all_gather_words(words)

    def sum_array(self, x):
        return self.collectives.sum_array(x)

    def count(self, corpus):
        """``corpus.count()``'s result, each worker counting only its share of the lines: the shares'
        counts are all-gathered (serialised, ShareCount.to_bytes) and merged the same on every worker.
        A corpus whose lines cannot be shared (a Corpus subclass that makes them otherwise) is counted whole."""
        if not corpus.shares_lines:
            return corpus.count()
        part = self.count_share(corpus)
        return merge_counts([ShareCount.from_bytes(data) for data in self.all_gather_bytes(part.to_bytes())])

    def count_share(self, corpus) -> ShareCount:
        """This worker's own share of the lines, counted (a file by the compiled reader: compiled_share)."""
        if reads_compiled(corpus):
            return compiled_share.count_share(corpus, (self.index, self.size))
        return corpus.count_share((self.index, self.size))

    def objective_corpus(self, corpus):
        """What the objective's constructor reads (glove counts its pairs there, classify keeps its
        lines): this worker's share of the lines (WorkerShare); a corpus whose lines cannot be shared whole."""
        return WorkerShare(corpus, self) if corpus.shares_lines else corpus

    def init_corpus(self, corpus):
        """What the new words' context pass reads (embedtune.newwords.contexts.context_sums): this worker's share of
        the lines, whose sums are added up over all workers there (WorkerShare.sum_arrays)."""
        return WorkerShare(corpus, self) if corpus.shares_lines else corpus

    def split(self, config):
        """The config each worker's trainer runs with. Averaging (--sync-every K > 0) and the gathered step of
        joined batches (its trainer steps the global batch; its part's batches come from ``part``): the one
        process's, on this worker's threads; gathered gradients: a host batch of B / N pairs."""
        t = config.train
        check_split(t, self.size)
        self.sync_every = t.sync_every
        if self.sync_every or self.joins:
            return dataclasses.replace(config, train=dataclasses.replace(t, threads=t.threads or self.threads or 0))
        return dataclasses.replace(config, train=dataclasses.replace(t, batch_size=batch_part(t, self.size)))

    def settings(self, settings: dict) -> dict:
        """The resume fingerprint's settings: the shares and the batch split depend on the number of workers."""
        return {**settings, "workers": self.size}

    def make_step(self, trainer, words, side, note):
        """Averaging: the single process's step, synced every K steps (AveragedStep). Else the gathered step: of
        joined batches, the objective's strict compiled step (``note`` told so unless --deterministic asked for
        it); else TensorFlow's (``note`` told when one process would have taken the objective's compiled step)."""
        objective, t = trainer.objective, trainer.config.train
        if self.sync_every:
            self.step = AveragedStep(trainer, choose_step(trainer, words, side, note), self)
            return self.step
        if self.joins:   # the same bits on every worker, on any CPU: the strict batch-synchronous kernel
            if not t.deterministic and note is not None:
                note(f"--workers {self.size} --sync-every 0: {objective.name} steps each global batch through its "
                     "--deterministic step on every worker (the same bits on all)")
            self.part = objective.worker_part(self.index, self.size)
            self.padding = self.part.padding_batch()
            self.step = CompiledStep.build(trainer, words, side, deterministic=True)
            return self.step
        if kernels.KERNEL and objective.compiles(t) and note is not None:
            note(f"--workers {self.size}: {objective.name} steps through TensorFlow's step (the workers' "
                 "gradients are gathered), not its compiled one")
        self.step = GatheredStep(trainer, self)
        return self.step

    def epoch(self, trainer, corpus, pos, total_words: int) -> Iterator:
        """This worker's batches of epoch ``pos.epoch`` from its position in ``pos`` on (prepared: they go
        to the batch thread)."""
        self.epoch_number, self.total_words = pos.epoch, total_words
        start = pos.shares[self.index] if pos.shares else None
        if self.joins:   # its part of each global batch, raw: the step prepares the joined batch
            return share_batches(self.part, corpus, trainer.local_index, trainer.config.train.seed, pos.epoch,
                                 self.index, self.size, start, lambda raw: raw)
        return share_batches(trainer.objective, corpus, trainer.local_index, trainer.config.train.seed, pos.epoch,
                             self.index, self.size, start, trainer.prepare)

    def groups(self, batches: Iterator, pos, train) -> Iterator[list]:
        """The steps of the epoch, one a call: this worker's own batches, then padding until no worker has
        a batch left. Whether one has is gathered with each step (``more``: a batch after this one), so
        the workers agree on the epoch's last step; the step's Batch gets the global pairs, words and
        every worker's position (GatheredStep.one). Averaging: rounds of K steps (averaging.rounds)."""
        if self.sync_every:
            yield from rounds(self, batches, pos, train)
            return
        if self.joins:
            yield from self.joined_steps(batches, pos)
            return
        for step, (current, mine) in enumerate(own_steps(self.index, batches, pos), 1):
            tensors = dict(current.tensors if current is not None else self.step.padding,
                           share=tf.constant([*mine, current.pairs if current is not None else 0], tf.int64))
            self.current = Batch(tensors, 0, 0, step, None, 0)
            yield [self.current]
            if not any(s[MORE] for s in self.current.shares):
                return

    def joined_steps(self, batches: Iterator, pos) -> Iterator[list]:
        """The gathered step of joined batches (gathered.py), a step a call: this worker's part of each global
        batch (padding once its share has ended) and its position, all-gathered; every worker steps the parts
        joined in worker order (the step's Batch: every worker's position, the pairs of all)."""
        for step, (current, mine) in enumerate(own_steps(self.index, batches, pos), 1):
            began = time.perf_counter()
            data = pack(current.tensors if current is not None else self.padding, mine)
            parts = [unpack(part) for part in self.all_gather_bytes(data)]
            self.exchange_bytes += len(data) * (self.size - 1)
            self.exchange_seconds += time.perf_counter() - began
            batch = self.part.join([part for part, _ in parts])
            shares = [position for _, position in parts]
            yield [Batch(self.step.prepare(batch), batch["pairs"], 0, step, None,
                         global_words(self.epoch_number, self.total_words, shares), shares)]
            if not any(s[MORE] for s in shares):
                return

    def summary(self) -> dict:
        """The run's figures of the workers: the averaging's syncs, or the gathered step's exchanges of joined
        batches (its parts packed and gathered, the wait for the slowest worker included), and what this worker
        sent."""
        if self.joins:
            return {"sync_every": 0, "exchange_bytes_sent": self.exchange_bytes,
                    "exchange_seconds": round(self.exchange_seconds, 3)}
        if not isinstance(self.step, AveragedStep):
            return {}
        return {"sync_every": self.sync_every, **self.step.summary()}


def own_steps(index: int, batches: Iterator, pos) -> Iterator[tuple]:
    """(batch, position) for each global step of the epoch from worker ``index``'s position in ``pos`` on: its
    own batches, then None (padding) while the others may have batches left; its position after the step
    ([chunk, batch, words, more]: ``more`` whether it has a batch after this one). The caller ends the epoch
    once the gathered positions say that no worker has one; none at all when resumed after its last step."""
    if pos.shares and not any(s[MORE] for s in pos.shares):
        return
    mine = pos.shares[index] if pos.shares else [0, 0, 0, 1]
    current = next(batches, None)
    while True:
        following = next(batches, None) if current is not None else None
        if current is not None:
            mine = [current.chunk, current.batch, current.words_done, int(following is not None)]
        else:
            mine = [*mine[:MORE], 0]
        yield current, mine
        current = following
