"""What --deterministic's kernels pay for giving the same bits on every CPU: each deterministic kernel
without fastmath (as it runs) against the same code compiled with common.FASTMATH (as it ran before),
on the same seeded tables and batches (tests/portable_steps.py's, at a batch of ``--batch`` pairs and
GloVe 6B 50d's width), in CPU time of one thread (``time.process_time``), median of ``--repeat`` rounds
that take turns.

    python benchmarks/strict_kernels.py [--batch 4096] [--steps 50] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def with_fastmath(kernel):
    """``kernel`` compiled again with common.FASTMATH (not cached: a name of its own, in this process)."""
    from numba import njit

    from embedtune.kernels.common import FASTMATH

    f = kernel.py_func
    twin = types.FunctionType(f.__code__, f.__globals__, f.__name__ + "_fastmath", f.__defaults__, f.__closure__)
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("fastmath", "nopython", "boundscheck")}
    return njit(**options, fastmath=FASTMATH)(twin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from numba import set_num_threads

    import portable_steps
    from embedtune.kernels import classify, glove, sgns

    set_num_threads(1)
    portable_steps.BATCH, portable_steps.STEPS = args.batch, args.steps
    portable_steps.N_WORDS, portable_steps.TRAINABLE = 20000, 15000
    # name -> (module, attribute the kernel class calls, its strict kernel, the run)
    cases = {
        "glove_step (adagrad, anchor)": (glove, "glove_step", lambda: portable_steps.glove_digest("adagrad", 0.0, 2.0)),
        "sgns_per_pair": (sgns, "sgns_per_pair", lambda: portable_steps.sgns_digest(False)),
        "sgns_shared": (sgns, "sgns_shared_strict", lambda: portable_steps.sgns_digest(True)),
        "fit_loss_grad": (classify, "fit_loss_grad_strict", portable_steps.classifier_fit_digest),
    }
    for name, (module, attr, call) in cases.items():
        strict = getattr(module, attr)
        base = getattr(module, attr.removesuffix("_strict"))
        fast = with_fastmath(base)
        times = {"strict": [], "fastmath": []}
        for kernel in (strict, fast):   # compiled outside the timing
            setattr(module, attr, kernel)
            call()
        for _ in range(args.repeat):
            for label, kernel in (("strict", strict), ("fastmath", fast)):
                setattr(module, attr, kernel)
                began = time.process_time()
                call()
                times[label].append(time.process_time() - began)
        setattr(module, attr, strict)
        s, f = np.median(times["strict"]), np.median(times["fastmath"])
        print(f"{name:30s} strict {s:.3f} s  fastmath {f:.3f} s  ratio {s / f:.2f}", flush=True)


if __name__ == "__main__":
    main()
