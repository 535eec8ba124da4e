"""The collectives of the gathered step through TensorFlow (--sync-every 0 without a compiled step: with
--anchor; averaging workers and the gathered step of joined batches use mesh.py's, the same calls over
TCP), those a run's set-up needs beyond the step's own gather: every worker's bytes (counts,
co-occurrence cells, the classifier's figures) and float64 sums (the new words' context sums, the
classifier's fit), each a collective call that every worker makes in the same order."""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np

# Seconds after which a collective waiting for a peer fails the step; unset or 0: none. None by default:
# TensorFlow times each collective with a thread of its own that sleeps the whole timeout, so a step's
# collectives left thousands of sleeping threads a second until a worker could start no more (SIGABRT,
# "Resource temporarily unavailable"). A dead peer is still found: the launcher stops its own workers as
# soon as one exits, and in a cluster TensorFlow's coordination service reports a peer that stops.
ENV_TIMEOUT = "EMBEDTUNE_COLLECTIVE_TIMEOUT"
# Seconds without a heartbeat after which TensorFlow's coordination service declares a launched worker dead
# and aborts every worker's collectives (TensorFlow's own: 10 s). A worker silent that long may be alive and
# only starved (a CI machine running the suite beside it ended a run "worker 0 exited (lost its peers)";
# a worker stopped 15 s did the same when averaging workers still exchanged here). Launched workers have a
# watchdog already: the launcher ends the run as soon as one exits. --peer-timeout's default: the same
# patience as at the start.
LAUNCHED_HEARTBEAT = 120.0
# Bytes a worker sends in one all-gather of its corpus counts (Collectives.all_gather_bytes): a large
# vocabulary's counts go in several pieces, each well under gRPC's message limits.
GATHER_PIECE = 1 << 24


@contextlib.contextmanager
def collective(index: int):
    """A collective's failure (a peer died or cannot be reached) as PeerLost."""
    from embedtune._tf import tf
    from embedtune.distribute.cluster import PeerLost

    lost = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError,
            tf.errors.AbortedError, tf.errors.InternalError, tf.errors.UnknownError)
    try:
        yield
    except lost as err:
        # One line, but not only the first: TensorFlow's first line of a heartbeat timeout ends "the following
        # tasks are unhealthy (stopped sending heartbeats):", and the tasks follow.
        said = " ".join((err.message or "").split())
        raise PeerLost(f"worker {index}: a collective step failed ({type(err).__name__}: "
                       f"{said[:400] + ' ...' if len(said) > 400 else said})") from None


class Collectives:
    """Worker ``index`` of ``size``'s side of tf.distribute.MultiWorkerMirroredStrategy: ``start`` joins
    the cluster (before any TensorFlow variable exists: the strategy sets up the runtime)."""

    def __init__(self, index: int, size: int):
        self.index, self.size = index, size
        self.strategy = self.device = None
        self._gather_fn = self._sum_fn = None

    def start(self) -> None:
        from embedtune._adapters import tensorflow_private
        from embedtune._tf import tf
        from embedtune.distribute.cluster import launched

        if launched():
            tensorflow_private.configure_coordination(json.loads(os.environ["TF_CONFIG"])["cluster"],
                                                      LAUNCHED_HEARTBEAT)
        timeout = float(os.environ.get(ENV_TIMEOUT) or 0)
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout or None, implementation=tf.distribute.experimental.CommunicationImplementation.RING)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.device = self.strategy.extended.worker_devices[0]

    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        """Every worker's ``data``, in worker order, on every worker (a collective: all must call it),
        sent as int64 words (the collectives take no uint8): ``all_gather_words``."""
        words = np.zeros(-(-len(data) // 8), np.int64)
        words.view(np.uint8)[:len(data)] = np.frombuffer(data, np.uint8)
        lengths, rows = self._all_gather(words, len(data), 8)
        return [rows[k].view(np.uint8)[:lengths[k]].tobytes() for k in range(self.size)]

    def all_gather_words(self, words: np.ndarray) -> list[np.ndarray]:
        """Every worker's int64 array ``words`` (1-D), in worker order, on every worker: views of one
        gathered array, no copy made after it (the averaging's syncs)."""
        lengths, rows = self._all_gather(np.ascontiguousarray(words, np.int64), len(words), 1)
        return [rows[k, :lengths[k]] for k in range(self.size)]

    def _all_gather(self, words: np.ndarray, length: int, per_word: int) -> tuple[np.ndarray, np.ndarray]:
        """Every worker's ``length`` (its size in units, ``per_word`` a word) and its ``words``, padded to
        the longest, as [workers, words]: the lengths are gathered first; then the words, in pieces of at
        most GATHER_PIECE bytes, every piece of one shape (one trace, the same collectives everywhere)."""
        from embedtune._tf import tf

        gather = self._gather()
        with collective(self.index):
            lengths = gather(tf.constant([length], tf.int64)).numpy()
            longest = -(-int(lengths.max()) // per_word)
            piece = max(1, min(GATHER_PIECE // 8, longest))
            size = -(-longest // piece) * piece
            padded = words if len(words) == size else np.zeros(size, np.int64)
            if padded is not words:
                padded[:len(words)] = words
            gathered = [gather(tf.constant(padded[start:start + piece])).numpy().reshape(self.size, piece)
                        for start in range(0, size, piece)]
        return lengths, gathered[0] if len(gathered) == 1 else np.concatenate(gathered, axis=1)

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
        with collective(self.index):
            parts = [self._sum_fn(tf.constant(padded[at:at + piece])).numpy() for at in range(0, len(padded), piece)]
        return np.concatenate(parts)[:flat.size].reshape(np.shape(x))

    def _gather(self):
        """The all-gather of a 1-D tensor along its axis, traced once a shape (the classifier's fit
        calls it a hundred times with one shape)."""
        if self._gather_fn is None:
            self._gather_fn = self._collective_fn(lambda context, x: context.all_gather(x, axis=0))
        return self._gather_fn

    def _collective_fn(self, collective_op):
        """A tf.function running ``collective_op(replica context, x)`` on this worker's replica."""
        from embedtune._tf import tf

        strategy, device = self.strategy, self.device

        def replica(x):
            with tf.device(device):   # as in the step: an unplaced input has no destination
                x = tf.identity(x)
            return collective_op(tf.distribute.get_replica_context(), x)

        # reduce_retracing: calls of changing lengths (the averaging's syncs) share one trace of unknown
        # length after the second, instead of a trace each.
        return tf.function(lambda x: strategy.run(replica, args=(x,)), autograph=False, reduce_retracing=True)
