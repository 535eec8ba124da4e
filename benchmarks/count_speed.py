"""Tokens/s per core of counting a corpus and turning it into ids, against plain Python and gensim.

    python benchmarks/count_speed.py [--vectors FILE] [--corpus FILE ...] [--repeat 3] [--skip-cold]

For each corpus (default benchmarks/_data/corpus.txt and corpus-large.txt), interleaved, ``--repeat``
rounds of:
  counter    ``Counter.update(line.split())`` over the file's lines (no tokenizing, no ids)
  gensim     ``Word2Vec().build_vocab(LineSentence(...))`` (counting only)
  reference  embedtune's reference reader (EMBEDTUNE_COMPILED_READER=0's): ``Corpus.count()`` and one
             ``id_chunks`` pass (what the first epoch read before), ``--tokenize auto``, lower-cased
  compiled   the compiled reader (corpus/fast.py): the same ``count()`` and ``id_chunks`` pass
Each figure is tokens / CPU second of this process (one core: all four are single-threaded), the
median of the rounds; wall seconds beside it. The compiled reader's first call in the process (numba
loading its cached code) is made before the rounds and printed apart. Then, in child processes:
the first count of a small file with numba's cache cold (compiled from scratch) and warm (what a run
pays), and the compiled reader's time on pathological lines at two sizes (linear: the ratio ~2).
The load average is printed at start and end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "_data")


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def counter_count(path):
    counts = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    return sum(counts.values())


def gensim_count(path):
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    model = Word2Vec(vector_size=50, min_count=1, workers=1)
    model.build_vocab(LineSentence(path))
    return model.corpus_total_words


def embedtune_pass(path, vocabulary, compiled: bool):
    from embedtune.corpus import Corpus, id_chunks

    corpus = Corpus(path, lowercase=True, tokenize="auto", vocabulary=vocabulary)
    corpus.compiled = compiled
    counts, total, _ = corpus.count()
    index = {word: i for i, word in enumerate(counts)}
    ids = sum(len(chunk.ids) for chunk in id_chunks(corpus, index))
    assert ids == total
    return total


COLD = """
import sys, time
start, cpu = time.perf_counter(), time.process_time()
from embedtune.corpus import Corpus, id_chunks
c = Corpus(sys.argv[1])
counts = c.count()[0]
sum(len(x.ids) for x in id_chunks(c, {w: i for i, w in enumerate(counts)}))
print(time.perf_counter() - start, time.process_time() - cpu)
"""

# (name, Python expression of the line, repeated to the size): each file holds two such lines
PATHOLOGICAL = [
    ("no spaces", "'x' * n"),
    ("'a ' repeated", "'a ' * (n // 2)"),
    ("punctuation only", "'.,;:!?()' * (n // 8)"),
    ("non-ASCII words", "'überß Σας 中文 ' * (n // 24)"),
    ("CRLF lines", "'the cat\\r\\n' * (n // 9)"),
    ("distinct tokens", "' '.join(map(str, range(n // 7)))"),
]


def pathological(sizes=(1 << 21, 1 << 22)) -> None:
    for name, expression in PATHOLOGICAL:
        seconds = []
        for n in sizes:
            if name.startswith("no spaces"):
                n = n * 3 // 4   # under the 4 MB token limit at both sizes
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
                line = eval(expression, {"n": n})
                f.write(line + "\n" + line + "\n")
            try:
                script = ("import sys, time\nfrom embedtune.corpus import Corpus\n"
                          "c = Corpus(sys.argv[1], tokenize='auto', vocabulary={'.', ',', '(', ')', 'the', 'cat'})\n"
                          "c.count(); c.count()\nstart = time.process_time()\nc.count()\n"
                          "print(time.process_time() - start)")
                out = subprocess.run([sys.executable, "-c", script, f.name], capture_output=True, text=True,
                                     timeout=600)
                seconds.append(float(out.stdout.split()[-1]) if out.returncode == 0 else float("nan"))
            finally:
                os.unlink(f.name)
        print(f"  {name:18} {sizes[0] >> 20} MB lines: {seconds[0]:.3f} s cpu, {sizes[1] >> 20} MB: "
              f"{seconds[1]:.3f} s (ratio {seconds[1] / max(seconds[0], 1e-9):.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", default=os.path.join(DATA, "glove.6B.50d.txt"))
    parser.add_argument("--corpus", nargs="+", default=[os.path.join(DATA, "corpus.txt"),
                                                        os.path.join(DATA, "corpus-large.txt")])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-cold", action="store_true", help="no child processes (cold cache, pathological)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)

    from embedtune.formats import load_vectors

    vocabulary = load_vectors(args.vectors).index
    small = os.path.join(HERE, "..", "data", "sample", "lee_background.cor")
    _, wall, cpu = timed(lambda: embedtune_pass(small, vocabulary, True))
    print(f"compiled reader's first call (numba's cached code loaded; a small corpus): {wall:.2f} s wall, "
          f"{cpu:.2f} s cpu", flush=True)
    ways = {"counter": counter_count, "gensim": gensim_count,
            "reference": lambda p: embedtune_pass(p, vocabulary, False),
            "compiled": lambda p: embedtune_pass(p, vocabulary, True)}
    for path in args.corpus:
        figures = {name: [] for name in ways}
        tokens = {}
        for _ in range(args.repeat):
            for name, way in ways.items():
                tokens[name], wall, cpu = timed(lambda: way(path))
                figures[name].append((tokens[name] / max(cpu, 1e-9), wall))
        print(f"{os.path.basename(path)}: {tokens['compiled']:,} tokens (auto, lower-cased; "
              f"{tokens['counter']:,} whitespace tokens), medians of {args.repeat}:")
        base = statistics.median(f[0] for f in figures["reference"])
        for name, runs in figures.items():
            rate, wall = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            what = "count + ids" if name in ("reference", "compiled") else "count"
            print(f"  {name:10} {what:12} {rate / 1e6:6.2f} M tokens/s per core  ({wall:.2f} s wall; "
                  f"{rate / base:.2f}x the reference)", flush=True)
    if not args.skip_cold:
        with tempfile.TemporaryDirectory() as cache:
            for label, env in (("cold cache (compiles)", {"NUMBA_CACHE_DIR": cache}), ("warm cache", {}),
                               ("warm cache", {})):
                out = subprocess.run([sys.executable, "-c", COLD, small], capture_output=True, text=True,
                                     env={**os.environ, **env}, check=True)
                wall, cpu = map(float, out.stdout.split())
                print(f"first compiled count + ids in a new process, {label}: {wall:.2f} s wall, {cpu:.2f} s cpu "
                      "(imports included)", flush=True)
        print("pathological lines, compiled reader (one count pass, after one to warm):")
        pathological()
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
