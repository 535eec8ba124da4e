"""Speed of `embedtune eval` against gensim's evaluation, whole process each, on GloVe 6B 50d (400k words).

    python data/make_sample.py --words 400000 -o benchmarks/_data/glove.6B.50d.txt   # once
    python benchmarks/eval_speed.py [--vectors FILE] [--repeat 3] [--every 1]
    python benchmarks/eval_speed.py --steps [--vectors FILE]
    python benchmarks/eval_speed.py --ab BEFORE_TREE AFTER_TREE [--repeat 3] [--vectors FILE]

Each turn runs two processes, one after the other, the first of the two alternating from turn to turn:
  embedtune  ``embedtune eval FILE --json``: WordSim-353, SimLex-999 and the Google analogies shipped
             with gensim, restrict_vocab 300000 (its defaults)
  gensim     a Python process doing the same with gensim: ``KeyedVectors.load_word2vec_format``, then
             ``evaluate_word_pairs`` on both pair files (restrict_vocab: the whole vocabulary, as
             embedtune scores pairs) and ``evaluate_word_analogies`` (restrict_vocab 300000)
Wall and CPU seconds (user + system of the process) of each run, medians of --repeat, and their ratio;
every figure of the two (Pearson, Spearman, each section's correct and answered) is compared and must be
equal. --every N keeps every N-th analogy question (both tools read the same file) for a shorter run:
gensim answers one question at a time, minutes for the whole set. The load average is printed before
each run and at the end: the machine is shared, and the ratio survives load better than the seconds.

--steps  one process doing what ``embedtune eval FILE`` does with its default sets, a step at a time: wall and
         CPU seconds (this process and its children: the reader forks) of the imports, numba's first call, the
         reading (by the compiled parse, as the command's), the word lookup, the word pairs and the analogies,
         the load average before and after. Set OPENBLAS_NUM_THREADS=1 as the command does.
--ab     ``PYTHONPATH=TREE embedtune -q eval FILE --json`` for each of two source trees (a checkout, or
         ``git archive COMMIT | tar -x -C DIR``), before then after in each of --repeat rounds, whole process:
         wall, user + system CPU and peak memory (GNU time) of each run, the load average at its start, the
         medians, and whether the two trees printed the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)   # timed processes cache bytecode as a user's do (benchmarks/README.md)
HERE = os.path.dirname(os.path.abspath(__file__))

GENSIM = """
import json, sys
from gensim.models import KeyedVectors
vectors, analogies, *pair_files = sys.argv[1:]
kv = KeyedVectors.load_word2vec_format(vectors, no_header=True)
similarity = []
for path in pair_files:
    pearson, spearman, oov = kv.evaluate_word_pairs(path, restrict_vocab=len(kv.index_to_key))
    similarity.append([pearson.statistic, spearman.statistic])
accuracy, sections = kv.evaluate_word_analogies(analogies, restrict_vocab=300000)
print(json.dumps({"similarity": similarity, "accuracy": accuracy, "sections": [
    [s["section"], len(s["correct"]), len(s["correct"]) + len(s["incorrect"])] for s in sections[:-1]]}))
