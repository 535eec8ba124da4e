"""The first run after an install against the next one (issue 48.1): the README's two jobs in a fresh copy of
this checkout, numba's cache empty, then again in the same copy with the cache it left.

    python benchmarks/first_run.py [--repeat 3] [--jobs quickstart,main] [--baseline DIR]

A round copies the checkout's tracked files (as they are in the working tree, so uncommitted changes count)
into a new temporary folder: no ``__pycache__`` anywhere, so numba's cache beside the kernels' sources is
empty, as after ``git clone && pip install -e .``; NUMBA_CACHE_DIR is unset for the runs. In that copy each
job runs cold, then warm. Jobs:
  quickstart  ``embedtune train --config configs/quickstart.toml`` (the README's first command)
  main        the README's main job as benchmarks/glove_job.py runs it: GloVe 6B 50d (400k x 50), 12.6M tokens,
              the top 10,000 words frozen (its inputs: ``python benchmarks/glove_job.py`` says how to make them)
  classify    the README's ``--objective classify`` command on the shipped glosses (--valid, --save-classifier)
  retrofit    the README's ``--objective retrofit`` command on the shipped WordNet synonyms and antonyms

Per job: the whole process's wall and CPU (user + sys, from wait4), cold and warm, the medians of the rounds;
cold - warm is what the first run pays (numba compiling, mostly; a child process's CPU counts in its parent's).
Then the kernels the cold run compiled (the cache index files it left) and the CPU seconds numba spent on each,
from one cold run in this process's own interpreter with numba's compile events (``--compiles``, its own process
only; ``--repeat 0``: these alone). Load: the 1-minute average before and after. ``--baseline DIR``: another tree
(a checkout, or a folder of its files, ``__pycache__`` left out) measured the same way in turns with this one,
each round the baseline's job then this checkout's, and a table for each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import glove_job  # noqa: E402  (the main job's inputs)

JOBS = {
    "quickstart": ["train", "--config", "configs/quickstart.toml", "-o", "{out}"],
    "main": ["train", glove_job.GLOVE, glove_job.CORPUS, "--freeze-list", glove_job.TOP, "-o", "{out}"],
    # The README's other training commands on the shipped samples (its "Other objectives" block).
    "classify": ["train", "data/sample/glove.6B.50d.20k.txt", "data/sample/wordnet-glosses.train.txt", "--objective",
                 "classify", "--valid", "data/sample/wordnet-glosses.valid.txt", "--freeze-top", "5000",
                 "--save-classifier", "{out}.clf", "-o", "{out}"],
    "retrofit": ["train", "data/sample/glove.6B.50d.20k.txt", "--objective", "retrofit", "--lexicon",
                 "data/sample/wordnet-synonyms.10k.txt", "--antonyms", "data/sample/wordnet-antonyms.10k.txt",
                 "--freeze-top", "5000", "-o", "{out}"],
}


def _files(root: str) -> list[str]:
    """A checkout's tracked files; a folder outside git: its files, numba's and Python's caches left out."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True)
    if listed.returncode == 0 and os.path.exists(os.path.join(root, ".git")):
        return list(filter(None, listed.stdout.decode().split("\0")))
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git") and not os.path.islink(os.path.join(folder, d))]
        found += [os.path.relpath(os.path.join(folder, f), root) for f in files]
        found += [os.path.relpath(os.path.join(folder, d), root) for d in os.listdir(folder)
                  if os.path.islink(os.path.join(folder, d)) and os.path.isdir(os.path.join(folder, d))]
    return found


def fresh_copy(folder: str, root: str = ROOT) -> str:
    """``root``'s tracked files (working-tree contents, links kept as links) under ``folder``."""
    copy = os.path.join(folder, "embedtune-copy")
    for name in _files(root):
        src, dst = os.path.join(root, name), os.path.join(copy, name)
        if not os.path.lexists(src):   # deleted in the working tree, not yet committed
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    return copy


def job_command(copy: str, job: str, out: str, extra: tuple = ()) -> list[str]:
    return [sys.executable, *extra, "-m", "embedtune.cli.main", "-q",
            *[a.format(out=out) for a in JOBS[job]]]


