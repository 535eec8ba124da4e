"""The longest silence on a terminal (issue 48.7: none over ~2 s at any size), with each command's wall and peak
memory, and gensim's loaders of the same files for scale (they say nothing while they read). Two sets of files:

    python benchmarks/silence.py                                   # 200k x 300 binary, 100k x 300 text
    python benchmarks/silence.py --rows 400000 --text-rows 200000 --dim 300 --repeat 3
    python benchmarks/silence.py --real-sizes --data /big/folder --scale 0.1   # a tenth of the issue's shapes
    python benchmarks/silence.py --real-sizes --data /big/folder               # the real sizes (16.5 GB of files)
    python benchmarks/silence.py --real-sizes --data /big/folder --only fasttext --cases inspect,train,diff --log DIR

Without --real-sizes: benchmarks/memory_sizes.py's synthetic files (made on the first run under benchmarks/_data/,
git-ignored: word2vec binary, a copy with every 100th row changed, GloVe text, a frozen list, a one-line corpus),
and a similarity file of 200 pairs of their words for eval; each figure the median of --repeat runs.

With --real-sizes, the issue's three shapes (--scale multiplies their rows and buckets):
  fasttext  cc.en.300.bin's: a fastText model (version 12, cbow, ns, dim 300, ws 5, epoch 5, minCount 5, neg 10,
            wordNgrams 1, bucket 2,000,000, minn 5, maxn 5, lrUpdateRate 100, t 1e-4), 2,000,000 words, its input
            matrix (words + buckets) random normal x 0.1, its output matrix (words x 300) zeros: 7.2 GB
  binary    GoogleNews-vectors-negative300.bin's: word2vec binary, 3,000,000 x 300, random normal x 0.4: 3.6 GB
  text      glove.840B.300d.txt's: GloVe text (no header), 2,200,000 x 300, values as %.5f: 5.7 GB
Every file is written a block of rows at a time, never whole in memory (the text's values: 20,000 rows rendered
once and repeated under new words, as benchmarks/memory_sizes.py does). Words: w0, w1, ... for binary and text;
for the model, distinct lower-case words of 5-12 letters (random letters, then five that spell the row number),
so that their n-grams are spread as a real vocabulary's are. Next to each file: a frozen list of 1,000 of its
words, a similarity file of 200 pairs of its words, and a one-line corpus of 2,000 of its words and two new ones.

The cases, each a child process with its standard error on a pseudo-terminal of 120 x 40 (progress bars show as
a person at a terminal sees them) and its standard output thrown away:
  inspect FILE;  convert FILE - (the model and the text to word2vec binary, the binary to GloVe text);
  train FILE corpus --objective sgns --max-steps 20 --freeze-list frozen -o OUT (the input's format);
  diff FILE OUT --check-frozen frozen;  eval FILE --similarity pairs;
  gensim: KeyedVectors.load_word2vec_format (binary; text with no_header=True) or load_facebook_vectors.
Figures: `wall`; `peak`, the child's own largest resident size (its VmHWM as it exits: file pages mapped and
touched count); `tree`, the largest sum of
resident sizes of the child and the processes under it, sampled every 0.1 s (what the machine needed); `silence`,
the longest gap between two writes to the terminal, the start and the end included, with what was written just
before it. GB are 10^9 bytes. One run of each case; the load is printed before and after each shape.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import struct
import statistics
import subprocess
import sys
import tempfile
import termios
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import memory_sizes  # noqa: E402  (the synthetic files, the process tree's resident size)

BLOCK = 50_000
LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
# cc.en.300.bin's settings, in fastText's order (dim ws epoch minCount neg wordNgrams loss model bucket minn maxn
# lrUpdateRate; t): cbow (model 1) with negative sampling (loss 2), character 5-grams only.
CC_ARGS = dict(dim=300, ws=5, epoch=5, min_count=5, neg=10, word_ngrams=1, loss=2, model=1, bucket=2_000_000,
               minn=5, maxn=5, lr_update_rate=100)
CC_T = 1e-4
SHAPES = {"fasttext": 2_000_000, "binary": 3_000_000, "text": 2_200_000}

# A case's process: writes its own VmHWM to the file named first when it exits (embedtune's command runs Python's
# exit handlers before its os._exit), then runs embedtune's command or the Python code given. Not ru_maxrss from
# wait4: a child's counts its parent's high-water mark from before its exec (this script's, rendering text).
WRAP = """
import atexit, sys
def peak(path=sys.argv[1]):
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    with open(path, "w") as f:
        f.write(str(hwm))
