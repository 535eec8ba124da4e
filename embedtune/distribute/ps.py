"""Tables larger than one machine: tf.distribute.ParameterServerStrategy, the run's chief as its coordinator.

TF_CONFIG names one chief, P "ps" tasks and W "worker" tasks (serve.py starts the latter two). The
chief builds the run's Trainer under the strategy's scope with a row partitioner, so the trainable
table, the objective's table and their optimizer state become ShardedVariables of P shards of rows,
one on each parameter server (a table's state on the same server as its rows); frozen rows are never
on a server (the chief gathers the ones a batch reads from its matrix, as one process does). The chief
reads the corpus, makes the batches (the one-process host side), and schedules each call of the
step (GROUP batches, or one) on a free worker through ClusterCoordinator; the worker gathers the rows
the batch reads from the shards, computes the update and scatters it back to them, shard by shard.
The chief never waits for a step except to read the losses and at the end, then reads the tables
shard by shard and writes the output, as one process does.

Semantics. Calls of the step run one at a time on each worker, in the order the chief scheduled them,
the next one a worker takes being the next in that order. With one worker task the steps are the one
process's, in its order (TensorFlow's step, unfused: tests/test_ps.py compares the rows). With W
workers, up to W calls run at once and their updates meet at the servers unordered, as word2vec's
Hogwild threads meet in memory: a step reads rows as the servers hold them when it starts and adds its
update to whatever they hold when it ends, and two runs differ. The learning rate of a batch follows
the corpus words scheduled before it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from embedtune._tf import lazy as tf

from embedtune import kernels
from embedtune._adapters import tensorflow_private
from embedtune.distribute.cluster import PeerLost, ServerCluster
from embedtune.distribute.peers import PEER_TIMEOUT, ctrl_c_ends_the_process
from embedtune.distribute.serve import answers, check_server_run, wait_for
from embedtune.errors import EmbedtuneError
from embedtune.training import batches as batching
from embedtune.training.step import TensorFlowStep
from embedtune.training.strategy import OneProcess

# Variables with fewer rows stay whole: the step's tf.random.Generator state (shape [3]) may not be
# sharded, and a split of a few rows saves nothing.
MIN_SHARDED_ROWS = 64
WATCH = 0.5   # seconds between the chief's probes of its servers while it trains
# The TensorFlow versions (major, minor) whose ShardedVariable.sparse_read ``_sparse_read`` replaces: from
# the oldest pyproject.toml allows to the newest it was checked against. tests/test_ps.py checks, on the
# installed TensorFlow, that its own still does what ``_sparse_read`` corrects, and fails when it does not.
SPARSE_READ_VERSIONS = ((2, 16), (2, 21))


def row_partitioner(shards: int, min_rows: int = MIN_SHARDED_ROWS) -> Callable:
    """A ``variable_partitioner`` for ParameterServerStrategy: ``shards`` shards of rows for a
    variable of at least ``min_rows`` rows (a table, its optimizer state: each accumulator is
    created like its table, so its shards sit on the same servers as its rows), one otherwise."""

    def partition(shape, dtype):
        rank = shape.rank or 0
        if rank == 0:
            return []
        return [min(shards, shape[0]) if shape[0] is not None and shape[0] >= min_rows else 1] + [1] * (rank - 1)

    return partition


def _sparse_read(self, indices, name=None):
    """Rows ``indices`` (any shape) of a ShardedVariable, in their order: [*indices.shape, *row shape].

    TensorFlow 2.21's own splits the ids by shard and concatenates each shard's rows shard after shard,
    dropping the ids' order: its rows are wrong unless the ids are sorted (inside a tf.function), and
    it refuses ids that are not 1-D. ``embedding_lookup`` puts the rows back in order (dynamic_stitch),
    with the "div" strategy that matches the shards' layout (larger first, as the partitioner makes
    them), and takes ids of any shape: per-pair negatives' [B, 1 + K] context ids as they are.
    """
    return tf.nn.embedding_lookup(self.variables, indices, name=name)


def tensorflow_version(version: str) -> tuple[int, int]:
    """(major, minor) of a TensorFlow version string ("2.21.0", "2.22.0rc1", "2.22.0-dev20260101")."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


