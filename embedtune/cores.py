"""The CPU cores this process may use (its affinity mask, not the machine's count): the default for
TensorFlow's thread pools, the compiled steps' threads and the local launcher's share per worker.
No TensorFlow here: the launcher and the test settings read it before anything imports it."""

from __future__ import annotations

import os


def local_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