atexit.register(peak)
kind, sys.argv = sys.argv[2], ["embedtune", *sys.argv[3:]]
if kind == "embedtune":
    from embedtune.cli.main import main
    main()
else:
    exec(kind)
"""


def model_words(count: int) -> list[bytes]:
    """``count`` distinct words: 0-7 random letters, then five letters spelling the row number in base 26 (so
    no two words are equal whatever their random part)."""
    rng = np.random.default_rng(1)
    digits = np.arange(count)[:, None] // 26 ** np.arange(4, -1, -1) % 26
    tail = LETTERS[digits]
    head = LETTERS[rng.integers(0, 26, (count, 7))]
    lengths = rng.integers(0, 8, count)
    return [head[i, :lengths[i]].tobytes() + tail[i].tobytes() for i in range(count)]


def make_fasttext_model(path: str, words: list[bytes], buckets: int, dim: int) -> None:
    """A fastText model file as fastText's save_model writes it (version 12), its matrices a block at a time."""
    rng = np.random.default_rng(0)
    nwords = len(words)
    counts = np.arange(nwords, 0, -1, dtype=np.int64) + 4   # fastText's dictionary is sorted by count, falling
    args = {**CC_ARGS, "dim": dim, "bucket": buckets}
    with open(path + ".part", "xb") as f:   # "x": two runs never write one file
        f.write(struct.pack("<ii", 793712314, 12))
        f.write(struct.pack("<12id", *args.values(), CC_T))
        f.write(struct.pack("<iiiqq", nwords, nwords, 0, int(counts.sum()), -1))
        for start in range(0, nwords, BLOCK):
            f.write(b"".join(w + b"\0" + struct.pack("<qb", int(c), 0)
                             for w, c in zip(words[start:start + BLOCK], counts[start:start + BLOCK])))
        f.write(b"\0" + struct.pack("<qq", nwords + buckets, dim))
        for start in range(0, nwords + buckets, BLOCK):
            n = min(BLOCK, nwords + buckets - start)
            f.write((rng.standard_normal((n, dim), np.float32) * np.float32(0.1)).astype("<f4").tobytes())
        f.write(b"\0" + struct.pack("<qq", nwords, dim))
        zeros = bytes(4 * BLOCK * dim)
        for start in range(0, nwords, BLOCK):
            f.write(zeros[:4 * min(BLOCK, nwords - start) * dim])
    os.replace(path + ".part", path)


