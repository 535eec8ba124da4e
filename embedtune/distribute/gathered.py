"""The gathered step (--sync-every 0) without TensorFlow, for an objective whose batches join (sgns, glove,
classify: ``Objective.joins_batches``) and which has a compiled step for the run's config.

Global step s is every worker's s-th batch. Each worker makes its own part of the global batch (B / N
units or lines, ``Objective.worker_part``), the workers all-gather the parts over the mesh's connections
(mesh.py) with each worker's position and pairs, and every worker steps the same global batch (the parts
joined in worker order, ``Objective.join``: concatenated; classify's words merged) through the objective's
batch-synchronous compiled step without fastmath (the
``--deterministic`` one, whatever the run asked): the same update from the same bits on every worker, on any
CPU, so the tables stay identical without sending a row. Only batches are exchanged (ids, negatives and
weights: a few bytes a pair), and no worker imports TensorFlow.

Each worker computes the whole global batch's step: N workers make one process's words a second, not N
times them (--sync-every K > 0, averaging, is the way to speed). What the gathered step gives is a run
whose every update is the global batch's, which one process can make too (tests/debug_worker.py's
emulation, the same bits). A run without a compiled step (--anchor) gathers its gradients through
TensorFlow (strategy.GatheredStep), as does an objective whose batches do not join.
"""

from __future__ import annotations

import json

import numpy as np

HEADER = 8   # bytes of the header's length, before the header (JSON) and the arrays' bytes


def joins_batches(train) -> bool:
    """Whether a gathered-step worker of resolved [train] config ``train`` steps without TensorFlow (above)."""
    from embedtune import kernels
    from embedtune.objectives import objective_class

    objective = objective_class(train.objective)
    return bool(kernels.KERNEL) and objective.joins_batches and objective.compiles(train)


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
