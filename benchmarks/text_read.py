"""The text reader's wall and peak memory against its matrix (issue 48.6: at most 1.3x the matrix), GloVe text
and word2vec text (.vec, with a header), read by `load_vectors` in a child process:

    python benchmarks/text_read.py --rows 400000 --dim 300 --repeat 3 --folder /work/big/wt-textread
    python benchmarks/text_read.py --rows 2200000 --dim 300 --repeat 1 --folder /big/folder --only glove
    python benchmarks/text_read.py --rows 1000000 --dim 300 --folder /big/folder --only glove --parse numpy

Files (made on the first run under --folder, by benchmarks/memory_sizes.py's make_text: values as `%.5f`,
20,000 rows rendered once and repeated under new words w0, w1, ...): `text.R.D.txt` (GloVe) and
`text.R.D.vec` (its header `R D`). Per run: `wall` (the child's, imports included), `CPU` (the child's and
its forked readers'), `peak` (its VmHWM as it ends: what the reading process held at most) and `tree` (the
largest sum of resident sizes of the child and the processes it forks, sampled every 20 ms). Ratios are to
the matrix, rows x dim x 4 bytes. GB are 10^9 bytes; the load is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from memory_sizes import make_text, tree_rss, watched  # noqa: E402

RUN = """
import sys
from embedtune.formats import load_vectors
from embedtune.formats.text import parse
if sys.argv[3] == "compiled":   # numba loaded first, as train and eval do
    parse.load_parser_ahead(sys.argv[1])
elif sys.argv[3] == "numpy":
    parse.COMPILED_MIN_BYTES = 1 << 62
vectors = load_vectors(sys.argv[1], format=sys.argv[2])
import os
with open("/proc/self/status") as f:
    print(next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")), len(vectors),
          sum(os.times()[:4]))
"""


def run(path: str, fmt: str, parse: str = "auto") -> tuple[float, int, int, int, float]:
    """-> (wall, peak, tree, rows, CPU seconds of the child and the readers it forked) of one read."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", RUN, path, fmt, parse], stdout=subprocess.PIPE, text=True)
    out, _, wall, tree = watched(child, tree_rss, start)
    if child.returncode:
        raise SystemExit(f"the read of {path} failed ({child.returncode})")
    peak, rows, cpu = out.split()
    return wall, int(peak), tree, int(rows), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each format, interleaved; medians shown")
    parser.add_argument("--folder", required=True, help="where the files are (made there if absent)")
    parser.add_argument("--only", default="glove,word2vec", help="comma-separated: glove, word2vec")
    parser.add_argument("--parse", default="auto", choices=("auto", "compiled", "numpy"),
                        help="auto: the reader's choice in a process without numba (convert's, a Python caller's); "
                             "compiled: numba loaded before the read, as train and eval do; numpy: decimals.py's "
                             "parse whatever the size")
    args = parser.parse_args()
    formats = [f for f in args.only.split(",") if f]
    paths = {}
    for fmt in formats:
        path = os.path.join(args.folder, f"text.{args.rows}.{args.dim}d.{'txt' if fmt == 'glove' else 'vec'}")
        if not os.path.exists(path):
            make_text(path, args.rows, args.dim, header=fmt != "glove")
        paths[fmt] = path
    matrix = args.rows * args.dim * 4
    print(f"load before: {os.getloadavg()[0]:.1f}; matrix {matrix / 1e9:.3f} GB; parse {args.parse}", flush=True)
    runs = {fmt: [] for fmt in formats}
    for _ in range(args.repeat):
        for fmt in formats:
            wall, peak, tree, rows, cpu = run(paths[fmt], fmt, args.parse)
            assert rows == args.rows, rows
            runs[fmt].append((wall, peak, tree, cpu))
            print(f"  {fmt:9s} {wall:7.1f} s  CPU {cpu:6.1f} s  peak {peak / 1e9:.3f} GB ({peak / matrix:.3f}x)  "
                  f"tree {tree / 1e9:.3f} GB ({tree / matrix:.3f}x)  load {os.getloadavg()[0]:.1f}", flush=True)
    for fmt in formats:
        wall, peak, tree, cpu = (statistics.median(r[k] for r in runs[fmt]) for k in range(4))
        print(f"{fmt:9s} median of {len(runs[fmt])}: {wall:.1f} s, CPU {cpu:.1f} s, "
              f"peak {peak / 1e9:.3f} GB ({peak / matrix:.3f}x), tree {tree / 1e9:.3f} GB ({tree / matrix:.3f}x)")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