@contextlib.contextmanager
def sparse_read_in_order():
    """While inside, ``tf.gather`` on every ShardedVariable returns rows in the ids' order, for ids of any
    shape (``_sparse_read``); TensorFlow's own again after. Enter before the first step is traced (a
    traced step keeps what it was traced with). Refused, with nothing patched, on a TensorFlow outside
    SPARSE_READ_VERSIONS, whose ShardedVariable it was not written for."""
    low, high = SPARSE_READ_VERSIONS
    if not low <= tensorflow_version(tf.__version__) <= high:
        raise EmbedtuneError(f"parameter servers: embedtune's sharded row gather is written for TensorFlow "
                             f"{low[0]}.{low[1]} to {high[0]}.{high[1]}, not {tf.__version__}; install one of "
                             "those for a run on parameter servers")
    ShardedVariable = tensorflow_private.sharded_variable_class()
    own = ShardedVariable.__dict__.get("sparse_read")   # None: inherited (ShardedVariableMixin's)
    ShardedVariable.sparse_read = _sparse_read
    try:
        yield
    finally:
        if own is None:
            del ShardedVariable.sparse_read
        else:
            ShardedVariable.sparse_read = own


def parameter_server_strategy(resolver, shards: int, min_rows: int = MIN_SHARDED_ROWS):
    """A ParameterServerStrategy over ``resolver``'s cluster whose tables (variables of ``min_rows``
    rows or more) are split by rows into ``shards`` shards (gather from them inside
    ``sparse_read_in_order``)."""
    return tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=row_partitioner(shards, min_rows))


def whole(table) -> np.ndarray:
    """A ShardedVariable's rows read shard by shard, in order (a plain variable's as they are)."""
    parts = getattr(table, "variables", None)
    if parts is None:
        return table.numpy()
    return np.concatenate([part.numpy() for part in parts])


class RemoteLoss:
    """One step's loss, scheduled: read (a wait for its call) only when the loop sums the losses."""

    def __init__(self, value, item: int | None, servers: ParameterServers):
        self.value, self.item, self.servers = value, item, servers

    def numpy(self):
        with self.servers.failures():
            self.servers.wait(self.value)
            out = self.value.fetch()
        return np.float32(out if self.item is None else out[self.item])

    def __float__(self):
        return float(self.numpy())


def _convert(value, dtype=None, name=None, as_ref=False):
    return tf.constant(value.numpy(), dtype=dtype, name=name)


class ServerStep(TensorFlowStep):
    """TensorFlow's step on the sharded tables, each call scheduled on a worker task; not fused (the
    fused sgd scatters inside an XLA cluster, which takes no ShardedVariable)."""

    # The anchor's start rows and slice counts as variables, sharded as the tables are: as constants (one
    # process) they would travel with every call.
    fixed_as_variables = True

    def __init__(self, trainer, servers: ParameterServers):
        super().__init__(trainer, fused=False)
        self.servers = servers
        tf.register_tensor_conversion_function(RemoteLoss, _convert)

    def run(self, batches, lrs):
        schedule = self.servers.schedule
        if len(batches) == batching.GROUP and self.grouped:
            losses = schedule(self.group_step, (batches, tf.constant(lrs, tf.float32)))
            return [RemoteLoss(losses, i, self.servers) for i in range(len(batches))]
        return [RemoteLoss(schedule(self.step, (batch, tf.constant(lr, tf.float32))), None, self.servers)
                for batch, lr in zip(batches, lrs)]

    def sync(self):
        self.servers.join()

    def trained_matrix(self):
        self.sync()
        return whole(self.trainer.trainable_variable)[: self.trainer.n_trainable]

    def side_matrix(self):
        self.sync()
        return whole(self.trainer.side_variable)


