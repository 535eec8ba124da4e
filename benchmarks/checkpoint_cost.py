"""What writing checkpoints (or TensorBoard's files) costs a run: the same ``embedtune train`` with and without
``--checkpoint-dir`` (``--option logdir``: ``--logdir``), each a process of its own, in this checkout and
(``--baseline``) another, taking turns.

    python benchmarks/checkpoint_cost.py [--repeat 3] [--jobs sample,main] [--option logdir] [--baseline PYTHON]

Jobs (both the compiled step's default glove run):
  sample  data/sample/glove.6B.50d.20k.txt on data/sample/lee_background.cor, the top 5,000 rows frozen;
          with checkpoints: --checkpoint-every 20 (4 checkpoints)
  main    the README's main job (benchmarks/glove_job.py's inputs: GloVe 6B 50d, 12.6M tokens, the top 10,000
          words frozen); with checkpoints: --checkpoint-every 1000 (5 of its 5,155 steps)
With ``--option logdir``: --logdir, TensorBoard's scalars every 20 steps and the projector's files at the end.
Per run: wall, CPU (user + sys, from wait4) and peak RSS of the process; the medians of the rounds, and what the
checkpoints add (with - without). A checkpoint's folder is removed at the run's end (the command's default), so
the runs differ only by the checkpoints written. PYTHON: the interpreter of another checkout (a wrapper that puts
its tree on PYTHONPATH will do: benchmarks/README.md). Load: the 1-minute average before and after each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import glove_job  # noqa: E402  (the main job's inputs, one process timed)

SAMPLE = os.path.join(ROOT, "data", "sample")
JOBS = {
    "sample": ([os.path.join(SAMPLE, "glove.6B.50d.20k.txt"), os.path.join(SAMPLE, "lee_background.cor"),
                "--freeze-top", "5000"], 20),
    "main": ([glove_job.GLOVE, glove_job.CORPUS, "--freeze-list", glove_job.TOP], 1000),
}


def one(python: str, job: str, folder: str, option: str | None) -> tuple[float, float, int]:
    args, every = JOBS[job]
    command = [python, "-m", "embedtune.cli.main", "-q", "train", *args, "-o", os.path.join(folder, "out.txt")]
    if option == "checkpoint-dir":
        command += ["--checkpoint-dir", os.path.join(folder, "checkpoints"), "--checkpoint-every", str(every)]
    elif option == "logdir":
        logs = os.path.join(folder, "logs")
        shutil.rmtree(logs, ignore_errors=True)   # a fresh folder each run, as the checkpoints' is
        command += ["--logdir", logs]
    return glove_job.timed(command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="sample,main")
    parser.add_argument("--option", choices=("checkpoint-dir", "logdir"), default="checkpoint-dir")
    parser.add_argument("--baseline", help="the python of another checkout, run in turns with this one")
    args = parser.parse_args()
    jobs = args.jobs.split(",")
    if "main" in jobs:
        glove_job.make_inputs()
    trees = {"this": sys.executable, **({"baseline": args.baseline} if args.baseline else {})}
    runs: dict = {}
    loads = [glove_job.load()]
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.repeat):
            for job in jobs:
                for tree, python in reversed(list(trees.items())):   # the baseline first, then this checkout
                    for added in (False, True):
                        wall, cpu, peak = one(python, job, folder, args.option if added else None)
                        loads.append(glove_job.load())
                        runs.setdefault((job, tree, added), []).append((wall, cpu, peak))
                        print(f"round {r + 1} {job:6s} {tree:8s} {args.option if added else 'none':14s} "
                              f"wall {wall:6.2f} s  cpu {cpu:6.2f} s  peak {peak / 2**20:7.0f} MiB  "
                              f"load {loads[-1]:.1f}", flush=True)
    print(f"\nmedians of {args.repeat} (load {min(loads):.1f}-{max(loads):.1f}):")
    for job in jobs:
        for tree in trees:
            without, with_ = ([statistics.median(x[i] for x in runs[(job, tree, c)]) for i in range(3)]
                              for c in (False, True))
            print(f"  {job:6s} {tree:8s} without: {without[0]:.2f} s, {without[1]:.2f} CPU-s, "
                  f"{without[2] / 2**20:.0f} MiB; with --{args.option}: {with_[0]:.2f} s, {with_[1]:.2f} CPU-s, "
                  f"{with_[2] / 2**20:.0f} MiB; it adds {with_[0] - without[0]:+.2f} s, "
                  f"{with_[1] - without[1]:+.2f} CPU-s, {(with_[2] - without[2]) / 2**20:+.0f} MiB")


if __name__ == "__main__":
    main()