def environment(copy: str) -> dict:
    # PYTHONDONTWRITEBYTECODE too: a user's first run writes the modules' bytecode, the next reads it.
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = copy   # the copy's package, whatever is installed
    return env


def cache_files(copy: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), copy) for d, _, files in os.walk(copy) for f in files
                  if f.endswith(".nbi"))


COMPILES = r'''
import sys, threading, time
import numba.core.event as ev
spent = {}
class Timer(ev.Listener):
    def __init__(self):
        self.began = {}
    def on_start(self, event):
        self.began[(threading.get_ident(), id(event.data["dispatcher"]))] = time.thread_time()
    def on_end(self, event):
        d = event.data["dispatcher"]
        began = self.began.pop((threading.get_ident(), id(d)), None)
        if began is not None and d.py_func.__module__.startswith("embedtune"):
            name = d.py_func.__module__ + "." + d.py_func.__name__
            seconds, n = spent.get(name, (0.0, 0))
            spent[name] = (seconds + time.thread_time() - began, n + 1)
ev.register("numba:compile", Timer())
from embedtune.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="embedtune", standalone_mode=False)
except SystemExit:
    pass
for name, (seconds, n) in sorted(spent.items(), key=lambda kv: -kv[1][0]):
    print(f"{seconds:8.2f} {n:3d}  {name}")
'''


def compiles(job: str) -> str:
    """Each kernel's compile CPU seconds (a kernel called from another counts in both) and specialisations, in a
    cold copy."""
    with tempfile.TemporaryDirectory() as folder:
        copy = fresh_copy(folder)
        done = subprocess.run([sys.executable, "-c", COMPILES, *job_command(copy, job, os.path.join(folder, "o"))[3:]],
                              cwd=copy, env=environment(copy), capture_output=True, text=True)
        return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="quickstart,main")
    parser.add_argument("--compiles", action="store_true", help="also each kernel's compile CPU seconds")
    parser.add_argument("--baseline", help="another tree, measured in turns with this checkout")
    args = parser.parse_args()
    jobs = args.jobs.split(",")
    if "main" in jobs:
        glove_job.make_inputs()
    print(f"load before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    trees = {"baseline": args.baseline, "this": ROOT} if args.baseline else {"this": ROOT}
    rounds: dict = {(tree, job): [] for tree in trees for job in jobs}
    for r in range(args.repeat):
        for job in jobs:
            for tree, root in trees.items():
                with tempfile.TemporaryDirectory() as folder:
                    copy = fresh_copy(folder, root)
                    env = environment(copy)
                    out = os.path.join(folder, "out")
                    cold = glove_job.timed(job_command(copy, job, out), copy, env)
                    made = cache_files(copy)
                    warm = glove_job.timed(job_command(copy, job, out), copy, env)
                    rounds[tree, job].append((cold, warm, len(made)))
                    print(f"round {r + 1} {tree} {job}: cold {cold[0]:.1f} s ({cold[1]:.1f} CPU-s), warm {warm[0]:.1f} s "
                          f"({warm[1]:.1f} CPU-s); {len(made)} kernels cached; load {os.getloadavg()[0]:.2f}", flush=True)
    print()
    print("tree      job          cold wall  warm wall  first run pays   cold CPU  warm CPU  paid CPU  (medians)")
    for tree in trees:
        for job in (jobs if args.repeat else []):   # --repeat 0: the compiles alone
            cw = statistics.median(c[0] for c, _, _ in rounds[tree, job])
            ww = statistics.median(w[0] for _, w, _ in rounds[tree, job])
            cc = statistics.median(c[1] for c, _, _ in rounds[tree, job])
            wc = statistics.median(w[1] for _, w, _ in rounds[tree, job])
            print(f"{tree:9s} {job:12s} {cw:8.1f} s {ww:8.1f} s {cw - ww:12.1f} s {cc:8.1f} s {wc:7.1f} s "
                  f"{cc - wc:7.1f} s")
    if args.compiles:
        for job in jobs:
            print(f"\n{job}, cold: compile CPU-s, specialisations, kernel")
            print(compiles(job), end="")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
