"""What a run reports while it trains: the loss read back from the step every LOSS_EVERY steps and
checked for divergence (``LossLog``), and what the progress callback is given (``Progress``). Before
the loop, each set-up phase reports through embedtune/phases.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from embedtune._tf import lazy as tf
from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints.state import Position

if TYPE_CHECKING:
    from embedtune.training.tblog import ScalarLog

# A mean loss (over LOSS_EVERY steps) above this many times the first step's is divergence. The
# first step's loss is taken before any update, so it is the start whatever the lr. 10x lies well
# above the ratios of normal runs and below what diverging runs pass in their first report
# (benchmarks/README.md, train_speed).
DIVERGED = 10
# A trained row longer than this many times the longest row the run started from (every input row and
# every new word's start; at least 1, so that a table of zeros is not divided by) is divergence too: a
# loss measured while the first step already moves rows (glove's compiled step, lock-free) can start
# at the exploded value, which the ratio above then never sees. A healthy run's longest trained row
# stays shorter than the longest input row (tests/test_divergence.py: each objective's defaults on the
# shipped sample), two orders of magnitude under this bound; a diverging one passes it by another four
# (glove --lr 1e6).
ROW_GROWTH = 100


@dataclass
class Progress:
    """What the loop reports to a progress callback."""

    epoch: int
    words_done: int       # raw corpus tokens processed so far, all epochs
    words_total: int
    loss: float           # mean loss per pair since the last report
    pairs: int


class LossLog:
    """The loss bookkeeping: the step's loss tensors are summed on the host every LOSS_EVERY steps (a
    read is a host sync), checked for divergence, kept in ``pos.loss_history`` and reported to the
    progress callback and TensorBoard."""

    def __init__(self, pos: Position, lr0: float, words_total: int,
                 progress: Callable[[Progress], None] | None, tblog: ScalarLog | None):
        self.pos = pos
        self.lr0 = lr0
        self.words_total = words_total
        self.progress = progress
        self.tblog = tblog
        self.pending: list = []
        self.pairs = 0
        self.lr = lr0   # that of the last step added

    def add(self, loss, pairs: int, lr: float) -> None:
        """One step's summed loss (a tensor, not read yet) over ``pairs`` pairs at ``lr``."""
        self.pending.append(loss)
        self.pairs += pairs
        self.lr = lr
        if self.pos.loss_start is None:   # the yardstick of divergence: the loss before any update
            self.pos.loss_start = float(loss) / max(pairs, 1)

    def flush(self) -> None:
        """Read the pending losses back: their mean per pair, checked and reported."""
        pos = self.pos
        # No pairs: steps of an averaging worker whose share has ended (none trained anything); no figure.
        if self.pending and self.pairs:
            mean = float(_sum(self.pending)) / max(self.pairs, 1)
            if not math.isfinite(mean):
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps} (loss {mean}); lower --lr (it was {self.lr0:g}) "
                    "or cap rows with --clip-norm")
            if pos.loss_start and mean > DIVERGED * pos.loss_start:
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps}: loss {mean:.4g} per pair, over {DIVERGED}x the "
                    f"first step's {pos.loss_start:.4g}; lower --lr (it was {self.lr0:g}) or cap each row's step "
                    f"with --clip-norm (e.g. 1)")
            pos.loss_history.append(mean)
            if self.progress is not None:
                self.progress(Progress(pos.epoch, pos.words_done, self.words_total, mean, self.pairs))
            if self.tblog is not None:
                self.tblog.write(pos.steps, pos.words_done, mean, self.lr)
        self.pending, self.pairs = [], 0


# Rows of a table widened to float64 at a time by longest_row: its two blocks (the next is made before the last
# goes) were the peak of a 1M x 300 run's end at 65,536 (benchmarks/log/memory_sizes.md, train by phase).
LONGEST_ROW_BLOCK = 1 << 13


def longest_row(*matrices: np.ndarray) -> float:
    """The largest L2 norm among the rows of ``matrices`` (a block at a time: no copy of a whole table)."""
    longest = 0.0
    for matrix in matrices:
        for start in range(0, len(matrix), LONGEST_ROW_BLOCK):
            block = np.asarray(matrix[start:start + LONGEST_ROW_BLOCK], np.float64)
            if block.size:
                longest = max(longest, float(np.sqrt(np.einsum("ij,ij->i", block, block).max())))
            del block
    return longest


def check_rows(trained: np.ndarray, start_length: float, advice: str) -> None:
    """Raise "training diverged" unless every row of ``trained`` is finite and at most ROW_GROWTH times
    ``start_length`` long (the longest row the run started from: ``longest_row``), whatever the
    objective. advice : what to change ("lower --lr (it was 0.05) or ...")."""
    if not np.isfinite(trained).all():
        raise EmbedtuneError(f"training diverged (rows with NaN or infinity); {advice}")
    bound = ROW_GROWTH * max(start_length, 1.0)
    longest = longest_row(trained)
    if longest > bound:
        raise EmbedtuneError(f"training diverged: a trained row's length reached {longest:.4g}, over {ROW_GROWTH}x "
                             f"the longest input row's {start_length:.4g}; {advice}")


def _sum(losses: list):
    """The losses summed as tf.add_n sums them, in float32: a compiled step's (numpy float32) without
    importing TensorFlow, with the same bits (tests/test_import_path.py compares the two). TensorFlow's
    CPU kernel adds the first n % 8 (8 for 0, 9 for 1) in order, then each next 8, summed in order,
    onto the total."""
    if not all(isinstance(loss, np.float32) for loss in losses):
        return tf.add_n(losses)
    first = {0: 8, 1: 9}.get(len(losses) % 8, len(losses) % 8)
    total = _in_order(losses[:first])
    for start in range(first, len(losses), 8):
        total = total + _in_order(losses[start:start + 8])
    return total


def _in_order(losses: list) -> np.float32:
    total = losses[0]
    for loss in losses[1:]:
        total = total + loss
    return total
