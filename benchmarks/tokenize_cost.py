"""What `--tokenize auto` costs, against one sgns epoch on the same corpus.

    python benchmarks/tokenize_cost.py [--vectors FILE] [--corpus FILE] [--repeat 3]

Reads the corpus the way training does (``Corpus.count()``, one pass) with ``tokenize="none"`` and
``"auto"`` (against the GloVe vocabulary, lower-cased as for GloVe), interleaved, ``--repeat`` times
each, on one Corpus per mode so that the per-token cache is warm after the first pass, as it is in
training (the corpus is read to count, to start new words and once per epoch). Then runs
``embedtune train VECTORS CORPUS --objective sgns --epochs 1`` and takes its ``train_seconds``.
Prints the extra time of a tokenized pass (the first, cold one and the median warm one), the extra
of a whole 1-epoch run (cold + 2 warm passes) and its ratio to the epoch. Goal: <= 10% of the epoch.
Wall and CPU seconds both, since the machine is shared; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", default=os.path.join(HERE, "_data", "glove.6B.50d.txt"))
    parser.add_argument("--corpus", default=os.path.join(HERE, "_data", "corpus.txt"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from embedtune.corpus import Corpus
    from embedtune.formats import load_vectors

    print(f"load average at start: {os.getloadavg()}", flush=True)
    vectors = load_vectors(args.vectors)
    corpora = {mode: Corpus(args.corpus, lowercase=True, tokenize=mode, vocabulary=vectors.index)
               for mode in ("none", "auto")}
    passes = {"none": [], "auto": []}
    tokens = {}
    for _ in range(args.repeat):
        for mode, corpus in corpora.items():
            (counts, total, _), wall, cpu = timed(corpus.count)
            passes[mode].append((wall, cpu))
            tokens[mode] = total
            print(f"pass  tokenize {mode:4}  {total:,} tokens  {wall:6.2f} s wall  {cpu:6.2f} s cpu", flush=True)
    cold = [passes["auto"][0][i] - passes["none"][0][i] for i in (0, 1)]
    warm = [statistics.median(a[i] - n[i] for a, n in zip(passes["auto"][1:], passes["none"][1:])) for i in (0, 1)]

    with tempfile.TemporaryDirectory() as tmp:
        summary_path = os.path.join(tmp, "summary.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "embedtune.cli.main", "-q", "train", args.vectors, args.corpus,
                        "-o", os.path.join(tmp, "out.txt"), "--objective", "sgns", "--epochs", "1",
                        "--json", summary_path], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(summary_path) as f:
            summary = json.load(f)
    epoch = summary["train_seconds"]
    run_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    extra = [cold[i] + 2 * warm[i] for i in (0, 1)]   # count (cold), new-word starts, the epoch
    print(f"tokens: none {tokens['none']:,}, auto {tokens['auto']:,}")
    print(f"extra per pass, tokenize auto vs none: cold {cold[0]:.2f} s wall ({cold[1]:.2f} s cpu), "
          f"warm {warm[0]:.2f} s wall ({warm[1]:.2f} s cpu)")
    print(f"sgns epoch: {epoch:.1f} s wall ({summary['words_per_second']:,} words/s); whole run "
          f"{summary['total_seconds']:.1f} s wall, {run_cpu:.1f} s cpu")
    print(f"tokenize auto over a 1-epoch run (3 passes): {extra[0]:.2f} s wall = {100 * extra[0] / epoch:.1f}% "
          f"of the epoch; per epoch (1 warm pass): {100 * warm[0] / epoch:.1f}%  (goal <= 10%)")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
