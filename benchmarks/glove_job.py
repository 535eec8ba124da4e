"""The README's main job, end to end and per phase (issue 38): a GloVe file, a domain corpus, a freeze list.

    python benchmarks/glove_job.py --repeat 3 [--baseline /path/to/python-of-another-checkout]
    python benchmarks/glove_job.py --parts reference      # the naive one-thread loop alone

The job: ``embedtune train glove.6B.50d.txt corpus-12m.txt --freeze-list top10k.txt -o out.txt --json s.json``
(GloVe 6B 50d, 400k x 50; the top 10,000 words frozen; objective glove at its defaults). The corpus: the
first 12.6M tokens of benchmarks/_data/corpus-large.txt read over and over (2.46 times; ``python
benchmarks/make_corpus.py --large`` makes it), the issue's size. The vectors: benchmarks/_data/glove.6B.50d.txt
(``python data/make_sample.py --words 400000 -o benchmarks/_data/glove.6B.50d.txt``).

Parts:
  job        the whole process, this checkout's and ``--baseline``'s taking turns: wall, CPU (user + sys of the
             process, from wait4), peak RSS, the --json summary's phases (load_vectors, count_and_import,
             setup, loop, write) and the loop's CPU; medians of ``--repeat`` rounds; then the dry run's
             memory estimate against the measured peak.
  setup      the set-up's pieces (issue 48), in this process: the job run once as far as its first step
             (embedtune.fine_tune), each piece's wall, its thread's CPU and the process's CPU while it ran (a
             numba kernel's other threads count in the last only), a line each; the spelling fit runs on a
             thread of its own beside the context pass.
  reference  the per-core reference of the issue: a plain one-thread numba loop of GloVe's AdaGrad update
             (glove.c's), over the job's shape (its local rows x 50, its batched pairs an epoch, random
             order), one epoch: pairs per CPU-second, against the job loop's pairs per CPU-second.

Load is the 1-minute average (``uptime``) before and after each part; the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)   # timed processes cache bytecode as a user's do (benchmarks/README.md)
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "_data")
GLOVE = os.path.join(DATA, "glove.6B.50d.txt")
LARGE = os.path.join(DATA, "corpus-large.txt")
CORPUS = os.path.join(DATA, "corpus-12m.txt")
TOP = os.path.join(DATA, "top10k.txt")
TOKENS = 12_600_000
PHASES = ("load_vectors", "count_and_import", "setup", "loop", "write")


def make_inputs() -> None:
    """corpus-12m.txt (corpus-large.txt's lines over and over until 12.6M tokens) and top10k.txt."""
    if not os.path.exists(GLOVE):
        sys.exit(f"glove_job: {GLOVE} not found; python data/make_sample.py --words 400000 -o {GLOVE}")
    if not os.path.exists(CORPUS):
        if not os.path.exists(LARGE):
            sys.exit(f"glove_job: {LARGE} not found; run: python benchmarks/make_corpus.py --large")
        with open(LARGE, encoding="utf-8") as f:
            lines = f.read().splitlines()
        n = 0
        with open(CORPUS + ".partial", "w", encoding="utf-8") as out:
            while n < TOKENS:
                for line in lines:
                    out.write(line + "\n")
                    n += len(line.split())
                    if n >= TOKENS:
                        break
        os.replace(CORPUS + ".partial", CORPUS)
    if not os.path.exists(TOP):
        with open(GLOVE, encoding="utf-8") as f, open(TOP, "w", encoding="utf-8") as out:
            for _, line in zip(range(10_000), f):
                out.write(line.split(" ", 1)[0] + "\n")


def load() -> float:
    return os.getloadavg()[0]


def timed(command: list[str], cwd: str | None = None, env: dict | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s of the process and its children, peak RSS bytes) of one process (benchmarks/first_run.py's
    too); it exits, naming the command, when the process fails."""
    began = time.perf_counter()
    # Run from the temporary folder by default: ``python -m`` puts the working folder first on sys.path, and a
    # checkout's own folder there would shadow the other checkout's package.
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=cwd or tempfile.gettempdir(), env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {' '.join(command)} failed:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def run_job(python: str, workdir: str, name: str) -> dict:
    """One whole run of the job by ``python`` (its checkout's package), its figures."""
    out, summary = os.path.join(workdir, f"{name}.txt"), os.path.join(workdir, f"{name}.json")
    wall, cpu, peak = timed([python, "-m", "embedtune.cli.main", "-q", "train", GLOVE, CORPUS, "--freeze-list", TOP,
                             "-o", out, "--json", summary])
    with open(summary, encoding="utf-8") as f:
        s = json.load(f)
    os.remove(out)
    return {"wall": wall, "cpu": cpu, "peak": peak, **{p: s["seconds"].get(p) for p in PHASES},
            "loop_cpu": s["train_cpu_seconds"], "pairs": s["pairs"], "steps": s["steps"],
            "max_frozen_change": s["max_frozen_change"], "new": s["new"]}


def dry_run(python: str) -> dict:
    done = subprocess.run([python, "-m", "embedtune.cli.main", "-q", "train", GLOVE, CORPUS, "--freeze-list", TOP,
                           "-o", os.devnull, "--dry-run", "--json", "-"], capture_output=True, text=True, check=True,
                          cwd=tempfile.gettempdir())
    return json.loads(done.stdout)


def median(rounds: list[dict], key: str):
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


def part_job(args) -> dict:
    runs = {"this": sys.executable}
    if args.baseline:
        runs["baseline"] = args.baseline
    rounds = {name: [] for name in runs}
    loads = [load()]
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.repeat):
            for name, python in runs.items():   # taking turns
                rounds[name].append(run_job(python, workdir, f"{name}{r}"))
                loads.append(load())
                one = rounds[name][-1]
                print(f"round {r + 1} {name:8s} wall {one['wall']:6.1f} s  cpu {one['cpu']:6.1f} s  peak "
                      f"{one['peak'] / 2**30:.2f} GiB  " + "  ".join(f"{p} {one[p]:.1f}" for p in PHASES if one[p])
                      + f"  loop cpu {one['loop_cpu']:.1f}  load {loads[-1]:.1f}", flush=True)
    figures = {name: {key: median(rs, key) for key in rs[0]} for name, rs in rounds.items()}
    estimate = dry_run(sys.executable)
    figures["this"]["dry_run_estimate"] = estimate["memory_estimate_bytes"]
    figures["this"]["local_rows"] = estimate["trainable_in_corpus"] + estimate["frozen_in_corpus"]
    if args.baseline:
        figures["baseline"]["dry_run_estimate"] = dry_run(args.baseline)["memory_estimate_bytes"]
    print(f"\nmedians of {args.repeat} (load {min(loads):.1f}-{max(loads):.1f}):")
    for name, f in figures.items():
        print(f"  {name:8s} wall {f['wall']:6.1f} s  cpu {f['cpu']:6.1f} s  peak {f['peak'] / 2**30:.2f} GiB  "
              + "  ".join(f"{p} {f[p]:.1f}" for p in PHASES if f[p] is not None)
              + f"  loop cpu {f['loop_cpu']:.1f}  pairs {f['pairs']:,}  dry run {f['dry_run_estimate'] / 2**30:.2f} GiB "
                f"({f['dry_run_estimate'] / f['peak']:.2f}x the peak)")
    if args.baseline:
        a, b = figures["this"], figures["baseline"]
        print(f"  this / baseline: wall {a['wall'] / b['wall']:.2f}x, cpu {a['cpu'] / b['cpu']:.2f}x, peak "
              f"{a['peak'] / b['peak']:.2f}x, setup {a['setup'] / b['setup']:.2f}x, loop {a['loop'] / b['loop']:.2f}x")
    # Issue 48, item 2 (the script's first goals, 35 s whole and 8 s set-up, came before it).
    print("  goals (2 cores, quiet): whole job <= 20 s, set-up <= 5 s, peak not above main's")
    figures["load"] = [min(loads), max(loads)]
    return figures


# The set-up's pieces timed by ``--parts setup``: module, name (a function, or Class.method).
SETUP_PIECES = [
    ("embedtune.training.loop", "setup"), ("embedtune.plan.rows", "plan_rows"),
    ("embedtune.newwords.form_context", "gather"), ("embedtune.newwords.form_context", "context_sums"),
    ("embedtune.kernels.contexts", "context_pass"), ("embedtune.newwords.spelling", "form_model_for"),
    ("embedtune.newwords.form_context", "finish"), ("embedtune.training.trainer", "Trainer.__init__"),
    ("embedtune.objectives.glove", "count_pairs"), ("embedtune.kernels.cooccur", "count_block"),
    ("embedtune.kernels.cooccur", "merge_rows"), ("embedtune.objectives.glove", "dots"),
    ("embedtune.objectives.glove", "fit_scale_and_biases"),
]


def part_setup(args) -> dict:
    """The job once, in this process, as far as its first step: each set-up piece's wall and CPU."""
    import functools
    import importlib
    import threading

    from embedtune import fine_tune

    rows: dict[str, list[float]] = {}

    def timed(name, f):
        @functools.wraps(f)
        def run(*a, **k):
            wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                one = rows.setdefault(name, [0, 0.0, 0.0, 0.0, threading.current_thread().name])
                one[0] += 1
                one[1] += time.perf_counter() - wall
                one[2] += time.thread_time() - thread
                one[3] += time.process_time() - process
        return run

    for module, name in SETUP_PIECES:   # looked up where they are called: their modules' attributes
        owner = importlib.import_module(module)
        *path, last = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, last, timed(name, getattr(owner, last)))
    loads = [load()]
    wall, cpu = time.perf_counter(), time.process_time()
    result = fine_tune(GLOVE, CORPUS, freeze_list=TOP, max_steps=1)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    loads.append(load())
    print(f"\nset-up pieces, the job to its first step in one process ({wall:.1f} s wall, {cpu:.1f} CPU-s; "
          f"{len(result) - 400_000:,} new words; load {loads[0]:.1f}-{loads[1]:.1f}):")
    for name, (calls, w, thread, process, where) in rows.items():
        print(f"  {name:24s} x{calls:<3d} wall {w:6.2f} s  its thread's CPU {thread:6.2f} s  process CPU {process:6.2f} s"
              f"  ({where})")
    return {name: {"calls": r[0], "wall": r[1], "thread_cpu": r[2], "process_cpu": r[3]} for name, r in rows.items()}


