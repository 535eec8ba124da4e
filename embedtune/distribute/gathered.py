"""The gathered step (--sync-every 0) without TensorFlow, for an objective whose batches join (sgns, glove:
``Objective.joins_batches``) and which has a compiled step for the run's config.

Global step s is every worker's s-th batch. Each worker makes its own part of the global batch (B / N
units, ``share_part``), the workers all-gather the parts over the mesh's connections (mesh.py) with each
worker's position and pairs, and every worker steps the same global batch (the parts joined in worker
order, ``joined``) through the objective's batch-synchronous compiled step without fastmath (the
``--deterministic`` one, whatever the run asked): the same update from the same bits on every worker, on any
CPU, so the tables stay identical without sending a row. Only batches are exchanged (ids, negatives and
weights: a few bytes a pair), and no worker imports TensorFlow.

Each worker computes the whole global batch's step: N workers make one process's words a second, not N
times them (--sync-every K > 0, averaging, is the way to speed). What the gathered step gives is a run
whose every update is the global batch's, which one process can make too (tests/debug_worker.py's
emulation, the same bits). classify (its compiled step takes batches that list each word once) and a run
without a compiled step (sgns's --anchor) gather their gradients through TensorFlow
(strategy.GatheredStep).
"""

from __future__ import annotations

import copy
import json

import numpy as np

HEADER = 8   # bytes of the header's length, before the header (JSON) and the arrays' bytes


def joins_batches(train) -> bool:
    """Whether a gathered-step worker of resolved [train] config ``train`` steps without TensorFlow (above)."""
    from embedtune import kernels
    from embedtune.objectives import objective_class

    objective = objective_class(train.objective)
    return bool(kernels.KERNEL) and objective.joins_batches and objective.compiles(train)


def share_part(objective, k: int, size: int):
    """Worker k of ``size``'s own objective for its batches: 1 / size of the global batch (share_batches
    gives it the worker's units; the objective's chunks and their cache are shared with ``objective``)."""
    part = copy.copy(objective)
    part.batch_size = objective.batch_size // size
    return part


def pack(batch: dict, position: list[int]) -> bytes:
    """A raw batch (numpy arrays and its "pairs") and the worker's ``position`` after it (shares.CHUNK ..
    MORE) as bytes."""
    arrays = {key: np.ascontiguousarray(value) for key, value in batch.items() if key != "pairs"}
    header = json.dumps({"position": [int(x) for x in position], "pairs": int(batch["pairs"]),
                         "arrays": [[key, a.dtype.str, list(a.shape)] for key, a in arrays.items()]}).encode()
    return b"".join([len(header).to_bytes(HEADER, "little"), header, *(a.tobytes() for a in arrays.values())])


def unpack(data: bytes) -> tuple[dict, list[int]]:
    """``pack``'s batch (read-only arrays over ``data``, and its "pairs") and position."""
    size = int.from_bytes(data[:HEADER], "little")
    header = json.loads(data[HEADER:HEADER + size])
    at, batch = HEADER + size, {"pairs": header["pairs"]}
    for key, dtype, shape in header["arrays"]:
        a = np.frombuffer(data, np.dtype(dtype), int(np.prod(shape)), at).reshape(shape)
        batch[key] = a
        at += a.nbytes
    return batch, header["position"]


def joined(parts: list[dict]) -> dict:
    """The workers' parts as one global batch: each entry concatenated in worker order, the pairs summed."""
    batch = {key: np.concatenate([part[key] for part in parts]) for key in parts[0] if key != "pairs"}
    batch["pairs"] = sum(int(part["pairs"]) for part in parts)
    return batch
