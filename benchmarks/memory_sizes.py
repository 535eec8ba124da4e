"""Wall and peak memory of the commands that read a whole vectors file, on synthetic files of a given shape
(issue 48.6): `inspect`, `diff --check-frozen`, reading GloVe text (`load_vectors`), `train --dry-run`.

    python benchmarks/memory_sizes.py                                  # 1M x 300 binary, 400k x 300 text
    python benchmarks/memory_sizes.py --rows 1000000 --text-rows 400000 --dim 300 --repeat 3
    python benchmarks/memory_sizes.py --only text-read --repeat 3 --python /path/to/other/python

Data (made on the first run under benchmarks/_data/, git-ignored; random normal x 0.4, seed 0, written a
block at a time, never whole in memory): `synthetic.R.D.bin` (word2vec binary, words w0, w1, ...) and
`synthetic.R.D.txt` (GloVe text, values as `%.5f`, GloVe 6B's look; 20,000 rows of values repeated under
new words), a copy of the binary with every
100th row changed (NEW for diff) and a list of 1,000 of its words (--check-frozen), a one-line corpus.

Each case runs as a child process. `peak` is the child's own peak resident size (its VmHWM, read when it
ends: GNU time's figure); `tree` is the largest sum of resident sizes of the child and the processes it
forks (the text reader's), sampled every 20 ms: what the machine needed. GB are 10^9 bytes.
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
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "_data")
BLOCK = 20_000

# One case: its Python; prints the child's VmHWM in bytes as the last line of standard error.
RUN = """
import sys, runpy
def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
kind, args = sys.argv[1], sys.argv[2:]
try:
    if kind == "read":
        from embedtune.formats import load_vectors
        load_vectors(args[0])
    else:
        from embedtune.cli.main import cli
        try:
            cli.main(args, prog_name="embedtune")
        except SystemExit as done:
            if done.code not in (0, 1, None):
                raise
finally:
    print(peak(), file=sys.stderr)
