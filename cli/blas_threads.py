"""One OpenBLAS thread for `embedtune eval` and `train`, and a short idle spin for `train` and `init`, chosen before
numpy loads.

eval's analogy search alternates one matrix product with a single-threaded screen of its result
(embedtune/compare/analogy_search.py). With numpy's default of one OpenBLAS thread a core, the second
thread spins waiting for the next product all through each screen: CPU taken from the screen on a
busy machine, for products that are a small part of the work (benchmarks/log/eval_speed.md). numpy
has no public call to set its BLAS threads, and OpenBLAS reads its thread count once, as it loads,
from the environment; so cli/main.py calls this before anything imports numpy (``import embedtune``
loads none). The variable stays set for the process: scipy's OpenBLAS, loaded later for the word
pairs' norms, reads it too. A thread count the user set, in any of the variables OpenBLAS reads, is
left as it is.

`train`'s BLAS products (the new words' fit: embedtune/newwords/) are few and small, between single-threaded
steps and compiled passes. After each, OpenBLAS's idle threads spin for the next one for 2**28 TSC cycles
(its THREAD_TIMEOUT, about a tenth of a second) before they sleep: that spin, blas_thread_server, took 2.3% of
the samples of a `perf record` of the 2m sgns job (benchmarks/end_to_end.py), none with the shortest spin
OpenBLAS takes (2**4 cycles). Only when an idle thread sleeps changes, not how many there are or how a
product is cut, so the results keep their bits (benchmarks/log/train_speed.md). `init` runs the same fit
(embedtune.newwords.add_new_words) and gets the same spin. What was left, OpenBLAS's
``inner_thread``, is the two threads of one product waiting for each other while the other is descheduled
(8% of the samples of a loaded run): on one thread the new words' start took less CPU and less time at 20k x
50 and at 1M x 300, with the same bits (benchmarks/log/train_speed.md, issue 48 item 3, sixth round). The short
spin stays for a thread count the user sets.
"""

from __future__ import annotations

import os
import sys

# What OpenBLAS reads for its thread count (OpenBLAS's README and openblas_env.c).
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
# The commands that run best on one BLAS thread (see above).
ONE_THREAD_COMMANDS = {"eval", "train"}
# The commands whose idle OpenBLAS threads sleep at once (see above), and what OpenBLAS reads for it
# (2**n cycles; OpenBLAS takes 4 to 30).
SHORT_SPIN_COMMANDS = {"train", "init"}
SPIN_VARIABLE, SHORT_SPIN = "OPENBLAS_THREAD_TIMEOUT", "4"


def command_of(args: list[str]) -> str | None:
    """The command name in ``embedtune``'s arguments: the first that is not an option (the group's
    options, -q, --version and --help, take no value)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def one_blas_thread_for(args: list[str]) -> None:
    """OPENBLAS_NUM_THREADS=1 when ``args`` run a command of ONE_THREAD_COMMANDS, numpy is not loaded
    yet (in a test runner it is, and nothing is changed) and the user set no thread count."""
    if "numpy" in sys.modules or command_of(args) not in ONE_THREAD_COMMANDS:
        return
    if any(name in os.environ for name in THREAD_VARIABLES):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"


def short_blas_spin_for(args: list[str]) -> None:
    """OPENBLAS_THREAD_TIMEOUT=4 when ``args`` run a command of SHORT_SPIN_COMMANDS, numpy is not loaded yet
    and the user set no timeout of their own."""
    if "numpy" in sys.modules or command_of(args) not in SHORT_SPIN_COMMANDS or SPIN_VARIABLE in os.environ:
        return
    os.environ[SPIN_VARIABLE] = SHORT_SPIN
