"""The whole `embedtune train --workers 2` command against one process, as a user times it.

    python benchmarks/workers_command.py [--repeat 3] [--jobs glove,sgns[,main,classify]] [--baseline DIR]
                                         [--sync-every K]

The jobs: ``glove`` and ``sgns``, the quickstart (configs/quickstart.toml: the GloVe 20k sample continued on
data/sample's corpus) with that --objective; ``main``, the README's main job as benchmarks/glove_job.py runs it
(GloVe 6B 50d, 12.6M tokens, a top-10k freeze list); ``classify``, the README's classify command. Each as one
process and as --workers 2 (averaging, the default --sync-every; --sync-every 0: the gathered step), each a
process of its own from start to exit: wall, CPU seconds (user + sys of the process and every process it
waited for: the launcher's workers), the largest peak RSS among them. With --baseline (another checkout's
folder, its package put first on PYTHONPATH) both trees take turns, round by round, and each round says whether
their two-worker outputs are the same bytes. Medians of --repeat rounds. Load is the 1-minute average before and
after.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


sys.path.insert(0, HERE)
import glove_job  # noqa: E402  (the main job's inputs)

JOBS = {"glove": ["--config", "configs/quickstart.toml", "--objective", "glove"],
        "sgns": ["--config", "configs/quickstart.toml", "--objective", "sgns"],
        "main": [glove_job.GLOVE, glove_job.CORPUS, "--freeze-list", glove_job.TOP],
        # The README's classify command on the shipped glosses (its classifier file left out).
        "classify": ["data/sample/glove.6B.50d.20k.txt", "data/sample/wordnet-glosses.train.txt", "--objective",
                     "classify", "--valid", "data/sample/wordnet-glosses.valid.txt", "--freeze-top", "5000"]}


def run(root: str, job: str, workers: int, out: str, extra: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of the command in ``root``'s tree (glove_job.timed: wait4's figures, those of
    the workers the launcher waited for included)."""
    command = [sys.executable, "-m", "embedtune.cli.main", "-q", "train", *JOBS[job], "--workers", str(workers),
               *extra, "-o", out]
    wall, cpu, peak = glove_job.timed(command, cwd=root, env=dict(os.environ, PYTHONPATH=root))
    return wall, cpu, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="glove,sgns")
    parser.add_argument("--baseline", help="another checkout's folder, measured in turns with this one")
    parser.add_argument("--sync-every", help="the two-worker runs' --sync-every (default: the command's)")
    args = parser.parse_args()
    extra = ["--sync-every", args.sync_every] if args.sync_every is not None else []
    if "main" in args.jobs.split(","):
        glove_job.make_inputs()
    trees = {"baseline": os.path.abspath(args.baseline), "this": ROOT} if args.baseline else {"this": ROOT}
    print(f"load before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs", flush=True)
    figures: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.repeat):
            for job in args.jobs.split(","):
                for workers in (1, 2):
                    outs = {}
                    for tree, root in trees.items():
                        outs[tree] = os.path.join(folder, f"{tree}-{job}-{workers}.txt")
                        wall, cpu, rss = run(root, job, workers, outs[tree], extra if workers > 1 else [])
                        figures.setdefault((tree, job, workers), []).append((wall, cpu, rss))
                        print(f"round {r + 1} {tree:8s} {job:5s} workers {workers}: {wall:5.2f} s, "
                              f"{cpu:5.2f} CPU-s, peak {rss:5.0f} MiB; load {os.getloadavg()[0]:.2f}", flush=True)
                    # One process steps lock-free on its threads (its bytes differ run to run); a worker of two
                    # has one thread here, so the trees' two-worker outputs can be compared.
                    if len(outs) == 2 and workers == 2:
                        same = filecmp.cmp(*outs.values(), shallow=False)
                        print(f"         the trees' outputs {'are' if same else 'are NOT'} the same bytes")
    print("\ntree      job        workers   wall      CPU       peak RSS  (medians)")
    for (tree, job, workers), rows in figures.items():
        wall, cpu, rss = (statistics.median(x[i] for x in rows) for i in range(3))
        print(f"{tree:9s} {job:10s} {workers:7d} {wall:6.2f} s {cpu:6.2f} s {rss:7.0f} MiB")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
