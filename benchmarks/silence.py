"""The longest silence on a terminal (issue 48.7: none over ~2 s at any size): each command runs with its standard
error on a pseudo-terminal (so its progress bars show, as a person at a terminal sees them), and the longest
gap between two writes to it, or before the first, or after the last until the process ends, is reported with its
wall. gensim's loaders of the same files, for scale (they say nothing while they read).

    python benchmarks/silence.py                                   # 200k x 300 binary, 100k x 300 text
    python benchmarks/silence.py --rows 3000000 --text-rows 2200000 --dim 300 --repeat 3   # GoogleNews, glove.840B

Data: benchmarks/memory_sizes.py's synthetic files (made on the first run under benchmarks/_data/, git-ignored:
word2vec binary, a copy with every 100th row changed, GloVe text, a frozen list, a one-line corpus), and a
similarity file of 200 pairs of their words for eval. Each figure is the median of --repeat runs; load is the
1-minute average before and after.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import memory_sizes  # noqa: E402  (the synthetic files)


def cases(paths: dict, out: str) -> dict:
    return {
        "inspect-binary": ["inspect", paths["bin"]],
        "inspect-text": ["inspect", paths["txt"]],
        "convert-binary-to-text": ["convert", paths["bin"], out + ".txt", "--to", "word2vec"],
        "train-binary": ["train", paths["bin"], paths["corpus"], "--objective", "sgns", "--max-steps", "20",
                         "-o", out + ".bin"],
        "train-text": ["train", paths["txt"], paths["corpus"], "--objective", "glove", "--max-steps", "20",
                       "-o", out + ".txt"],
        "diff-binary": ["diff", paths["bin"], paths["new"], "--check-frozen", paths["frozen"]],
        "eval-text": ["eval", paths["txt"], "--similarity", paths["pairs"]],
        "neighbors-text": ["neighbors", paths["txt"], "w1"],
    }


GENSIM = {
    "gensim-load-binary": ("bin", True),
    "gensim-load-text": ("txt", False),
}


def listen(command: list[str], env: dict) -> dict:
    """Run ``command`` with standard error on a pseudo-terminal: its wall, exit code, the longest gap between
    writes there (from the start, and to the end) and what it had written just before that gap."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))   # a terminal's size: tqdm draws to it
    began = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env,
                            cwd=tempfile.gettempdir())
    os.close(slave)
    last, longest, before, shown = began, 0.0, "(the start)", b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:   # the terminal's other end closed: the process is gone
                data = b""
            if not data:
                break
            now = time.perf_counter()
            if now - last > longest:
                longest, before = now - last, shown[-60:].decode("utf-8", "replace")
            last, shown = now, (shown + data)[-200:]
        elif proc.poll() is not None:
            break
    code = proc.wait()
    end = time.perf_counter()
    if end - last > longest:
        longest, before = end - last, shown[-60:].decode("utf-8", "replace") + " (to the end)"
    os.close(master)
    tail = before.replace("\r", "\\r").replace("\n", "\\n").strip()
    return {"wall": end - began, "code": code, "silence": longest, "before": tail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the binary files")
    parser.add_argument("--text-rows", type=int, default=100_000, help="rows of the text file")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case; the medians are shown")
    parser.add_argument("--only", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--pythonpath", default=ROOT, help="PYTHONPATH of the commands (the code measured)")
    args = parser.parse_args()
    paths = memory_sizes.files(args.rows, args.text_rows, args.dim)
    paths["pairs"] = os.path.join(memory_sizes.DATA, "synthetic.pairs.tsv")
    with open(paths["pairs"], "w", encoding="ascii") as f:
        f.write("".join(f"w{i}\tw{i + 1}\t{i % 10}\n" for i in range(0, 400, 2)))
    env = {**os.environ, "PYTHONPATH": args.pythonpath, "COLUMNS": "100"}
    out = os.path.join(tempfile.mkdtemp(prefix="silence."), "out")
    commands = {name: [sys.executable, "-m", "embedtune.cli.main", *argv] for name, argv in cases(paths, out).items()}
    for name, (key, binary) in GENSIM.items():
        commands[name] = [sys.executable, "-c", "import sys; from gensim.models import KeyedVectors; "
                          f"KeyedVectors.load_word2vec_format(sys.argv[1], binary={binary}, no_header={not binary})",
                          paths[key]]
    only = [c for c in args.only.split(",") if c]
    print(f"load before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; binary {args.rows:,} x {args.dim}, "
          f"text {args.text_rows:,} x {args.dim}", flush=True)
    print(f"{'case':24s} {'wall':>8s} {'longest silence':>16s}  exit  before the longest silence")
    for name, command in commands.items():
        if only and name not in only:
            continue
        runs = [listen(command, env) for _ in range(args.repeat)]
        wall = statistics.median(r["wall"] for r in runs)
        silence = statistics.median(r["silence"] for r in runs)
        worst = max(runs, key=lambda r: r["silence"])
        print(f"{name:24s} {wall:7.1f}s {silence:15.1f}s  {worst['code']:4d}  {worst['before']}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