class ParameterServers(OneProcess):
    """The chief of a parameter-server cluster: the whole corpus read here, the steps run on the workers,
    the tables on the servers."""

    def __init__(self, cluster: ServerCluster, threads: int | None = None):
        self.cluster = cluster
        self.threads = threads
        self.shards = len(cluster.spec["ps"])
        self.size = len(cluster.spec["worker"])   # the workers stepping
        self.strategy = self.coordinator = self.step = None
        self.lost: str | None = None   # a server that stopped answering (the watch)
        self.watching = threading.Event()
        self.held = contextlib.ExitStack()   # the sharded gather's patch, from start to close

    def start(self, train=None, note=None, stop=None):
        """Wait for every server, then connect: TensorFlow's own connection waits without a limit for a
        server that is not there, and retries a lost worker's steps for an hour. A TensorFlow whose
        sharded gather was not checked is refused first."""
        self.held.enter_context(sparse_read_in_order())
        wait_for(self.cluster, train.peer_timeout if train is not None else PEER_TIMEOUT)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.cluster.spec), task_type="chief", task_id=0, rpc_layer="grpc")
        # The coordinator logs each failed step with the whole gRPC error; the chief says it in one line.
        logging.getLogger("tensorflow").addFilter(
            lambda record: not record.pathname.endswith("cluster_coordinator.py") or record.levelno < logging.ERROR)
        with ctrl_c_ends_the_process():   # its servers' ports are only seen open (serve.wait_for)
            self.strategy = parameter_server_strategy(resolver, self.shards)
            self.coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        self.watching.set()
        threading.Thread(target=self._watch, name="embedtune-ps-watch", daemon=True).start()

    def _silent(self) -> str | None:
        """The first ps or worker task that does not answer (two probes), as a line; None if all do."""
        for kind in ("ps", "worker"):
            for index, address in enumerate(self.cluster.spec[kind]):
                if not answers(address) and not answers(address):
                    return f"{kind} task {index} at {address} stopped answering"
        return None

    def _watch(self):
        """Mark the run failed when a server stops answering: TensorFlow waits an hour for a lost
        worker to come back, and a step scheduled on it would wait that long."""
        while self.watching.is_set():
            time.sleep(WATCH)
            lost = self._silent()
            if lost and self.watching.is_set():
                self.lost = lost
                # wakes a join (nothing to wake when no call is in flight); a wait for one call's
                # result polls ``lost`` (``wait``)
                tensorflow_private.fail_scheduled(self.coordinator, PeerGone(lost))
                return

    @contextlib.contextmanager
    def failures(self):
        """A step's failure as one line: PeerLost naming a server gone, else the error's first line."""
        try:
            yield
        except PeerGone:
            pass
        except tf.errors.OpError as err:
            self.lost = self.lost or self._silent()
            if not self.lost:
                raise EmbedtuneError(f"a step failed on a worker: {str(err).strip().splitlines()[0]}") from None
        if self.lost:
            self.watching.clear()
            raise PeerLost(self.lost)

    def wait(self, value) -> None:
        """Wait for a scheduled call's result, or for the watch to find a server gone (a lost worker's
        call is put back for it to come back, and its result waited for without a limit)."""
        ready = tensorflow_private.result_event(value)
        while ready is not None and not ready.wait(WATCH):
            if self.lost:
                raise PeerGone(self.lost)

    def schedule(self, function, args):
        with self.failures():
            return self.coordinator.schedule(function, args=args)

    def join(self):
        with self.failures():
            self.coordinator.join()

    def split(self, config):
        """The one process's config; what the mode does not build refused here too, for a library caller
        (the command refuses it in every task before any starts)."""
        check_server_run(config, False, 1, self.cluster)
        return config

    def make_step(self, trainer, words, side, note):
        objective, t = trainer.objective, trainer.config.train
        if kernels.KERNEL and objective.compiles(t) and note is not None:
            note(f"parameter servers: {objective.name} steps through TensorFlow's step on the workers, not its "
                 "compiled one")
        with self.strategy.scope():
            self.step = ServerStep(trainer, self)
        return self.step

    def finish(self, trainer):
        self.join()
        self.watching.clear()

    def close(self):
        """TensorFlow's own ShardedVariable.sparse_read back, however the run ended."""
        self.held.close()

    def summary(self) -> dict:
        """The cluster, and the rows of the trainable table each server holds (its sink included)."""
        shards = getattr(self.step.trainer.trainable_variable, "variables", [])
        return {"parameter_servers": self.shards, "ps_workers": self.size,
                "ps_shard_rows": [int(v.shape[0]) for v in shards],
                "ps_shard_devices": [v.device for v in shards]}


class PeerGone(Exception):
    """The watch's mark on the coordinator's queue: wakes a join waiting for a server that is gone."""