def part_reference(args, job: dict | None) -> dict:
    """The naive one-thread numba loop: GloVe's AdaGrad per pair over [rows, 50] tables, random order."""
    from numba import njit

    @njit(cache=False)
    def epoch(w, c, bw, bc, gw, gc, gbw, gbc, rows, cols, target, f, lr):
        for i in range(len(rows)):
            j, k = rows[i], cols[i]
            x = 0.0
            for d in range(w.shape[1]):
                x += w[j, d] * c[k, d]
            diff = x + bw[j] + bc[k] - target[i]
            fdiff = f[i] * diff
            for d in range(w.shape[1]):
                t1 = fdiff * c[k, d]
                t2 = fdiff * w[j, d]
                w[j, d] -= lr * t1 / np.sqrt(gw[j, d])
                c[k, d] -= lr * t2 / np.sqrt(gc[k, d])
                gw[j, d] += t1 * t1
                gc[k, d] += t2 * t2
            bw[j] -= lr * fdiff / np.sqrt(gbw[j])
            bc[k] -= lr * fdiff / np.sqrt(gbc[k])
            gbw[j] += fdiff * fdiff
            gbc[k] += fdiff * fdiff

    n_rows = job["local_rows"] if job else args.rows
    n_pairs = int(job["pairs"] / 5) if job else args.pairs   # the job's 5 epochs
    rng = np.random.default_rng(1)
    tables = [rng.standard_normal((n_rows, 50)).astype(np.float32) * 0.1 for _ in range(2)]
    biases = [np.zeros(n_rows, np.float32) for _ in range(2)]
    states = [np.ones((n_rows, 50), np.float32) for _ in range(2)] + [np.ones(n_rows, np.float32) for _ in range(2)]
    rows = rng.integers(0, n_rows, n_pairs).astype(np.int32)
    cols = rng.integers(0, n_rows, n_pairs).astype(np.int32)
    target = rng.standard_normal(n_pairs).astype(np.float32)
    f = rng.uniform(0, 1, n_pairs).astype(np.float32)
    small = slice(0, 1000)
    epoch(*tables, *biases, *states, rows[small], cols[small], target[small], f[small], np.float32(0.05))   # compile
    times = []
    for _ in range(args.repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        epoch(*tables, *biases, *states, rows, cols, target, f, np.float32(0.05))
        times.append((time.process_time() - cpu, time.perf_counter() - wall))
    cpu, wall = statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)
    out = {"rows": n_rows, "pairs": n_pairs, "cpu": cpu, "wall": wall, "pairs_per_cpu_second": n_pairs / cpu}
    print(f"\nreference: one-thread numba GloVe AdaGrad loop, {n_rows:,} x 50 rows, {n_pairs:,} random-order pairs: "
          f"{wall:.2f} s wall, {cpu:.2f} CPU-s an epoch, {n_pairs / cpu / 1e6:.2f}M pairs per CPU-second "
          f"(median of {args.repeat}, load {load():.1f})")
    if job:
        mine = job["pairs"] / job["loop_cpu"]
        out["job_pairs_per_cpu_second"] = mine
        print(f"  the job's loop: {mine / 1e6:.2f}M pairs per CPU-second ({job['pairs']:,} pairs in "
              f"{job['loop_cpu']:.1f} CPU-s): {mine / out['pairs_per_cpu_second']:.2f}x the reference per core")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="job,reference")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="the python of another checkout (its own venv), run in turns")
    parser.add_argument("--rows", type=int, default=412_000, help="reference: table rows, without the job (else its local rows)")
    parser.add_argument("--pairs", type=int, default=7_500_000, help="reference: pairs an epoch, without the job")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    make_inputs()
    parts = args.parts.split(",")
    figures = {}
    if "job" in parts:
        figures["job"] = part_job(args)
    if "setup" in parts:
        figures["setup"] = part_setup(args)
    if "reference" in parts:
        figures["reference"] = part_reference(args, figures.get("job", {}).get("this"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
