"""Two checkouts of embedtune, the same commands, taking turns: whole-process wall and peak memory.

    python benchmarks/ab.py BEFORE_PYTHON AFTER_PYTHON [--rounds 3] [--only sgns,glove]

Each PYTHON is an interpreter whose ``embedtune`` is one checkout (a venv with ``pip install -e``).
Every case runs ``PYTHON -m embedtune.cli.main train ...`` on the shipped GloVe sample and
``benchmarks/_data/corpus.txt`` (``benchmarks/make_corpus.py``) or the shipped WordNet glosses, with
``--deterministic`` so that both sides must also write the same bytes (checked). The sides alternate
within each round (before, after; then after, before), so that a change of load hits both alike.
Prints, per case, the median wall and peak resident memory (the child's ru_maxrss) of each side
and their ratio, and ``uptime`` before and after. Used for redesigns that must hold speed and memory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(ROOT, "data", "sample")
GLOVE = os.path.join(SAMPLE, "glove.6B.50d.20k.txt")
CORPUS = os.path.join(HERE, "_data", "corpus.txt")

CASES = {
    # name: train arguments after VECTORS (the output goes to OUT)
    "sgns": [CORPUS, "--objective", "sgns", "--epochs", "1", "--freeze-top", "10000"],
    "sgns-tf": [CORPUS, "--objective", "sgns", "--epochs", "1", "--freeze-top", "10000", "--optimizer", "adagrad"],
    "glove": [CORPUS, "--objective", "glove", "--epochs", "1", "--freeze-top", "10000"],
    "classify": [os.path.join(SAMPLE, "wordnet-glosses.train.txt"), "--objective", "classify", "--epochs", "5",
                 "--word-ngrams", "2", "--freeze-pretrained"],
    "retrofit": ["--objective", "retrofit", "--lexicon", os.path.join(SAMPLE, "wordnet-synonyms.10k.txt")],
}


def run(python: str, case: str, out: str) -> tuple[float, float, str]:
    """Wall seconds, peak resident GB and the output's sha256 of one run. Called in a fresh helper
    process (``measured``), so that RUSAGE_CHILDREN's peak is this run's alone."""
    command = [python, "-m", "embedtune.cli.main", "train", GLOVE, *CASES[case], "--deterministic",
               "--seed", "1", "-o", out, "-q"]
    began = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    wall = time.perf_counter() - began
    if done.returncode:
        sys.exit(f"{python} {case}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss   # kilobytes on Linux
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return wall, peak_kb * 1024 / 1e9, digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated cases: " + ",".join(CASES))
    args = parser.parse_args()
    cases = args.only.split(",") if args.only else list(CASES)
    if any(CORPUS in CASES[case] for case in cases) and not os.path.exists(CORPUS):
        sys.exit(f"{CORPUS} is missing: run python benchmarks/make_corpus.py first")
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    figures = {(case, side): [] for case in cases for side in ("before", "after")}
    digests: dict[str, set] = {case: set() for case in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            for case in cases:
                order = ("before", "after") if number % 2 == 0 else ("after", "before")
                for side in order:
                    python = args.before if side == "before" else args.after
                    # a fresh process per run, so that ru_maxrss is this run's own
                    wall, peak, digest = measured(python, case, os.path.join(tmp, f"{side}.txt"))
                    figures[case, side].append((wall, peak))
                    digests[case].add(digest)
                    print(f"round {number + 1} {case:<9} {side:<6} {wall:7.2f} s {peak:6.3f} GB", flush=True)
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"\n{'case':<9} {'before s':>9} {'after s':>9} {'ratio':>6} {'before GB':>10} {'after GB':>9}  same bytes")
    for case in cases:
        b = figures[case, "before"]
        a = figures[case, "after"]
        bw, aw = statistics.median(w for w, _ in b), statistics.median(w for w, _ in a)
        bp, ap = statistics.median(p for _, p in b), statistics.median(p for _, p in a)
        print(f"{case:<9} {bw:9.2f} {aw:9.2f} {aw / bw:6.3f} {bp:10.3f} {ap:9.3f}  {len(digests[case]) == 1}")


def measured(python: str, case: str, out: str) -> tuple[float, float, str]:
    """One run in a child of a fresh helper process, so that RUSAGE_CHILDREN is this run's alone."""
    code = (f"import sys, json; sys.path.insert(0, {HERE!r}); import ab; "
            f"print(json.dumps(ab.run({python!r}, {case!r}, {out!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr[-2000:])
    wall, peak, digest = json.loads(done.stdout)
    return wall, peak, digest


if __name__ == "__main__":
    main()
