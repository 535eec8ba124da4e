"""The process's heap: handing freed pages back to the system between the phases of a run."""

from __future__ import annotations

import ctypes


def release_freed_memory() -> None:
    """Hand freed heap pages back to the system (glibc's malloc_trim; nothing elsewhere).

    The spelling model's fit frees its work arrays, but those under glibc's mmap threshold (which
    rises to 32 MB as large arrays are freed) stay resident in the heap's free lists until trimmed
    (benchmarks/README.md, memory). Left there, they add to the peak of the training that follows.
    """
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):   # not glibc
        pass