"""


def timed(name: str, command: list[str]) -> tuple[dict, float, float]:
    """(the JSON it printed, wall seconds, CPU seconds) of one process."""
    print(f"  load average {os.getloadavg()[0]:.2f}: {name} ...", end=" ", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{name} failed:\n{done.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return json.loads(done.stdout), wall, cpu


def figures_of_embedtune(out: dict) -> dict:
    [analogies] = out["analogies"]
    return {"similarity": [[s["pearson"], s["spearman"]] for s in out["similarity"]],
            "accuracy": analogies["accuracy"],
            "sections": [[s["name"], s["correct"], s["answered"]] for s in analogies["sections"]]}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def steps(vectors_path: str) -> None:
    """--steps: one process doing what eval does with its default sets, a step at a time."""
    last = [time.perf_counter(), cpu_seconds()]

    def lap(name: str) -> None:
        now, cpu = time.perf_counter(), cpu_seconds()
        print(f"{name:34s} {now - last[0]:6.2f} s wall {cpu - last[1]:6.2f} s CPU", flush=True)
        last[:] = [now, cpu]

    print(f"load average {os.getloadavg()}")
    from embedtune.formats.reading import Reading, load_training_vectors
    lap("import the reader")
    import numba  # noqa: F401
    lap("import numba")
    from embedtune.formats.text.parse import load_parser_ahead
    load_parser_ahead(vectors_path)   # what the command's read does first (kernels=True): numba's first call
    lap("numba's first call (the parse)")
    vectors = load_training_vectors(vectors_path, None, Reading(), kernels=True)
    lap("read the vectors")
    from embedtune.compare import evaluation
    lap("import embedtune.compare")
    import embedtune.compare.analogy_search  # noqa: F401  (numba)
    lap("import analogy_search")
    read = [(p, evaluation._read_analogies(p, True)) for p in evaluation.default_analogy_files()]
    pair_files = [(p, evaluation._read_word_pairs(p, True)) for p in evaluation.default_similarity_files()]
    lap("read the questions and pairs")
    wanted = set().union(*(evaluation._question_words(s) for _, s in read),
                         *(evaluation._pair_words(pairs) for _, pairs in pair_files))
    rows = evaluation._first_rows(vectors, True, wanted)
    lap("word lookup (_first_rows)")
    restrict = min(evaluation.RESTRICT_VOCAB, len(vectors.words))
    asked = [evaluation._asked(sections, rows, restrict) for _, sections in read]
    lap("questions asked (_asked)")
    for path, pairs in pair_files:
        evaluation._score_pairs(vectors, path, pairs, rows)
    lap("word pairs (both sets)")
    for (path, sections), asked_abc in zip(read, asked):
        evaluation._score_analogies(vectors, path, sections, asked_abc, evaluation.RESTRICT_VOCAB, True, None)
    lap("analogies")
    print(f"load average {os.getloadavg()}; scipy.stats imported: {'scipy.stats' in sys.modules}")


def ab(before: str, after: str, rounds: int, vectors_path: str) -> None:
    """--ab BEFORE AFTER: `embedtune eval` alone from two source trees, taking turns."""
    runs: dict[str, list] = {"before": [], "after": []}
    outputs: dict[str, set] = {"before": set(), "after": set()}
    print(f"load average {os.getloadavg()}")
    for turn in range(rounds):
        for side, tree in (("before", before), ("after", after)):
            load = os.getloadavg()[0]
            timing = os.path.join(tempfile.gettempdir(), f"eval_steps.{os.getpid()}.time")
            done = subprocess.run(["/usr/bin/time", "-o", timing, "-f", "%e %U %S %M", "embedtune", "-q", "eval",
                                   vectors_path, "--json"], capture_output=True,
                                  env={**os.environ, "PYTHONPATH": os.path.abspath(tree)}, cwd=tree)
            if done.returncode:
                sys.exit(f"{side} failed:\n{done.stderr.decode()}")
            with open(timing) as f:
                wall, user, system, peak_kb = (float(x) for x in f.read().split()[-4:])
            os.remove(timing)
            cpu = user + system
            runs[side].append((wall, cpu))
            outputs[side].add(done.stdout)
            print(f"{side} {turn + 1}, load {load:.2f}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                  f"peak {peak_kb / 1e6:.2f} GB", flush=True)
    for side, rs in runs.items():
        print(f"{side}: median {statistics.median(w for w, _ in rs):.2f} s wall, "
              f"{statistics.median(c for _, c in rs):.2f} s CPU")
    print(f"the same output: {len(outputs['before'] | outputs['after']) == 1}; load average {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", default=os.path.join(HERE, "_data", "glove.6B.50d.txt"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--every", type=int, default=1, help="keep every N-th analogy question")
    parser.add_argument("--steps", action="store_true", help="where eval's own time goes, step by step")
    parser.add_argument("--ab", nargs=2, metavar=("BEFORE_TREE", "AFTER_TREE"),
                        help="eval alone from two source trees, taking turns")
    args = parser.parse_args()
    if args.steps:
        return steps(os.path.abspath(args.vectors))
    if args.ab:
        return ab(*args.ab, args.repeat, os.path.abspath(args.vectors))

    from embedtune.compare import default_analogy_files, default_similarity_files

    pair_files = default_similarity_files()
    questions = default_analogy_files()[0]
    with tempfile.TemporaryDirectory() as tmp:
        if args.every > 1:
            subset = os.path.join(tmp, "questions.txt")
            kept = 0
            with open(questions, encoding="utf-8") as f, open(subset, "w", encoding="utf-8") as out:
                for line in f:
                    kept += not line.startswith(": ")
                    if line.startswith(": ") or kept % args.every == 0:
                        out.write(line)
            questions = subset
        ours = [sys.executable, "-m", "embedtune.cli.main", "-q", "eval", args.vectors, "--json",
                "--analogy", questions] + [x for path in pair_files for x in ("--similarity", path)]
        theirs = [sys.executable, "-c", GENSIM, args.vectors, questions, *pair_files]
        print(f"load average at start: {os.getloadavg()}; {args.repeat} turns of both, whole process each",
              flush=True)
        runs = {"embedtune": [], "gensim": []}
        figures = {}
        for turn in range(args.repeat):
            order = [("embedtune", ours), ("gensim", theirs)]
            for name, command in order if turn % 2 == 0 else order[::-1]:
                out, wall, cpu = timed(name, command)
                runs[name].append((wall, cpu))
                figures[name] = figures_of_embedtune(out) if name == "embedtune" else out
                print(f"{wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
    median = {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
              for name, r in runs.items()}
    e, g = median["embedtune"], median["gensim"]
    answered = sum(s[2] for s in figures["embedtune"]["sections"])
    print(f"medians of {args.repeat} ({answered:,} analogy questions answered): embedtune {e[0]:.1f} s wall "
          f"({e[1]:.1f} s CPU), gensim {g[0]:.1f} s wall ({g[1]:.1f} s CPU): embedtune takes "
          f"{e[0] / g[0]:.3f} of gensim's wall, {e[1] / g[1]:.3f} of its CPU (goal: <= 8 s wall, issue 26)")
    print(f"every figure equal (Pearson, Spearman, accuracy, each section): {figures['embedtune'] == figures['gensim']}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
