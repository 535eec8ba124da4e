"""The promise, in one place: frozen rows stay bit-identical, and this module is what proves it.

- in memory, after training: ``max_frozen_change`` (the trainer's rows against the input's);
- as written: ``FrozenRowsCheck``, fed the rows read back from the bytes a writer wrote, and
  ``save_checked``, the checked write (a difference leaves no file) that ``run`` and the Keras layer use;
- after a reload or an epoch of a Keras model: ``row_hashes`` and ``digest``, a hash of each frozen row's
  bits taken from the vectors as read, that ``embedtune.keras.Embedding.check_frozen`` compares with;
- between two files: ``frozen_verdict`` and ``FrozenCheck``, what ``diff --check-frozen`` (and the
  report's page) say about a list of words (embedtune.compare matches the words and reads the rows).

"Changed" means one definition everywhere: the float32 bits differ (``bits_differ``), so -0.0 against
0.0 or another NaN payload is a change a frozen row must not have. Knows nothing about TensorFlow,
training or the commands: the Keras package uses it without importing the whole run.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass

import numpy as np

from embedtune.errors import EmbedtuneError

BLOCK = 1 << 16   # rows hashed at a time: the uint64 work copy of a block stays a few tens of MB


def bits_differ(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """bool [n]: rows of ``new`` (float32 [n, dim]) whose bits are not ``old``'s."""
    old, new = np.ascontiguousarray(old), np.ascontiguousarray(new)
    return (old.view(np.uint32) != new.view(np.uint32)).any(axis=1)


def largest_change(old: np.ndarray, new: np.ndarray) -> float:
    """The largest absolute difference between two sets of rows (float64): inf where a NaN or an
    infinity stands for a finite value, 0.0 for a change of sign of zero."""
    diff = np.abs(old.astype(np.float64) - new.astype(np.float64))
    return float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf


# -- in memory, after training -------------------------------------------------------------------


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
    return largest_change(old, new)


# -- as written -----------------------------------------------------------------------------------


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
        differs = bits_differ(old, new)
        if differs.any():
            self.changed += int(differs.sum())
            self.worst = max(self.worst, largest_change(old[differs], new[differs]))


def save_checked(out, before: np.ndarray, frozen: np.ndarray, output: str, out_format: str, *,
                 model=None, ahead=None, progress=None) -> FrozenRowsCheck:
    """Write ``out`` (Vectors or PatchedVectors) with its frozen rows checked as written (read back from
    the output's bytes) against ``before`` (float32 [n_pretrained, dim], the input as read; ``frozen``:
    bool [>= n_pretrained]); a difference is an error before the output is renamed into place.
    ``model``: the fastText model the input was read from, what a fasttext-model output is written from.
    ``ahead``: ``out``'s lines rendered ahead (formats.render_ahead); ``progress``: the writer's
    (formats.save_vectors). Returns the check (checked: rows
    compared, worst: the largest change, 0.0)."""
    from embedtune import formats

    written = FrozenRowsCheck(before, frozen)
    if out_format == "fasttext-model":   # the model read: its subword rows and settings, written back
        from embedtune.formats.fasttext_write import require_model

        out.model = model
        require_model(out, output)

    def check_block(start, stop, rows):
        written(start, stop, rows)
        if written.changed:
            what = "1 frozen row" if written.changed == 1 else f"{written.changed:,} frozen rows"
            left = "nothing was written" if output != "-" else "the output stops here"
            raise EmbedtuneError(f"{what} would be written changed (largest change {written.worst:.3g}); {left}",
                                 output)

    # Only blocks holding a frozen row are read back: the check compares nothing else.
    formats.save_vectors(out, output, out_format, on_written=check_block, check_rows=frozen, ahead=ahead,
                         progress=progress)
    return written


# -- hashes: a Keras layer's frozen rows after an epoch or a reload --------------------------------
# A row's hash is sum_j bits_j * c_j modulo 2^64 (bits: the float32's as an integer; c_j: fixed odd
# numbers), so a change of any one value always changes it, and several at once go unseen with
# odds of about 2^-64. It costs a pass over the frozen rows, a block at a time, and 8 bytes a row.


def _multipliers(dim: int) -> np.ndarray:
    rng = np.random.default_rng(20260)   # fixed: a digest must not depend on the process
    return rng.integers(0, 2**63, dim, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def row_hashes(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """uint64 [len(rows)]: the hash of each of ``rows`` (int, ascending) of ``matrix`` (float32 [n, dim])."""
    c = _multipliers(matrix.shape[1])
    out = np.empty(len(rows), np.uint64)
    for start in range(0, len(rows), BLOCK):
        block = np.ascontiguousarray(matrix[rows[start:start + BLOCK]], np.float32)
        with np.errstate(over="ignore"):
            out[start:start + BLOCK] = (block.view(np.uint32).astype(np.uint64) * c).sum(axis=1, dtype=np.uint64)
    return out


def digest(hashes: np.ndarray) -> str:
    """The frozen rows' hashes as one hex digest (the layer's config keeps it)."""
    return hashlib.blake2b(np.ascontiguousarray(hashes, np.uint64).tobytes(), digest_size=16).hexdigest()


# -- between two files: diff --check-frozen ---------------------------------------------------------


@dataclass
class FrozenCheck:
    """Frozen words checked between an old and a new set of vectors.

    changed : frozen words whose vector is not bit-identical in the new set
    removed : frozen words the old set has and the new one lacks
    unknown : listed words the old set does not have (nothing to keep; not a failure)
    """

    checked: int
    changed: list[str]
    removed: list[str]
    unknown: list[str]

    @property
    def ok(self) -> bool:
        return not self.changed and not self.removed

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def frozen_verdict(words: list[str], rows: np.ndarray, held: np.ndarray, changed: np.ndarray) -> FrozenCheck:
    """What became of the listed ``words`` (distinct, in the order to report them) of an old set: ``rows``
    int [len(words)], each one's row there (-1: the old set lacks it); ``held[r]``: the new set has old
    row r's word; ``changed[r]``: its row there is not bit-identical to old row r (bits_differ)."""
    rows = np.asarray(rows, np.int64)
    at = np.flatnonzero(rows >= 0)
    kept, moved = held[rows[at]], changed[rows[at]]
    return FrozenCheck(
        checked=len(at),
        changed=[words[i] for i in at[kept & moved].tolist()],
        removed=[words[i] for i in at[~kept].tolist()],
        unknown=[words[i] for i in np.flatnonzero(rows < 0).tolist()],
    )
