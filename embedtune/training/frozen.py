"""Frozen rows checked: in memory after training (``max_frozen_change``) and as written (``FrozenRowsCheck``)."""

from __future__ import annotations

import math

import numpy as np


def max_frozen_change(before: np.ndarray, rows: np.ndarray, values: np.ndarray, frozen: np.ndarray) -> float:
    """Largest absolute change the trainer's rows make to a frozen row (0.0 when none of them is
    frozen, as the plan requires). Every other output row is the input's own row, so this is all
    that can differ in memory; what reaches the file is checked by FrozenRowsCheck as it is written."""
    hit = frozen[rows]
    if not hit.any():
        return 0.0
    old, new = before[rows[hit]], values[hit]
    if np.array_equal(old.view(np.uint32), new.view(np.uint32)):
        return 0.0
    diff = np.abs(old.astype(np.float64) - new.astype(np.float64))
    return float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf


class FrozenRowsCheck:
    """Frozen rows as written against the rows as read: pass it as save_vectors(on_written=...).

    Each block the writer hands over holds the rows read back from the bytes it wrote; the frozen
    ones are compared bit for bit with the input matrix (the values the input file was read as).
    checked : frozen rows compared; changed : rows whose bits differ; worst : largest absolute change
    (inf for a NaN or infinity where a finite value was, 0.0 for a change of sign of zero).
    """

    def __init__(self, before: np.ndarray, frozen: np.ndarray):
        self.before = before
        self.frozen = frozen
        self.checked = 0
        self.changed = 0
        self.worst = 0.0

    def __call__(self, start: int, stop: int, written: np.ndarray) -> None:
        stop_pre = min(stop, len(self.before))   # new rows (after the pretrained ones) are never frozen
        if stop_pre <= start:
            return
        rows = self.frozen[start:stop_pre]
        old, new = self.before[start:stop_pre][rows], written[: stop_pre - start][rows]
        self.checked += len(old)
        differs = (old.view(np.uint32) != new.view(np.uint32)).any(axis=1)
        if differs.any():
            self.changed += int(differs.sum())
            diff = np.abs(old[differs].astype(np.float64) - new[differs].astype(np.float64))
            self.worst = max(self.worst, float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf)