"""


def make_binary(path: str, rows: int, dim: int, changed_every: int = 0) -> None:
    rng = np.random.default_rng(0)
    with open(path + ".part", "xb") as f:   # "x": two runs never write one file
        f.write(b"%d %d\n" % (rows, dim))
        for start in range(0, rows, BLOCK):
            block = (rng.standard_normal((min(BLOCK, rows - start), dim)) * 0.4).astype("<f4")
            if changed_every:
                block[(changed_every - start) % changed_every::changed_every] += np.float32(0.01)
            f.write(b"".join(b"w%d " % (start + i) + row.tobytes() + b"\n" for i, row in enumerate(block)))
    os.replace(path + ".part", path)


def make_text(path: str, rows: int, dim: int) -> None:
    """GloVe text: BLOCK rows of random values rendered once, then written again under new words (rendering
    every value would take most of an hour for 400k x 300 on a loaded machine; the readers' work is the same)."""
    rng = np.random.default_rng(0)
    lines = [" ".join(row) for row in np.char.mod("%.5f", rng.standard_normal((BLOCK, dim)) * 0.4)]
    with open(path + ".part", "x", encoding="ascii") as f:   # "x": two runs never write one file
        for start in range(0, rows, BLOCK):
            f.write("".join(f"w{start + i} {line}\n" for i, line in enumerate(lines[:rows - start])))
    os.replace(path + ".part", path)


def files(rows: int, text_rows: int, dim: int) -> dict:
    os.makedirs(DATA, exist_ok=True)
    paths = {"bin": os.path.join(DATA, f"synthetic.{rows}.{dim}d.bin"),
             "new": os.path.join(DATA, f"synthetic.{rows}.{dim}d.changed.bin"),
             "txt": os.path.join(DATA, f"synthetic.{text_rows}.{dim}d.txt"),
             "frozen": os.path.join(DATA, f"synthetic.{rows}.frozen.txt"),
             "corpus": os.path.join(DATA, "synthetic.corpus.txt")}
    if not os.path.exists(paths["bin"]):
        make_binary(paths["bin"], rows, dim)
    if not os.path.exists(paths["new"]):
        make_binary(paths["new"], rows, dim, changed_every=100)
    if not os.path.exists(paths["txt"]):
        make_text(paths["txt"], text_rows, dim)
    with open(paths["frozen"], "w", encoding="ascii") as f:
        f.write("".join(f"w{i}\n" for i in range(0, rows, max(1, rows // 1000))))
    with open(paths["corpus"], "w", encoding="ascii") as f:
        f.write(" ".join(f"w{i}" for i in range(0, 2000)) + " newword another\n")
    return paths


def cases(paths: dict) -> dict:
    out = os.path.join(tempfile.gettempdir(), "memory_sizes.out.bin")
    return {
        "inspect-binary": ["cli", "-q", "inspect", paths["bin"]],
        "inspect-text": ["cli", "-q", "inspect", paths["txt"]],
        "diff-binary": ["cli", "-q", "diff", paths["bin"], paths["new"], "--check-frozen", paths["frozen"]],
        "text-read": ["read", paths["txt"]],
        "dry-run-binary": ["cli", "-q", "train", paths["bin"], paths["corpus"], "--dry-run", "--optimizer", "adam",
                           "--objective", "sgns", "-o", out],
        "dry-run-text": ["cli", "-q", "train", paths["txt"], paths["corpus"], "--dry-run", "--optimizer", "adam",
                         "--objective", "sgns", "-o", out],
    }


def tree_rss(pid: int) -> int:
    """The resident bytes of ``pid`` and every process under it."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
            except OSError:
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def run_case(python: str, args: list, env: dict) -> dict:
    start = time.perf_counter()
    # Not run from the repository: `python -c` puts its folder first on sys.path, ahead of PYTHONPATH.
    child = subprocess.Popen([python, "-c", RUN, *args], cwd=tempfile.gettempdir(), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    most = [0]

    def sample():
        while child.poll() is None:
            most[0] = max(most[0], tree_rss(child.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    lines = err.strip().splitlines()
    if child.returncode not in (0, 1) or not lines:
        raise SystemExit(f"{args}: exit {child.returncode}\n{err[-2000:]}")
    return {"wall": wall, "peak": int(lines[-1]), "tree": most[0], "stdout": out[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the binary files")
    parser.add_argument("--text-rows", type=int, default=400_000, help="rows of the text file")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case; the median is shown")
    parser.add_argument("--only", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--python", default=sys.executable, help="the Python to run the cases with")
    parser.add_argument("--pythonpath", default=ROOT, help="PYTHONPATH of the cases (the code measured)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = files(args.rows, args.text_rows, args.dim)
    env = {**os.environ, "PYTHONPATH": args.pythonpath}
    chosen = {k: v for k, v in cases(paths).items() if not args.only or k in args.only.split(",")}
    matrix = {"binary": 4 * args.rows * args.dim, "text": 4 * args.text_rows * args.dim}
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[0]
    results = {}
    for name, case in chosen.items():
        runs = [run_case(args.python, case, env) for _ in range(args.repeat)]
        m = matrix["text" if "text" in name else "binary"]
        results[name] = {key: statistics.median(r[key] for r in runs) for key in ("wall", "peak", "tree")}
        results[name]["matrix"] = m
        r = results[name]
        if not args.json:
            print(f"{name:16s} wall {r['wall']:6.1f} s  peak {r['peak'] / 1e9:5.2f} GB ({r['peak'] / m:4.2f}x the "
                  f"matrix)  tree {r['tree'] / 1e9:5.2f} GB ({r['tree'] / m:4.2f}x)", flush=True)
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[0]
    if args.json:
        print(json.dumps({"results": results, "load": [load_before, load_after]}, indent=2))
    else:
        print(f"load {load_before} -> {load_after}; matrices: binary {matrix['binary'] / 1e9:.2f} GB, "
              f"text {matrix['text'] / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
