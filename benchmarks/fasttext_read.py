"""Reading a fastText model (.bin): embedtune's reader against gensim's load_facebook_vectors, same run.

    python benchmarks/fasttext_read.py [--words 100000] [--buckets 200000] [--dim 100] [--repeat 3]
    python benchmarks/fasttext_read.py --model MODEL.bin [--repeat 3]    # a real model instead

Data: a synthetic model built once under benchmarks/_data/ (git-ignored) in fastText's version-12 layout:
WORDS random lower-case words of 3-12 letters, BUCKETS subword rows, minn 3, maxn 6, random normal float32
input rows (x 0.1), a zero output matrix. Both tools compute every word's vector (word row plus n-gram
rows, averaged); the figures check they agree (gensim divides where fastText multiplies by 1/n: within
1e-5). Wall-clock seconds, the median of --repeat runs each, the tools taking turns; the ratio is
gensim's median over ours. Goal: >= 2x. The load average is printed before and after.

The memory plan of a 2M-word + 2M-bucket x 300 model (cc.<lang>.300.bin's shape) is printed from the
reader's layout: what is copied, what is memory-mapped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def load_average() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def make_model(path: str, words: int, buckets: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    seen, vocab = set(), []
    while len(vocab) < words:
        w = bytes(letters[rng.integers(0, 26, rng.integers(3, 13))])
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    with open(path, "wb") as f:
        f.write(struct.pack("<ii", 793712314, 12))
        f.write(struct.pack("<12id", dim, 5, 5, 5, 5, 1, 2, 2, buckets, 3, 6, 100, 1e-4))
        f.write(struct.pack("<iiiqq", words, words, 0, words * 10, -1))
        f.write(b"".join(w + b"\0" + struct.pack("<qb", 10, 0) for w in vocab))
        f.write(b"\0" + struct.pack("<qq", words + buckets, dim))
        for start in range(0, words + buckets, 100000):
            n = min(100000, words + buckets - start)
            f.write((rng.standard_normal((n, dim), np.float32) * 0.1).astype("<f4").tobytes())
        f.write(b"\0" + struct.pack("<qq", words, dim))
        f.write(bytes(4 * words * dim))


def ours(path):
    from embedtune.formats import load_vectors

    return load_vectors(path).matrix


def gensims(path):
    from gensim.models.fasttext import load_facebook_vectors

    return load_facebook_vectors(path).vectors


def memory_plan(words=2_000_000, buckets=2_000_000, dim=300, word_bytes=12) -> list[str]:
    gb = 1e9
    return [
        f"memory plan, {words:,} words + {buckets:,} buckets x {dim}:",
        f"  input matrix (memory-mapped, file pages)  {(words + buckets) * dim * 4 / gb:.1f} GB",
        f"  output matrix (memory-mapped, untouched unless written back)  {words * dim * 4 / gb:.1f} GB",
        f"  word vectors (float32, the Vectors' matrix)  {words * dim * 4 / gb:.1f} GB",
        f"  words (one block of UTF-8 + offsets) and index  {words * (word_bytes + 1 + 8 + 4 * 4) / gb:.2f} GB",
        "  written back (.bin): the changed words' solved rows only, blocks of 16k rows otherwise",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=int, default=100_000)
    ap.add_argument("--buckets", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", help="time this fastText model instead of the synthetic one")
    a = ap.parse_args()
    folder = os.path.join(HERE, "_data")
    os.makedirs(folder, exist_ok=True)
    path = a.model or os.path.join(folder, f"synthetic.ft.{a.words}.{a.buckets}.{a.dim}.bin")
    if not os.path.exists(path):
        make_model(path, a.words, a.buckets, a.dim)
    print(f"model {path}: {os.path.getsize(path) / 1e6:.0f} MB; load {load_average()}")
    ours(path)   # numba's compiled kernels from their cache, once, outside the timings
    times = {"embedtune": [], "gensim": []}
    results = {}
    for _ in range(a.repeat):
        for name, read in (("embedtune", ours), ("gensim", gensims)):
            began = time.perf_counter()
            results[name] = read(path)
            times[name].append(time.perf_counter() - began)
    # gensim gives </s> n-grams (fastText does not): that row is left out of the comparison
    from embedtune.formats import load_vectors

    words = list(load_vectors(path).words)
    rows = [i for i, w in enumerate(words) if w != "</s>"]
    diff = float(np.abs(results["embedtune"][rows] - results["gensim"][rows]).max())
    mine, theirs = statistics.median(times["embedtune"]), statistics.median(times["gensim"])
    print(f"embedtune {mine:.2f} s  gensim {theirs:.2f} s  ratio {theirs / mine:.1f}x (goal 2x)  "
          f"largest difference {diff:.2g}; runs {times}")
    print(f"load after {load_average()}")
    print("\n".join(memory_plan()))


if __name__ == "__main__":
    main()
