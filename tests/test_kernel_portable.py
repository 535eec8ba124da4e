"""--deterministic's compiled kernels write the same bits on any x86-64 CPU (embedtune/kernels/common.py,
FASTMATH): numba compiles for the host (its vector width, whether it has FMA), so the kernels run again in
a process where numba compiles for a generic x86-64 (SSE2 vectors, no FMA) and must write this process's
bytes. The golden runs (tests/test_golden.py) hold the whole run; this holds each kernel, on one machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import portable_steps


def test_deterministic_kernels_write_the_same_bits_when_compiled_for_another_cpu():
    here = portable_steps.digests()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FEATURES"}
    done = subprocess.run([sys.executable, str(Path(portable_steps.__file__))], env={**env, "NUMBA_CPU_NAME": "generic"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    elsewhere = json.loads(done.stdout)
    assert elsewhere == here, [name for name in here if elsewhere[name] != here[name]]
