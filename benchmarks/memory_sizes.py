"""Wall and peak memory of the commands that read a whole vectors file, on synthetic files of a given shape
(issue 48.6): `inspect`, `diff --check-frozen`, reading GloVe text (`load_vectors`), `train --dry-run`.

    python benchmarks/memory_sizes.py                                  # 1M x 300 binary, 400k x 300 text
    python benchmarks/memory_sizes.py --rows 1000000 --text-rows 400000 --dim 300 --repeat 3
    python benchmarks/memory_sizes.py --only text-read --repeat 3 --python /path/to/other/python
    python benchmarks/memory_sizes.py --estimates --rows 200000 --repeat 3   # the dry run's estimate per format
    python benchmarks/memory_sizes.py --diff-models OLD.bin NEW.bin FROZEN.txt --repeat 3   # diff of two fastText models

Data (made on the first run under benchmarks/_data/, git-ignored; random normal x 0.4, seed 0, written a
block at a time, never whole in memory): `synthetic.R.D.bin` (word2vec binary, words w0, w1, ...) and
`synthetic.R.D.txt` (GloVe text, values as `%.5f`, GloVe 6B's look; 20,000 rows of values repeated under
new words), a copy of the binary with every
100th row changed (NEW for diff) and a list of 1,000 of its words (--check-frozen), a one-line corpus.

--estimates compares the dry run's memory estimate with the measured peak of the same training run, one
vectors format at a time (issue 48 item 6: within 25% for every format, a fastText model's mapped pages
counted apart). Its data is made under --folder (default /work/big/wt-memory): ROWS words `w0`, `w1`, ...
as word2vec binary, GloVe text and fastText .vec (as above), and a fastText model (.bin, version 12,
minn 3, maxn 6, --buckets subword rows of random values, a zero output matrix) with the same words; a
corpus of 300,000 tokens drawn from the first 50,000 words (Zipf-like, seed 2) and 2,000 made-up words;
a train list of 5% of the rows (seed 1). The command, per format: `embedtune train VECTORS CORPUS
--train-list LIST --optimizer adam --objective sgns --epochs 1 -o OUT --to word2vec-binary`, once with
`--dry-run --json` (the estimate, and the dry run's own wall and peak) and once for real. There `anon` is
the largest RssAnon + RssShmem sampled every 20 ms: the resident memory that is not file pages, which the
system cannot take back. A fastText model's estimate is compared with `anon`, and the estimate plus its
mapped pages (memory_mapped_bytes) with `peak`, and the estimate alone with the largest resident size
less the model file's own pages (summed from /proc/PID/smaps every 20 ms); the other formats' estimate with
`peak`.

--diff-models runs `embedtune diff OLD NEW --check-frozen FROZEN` on two fastText models, with `anon` as above.
The models measured (benchmarks/silence.py's cc.en.300.bin shape at --scale 0.5: 1M words and 1M buckets x 300, a
2.4 GB input matrix, 1.2 GB of words' vectors; NEW a copy of OLD):
    B=/work/big/wt-memory M=$B/real_sizes.fasttext.1000000
    python benchmarks/silence.py --real-sizes --data $B --scale 0.5 --only fasttext --cases inspect
    cp $M.300d.ft.bin $M.300d.copy.ft.bin
    python benchmarks/memory_sizes.py --diff-models $M.300d.ft.bin $M.300d.copy.ft.bin $M.frozen.txt

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


def make_text(path: str, rows: int, dim: int, header: bool = False) -> None:
    """GloVe text (with ``header``, fastText .vec): BLOCK rows of random values rendered once, then written
    again under new words (rendering every value would take most of an hour for 400k x 300 on a loaded
    machine; the readers' work is the same)."""
    rng = np.random.default_rng(0)
    lines = [" ".join(row) for row in np.char.mod("%.5f", rng.standard_normal((BLOCK, dim)) * 0.4)]
    with open(path + ".part", "x", encoding="ascii") as f:   # "x": two runs never write one file
        if header:
            f.write(f"{rows} {dim}\n")
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


def anon_rss(pid: int) -> int:
    """The resident bytes of ``pid`` that are not file pages (RssAnon + RssShmem)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return sum(int(fields[key].split()[0]) * 1024 for key in ("RssAnon", "RssShmem"))
    except (OSError, KeyError, ValueError):
        return 0


def resident_apart_from(path: str):
    """A sampler: the resident bytes of a process less the pages of ``path`` it has mapped (a fastText
    model's matrices: file pages the system takes back as it needs)."""
    def sampled(pid: int) -> int:
        total = mapped = 0
        here = False
        try:
            with open(f"/proc/{pid}/smaps") as f:
                for line in f:
                    name = line.split(None, 1)[0]
                    if not name.endswith(":"):   # a mapping's first line: addresses ... pathname
                        here = line.rstrip().endswith(path)
                    elif name == "Rss:":
                        kib = int(line.split()[1])
                        total += kib
                        mapped += kib if here else 0
        except (OSError, ValueError, IndexError):
            return 0
        return (total - mapped) * 1024
    return sampled


def run_case(python: str, args: list, env: dict, sampled=tree_rss) -> dict:
    """``tree``: the largest ``sampled(pid)`` of the child while it runs."""
    start = time.perf_counter()
    # Not run from the repository: `python -c` puts its folder first on sys.path, ahead of PYTHONPATH.
    child = subprocess.Popen([python, "-c", RUN, *args], cwd=tempfile.gettempdir(), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    out, err, wall, most = watched(child, sampled, start)
    lines = err.strip().splitlines()
    if child.returncode not in (0, 1) or not lines:
        raise SystemExit(f"{args}: exit {child.returncode}\n{err[-2000:]}")
    return {"wall": wall, "peak": int(lines[-1]), "tree": most, "stdout": out}


def watched(child: subprocess.Popen, sampled, start: float) -> tuple[str, str, float, int]:
    """``child`` waited for while ``sampled(child.pid)`` is taken every 20 ms: (its stdout, its stderr, the wall
    since ``start``, the largest sample)."""
    most = [0]

    def sample():
        while child.poll() is None:
            most[0] = max(most[0], sampled(child.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    return out, err, wall, most[0]


# -- --estimates: the dry run's estimate against the run's peak, per format ----------------------------

ESTIMATE_FORMATS = {"binary": ("word2vec-binary", "w2v.bin"), "glove": ("glove", "glove.txt"),
                    "vec": ("fasttext", "vec"), "model": ("fasttext-model", "ft.bin")}


def make_model(path: str, rows: int, buckets: int, dim: int) -> None:
    """A fastText model in version 12's layout (as benchmarks/fasttext_read.py writes one), words w0, w1, ..."""
    import struct

    rng = np.random.default_rng(0)
    with open(path + ".part", "xb") as f:
        f.write(struct.pack("<ii", 793712314, 12))
        f.write(struct.pack("<12id", dim, 5, 5, 5, 5, 1, 2, 2, buckets, 3, 6, 100, 1e-4))
        f.write(struct.pack("<iiiqq", rows, rows, 0, rows * 10, -1))
        f.write(b"".join(b"w%d\0" % i + struct.pack("<qb", 10, 0) for i in range(rows)))
        f.write(b"\0" + struct.pack("<qq", rows + buckets, dim))
        for start in range(0, rows + buckets, BLOCK):
            f.write((rng.standard_normal((min(BLOCK, rows + buckets - start), dim)) * 0.4).astype("<f4").tobytes())
        f.write(b"\0" + struct.pack("<qq", rows, dim))
        for start in range(0, rows, BLOCK):
            f.write(bytes(4 * min(BLOCK, rows - start) * dim))
    os.replace(path + ".part", path)


def estimate_files(folder: str, rows: int, dim: int, buckets: int, chosen: list) -> dict:
    os.makedirs(folder, exist_ok=True)
    stem = os.path.join(folder, f"dryrun.{rows}.{dim}d")
    paths = {name: f"{stem}.{ESTIMATE_FORMATS[name][1]}" for name in chosen}
    makers = {"binary": lambda p: make_binary(p, rows, dim), "glove": lambda p: make_text(p, rows, dim),
              "vec": lambda p: make_text(p, rows, dim, header=True), "model": lambda p: make_model(p, rows, buckets, dim)}
    for name, path in paths.items():
        if not os.path.exists(path):
            makers[name](path)
    paths["corpus"], paths["list"] = f"{stem}.corpus.txt", f"{stem}.train.txt"
    if not os.path.exists(paths["corpus"]):
        rng = np.random.default_rng(2)
        ids = np.minimum(rng.zipf(1.3, 300_000) - 1, min(rows, 50_000) - 1)
        tokens = [f"w{i}" for i in ids] + [f"new{i}" for i in range(2_000)]
        order = rng.permutation(len(tokens))
        with open(paths["corpus"], "w", encoding="ascii") as f:
            f.write("".join(" ".join(tokens[k] for k in order[s:s + 20]) + "\n" for s in range(0, len(order), 20)))
    if not os.path.exists(paths["list"]):
        picked = np.sort(np.random.default_rng(1).choice(rows, rows // 20, replace=False))
        with open(paths["list"], "w", encoding="ascii") as f:
            f.write("".join(f"w{i}\n" for i in picked))
    return paths


def estimates(args, env: dict) -> None:
    chosen = [f for f in (args.only or ",".join(ESTIMATE_FORMATS)).split(",")]
    paths = estimate_files(args.folder, args.rows, args.dim, args.buckets, chosen)
    out = os.path.join(tempfile.gettempdir(), f"memory_sizes.{os.getpid()}.bin")
    for name in chosen:
        command = ["cli", "-q", "train", paths[name], paths["corpus"], "--format", ESTIMATE_FORMATS[name][0],
                   "--train-list", paths["list"], "--optimizer", "adam", "--objective", "sgns", "--epochs", "1",
                   "-o", out, "--to", "word2vec-binary"]
        # A model's peak is also read without its mapped pages; the other formats' peak is their VmHWM.
        apart = resident_apart_from(paths[name]) if name == "model" else anon_rss
        dry = [run_case(args.python, [*command, "--dry-run", "--json"], env, apart) for _ in range(args.repeat)]
        d = json.loads(dry[0]["stdout"])
        estimate, mapped = d["memory_estimate_bytes"], d.get("memory_mapped_bytes", 0)
        line = (f"{name:7s} dry run: wall {statistics.median(r['wall'] for r in dry):6.1f} s, peak "
                f"{statistics.median(r['peak'] for r in dry) / 1e9:5.2f} GB; estimate {estimate / 1e9:5.2f} GB"
                + (f" + {mapped / 1e9:.2f} GB mapped" if mapped else ""))
        if not args.dry_only:
            runs = [run_case(args.python, command, env, apart) for _ in range(args.repeat)]
            peak, sampled = (statistics.median(r[key] for r in runs) for key in ("peak", "tree"))
            line += (f"; run: wall {statistics.median(r['wall'] for r in runs):6.1f} s, peak {peak / 1e9:5.2f} GB, "
                     + (f"without the mapped model {sampled / 1e9:5.2f} GB; estimate / that {estimate / sampled:.2f}, "
                        f"(estimate + mapped) / peak {(estimate + mapped) / peak:.2f}" if name == "model" else
                        f"anon {sampled / 1e9:5.2f} GB; estimate / peak {estimate / peak:.2f}"))
            if os.path.exists(out):
                os.remove(out)
        print(line, flush=True)


def diff_models(args) -> None:
    """--diff-models: each run's wall, peak and anon, then their medians."""
    env = {**os.environ, "PYTHONPATH": args.pythonpath}
    old, new, frozen = args.diff_models
    case = ["cli", "-q", "diff", old, new, "--check-frozen", frozen]
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[0]
    runs = [run_case(args.python, case, env, sampled=anon_rss) for _ in range(args.repeat)]
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[0]
    for r in runs:
        print(f"run: wall {r['wall']:.1f} s  peak {r['peak'] / 1e9:.2f} GB  anon {r['tree'] / 1e9:.2f} GB", flush=True)
    median = {key: statistics.median(r[key] for r in runs) for key in ("wall", "peak", "tree")}
    print(f"median of {len(runs)}: wall {median['wall']:.1f} s  peak {median['peak'] / 1e9:.2f} GB  "
          f"anon {median['tree'] / 1e9:.2f} GB; load {load_before} -> {load_after}; PYTHONPATH {args.pythonpath}")


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
    parser.add_argument("--estimates", action="store_true", help="the dry run's estimate per format (--only: of "
                        f"{', '.join(ESTIMATE_FORMATS)})")
    parser.add_argument("--buckets", type=int, default=200_000, help="--estimates: the fastText model's subword rows")
    parser.add_argument("--folder", default="/work/big/wt-memory", help="--estimates: where its data is made")
    parser.add_argument("--dry-only", action="store_true", help="--estimates: the dry runs alone")
    parser.add_argument("--diff-models", nargs=3, metavar=("OLD", "NEW", "FROZEN"),
                        help="diff of two fastText models: wall, peak and anon")
    args = parser.parse_args()
    if args.diff_models:
        diff_models(args)
        return
    if args.estimates:
        env = {**os.environ, "PYTHONPATH": args.pythonpath}
        with open("/proc/loadavg") as f:
            load_before = f.read().split()[0]
        estimates(args, env)
        with open("/proc/loadavg") as f:
            print(f"load {load_before} -> {f.read().split()[0]}; {args.rows:,} x {args.dim} "
                  f"(matrix {4 * args.rows * args.dim / 1e9:.2f} GB), repeat {args.repeat}")
        return
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
