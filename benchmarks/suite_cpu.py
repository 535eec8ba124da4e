"""CPU seconds per test of the suite: its own process's and those of the processes it started and waited for.

A pytest plugin (each xdist process loads it too) that appends one JSON line per test, set-up and
tear-down included (so a module fixture's runs count to the first test that uses it), to
$SUITE_CPU_OUT; then, run as a script, a table per file and the costliest tests:

    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/cpu.jsonl python -m pytest -q -p no:cacheprovider -p suite_cpu
    python benchmarks/suite_cpu.py /tmp/cpu.jsonl

"child" counts only children the test waited for (subprocess.run, Popen.wait), with their own waited
children: a process left to init is not counted. Compare CPU, not wall, on a shared machine.

With SUITE_CPU_IDLE=SECONDS (0.1 will do) a thread looks every SECONDS whether any thread of the test's process or
of a process below it runs or waits for a core (or a disk), and "idle" counts the looks when none did, times
SECONDS: the wall a test spends in sleeps, timeouts and polls, holding its xdist process without using a core.
Unlike wall, that does not grow with the machine's load (a starved process still waits for a core).

What the suite's cold kernel compiles cost (a fresh clone's numba cache is empty), and that the sgns and classify
kernels' warm loops did not pay for a cheaper compile:

    python benchmarks/suite_cpu.py --compiles other,portable-generic [--tree PATH] [--detail]
    python benchmarks/suite_cpu.py --loops BASE [--tree PATH] [--repeat 3]

--compiles: tests/warm_kernels.py's runs (``other``, ``glove``) or tests/portable_steps.py's cases (``portable``;
``portable-generic``: compiled for a generic x86-64, as test_kernel_portable's child) in a new process with
NUMBA_CACHE_DIR an empty folder; the process's CPU (user + sys) and each embedtune kernel's compile CPU seconds
(thread time from numba's ``numba:compile`` event's start to its end, numba's own functions compiled inside it
included) and specialisations; --detail: also those functions of numba's, by name. --tree: the checkout whose
``embedtune`` and ``tests`` run (default: this one), so that another tree's figures come from the same code.
--loops: the warm CPU seconds of each kernel's steps (seeded tables, GloVe 6B 50d's width, 20k rows, batches of
4,096 pairs or 256 lines, two threads; a first call compiles or loads it, untimed) in BASE and in --tree, taking
turns, the median of --repeat rounds: sgns_hogwild (a plain sgns run's loop), sgns_per_pair and
sgns_shared_strict (--deterministic), sgns_lazy_step (adam), classify_step (adagrad, classify's default).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pytest


def _cpu() -> tuple[float, float]:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _tree_runs(root: int, sampler: int) -> bool:
    """Whether a thread of ``root`` or of a process below it is running or waits for a core (state R) or for a
    disk (D): the sampler's own thread aside. /proc's children files list each thread's children."""
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    state = f.read().rpartition(b")")[2][1:2]
                if state in (b"R", b"D") and int(tid) != sampler:
                    return True
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                continue
    return False


class IdleSampler:
    """Seconds of a test's wall during which nothing of its process tree ran or waited for a core: sleeps,
    timeouts and polls (a test that holds its xdist process idle), told apart from a loaded machine's slowness,
    which leaves threads runnable. One look every ``every`` seconds, from a thread of its own."""

    def __init__(self, every: float):
        self.every, self.idle, self.looks = every, 0, 0
        self._stop, self._tid = threading.Event(), None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        self._tid, root = threading.get_native_id(), os.getpid()
        while not self._stop.wait(self.every):
            self.looks += 1
            self.idle += not _tree_runs(root, self._tid)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.idle * self.every


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    every = float(os.environ.get("SUITE_CPU_IDLE") or 0)   # seconds between looks; unset: no sampler
    sampler = IdleSampler(every) if every > 0 else None
    before, began = _cpu(), time.monotonic()
    yield
    after, wall = _cpu(), time.monotonic() - began
    row = {"id": item.nodeid, "self": after[0] - before[0], "child": after[1] - before[1], "wall": wall,
           "pid": os.getpid()}
    if sampler is not None:
        row["idle"] = sampler.stop()
    with open(os.environ.get("SUITE_CPU_OUT", "suite_cpu.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def report(path: str, top: int = 30) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    files = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::", 1)[0]]
        f[0] += r["self"]
        f[1] += r["child"]
        f[2] += r["wall"]
        f[3] += r.get("idle", 0.0)
        f[4] += 1
    own, children = sum(r["self"] for r in rows), sum(r["child"] for r in rows)
    wall, idle = sum(r["wall"] for r in rows), sum(r.get("idle", 0.0) for r in rows)
    print(f"{len(rows)} tests: {own + children:.1f} CPU-s ({own:.1f} in the test processes, {children:.1f} in "
          f"processes they started); {wall:.1f} s of wall, {idle:.1f} of it idle (SUITE_CPU_IDLE)\n\n"
          "  CPU-s    own  child   wall   idle  tests  file")
    for name, (o, c, w, i, n) in sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        print(f"{o + c:7.1f} {o:6.1f} {c:6.1f} {w:6.1f} {i:6.1f} {n:6d}  {name}")
    print("\n  CPU-s    own  child   wall   idle  test")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["child"]))[:top]:
        print(f"{r['self'] + r['child']:7.1f} {r['self']:6.1f} {r['child']:6.1f} {r['wall']:6.1f} "
              f"{r.get('idle', 0.0):6.1f}  {r['id']}")
    if any("idle" in r for r in rows):
        print("\n   idle   wall  CPU-s  test (the most idle: nothing of its process tree ran)")
        for r in sorted(rows, key=lambda r: -r.get("idle", 0.0))[:top]:
            print(f"{r.get('idle', 0.0):7.1f} {r['wall']:6.1f} {r['self'] + r['child']:6.1f}  {r['id']}")


