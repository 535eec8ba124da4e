"""Speed of `embedtune eval` on GloVe 6B 50d (400k words), against gensim in the same run.

    python data/make_sample.py --words 400000 -o benchmarks/_data/glove.6B.50d.txt   # once
    python benchmarks/eval_speed.py [--vectors FILE] [--repeat 3] [--every 20]

full    ``embedtune.compare.evaluate`` with its defaults (WordSim-353, SimLex-999, the Google
        analogies, restrict_vocab 300000), ``--repeat`` times: wall and CPU seconds, median.
        Goal: <= 10 s (issue 10).
subset  every ``--every``-th Google analogy question, answered by gensim's
        ``evaluate_word_analogies`` and by embedtune, interleaved: both times, the ratio, and whether
        every section's correct/answered counts are equal (they must be). gensim answers one question
        at a time, so the whole file would take it many minutes; the subset keeps this short.

Loading the file is timed apart. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--every", type=int, default=20)
    args = parser.parse_args()

    from gensim.models import KeyedVectors

    from embedtune.compare import default_analogy_files, evaluate, evaluate_analogies
    from embedtune.formats import load_vectors

    print(f"load average at start: {os.getloadavg()}", flush=True)
    vectors, wall, cpu = timed(lambda: load_vectors(args.vectors))
    print(f"load {args.vectors}: {len(vectors):,} x {vectors.dim} in {wall:.1f} s wall ({cpu:.1f} s cpu)", flush=True)

    runs = []
    for _ in range(args.repeat):
        e, wall, cpu = timed(lambda: evaluate(vectors))
        runs.append((wall, cpu))
        a = e.analogies[0]
        print(f"full: {wall:.1f} s wall, {cpu:.1f} s cpu; analogies {a.correct}/{a.answered}, "
              + ", ".join(f"{s.name} {s.spearman:.4f}" for s in e.similarity), flush=True)
    print(f"full, median of {args.repeat}: {statistics.median(w for w, _ in runs):.1f} s wall, "
          f"{statistics.median(c for _, c in runs):.1f} s cpu (goal <= 10 s)", flush=True)

    kv = KeyedVectors(vectors.dim)
    kv.add_vectors(vectors.words, vectors.matrix.copy())
    with tempfile.TemporaryDirectory() as tmp:
        subset = os.path.join(tmp, "questions.txt")
        kept = 0
        with open(default_analogy_files()[0], encoding="utf-8") as f, open(subset, "w", encoding="utf-8") as out:
            for line in f:
                if line.startswith(": "):
                    out.write(line)
                else:
                    kept += 1
                    if kept % args.every == 0:
                        out.write(line)
        (score, sections), g_wall, g_cpu = timed(lambda: kv.evaluate_word_analogies(subset))
        ours, e_wall, e_cpu = timed(lambda: evaluate_analogies(vectors, subset))
    theirs = [(s["section"], len(s["correct"]), len(s["correct"]) + len(s["incorrect"])) for s in sections[:-1]]
    equal = theirs == [(s.name, s.correct, s.answered) for s in ours.sections]
    print(f"subset ({ours.answered} questions answered): gensim {g_wall:.1f} s wall ({g_cpu:.1f} s cpu), "
          f"embedtune {e_wall:.1f} s wall ({e_cpu:.1f} s cpu): {g_wall / e_wall:.1f}x; "
          f"accuracy {ours.accuracy:.4f} vs gensim {score:.4f}; every section equal: {equal}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
