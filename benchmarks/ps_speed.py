"""Parameter servers (TF_CONFIG naming ps tasks) against one process: words/s and each task's memory.

    python benchmarks/ps_speed.py [--repeat 3] [--words 100000] [--workers 1,2] [--ps 2] [--dim-vectors PATH]

One process (`--threads 1`) and loopback clusters of --ps parameter servers, W worker tasks (each W of
--workers) and the chief, every task one `embedtune train` process on one thread, take turns for
--repeat rounds on the same run: the GloVe 20k sample (data/sample) continued on
benchmarks/_data/corpus.txt (its first --words words, --max-words), sgns with adagrad (TensorFlow's step
in both: the compiled step takes plain sgd only), batch 4,096, one epoch. Prints each run's words/s (the
chief's training-loop figure, from --json), the medians and their ratio, and each task's peak resident
memory (VmRSS polled every 0.1 s) with the rows of the trainable table each parameter server holds:
each holds 1/P of the rows of both tables and of their optimizer state; the chief holds the input
matrix, makes the batches and writes the output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))

from embedtune.distribute.serve import task_config  # noqa: E402
from loopback import loopback_cluster  # noqa: E402

CORPUS = os.path.join(HERE, "_data", "corpus.txt")
VECTORS = os.path.join(REPO, "data", "sample", "glove.6B.50d.20k.txt")
ARGS = ["--objective", "sgns", "--optimizer", "adagrad", "--epochs", "1", "--seed", "5", "--threads", "1",
        "--batch-size", "4096", "-q"]


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Peaks:
    """Each process's largest VmRSS, polled on a thread until ``stop``."""

    def __init__(self, procs: dict[str, subprocess.Popen]):
        self.procs, self.peak = procs, {name: 0.0 for name in procs}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.done.wait(0.1):
            for name, proc in self.procs.items():
                self.peak[name] = max(self.peak[name], rss_mib(proc.pid))

    def stop(self) -> dict[str, float]:
        self.done.set()
        self.thread.join()
        return self.peak


def command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "embedtune.cli.main", "train", *map(str, args)]


def one_process(args: list[str], folder: str) -> dict:
    summary = os.path.join(folder, "one.json")
    proc = subprocess.Popen(command([*args, "-o", os.path.join(folder, "one.txt"), "--json", summary]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = Peaks({"one": proc})
    _, err = proc.communicate(timeout=1800)
    memory = peaks.stop()
    if proc.returncode:
        raise SystemExit(f"one process failed: {err[-2000:]}")
    return {"summary": json.load(open(summary)), "memory": memory}


def cluster(args: list[str], folder: str, ps: int, workers: int) -> dict:
    spec = loopback_cluster(ps, workers)
    summary = os.path.join(folder, f"ps{ps}w{workers}.json")
    tasks = [("ps", k) for k in range(ps)] + [("worker", k) for k in range(workers)] + [("chief", 0)]
    procs = {}
    for kind, index in tasks:
        env = dict(os.environ, TF_CONFIG=task_config(spec, kind, index), TF_CPP_MIN_LOG_LEVEL="3")
        procs[f"{kind} {index}"] = subprocess.Popen(
            command([*args, "-o", os.path.join(folder, "ps.txt"), "--json", summary]), env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = Peaks(procs)
    errors = {name: proc.communicate(timeout=1800)[1] for name, proc in procs.items()}
    memory = peaks.stop()
    failed = {name: errors[name][-1500:] for name, proc in procs.items() if proc.returncode}
    if failed:
        raise SystemExit(f"cluster failed: {failed}")
    return {"summary": json.load(open(summary)), "memory": memory}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--words", type=int, default=100_000, help="--max-words of every run (0: the whole corpus)")
    parser.add_argument("--workers", default="1,2", help="worker tasks of each cluster, comma-separated")
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--vectors", default=VECTORS)
    parser.add_argument("--corpus", default=CORPUS)
    a = parser.parse_args()
    args = [a.vectors, a.corpus, *ARGS, *(["--max-words", str(a.words)] if a.words else [])]
    layouts = [int(w) for w in a.workers.split(",")]
    speeds = {"one": []}
    speeds.update({f"{a.ps} ps + {w} worker": [] for w in layouts})
    memory = {}
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(a.repeat):
            runs = {"one": one_process(args, folder)}
            for w in layouts:
                runs[f"{a.ps} ps + {w} worker"] = cluster(args, folder, a.ps, w)
            for name, run in runs.items():
                s = run["summary"]
                speeds[name].append(s["words_per_second"])
                memory.setdefault(name, []).append(run["memory"])
                shards = f", shard rows {s['ps_shard_rows']}" if "ps_shard_rows" in s else ""
                print(f"round {round_ + 1} {name:>16}: {s['words_per_second']:>8,} words/s, {s['words_done']:,} "
                      f"words, {s['steps']} steps, loop {s['train_seconds']:.1f} s, trained rows "
                      f"{s['trained_rows']:,}{shards}; peak MiB "
                      + ", ".join(f"{task} {mib:.0f}" for task, mib in run["memory"].items()), flush=True)
    print(f"load average after: {os.getloadavg()}")
    base = statistics.median(speeds["one"])
    for name, values in speeds.items():
        med = statistics.median(values)
        peak = {task: statistics.median(m[task] for m in memory[name]) for task in memory[name][0]}
        print(f"median {name:>16}: {med:>8,.0f} words/s ({med / base:.3f}x one process); median peak MiB "
              + ", ".join(f"{task} {mib:.0f}" for task, mib in peak.items()))


if __name__ == "__main__":
    main()