TIMER = r'''
import collections, os, sys, threading, time
import numba.core.event as ev
spent = collections.defaultdict(lambda: [0.0, 0])
depth = threading.local()
class Timer(ev.Listener):
    def __init__(self):
        self.began = {}
    def on_start(self, event):
        self.began[(threading.get_ident(), id(event.data["dispatcher"]))] = (time.thread_time(), getattr(depth, "n", 0))
        depth.n = getattr(depth, "n", 0) + 1
    def on_end(self, event):
        depth.n -= 1
        d = event.data["dispatcher"]
        began = self.began.pop((threading.get_ident(), id(d)), None)
        if began is None:
            return
        f = getattr(d, "py_func", None)
        module = getattr(f, "__module__", "") or ""
        name = module + "." + getattr(f, "__qualname__", getattr(f, "__name__", repr(d)))
        mine = module.startswith("embedtune")
        key = (mine and began[1] == 0, name)
        spent[key][0] += time.thread_time() - began[0]
        spent[key][1] += 1
ev.register("numba:compile", Timer())
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
part = sys.argv[1]
if part in ("other", "glove"):
    import warm_kernels
    warm_kernels.main(part)
else:
    import portable_steps
    portable_steps.digests()
for (top, name), (seconds, n) in sorted(spent.items(), key=lambda kv: -kv[1][0]):
    print(f"{'kernel' if top else 'inside'} {seconds:.3f} {n} {name}")
'''


def compiles_of(tree: str, part: str) -> tuple[float, list[tuple[str, float, int, str]]]:
    """(the process's CPU seconds, [(kernel | inside, compile CPU-s, compiles, name)]) of one cold run of ``part``."""
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
        env.update(NUMBA_CACHE_DIR=cache, PYTHONPATH=tree)
        if part == "portable-generic":
            env["NUMBA_CPU_NAME"] = "generic"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-c", TIMER, part.split("-")[0]], cwd=tree, env=env,
                              capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(done.stderr)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    rows = []
    for line in done.stdout.splitlines():
        kind, seconds, n, name = line.split(" ", 3)
        rows.append((kind, float(seconds), int(n), name))
    return cpu, rows


