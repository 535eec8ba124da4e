"""Whole-process speed: ``embedtune train --objective sgns`` against a gensim script doing the same job,
each a process of its own timed from start to exit (what ``time`` shows), in the same run, taking turns.

    python benchmarks/end_to_end.py [--repeat 3] [--sizes 2m,20m] [--json FILE]

The job (issue 26): continue GloVe 6B 50d's first 20,000 rows (data/sample/glove.6B.50d.20k.txt) on a
corpus, the first 10,000 rows frozen, new corpus words (min_count 5) added and trained, dim 50, window 5,
negative 5, sample 1e-3, lr 0.025 decaying linearly to 1e-4 of it, 1 epoch, every core; write the vectors.

embedtune   python -m embedtune.cli.main -q train GLOVE CORPUS -o OUT --freeze-top 10000 --objective sgns
            --epochs 1 --seed 1 --json   (its defaults are the settings above)
gensim      a script (``gensim_job`` below, run as ``--gensim-job``): load the 20k rows as KeyedVectors,
            Word2Vec(sg=1, the settings above, workers = every core).build_vocab on the corpus, copy the
            GloVe rows of its vocabulary in, lock the first 10,000 GloVe words (vectors_lockf 0), train 1
            epoch, put the trained rows and the new words into the KeyedVectors and save them as text (the
            20k rows and the new words, as embedtune writes). ``corpus_file`` mode: gensim's faster one.

Corpora, made in a temporary folder:
    2m    the first 40,000 lines of benchmarks/_data/corpus-large.txt (2.27M tokens; the issue's case had 2.16M)
    20m   corpus-large.txt four times over (20.5M tokens)

Figures: raw corpus words per second of whole-process wall (tokens / wall), the ratio embedtune / gensim
(median of the rounds' ratios), CPU seconds of each process (every thread; their ratio holds up better
than wall on a busy machine), and beside them the loop-only ratio (each
tool's own training words/s: embedtune's ``words_per_second``, gensim's corpus words over ``train``'s wall)
and embedtune's ``--json`` split of its wall beside gensim's own split (import, load_vectors, count: build_vocab,
setup: the GloVe rows and locks, loop: train, write; wall and CPU seconds). Goal: end to end >= 1.3x gensim on 2m.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)   # timed processes cache bytecode as a user's do (benchmarks/README.md)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GLOVE_20K = os.path.join(ROOT, "data", "sample", "glove.6B.50d.20k.txt")
CORPUS_LARGE = os.path.join(HERE, "_data", "corpus-large.txt")
FROZEN = 10_000
DIM, WINDOW, NEGATIVE, SAMPLE, MIN_COUNT, EPOCHS, LR, MIN_LR_FRACTION = 50, 5, 5, 1e-3, 5, 1, 0.025, 1e-4
SIZES = {"2m": ("first 40,000 lines of corpus-large.txt", 40_000, 1),
         "20m": ("corpus-large.txt 4 times over", None, 4)}


def make_corpus(size: str, workdir: str) -> str:
    _, lines, times = SIZES[size]
    path = os.path.join(workdir, f"corpus-{size}.txt")
    with open(CORPUS_LARGE, "rb") as src:
        data = b"".join(line for _, line in zip(range(lines), src)) if lines else src.read()
    with open(path, "wb") as dst:
        for _ in range(times):
            dst.write(data)
    return path


def gensim_job(glove: str, corpus: str, out: str) -> None:
    """The gensim side, in a process of its own; prints its own timings as JSON, with "phases": the wall
    and CPU seconds (every thread) of each step, as embedtune's ``--json`` splits its own wall."""
    began = time.perf_counter()
    phases, mark = {}, [began, time.process_time()]

    def phase(name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        phases[name] = {"wall": wall - mark[0], "cpu": cpu - mark[1]}
        mark[:] = [wall, cpu]

    from gensim.models import KeyedVectors, Word2Vec

    phase("import")
    glove_kv = KeyedVectors.load_word2vec_format(glove, binary=False, no_header=True)
    phase("load_vectors")
    model = Word2Vec(vector_size=DIM, window=WINDOW, negative=NEGATIVE, sample=SAMPLE, min_count=MIN_COUNT, sg=1,
                     hs=0, alpha=LR, min_alpha=LR * MIN_LR_FRACTION, workers=len(os.sched_getaffinity(0)),
                     epochs=EPOCHS, seed=1)
    model.build_vocab(corpus_file=corpus)
    phase("count")
    keys = model.wv.index_to_key
    rows = np.array([glove_kv.key_to_index.get(w, -1) for w in keys])
    pretrained = rows >= 0
    model.wv.vectors[pretrained] = glove_kv.vectors[rows[pretrained]]
    # After build_vocab: gensim indexes the factors as lockf[word % len(lockf)].
    lockf = np.ones(len(keys), np.float32)
    frozen = pretrained & (rows < FROZEN)
    lockf[frozen] = 0.0
    model.wv.vectors_lockf = lockf
    before = model.wv.vectors[frozen].copy()
    phase("setup")
    trained_at = time.perf_counter()
    model.train(corpus_file=corpus, total_words=model.corpus_total_words, epochs=EPOCHS)
    train_seconds = time.perf_counter() - trained_at
    phase("loop")
    after = model.wv.vectors
    identical = bool(np.array_equal(after[frozen].view(np.uint32), before.view(np.uint32)))
    glove_kv.vectors[rows[pretrained]] = after[pretrained]
    new = [w for w, r in zip(keys, rows) if r < 0]
    glove_kv.add_vectors(new, after[~pretrained])
    glove_kv.save_word2vec_format(out, write_header=False, sort_attr=None)   # in row order, as embedtune
    phase("write")
    print(json.dumps({"corpus_words": model.corpus_total_words, "train_seconds": train_seconds,
                      "loop_words_per_second": model.corpus_total_words / train_seconds, "new": len(new),
                      "frozen_identical": identical, "inside_seconds": time.perf_counter() - began,
                      "phases": phases}))


def timed(command: list[str]) -> tuple[float, float, str]:
    """(wall, CPU seconds of the process and its threads, stdout) of a command run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"end_to_end: {command[:4]} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def run_embedtune(corpus: str, out: str) -> dict:
    wall, cpu, stdout = timed([sys.executable, "-m", "embedtune.cli.main", "-q", "train", GLOVE_20K, corpus,
                               "-o", out, "--freeze-top", str(FROZEN), "--objective", "sgns", "--epochs",
                               str(EPOCHS), "--seed", "1", "--json"])
    stats = json.loads(stdout)
    return {"wall": wall, "cpu": cpu, "corpus_words": stats["corpus_words"],
            "loop_words_per_second": stats["words_per_second"], "seconds": stats["seconds"],
            "new": stats["new"], "frozen_identical": stats["max_frozen_change"] == 0.0}


def run_gensim(corpus: str, out: str) -> dict:
    wall, cpu, stdout = timed([sys.executable, os.path.abspath(__file__), "--gensim-job", GLOVE_20K, corpus, out])
    return {"wall": wall, "cpu": cpu, **json.loads(stdout.strip().splitlines()[-1])}


def compare(size: str, workdir: str, repeat: int) -> dict:
    corpus = make_corpus(size, workdir)
    out = os.path.join(workdir, "out.txt")
    print(f"\n== whole process, {size}: {SIZES[size][0]}, {repeat} rounds, embedtune then gensim ==")
    rounds = []
    for number in range(repeat):
        load = os.getloadavg()[0]
        mine, theirs = run_embedtune(corpus, out), run_gensim(corpus, out)
        tokens = mine["corpus_words"]
        r = {"load": load, "embedtune": mine, "gensim": theirs,
             "ratio": theirs["wall"] / mine["wall"], "cpu_ratio": theirs["cpu"] / mine["cpu"],
             "loop_ratio": mine["loop_words_per_second"] / theirs["loop_words_per_second"]}
        rounds.append(r)
        print(f"-- round {number + 1}, load average {load:.1f}: {tokens:,} tokens (gensim counts "
              f"{theirs['corpus_words']:,})")
        print(f"   embedtune {mine['wall']:6.1f} s wall, {mine['cpu']:6.1f} s CPU, {tokens / mine['wall']:9,.0f} words/s "
              f"end to end, loop {mine['loop_words_per_second']:,} words/s; --json seconds {mine['seconds']}")
        print(f"   gensim    {theirs['wall']:6.1f} s wall, {theirs['cpu']:6.1f} s CPU, "
              f"{theirs['corpus_words'] / theirs['wall']:9,.0f} words/s end to end, loop "
              f"{theirs['loop_words_per_second']:,.0f} words/s (train {theirs['train_seconds']:.1f} s)")
        print(f"   gensim's split (wall / CPU s): "
              + ", ".join(f"{k} {v['wall']:.2f} / {v['cpu']:.2f}" for k, v in theirs["phases"].items()))
        print(f"   ratio end to end {r['ratio']:.2f} (CPU {r['cpu_ratio']:.2f}), loop {r['loop_ratio']:.2f}; frozen rows identical: "
              f"embedtune {mine['frozen_identical']}, gensim {theirs['frozen_identical']}")
    median = lambda key: float(np.median([r[key] for r in rounds]))   # noqa: E731
    result = {
        "size": size, "corpus": SIZES[size][0], "tokens": rounds[0]["embedtune"]["corpus_words"], "rounds": rounds,
        "loads": [r["load"] for r in rounds], "ratio": median("ratio"), "cpu_ratio": median("cpu_ratio"),
        "loop_ratio": median("loop_ratio"),
        "embedtune_wall": float(np.median([r["embedtune"]["wall"] for r in rounds])),
        "gensim_wall": float(np.median([r["gensim"]["wall"] for r in rounds])),
        "embedtune_cpu": float(np.median([r["embedtune"]["cpu"] for r in rounds])),
        "gensim_cpu": float(np.median([r["gensim"]["cpu"] for r in rounds])),
        "seconds": {key: float(np.median([r["embedtune"]["seconds"][key] for r in rounds]))
                    for key in rounds[0]["embedtune"]["seconds"]},
        "gensim_phases": {key: {kind: float(np.median([r["gensim"]["phases"][key][kind] for r in rounds]))
                                for kind in ("wall", "cpu")} for key in rounds[0]["gensim"]["phases"]},
    }
    tokens = result["tokens"]
    print(f"median of {repeat} (load {min(result['loads']):.1f} to {max(result['loads']):.1f}): embedtune "
          f"{result['embedtune_wall']:.1f} s ({tokens / result['embedtune_wall']:,.0f} words/s), gensim "
          f"{result['gensim_wall']:.1f} s ({tokens / result['gensim_wall']:,.0f} words/s): end to end "
          f"{result['ratio']:.2f}x gensim (goal >= 1.3 on 2m), loop alone {result['loop_ratio']:.2f}x; CPU "
          f"{result['embedtune_cpu']:.1f} s against {result['gensim_cpu']:.1f} s ({result['cpu_ratio']:.2f}x); "
          f"embedtune's split "
          f"{ {k: round(v, 2) for k, v in result['seconds'].items()} }; gensim's (wall) "
          f"{ {k: round(v['wall'], 2) for k, v in result['gensim_phases'].items()} }, (CPU) "
          f"{ {k: round(v['cpu'], 2) for k, v in result['gensim_phases'].items()} }")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds, the tools taking turns [3]")
    parser.add_argument("--sizes", default="2m,20m", help="comma-separated: 2m,20m [both]")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    parser.add_argument("--gensim-job", nargs=3, metavar=("GLOVE", "CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gensim_job:
        gensim_job(*args.gensim_job)
        return
    results = main_results(args.sizes.split(","), args.repeat)
    print(results["summary"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=float)


def main_results(sizes: list[str], repeat: int) -> dict:
    """Each size compared: its figures, and "summary", the lines that head train_speed.py's summary."""
    if not os.path.exists(CORPUS_LARGE):
        sys.exit(f"end_to_end: {CORPUS_LARGE} not found; run: python benchmarks/make_corpus.py --large")
    with tempfile.TemporaryDirectory(prefix="embedtune-e2e-") as workdir:
        results = {size: compare(size, workdir, repeat) for size in sizes}
    return {**results, "summary": summary_lines(results)}


def summary_lines(results: dict) -> str:
    lines = ["\n== end to end (whole process) =="]
    for size, r in results.items():
        tokens = r["tokens"]
        lines.append(f"{size:4s} {tokens:>11,} tokens: embedtune {tokens / r['embedtune_wall']:>9,.0f} words/s, gensim "
                     f"{tokens / r['gensim_wall']:>9,.0f} words/s: {r['ratio']:.2f}x end to end "
                     f"(CPU-seconds {r['cpu_ratio']:.2f}x; loop {r['loop_ratio']:.2f}x), median of {len(r['rounds'])}, load "
                     f"{min(r['loads']):.1f}-{max(r['loads']):.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