def make_shape(shape: str, rows: int, dim: int, data: str) -> dict:
    """The shape's vectors file (made once) and its frozen list, similarity pairs and corpus."""
    os.makedirs(data, exist_ok=True)
    suffix = {"fasttext": "ft.bin", "binary": "bin", "text": "txt"}[shape]
    paths = {"vectors": os.path.join(data, f"real_sizes.{shape}.{rows}.{dim}d.{suffix}")}
    for name in ("frozen", "pairs", "corpus"):
        paths[name] = os.path.join(data, f"real_sizes.{shape}.{rows}.{name}.txt")
    if shape == "fasttext":
        words = model_words(rows)
        if not os.path.exists(paths["vectors"]):
            make_fasttext_model(paths["vectors"], words, rows, dim)   # as many buckets as words, as cc.en's
        word = [w.decode("ascii") for w in words[:4000]] + [words[i].decode("ascii")
                                                           for i in range(0, rows, max(1, rows // 1000))]
        frozen = word[4000:]
    else:
        if not os.path.exists(paths["vectors"]):
            (memory_sizes.make_binary if shape == "binary" else memory_sizes.make_text)(paths["vectors"], rows, dim)
        word = [f"w{i}" for i in range(4000)]
        frozen = [f"w{i}" for i in range(0, rows, max(1, rows // 1000))]
    with open(paths["frozen"], "w", encoding="ascii") as f:
        f.write("".join(w + "\n" for w in frozen))
    with open(paths["pairs"], "w", encoding="ascii") as f:
        f.write("".join(f"{word[i]}\t{word[i + 1]}\t{i % 10}\n" for i in range(0, 400, 2)))
    with open(paths["corpus"], "w", encoding="ascii") as f:
        f.write(" ".join(word[:2000]) + " newword another\n")
    return paths


def cases(shape: str, paths: dict, out: str) -> dict:
    vectors = paths["vectors"]
    output = out + {"fasttext": ".bin", "binary": ".bin", "text": ".txt"}[shape]
    to = "glove" if shape == "binary" else "word2vec-binary"
    if shape == "fasttext":
        gensim = ("from gensim.models.fasttext import load_facebook_vectors; load_facebook_vectors(sys.argv[1])")
    else:
        gensim = ("from gensim.models import KeyedVectors; KeyedVectors.load_word2vec_format(sys.argv[1], "
                  f"binary={shape == 'binary'}, no_header={shape == 'text'})")
    embedtune = ["embedtune"]
    return {
        "inspect": embedtune + ["inspect", vectors],
        "convert": embedtune + ["convert", vectors, "-", "--to", to],
        "train": embedtune + ["train", vectors, paths["corpus"], "--objective", "sgns", "--max-steps", "20",
                              "--freeze-list", paths["frozen"], "-o", output],
        "diff": embedtune + ["diff", vectors, output, "--check-frozen", paths["frozen"]],
        "eval": embedtune + ["eval", vectors, "--similarity", paths["pairs"]],
        "gensim": [f"import sys; {gensim}", vectors],
    }


def measure(command: list[str], env: dict, log: str = "") -> dict:
    """Run ``command`` (WRAP's arguments) with standard error on a pseudo-terminal: its wall, exit code, peak
    (VmHWM), the largest resident size of its process tree, the longest gap between writes to the terminal and
    what had been written just before it. ``log``: a file for what the terminal got, each write with its time."""
    peak_file = tempfile.mktemp(prefix="real_sizes.peak.")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))   # tqdm draws nothing at 0 columns
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRAP, peak_file, *command], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env,
                            cwd=tempfile.gettempdir())
    os.close(slave)
    most, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            most[0] = max(most[0], memory_sizes.tree_rss(proc.pid))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    last, longest, before, shown, timeline = began, 0.0, "(the start)", b"", []
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if not ready:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:   # every holder of the terminal's other end has closed it: the process is gone
            data = b""
        if not data:
            break
        now = time.perf_counter()
        timeline.append(f"{now - began:8.2f} {data!r}\n")
        if now - last > longest:
            longest, before = now - last, shown[-60:].decode("utf-8", "replace")
        last, shown = now, (shown + data)[-400:]
    code = proc.wait()
    end = time.perf_counter()
    done.set()
    sampler.join()
    if log:
        with open(log, "w") as f:
            f.write(f"{' '.join(command)}\n{''.join(timeline)}{end - began:8.2f} (the end, exit {code})\n")
    try:
        with open(peak_file) as f:
            peak = int(f.read())
        os.remove(peak_file)
    except (OSError, ValueError):   # ended before its exit handlers ran
        peak = 0
    if end - last > longest:
        longest, before = end - last, shown[-60:].decode("utf-8", "replace") + " (to the end)"
    os.close(master)
    return {"wall": end - began, "code": code, "peak": peak, "tree": most[0],
            "silence": longest, "before": before.replace("\r", "\\r").replace("\n", "\\n").strip(),
            "tail": shown[-300:].decode("utf-8", "replace")}


def synthetic_cases(paths: dict, out: str) -> dict:
    """The cases on memory_sizes.py's files (without --real-sizes), as WRAP's arguments."""
    return {
        "inspect-binary": ["embedtune", "inspect", paths["bin"]],
        "inspect-text": ["embedtune", "inspect", paths["txt"]],
        "convert-binary-to-text": ["embedtune", "convert", paths["bin"], out + ".txt", "--to", "word2vec"],
        "train-binary": ["embedtune", "train", paths["bin"], paths["corpus"], "--objective", "sgns", "--max-steps",
                         "20", "-o", out + ".bin"],
        "train-text": ["embedtune", "train", paths["txt"], paths["corpus"], "--objective", "glove", "--max-steps",
                       "20", "-o", out + ".txt"],
        "diff-binary": ["embedtune", "diff", paths["bin"], paths["new"], "--check-frozen", paths["frozen"]],
        "eval-text": ["embedtune", "eval", paths["txt"], "--similarity", paths["pairs"]],
        "neighbors-text": ["embedtune", "neighbors", paths["txt"], "w1"],
        "gensim-load-binary": ["import sys; from gensim.models import KeyedVectors; "
                               "KeyedVectors.load_word2vec_format(sys.argv[1], binary=True)", paths["bin"]],
        "gensim-load-text": ["import sys; from gensim.models import KeyedVectors; "
                             "KeyedVectors.load_word2vec_format(sys.argv[1], binary=False, no_header=True)",
                             paths["txt"]],
    }


def synthetic(args, env: dict) -> None:
    """Without --real-sizes: memory_sizes.py's files, each case the median of --repeat runs."""
    paths = memory_sizes.files(args.rows, args.text_rows, args.dim)
    paths["pairs"] = os.path.join(memory_sizes.DATA, "synthetic.pairs.tsv")
    with open(paths["pairs"], "w", encoding="ascii") as f:
        f.write("".join(f"w{i}\tw{i + 1}\t{i % 10}\n" for i in range(0, 400, 2)))
    out = os.path.join(tempfile.mkdtemp(prefix="silence."), "out")
    only = [c for c in args.only.split(",") if c]
    print(f"load before: {load()}; {os.cpu_count()} CPUs; binary {args.rows:,} x {args.dim}, "
          f"text {args.text_rows:,} x {args.dim}", flush=True)
    print(f"{'case':24s} {'wall':>8s} {'peak':>8s} {'longest silence':>16s}  exit  before the longest silence")
    for name, command in synthetic_cases(paths, out).items():
        if only and name not in only:
            continue
        runs = [measure(command, env) for _ in range(args.repeat)]
        wall = statistics.median(r["wall"] for r in runs)
        peak = statistics.median(r["peak"] for r in runs)
        silence = statistics.median(r["silence"] for r in runs)
        worst = max(runs, key=lambda r: r["silence"])
        print(f"{name:24s} {wall:7.1f}s {peak / 1e9:6.2f}GB {silence:15.1f}s  {worst['code']:4d}  {worst['before']}",
              flush=True)
    print(f"load after: {load()}")


def load() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real-sizes", action="store_true", help="the issue's three shapes (else memory_sizes.py's)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the binary files (without --real-sizes)")
    parser.add_argument("--text-rows", type=int, default=100_000, help="rows of the text file (without --real-sizes)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case, the medians shown (without "
                                                              "--real-sizes)")
    parser.add_argument("--data", default=memory_sizes.DATA, help="with --real-sizes: a folder for the files (made "
                                                                  "there once, kept for reruns)")
    parser.add_argument("--scale", type=float, default=1.0, help="with --real-sizes: times the real rows (and buckets)")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--only", default="", help="comma-separated shapes (fasttext, binary, text) with --real-sizes, "
                                                   "else cases; default all")
    parser.add_argument("--cases", default="", help="with --real-sizes: comma-separated cases, run in that order "
                                                    "(inspect, convert, train, diff, eval, gensim); default all")
    parser.add_argument("--delete", action="store_true", help="with --real-sizes: delete each shape's vectors file "
                                                              "after its cases")
    parser.add_argument("--log", default="", help="a folder for each case's terminal output, each write timed")
    parser.add_argument("--pythonpath", default=ROOT, help="PYTHONPATH of the commands (the code measured)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": args.pythonpath, "COLUMNS": "120"}
    if not args.real_sizes:
        synthetic(args, env)
        return
    os.makedirs(args.data, exist_ok=True)
    out = os.path.join(tempfile.mkdtemp(prefix="silence.", dir=args.data), "out")
    chosen = [c for c in args.cases.split(",") if c]
    print(f"{os.cpu_count()} CPUs; {args.pythonpath}; GB = 10^9 bytes")
    for shape, real_rows in SHAPES.items():
        if args.only and shape not in args.only.split(","):
            continue
        rows = max(1000, round(real_rows * args.scale))
        began = time.perf_counter()
        paths = make_shape(shape, rows, args.dim, args.data)
        size = os.path.getsize(paths["vectors"])
        print(f"\n{shape}: {rows:,} rows x {args.dim}{f' + {rows:,} buckets' if shape == 'fasttext' else ''}, "
              f"{size / 1e9:.2f} GB ({time.perf_counter() - began:.0f} s to make or find); load {load()}",
              flush=True)
        print(f"{'case':8s} {'wall':>7s} {'peak':>8s} {'tree':>8s} {'silence':>8s}  exit  before the longest silence")
        commands = cases(shape, paths, out)
        for name in chosen or commands:   # in the order asked (train before diff: diff reads train's output)
            command = commands[name]
            if args.log:
                os.makedirs(args.log, exist_ok=True)
            r = measure(command, env, os.path.join(args.log, f"{shape}.{rows}.{name}.log") if args.log else "")
            print(f"{name:8s} {r['wall']:6.1f}s {r['peak'] / 1e9:6.2f}GB {r['tree'] / 1e9:6.2f}GB "
                  f"{r['silence']:7.1f}s  {r['code']:4d}  {r['before'][-70:]}", flush=True)
            if r["code"] not in (0,):
                print(f"         its last words: {r['tail'][-200:]!r}", flush=True)
        for leftover in (out + ".bin", out + ".txt"):
            if os.path.exists(leftover):
                os.remove(leftover)
        if args.delete:
            os.remove(paths["vectors"])
        print(f"load after {shape}: {load()}", flush=True)
    os.rmdir(os.path.dirname(out))


if __name__ == "__main__":
    main()