CHILD = r'''
import json, resource, sys
import numpy as np
N, T, DIM, NEG, B = 20000, 15000, 50, 5, 4096
case = sys.argv[1]

def tables(rng, side_rows, side_dim=DIM, scale=0.3):
    matrix = rng.normal(0, 0.3, (N, DIM)).astype(np.float32)
    words = np.concatenate([matrix[:T], np.zeros((1, DIM), np.float32)])
    return words, rng.normal(0, scale, (side_rows, side_dim)).astype(np.float32), matrix, np.arange(T, N, dtype=np.int64)

def sgns_batches(rng, n, shared):
    return [{"center": rng.integers(0, N, B).astype(np.int32), "context": rng.integers(0, N, B).astype(np.int32),
             "negatives": rng.integers(0, N, (B // 8 if shared else B, NEG)).astype(np.int32),
             "weight": np.ones(B, np.float32), "seed": int(rng.integers(0, 2**40))} for _ in range(n)]

rng = np.random.default_rng(0)
if case.startswith("sgns_lazy"):
    from embedtune.kernels.sgns_lazy import SgnsLazyKernel
    from embedtune.training.optimizers import Update
    words, side, matrix, frozen = tables(rng, N + 1)
    kernel = SgnsLazyKernel(words, side, matrix, frozen, T, B, NEG, False,
                            Update("adam", 0.0, {"word": words.shape, "side": side.shape}), 2, False)
    calls = [(sgns_batches(rng, 1, False), [0.01])] * 200
elif case.startswith("sgns"):
    from embedtune.kernels.sgns import SgnsKernel
    words, side, matrix, frozen = tables(rng, N + 1)
    shared, lockfree = case == "sgns_shared_strict", case == "sgns_hogwild"
    kernel = SgnsKernel(words, side, matrix, frozen, T, B, NEG, shared, 2, lockfree=lockfree,
                        table=rng.integers(0, N, 100000).astype(np.int32))
    calls = [(sgns_batches(rng, 10, shared), [0.01] * 10)] * (150 if lockfree else 40)
else:
    from embedtune.kernels.classify import ClassifyKernel
    from embedtune.objectives.classify.batches import line_batches
    from embedtune.training.optimizers import Update
    L, lines = 26, 20000
    lengths = rng.integers(3, 20, lines)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, N, starts[-1]).astype(np.int32)
    targets = np.zeros((lines, L), np.float32)
    targets[np.arange(lines), rng.integers(0, L, lines)] = 1
    words, side, matrix, frozen = tables(rng, L + 1, DIM + 1, 0.1)
    kernel = ClassifyKernel(words, side, matrix, frozen, T, L, False,
                            Update("adagrad", 0.0, {"word": words.shape, "side": side.shape}), 2)
    batches = list(line_batches(rng.permutation(lines), ids, starts, targets, L, N, 256, 3500, 2000))
    calls = [(batches[i:i + 10], [0.1] * len(batches[i:i + 10])) for i in range(0, len(batches), 10)] * 5
kernel.run(*calls[0])   # compiled or loaded here, not timed
before = resource.getrusage(resource.RUSAGE_SELF)
for batches, lrs in calls[1:]:
    kernel.run(batches, lrs)
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
'''

CASES = ("sgns_hogwild", "sgns_per_pair", "sgns_shared_strict", "sgns_lazy_adam", "classify_adagrad")


def loop_cpu(tree: str, case: str) -> float:
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, "-c", CHILD, case], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="?", help="the tests' CPU lines ($SUITE_CPU_OUT): a table per file")
    parser.add_argument("--compiles", metavar="PARTS", help="other,glove,portable,portable-generic")
    parser.add_argument("--loops", metavar="BASE", help="the kernels' warm loops, BASE's checkout against --tree")
    parser.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--detail", action="store_true", help="--compiles: also numba's own functions compiled inside")
    parser.add_argument("--repeat", type=int, default=3, help="--loops: rounds, the trees taking turns [3]")
    args = parser.parse_args()
    if args.jsonl:
        report(args.jsonl)
    tree = os.path.abspath(args.tree)
    if args.compiles:
        print(f"tree {tree}; load before {os.getloadavg()[0]:.2f}", flush=True)
        for part in args.compiles.split(","):
            cpu, rows = compiles_of(tree, part)
            kernels = [r for r in rows if r[0] == "kernel"]
            print(f"\n{part}: process {cpu:.1f} CPU-s, kernels' compiles {sum(r[1] for r in kernels):.1f} CPU-s")
            for _, seconds, n, name in kernels:
                print(f"  {seconds:7.2f} {n:3d}  {name}")
            if args.detail:
                for _, seconds, n, name in [r for r in rows if r[0] == "inside"][:25]:
                    print(f"      inside {seconds:7.2f} {n:3d}  {name}")
        print(f"\nload after {os.getloadavg()[0]:.2f}")
    if args.loops:
        trees = {"base": os.path.abspath(args.loops), "tree": tree}
        print(f"load before {os.getloadavg()[0]:.2f}", flush=True)
        for case in CASES:
            for path in trees.values():   # each tree's cache warm first
                loop_cpu(path, case)
            seconds = {name: [] for name in trees}
            for _ in range(args.repeat):
                for name, path in trees.items():
                    seconds[name].append(loop_cpu(path, case))
            base, new = (statistics.median(seconds[name]) for name in trees)
            print(f"{case:20s} base {base:6.2f} CPU-s  tree {new:6.2f} CPU-s  {new / base:5.2f}x  (rounds "
                  f"{[round(x, 2) for x in seconds['base']]} / {[round(x, 2) for x in seconds['tree']]})", flush=True)
        print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
