"""A few steps of each --deterministic compiled kernel on small seeded tables, and a digest of what they
wrote (tests/test_kernel_portable.py runs this here and, as a script, with numba compiling for another CPU).

    NUMBA_CPU_NAME=generic python tests/portable_steps.py   # prints the digests as JSON
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

N_WORDS, TRAINABLE, DIM, BATCH, NEGATIVE, STEPS = 300, 200, 50, 256, 5, 4


def _digest(*arrays) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


def _tables(rng):
    """(trainable rows with the sink last [T + 1, dim], the frozen source [N, dim], frozen local id T + i ->
    its row there)."""
    matrix = rng.normal(0, 0.3, (N_WORDS, DIM)).astype(np.float32)
    words = np.concatenate([matrix[:TRAINABLE], np.zeros((1, DIM), np.float32)])
    return words, matrix, np.arange(TRAINABLE, N_WORDS, dtype=np.int64)


def glove_digest(optimizer: str, clip_norm: float, anchor: float) -> str:
    from embedtune.kernels.glove import GloveKernel
    from embedtune.training.optimizers import Update

    rng = np.random.default_rng(1)
    words, matrix, frozen_rows = _tables(rng)
    side = rng.normal(0, 0.1, (N_WORDS + 1, 1)).astype(np.float32)
    update = Update(optimizer, clip_norm, {"word": words.shape, "side": side.shape})
    kernel = GloveKernel(words, side, matrix, frozen_rows, TRAINABLE, 1.0, update, anchor,
                         rng.uniform(1, 20, TRAINABLE).astype(np.float32), BATCH, 2, lockfree=False)
    losses = []
    for _ in range(STEPS):
        batch = {"row": rng.integers(0, N_WORDS, BATCH).astype(np.int32),
                 "col": rng.integers(0, N_WORDS, BATCH).astype(np.int32),
                 "target": rng.uniform(0, 3, BATCH).astype(np.float32),
                 "f": rng.uniform(0, 1, BATCH).astype(np.float32),
                 "weight": (rng.random(BATCH) < 0.95).astype(np.float32)}
        losses.append(kernel.run([batch], [0.05])[0])
    return _digest(kernel.words, kernel.side, np.array(losses), *kernel.word_state.values())


def _sgns_batch(rng, shared: bool) -> dict:
    """A batch of random pairs, one negative row a pair (or one per 8 pairs, shared), 5% weighted out."""
    return {"center": rng.integers(0, N_WORDS, BATCH).astype(np.int32),
            "context": rng.integers(0, N_WORDS, BATCH).astype(np.int32),
            "negatives": rng.integers(0, N_WORDS, (BATCH // 8 if shared else BATCH, NEGATIVE)).astype(np.int32),
            "weight": (rng.random(BATCH) < 0.95).astype(np.float32)}


def sgns_digest(shared: bool) -> str:
    from embedtune.kernels.sgns import SgnsKernel

    rng = np.random.default_rng(2)
    words, matrix, frozen_rows = _tables(rng)
    side = rng.normal(0, 0.3, (N_WORDS + 1, DIM)).astype(np.float32)
    kernel = SgnsKernel(words, side, matrix, frozen_rows, TRAINABLE, BATCH, NEGATIVE, shared, 2, lockfree=False)
    losses = []
    for _ in range(STEPS):
        losses.append(kernel.run([_sgns_batch(rng, shared)], [0.05])[0])
    return _digest(kernel.words, kernel.side, np.array(losses))


def sgns_lazy_digest(optimizer: str, shared: bool, clip_norm: float) -> str:
    from embedtune.kernels.sgns_lazy import SgnsLazyKernel
    from embedtune.training.optimizers import Update

    rng = np.random.default_rng(4)
    words, matrix, frozen_rows = _tables(rng)
    side = rng.normal(0, 0.3, (N_WORDS + 1, DIM)).astype(np.float32)
    update = Update(optimizer, clip_norm, {"word": words.shape, "side": side.shape})
    kernel = SgnsLazyKernel(words, side, matrix, frozen_rows, TRAINABLE, BATCH, NEGATIVE, shared, update, 2)
    losses = []
    for _ in range(STEPS):
        losses.append(kernel.run([_sgns_batch(rng, shared)], [0.05])[0])
    return _digest(kernel.words, kernel.side, np.array(losses), *kernel.word_state.values(),
                   *kernel.side_state.values())


def classifier_fit_digest() -> str:
    from embedtune.objectives.classify.model import _summed_loss_and_grad

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, DIM)).astype(np.float32)
    Y = np.zeros((500, 7), np.float32)
    Y[np.arange(500), rng.integers(0, 7, 500)] = 1
    loss, grad = _summed_loss_and_grad(X, Y, rng.normal(0, 0.1, 7 * (DIM + 1)), False, strict=True)
    return _digest(np.array(loss), grad)


def digests() -> dict[str, str]:
    return {"glove-adagrad-anchored": glove_digest("adagrad", 0.0, 2.0),
            "glove-sgd-capped": glove_digest("sgd", 0.01, 0.0),
            "glove-adam-capped": glove_digest("adam", 0.05, 0.0),
            "sgns-per-pair": sgns_digest(False), "sgns-shared": sgns_digest(True),
            "sgns-adam": sgns_lazy_digest("adam", False, 0.0), "sgns-adagrad-shared-capped": sgns_lazy_digest(
                "adagrad", True, 0.05),
            "classifier-fit": classifier_fit_digest()}


if __name__ == "__main__":
    print(json.dumps(digests()))
