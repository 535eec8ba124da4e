"""The corpus as a run's passes read it: the lines held here, and how what is made of them combines with
what the run's other processes make of theirs.

One process holds every line (``HeldLines``' defaults: combining one share's figures gives those figures);
a worker of several holds its share of the lines (distribute.WorkerShare: its figures are gathered from
every worker); the tests' one-process emulation holds every share, each apart (tests/debug_worker.py).
The new words' context sums (embedtune.newwords.contexts), glove's pair counts and classify's lines call these
methods whatever holds the lines, so none of them asks how many processes there are."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

Figure = TypeVar("Figure")


class HeldLines:
    """size : the shares the corpus's lines are split into; held : those whose figures the methods
    take (one item a share held, in this order); chief : this process writes the run's figures."""

    size: int = 1
    held: tuple[int, ...] | list[int] = (0,)
    chief: bool = True

    def gather_bytes(self, items: list[bytes]) -> list[bytes]:
        """Every share's item, in share order, from those of the shares held here (``items``)."""
        return list(items)

    def sum_arrays(self, items: list[np.ndarray]) -> np.ndarray:
        """The sum over every share of float64 arrays of one shape, from those of the shares held here
        (``items``), added in share order; the same on every process. One item: that item."""
        total = np.asarray(items[0], np.float64)
        for item in items[1:]:
            total = total + item
        return total

    def combine(self, figure: Figure, to_bytes: Callable[[Figure], bytes],
                merge: Callable[[list[bytes]], Figure]) -> Figure:
        """The whole corpus's figure from ``figure``, made of every line this object reads: where other
        processes read the other lines, each one's ``to_bytes`` gathered and ``merge``d, the same on
        every process; here every line was read, so ``figure`` itself (nothing is encoded)."""
        return figure
