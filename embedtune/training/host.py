"""The host process's settings for a run: TensorFlow's thread pools and glibc's large-block threshold."""

from __future__ import annotations

import ctypes

from embedtune import _tf


def use_threads(threads: int) -> None:
    """TensorFlow's intra- and inter-op thread pools. Steps run one at a time: two lock-free steps at
    once (gensim's workers) cut wall time under load but moved new words far from their true vectors
    (benchmarks/README.md, train_speed), so they were taken out. The pools can be set only before TensorFlow
    starts its runtime; in a process where it has started (a test, a notebook) they stay as
    they are. A run that has not imported TensorFlow (a compiled step's) sets them when it does, if
    it ever does."""
    def apply(tf):
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError:
            pass

    _tf.when_imported("threads", apply)


# glibc's mallopt parameter, and the block size from which it is used: above a batch's small arrays
# (a 4096-pair sgns batch: 16-80 KB), below its frozen rows (4096 x 300 floats: 4.9 MB) and a
# chunk's pairs (tens of MB).
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20


def map_large_blocks() -> bool:
    """Blocks of MMAP_THRESHOLD bytes or more come straight from the system and go back to it when
    freed (glibc's mallopt; nothing elsewhere). True if it was set.

    By default glibc raises that threshold to each large block freed (up to 32 MB), after which the
    host's per-batch and per-chunk arrays stay in the heap of whichever thread freed them. On
    TensorFlow's step (with its tensors already pooled: embedtune/_tf.py) handing them back lowers the
    training loop's resident level and peak at the same speed (benchmarks/README.md, memory). Set for every
    run, before the new words' starts (training.loop.setup): the spelling fit's work arrays (tens of MB, made
    and freed each round) and each chunk's pairs otherwise stayed resident in the heap under the start's and
    the loop's peaks (the 1M x 300 Adam job: benchmarks/log/memory_sizes.md); a compiled step's batches hold
    no block this large, so its steps take no fresh pages. The setting holds for the rest of the process.
    """
    try:
        return ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    except (OSError, AttributeError, TypeError):   # not glibc
        return False
