"""TensorBoard scalars of a run (``--logdir``), written with tf.summary where the loop reads its loss.

Tags (step = the training step):

    train/loss                 mean loss per pair since the last point
    train/words_per_second     raw corpus words per second since the last point
    train/learning_rate        the rate of the last step
    rows/mean_change_trainable mean L2 distance of trainable pretrained rows from their start
    rows/mean_change_new       the same for new words

"Start" is where this process started the rows: after --resume, the rows of the checkpoint.

The row changes are means over a fixed sample of at most ROW_SAMPLE rows of each kind, picked once:
reading the whole table back at every point costs far more (benchmarks/README.md, train_speed).

Neither objective has figures of its own that change while it trains (glove's scale is fitted once,
before), so none are written.
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from embedtune._tf import tf
from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints.folder import os_reason
from tensorflow.core.framework import summary_pb2

ROW_SAMPLE = 10_000
# tf.summary.scalar is TensorBoard's, and TensorFlow 2.21 installs without it (TBNotInstalledError);
# tf.summary.write with the metadata TensorBoard's scalar puts on its values (plugin "scalars",
# empty content: ScalarPluginData version 0) writes the same event without needing it.
SCALAR = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
                                     data_class=summary_pb2.DATA_CLASS_SCALAR)


def scalar(tag: str, value: float) -> None:
    """One scalar at the default writer's step (TensorBoard shows it as tf.summary.scalar's)."""
    tf.summary.write(tag, tf.constant(value, tf.float32), metadata=SCALAR)


class ScalarLog:
    """Scalars of one run; ``write`` at each loss point, ``close`` at the end.

    trainer : an embedtune.training.trainer.Trainer (its ``trainable`` variable, ``rows`` and ``plan``)
    """

    def __init__(self, logdir: str, trainer, words_done: int = 0, seed: int = 1):
        self.logdir = logdir
        before = set(os.listdir(logdir)) if os.path.isdir(logdir) else set()
        try:
            self.writer = tf.summary.create_file_writer(logdir)
        except tf.errors.OpError as err:   # a full disk: TensorFlow's ResourceExhaustedError
            # The events file TensorFlow made before its first write failed is this run's: it goes.
            for name in set(os.listdir(logdir)) - before if os.path.isdir(logdir) else ():
                if name.startswith("events.out.tfevents.") and f".{os.getpid()}." in name:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(logdir, name))
            raise self._error(err) from None
        self.trainer = trainer   # its ``trainable`` read each time: the kernel's steps reach the variable when read
        rng = np.random.default_rng(seed)
        is_new = trainer.rows[: trainer.n_trainable] >= trainer.plan.n_pretrained
        self.groups = {}
        for name, ids in (("trainable", np.flatnonzero(~is_new)), ("new", np.flatnonzero(is_new))):
            if len(ids) > ROW_SAMPLE:
                ids = np.sort(rng.choice(ids, ROW_SAMPLE, replace=False))
            if len(ids):
                ids = tf.constant(ids, tf.int32)
                self.groups[name] = (ids, tf.gather(trainer.trainable, ids))   # the start (a copy)
        self.last = (time.perf_counter(), words_done)

    def _mean_changes(self) -> dict[str, float]:
        return {name: float(tf.reduce_mean(tf.norm(tf.gather(self.trainer.trainable, ids) - start, axis=1)))
                for name, (ids, start) in self.groups.items()}

    def write(self, step: int, words_done: int, loss: float, lr: float) -> None:
        now = time.perf_counter()
        seconds, words = now - self.last[0], words_done - self.last[1]
        self.last = (now, words_done)
        try:
            with self.writer.as_default(step=step):
                scalar("train/loss", loss)
                if seconds > 0:
                    scalar("train/words_per_second", words / seconds)
                scalar("train/learning_rate", lr)
                for name, value in self._mean_changes().items():
                    scalar(f"rows/mean_change_{name}", value)
            # A point's scalars reach the file now, so an interrupted or killed run keeps them (a few
            # hundred bytes every LOSS_EVERY steps).
            self.writer.flush()
        except tf.errors.OpError as err:   # a full disk: TensorFlow's ResourceExhaustedError
            raise self._error(err) from None

    def close(self) -> None:
        try:
            self.writer.close()
        except tf.errors.OpError as err:
            raise self._error(err) from None

    def _error(self, err) -> EmbedtuneError:
        return EmbedtuneError(f"--logdir: cannot write TensorBoard's scalars: {os_reason(err)}", self.logdir)
