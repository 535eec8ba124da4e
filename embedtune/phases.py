"""Each set-up phase's progress before the training loop, and the trained rows' checks after it (``Phase``, from
``phase`` while ``reporting``: train's on_phase). A leaf: a phase deep in an objective (glove's pair count) or the
new words' pass reports from below the training package without importing it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Phase:
    """What a set-up phase reports to train's ``on_phase`` (the command shows a bar for one that lasts)."""

    name: str             # what it does, a few words ("glove: counting pairs")
    done: int
    total: int
    unit: str             # "": nothing counted (the command shows the time the phase has taken)
    finished: bool = False
    counted: bool = True   # False: a moment with nothing to count (``announce``), said once


# The run's progress callback while its set-up runs (``reporting``): the set-up's phases, deep in an
# objective or the new words' pass, report to it without a callback threaded through every constructor.
_report: ContextVar[Callable | None] = ContextVar("embedtune_progress", default=None)


@contextlib.contextmanager
def reporting(progress: Callable | None) -> Iterator[None]:
    """``phase`` reports to ``progress`` within this block (on this thread)."""
    token = _report.set(progress)
    try:
        yield
    finally:
        _report.reset(token)


@contextlib.contextmanager
def phase(name: str, total: int, unit: str = "word") -> Iterator[Callable[[int], None]]:
    """A set-up phase of ``total`` units: yields ``advance(n)``, called as n more units are done; the
    callback of ``reporting`` (if any) is given a ``Phase`` at the start, at each advance and at the end."""
    report = _report.get()
    if report is None:
        yield lambda n: None
        return
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        report(Phase(name, done, total, unit))

    advance(0)
    try:
        yield advance
    finally:
        report(Phase(name, done, total, unit, finished=True))


def announce(name: str) -> None:
    """A moment of the set-up with nothing to count (numba compiling on a cold cache): the callback of
    ``reporting`` (if any) is given it once, as a finished Phase that is not ``counted``."""
    report = _report.get()
    if report is not None:
        report(Phase(name, 0, 0, "", finished=True, counted=False))
