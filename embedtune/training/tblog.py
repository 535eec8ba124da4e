"""TensorBoard scalars of a run (``--logdir``), written where the loop reads its loss, without
TensorFlow (training/eventfile.py: the files are those tf.summary writes).

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

import time

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.training.eventfile import EventFile

ROW_SAMPLE = 10_000


class ScalarLog:
    """Scalars of one run; ``write`` at each loss point, ``close`` at the end.

    trainer : an embedtune.training.trainer.Trainer (its ``rows``, ``plan`` and ``trainable_rows``)
    """

    def __init__(self, logdir: str, trainer, words_done: int = 0, seed: int = 1):
        self.logdir = logdir
        try:
            self.file = EventFile(logdir)
        except OSError as err:   # a full disk, a file in the folder's place
            raise self._error(err) from None
        self.trainer = trainer   # its rows read each time: the step's tables as they are then
        rng = np.random.default_rng(seed)
        is_new = trainer.rows[: trainer.n_trainable] >= trainer.plan.n_pretrained
        self.groups = {}
        for name, ids in (("trainable", np.flatnonzero(~is_new)), ("new", np.flatnonzero(is_new))):
            if len(ids) > ROW_SAMPLE:
                ids = np.sort(rng.choice(ids, ROW_SAMPLE, replace=False))
            if len(ids):
                self.groups[name] = (ids, trainer.trainable_rows(ids).astype(np.float32, copy=True))   # the start
        self.last = (time.perf_counter(), words_done)

    def _mean_changes(self) -> dict[str, float]:
        return {name: float(np.mean(np.linalg.norm(self.trainer.trainable_rows(ids) - start, axis=1)))
                for name, (ids, start) in self.groups.items()}

    def write(self, step: int, words_done: int, loss: float, lr: float) -> None:
        now = time.perf_counter()
        seconds, words = now - self.last[0], words_done - self.last[1]
        self.last = (now, words_done)
        scalars = {"train/loss": loss}
        if seconds > 0:
            scalars["train/words_per_second"] = words / seconds
        scalars["train/learning_rate"] = lr
        scalars.update((f"rows/mean_change_{name}", value) for name, value in self._mean_changes().items())
        try:
            for tag, value in scalars.items():
                self.file.scalar(tag, value, step)
            # A point's scalars reach the file now, so an interrupted or killed run keeps them (a few
            # hundred bytes every LOSS_EVERY steps).
            self.file.flush()
        except OSError as err:   # a full disk
            raise self._error(err) from None

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as err:
            raise self._error(err) from None

    def _error(self, err) -> EmbedtuneError:
        return EmbedtuneError(f"--logdir: cannot write TensorBoard's scalars: {err.strerror or err}", self.logdir)
