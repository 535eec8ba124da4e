"""embedtune --objective classify against fastText's supervised mode: settings chosen on valid, figures on test.

Issue 12 item 4, issue 26 items 3 and 5. Data: WordNet noun glosses labelled by lexicographer file
(26 classes, split 80/10/10 into train, valid and test; `python data/make_glosses.py`), GloVe 6B 50d
(400k words; fastText reads it with a word2vec header: glove.6B.50d.w2v.txt, made here when missing).
fastText is PyPI's `fasttext-numpy2-wheel` (a maintained build of fastText 0.9.2; the `bench` extra),
`train_supervised(pretrainedVectors=..., dim=50, thread=2)`; embedtune runs with `--threads 2`.

Two stages, each tool run as its own process:

  --tune   each tool's settings chosen on valid, with the same budget: 8 trials each, its learning rate
           (4 values around its default) crossed with 5 or 25 epochs (the rest at each tool's
           defaults); then the bigram rows' learning rate alone (4 trials each) at the chosen epochs. Prints every trial and the best;
           the choices are TUNED below (with the figures they came from).
  (default) the rows on test, interleaved within a round, ROUNDS rounds, medians:
    fasttext-tuned         fastText at its valid-chosen lr and epochs
    embedtune-tuned        embedtune at its valid-chosen lr and epochs (its defaults: valid chose them)
    fasttext-25            fastText at 25 epochs and the lr valid chose for 25 epochs
    embedtune-25           embedtune at its defaults with --epochs 25 (issue 26's first comparison)
    embedtune-tuned-top10k   embedtune-tuned with --freeze-top 10000 (the frozen rows checked
                           bit-identical as written, and again here, byte for byte)
    fasttext-ng2           fastText with wordNgrams 2 at its valid-chosen bigram lr
    embedtune-ng2          embedtune with --word-ngrams 2 at its valid-chosen bigram lr
    embedtune-ng2-top10k   embedtune-ng2 with --freeze-top 10000
Wall time is the whole command for both (loading 400k vectors included); embedtune's also writes the
400k-row output, which fastText does not. Where embedtune's wall goes is printed from its summary's
"seconds" and "fit_seconds" ("other" is the wall less those: Python's start, imports, the report).

    python benchmarks/classify.py --tune [--only-tool fasttext|embedtune]
    python benchmarks/classify.py [--rounds 3] [--only ROW,ROW]
    python benchmarks/classify.py --splits 5 [--data glosses|fortunes] [--vectors glove50|sgns100] [--only ROW,ROW]
    python benchmarks/classify.py --splits 5 --split-part valid --only embedtune-form-context,embedtune-alacarte

Issue 40: ``--splits N`` pools the data's lines and cuts them N times afresh (seeded permutations 0..N-1,
80/10/10 as make_glosses.py cuts), each row run once on each split's test part (the tools taking turns), and
prints the accuracy's mean ± sd over the splits and the median wall ratio. ``--data fortunes`` is a second
task: the English fortune cookies (Debian's fortunes, fortunes-min) labelled by their file (art, computers,
food, law, love, ...: the files of FORTUNE_MIN_COOKIES+ cookies), tokenised as make_corpus.py does.
``--vectors sgns100`` is the second vector space (benchmarks/spaces.py); fastText reads it as written (its
word2vec header). ``--tune`` and the fixed split take --data and --vectors too. ``--split-part valid`` takes
each split's accuracy on its valid part (to choose a setting); the rows ``embedtune-form-context`` and
``embedtune-alacarte`` are embedtune-tuned with the new words started one way or the other (paired per split).
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spaces import SPACES, vectors_path  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)   # the checkout under test: its embedtune is the one each run imports
DATA = os.path.join(HERE, "_data")
TRAIN, VALID, TEST = (os.path.join(DATA, f"wordnet-noun-glosses.{part}.txt") for part in ("train", "valid", "test"))
GLOVE = os.path.join(DATA, "glove.6B.50d.txt")
GLOVE_W2V = os.path.join(DATA, "glove.6B.50d.w2v.txt")   # the same rows with a "400000 50" header
FORTUNES = "/usr/share/games/fortunes"
FORTUNE_MIN_COOKIES = 100
HELD_SHARE = 0.2   # valid and test together, as data/make_glosses.py
# What a run reads: the fixed split and GloVe unless main() sets others (--data, --vectors, --splits).
INPUTS = {"train": TRAIN, "vectors": GLOVE, "fasttext_vectors": GLOVE_W2V, "dim": 50}

# The grids (--tune): the same number of trials for both tools. fastText's defaults are lr 0.1 and 5
# epochs, embedtune's adagrad at 0.3, 5 epochs, 256 lines a step (adam at 0.01 until issue 40).
FASTTEXT_GRID = [{"lr": lr, "epoch": epoch} for epoch in (5, 25) for lr in (0.1, 0.25, 0.5, 1.0)]
EMBEDTUNE_GRID = [{"lr": lr, "epochs": epochs} for epochs in (5, 25) for lr in (0.1, 0.2, 0.3, 0.5)]
FASTTEXT_NG2_LRS = (0.1, 0.25, 0.5, 1.0)
EMBEDTUNE_NG2_LRS = (0.006, 0.012, 0.024, 0.048)   # adam's (the bigram rows were tuned with adam)

# What --tune chose on valid (benchmarks/README.md, classify, has every trial).
TUNED = {
    "fasttext": {"lr": 0.5, "epoch": 5},
    "fasttext-25": {"lr": 0.1, "epoch": 25},
    "embedtune": {"epochs": 5},   # its defaults: adagrad 0.3, 256 lines a step (issue 40)
    "fasttext-ng2": {"lr": 0.5},
    "embedtune-ng2": {"optimizer": "adam", "lr": 0.024},
}
# Issue 40: fastText chosen per task, on the validation parts of the 5 shuffled splits (its grid above;
# benchmarks/README.md, classify); on the glosses they keep lr 0.5 at 5 epochs and choose 0.25 at 25.
TUNED_FOR_DATA = {
    "glosses": {"fasttext-25": {"lr": 0.25, "epoch": 25}},
    "fortunes": {"fasttext": {"lr": 0.25, "epoch": 5}, "fasttext-25": {"lr": 0.25, "epoch": 25}},
}

FASTTEXT = r"""
import json, sys, time
import fasttext
began = time.perf_counter()
model = fasttext.train_supervised(input=sys.argv[1], pretrainedVectors=sys.argv[3], thread=2, verbose=0,
                                  **json.loads(sys.argv[4]))
trained = time.perf_counter() - began
n, p1, r1 = model.test(sys.argv[2])
print(json.dumps({"accuracy": p1, "lines": n, "train_seconds": trained}))
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of the children waited for so far: a run's is the difference."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_fasttext(options: dict, held: str) -> dict:
    began, cpu = time.perf_counter(), children_cpu()
    out = subprocess.run([sys.executable, "-c", FASTTEXT, INPUTS["train"], held, INPUTS["fasttext_vectors"],
                          json.dumps({"dim": INPUTS["dim"], **options})],
                         check=True, capture_output=True, text=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["wall_seconds"], figures["cpu_seconds"] = time.perf_counter() - began, children_cpu() - cpu
    return figures


def under_test() -> dict:
    """The environment of an embedtune run: this checkout's package first on the path. With ``python -P``
    the working directory is not put before it (``-m`` puts it first: run from another checkout, that
    checkout's embedtune was the one measured)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": ROOT + (os.pathsep + path if path else "")}


def options_of(settings: dict) -> list[str]:
    return [x for key, value in settings.items() for x in (f"--{key.replace('_', '-')}", str(value))]


def run_embedtune(args: list[str], held: str, folder: str) -> dict:
    output = os.path.join(folder, "tuned.txt")
    summary = os.path.join(folder, "summary.json")
    began, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-P", "-m", "embedtune.cli.main", "train", INPUTS["vectors"], INPUTS["train"],
                    "--objective", "classify",
                    "--valid", held, "-o", output, "--json", summary, "--threads", "2", "-q", *args],
                   check=True, capture_output=True, text=True, env=under_test())
    wall, cpu = time.perf_counter() - began, children_cpu() - cpu
    with open(summary) as f:
        s = json.load(f)
    v = s["valid"]
    parts = {**s["seconds"], "fit": s["fit_seconds"]}
    parts["other"] = wall - sum(parts[k] for k in ("load_vectors", "count_and_import", "setup", "loop", "write"))
    return {"accuracy": v["after"]["accuracy"], "before": v["before"]["accuracy"], "wall_seconds": wall,
            "cpu_seconds": cpu, "train_seconds": s["train_seconds"], "frozen_rows_checked": s["frozen_rows_checked"],
            "max_frozen_change": s["max_frozen_change"], "seconds": {k: round(x, 2) for k, x in parts.items()},
            "output": output}


def frozen_identical(output: str, n: int) -> bool:
    """The first n rows of ``output`` against GloVe's, byte for byte as text (the same writer format)."""
    with open(INPUTS["vectors"], "rb") as a, open(output, "rb") as b:
        return all(x == y for _, x, y in zip(range(n), a, b))


def best(trials: list[tuple[dict, dict]]) -> dict:
    """The settings of the trial with the highest valid accuracy (the first such, in grid order)."""
    return max(trials, key=lambda t: t[1]["accuracy"])[0]


def tune(only: str | None, folder: str) -> None:
    """Each grid on valid, then the bigram rows' lr at the chosen settings; prints every trial."""
    def trial(tool, settings, run):
        r = run()
        r.pop("output", None)
        print(f"{tool:<14} {json.dumps(settings):<52} valid {r['accuracy']:.4f}  wall {r['wall_seconds']:.1f} s",
              flush=True)
        return settings, r

    if only in (None, "fasttext"):
        ft = [trial("fasttext", s, lambda s=s: run_fasttext(s, VALID)) for s in FASTTEXT_GRID]
        chosen = best(ft)
        print(f"fastText chose {chosen}; at 25 epochs {best([t for t in ft if t[0]['epoch'] == 25])}", flush=True)
        ng = [trial("fasttext-ng2", {**chosen, "lr": lr}, lambda lr=lr: run_fasttext({**chosen, "lr": lr,
                                                                                     "wordNgrams": 2}, VALID))
              for lr in FASTTEXT_NG2_LRS]
        print(f"fastText with bigrams chose {best(ng)}", flush=True)
    if only in (None, "embedtune"):
        et = [trial("embedtune", s, lambda s=s: run_embedtune(options_of(s), VALID, folder)) for s in EMBEDTUNE_GRID]
        chosen = best(et)
        print(f"embedtune chose {chosen}", flush=True)
        ng = [trial("embedtune-ng2", {**chosen, "lr": lr},
                    lambda lr=lr: run_embedtune(options_of({**chosen, **TUNED["embedtune-ng2"], "lr": lr})
                                                + ["--word-ngrams", "2"], VALID,
                                                folder))
              for lr in EMBEDTUNE_NG2_LRS]
        print(f"embedtune with bigrams chose {best(ng)}", flush=True)


def pooled_lines(data: str) -> list[str]:
    """Every labelled line of ``data``: the gloss files' three parts, or the fortune cookies."""
    if data == "glosses":
        lines = []
        for path in (TRAIN, VALID, TEST):
            if not os.path.exists(path):
                sys.exit(f"{path} is missing: python data/make_glosses.py")
            with open(path, encoding="utf-8") as f:
                lines.extend(f)
        return lines
    from make_corpus import words

    if not os.path.exists(os.path.join(FORTUNES, "fortunes")):
        sys.exit(f"{FORTUNES} is missing: apt-get install fortunes fortunes-min")
    by_file = {}
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or name == "ascii-art" or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            cookies = [" ".join(words(c)) for c in f.read().split("\n%\n")]
        by_file[name] = [f"__label__{name} {c}\n" for c in cookies if c]
    return [line for cookies in by_file.values() if len(cookies) >= FORTUNE_MIN_COOKIES for line in cookies]


def write_split(lines: list[str], seed: int, folder: str) -> tuple[str, str, str]:
    """Split ``seed``: a seeded permutation cut 80/10/10 into train, valid and test files in ``folder``."""
    order = np.random.default_rng(seed).permutation(len(lines))
    n_held = int(round(len(lines) * HELD_SHARE))
    parts = (order[n_held:], order[:n_held // 2], order[n_held // 2:n_held])
    paths = tuple(os.path.join(folder, f"split{seed}.{name}.txt") for name in ("train", "valid", "test"))
    for path, rows in zip(paths, parts):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines[i] for i in rows)
    return paths


def fasttext_vectors(name: str) -> str:
    """The vectors as fastText reads them: with a word2vec header (GloVe's text has none)."""
    if name != "glove50":
        return vectors_path(name)
    if not os.path.exists(GLOVE_W2V):
        with open(GLOVE, "rb") as src, open(GLOVE_W2V + ".part", "wb") as dst:
            dst.write(b"400000 50\n")
            while block := src.read(1 << 24):
                dst.write(block)
        os.replace(GLOVE_W2V + ".part", GLOVE_W2V)
    return GLOVE_W2V


def vectors_dim(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        first = f.readline().split()
        if len(first) == 2:   # a word2vec header
            return int(first[1])
        return len(first) - 1


def shuffled_splits(rows: dict, data: str, n: int, folder: str, part: str = "test") -> None:
    """Each row on each of ``n`` fresh splits of the pooled data; mean ± sd of the accuracy on ``part``
    (test, or valid to choose a setting)."""
    lines = pooled_lines(data)
    labels = {line.split(" ", 1)[0] for line in lines}
    print(f"{data}: {len(lines):,} lines, {len(labels)} classes; {n} shuffled splits 80/10/10", flush=True)
    results = {name: [] for name in rows}
    for seed in range(n):
        INPUTS["train"], valid, test = write_split(lines, seed, folder)
        for name, run in rows.items():
            r = run(folder, valid if part == "valid" else test)
            r.pop("output", None)
            r["load"] = os.getloadavg()[0]
            results[name].append(r)
            print(name, f"split {seed}", json.dumps(r), flush=True)
    print(f"load after: {os.getloadavg()}")
    print(f"\n{part} accuracy over {n} shuffled splits, mean ± sd (min-max); wall median:")
    for name, runs in results.items():
        acc = [r["accuracy"] for r in runs]
        print(f"{name:<24} {statistics.mean(acc):.4f} ± {statistics.stdev(acc) if n > 1 else 0:.4f} "
              f"({min(acc):.4f}-{max(acc):.4f})  wall {statistics.median(r['wall_seconds'] for r in runs):.1f} s")
    for mine, theirs in (("embedtune-tuned", "fasttext-tuned"), ("embedtune-25", "fasttext-25"),
                         ("embedtune-ng2", "fasttext-ng2"), ("embedtune-alacarte", "embedtune-form-context")):
        if mine in results and theirs in results:
            diff = [a["accuracy"] - b["accuracy"] for a, b in zip(results[mine], results[theirs])]
            ratios = [a["wall_seconds"] / b["wall_seconds"] for a, b in zip(results[mine], results[theirs])]
            cpu = [a["cpu_seconds"] / b["cpu_seconds"] for a, b in zip(results[mine], results[theirs])]
            print(f"{mine} - {theirs}: accuracy {statistics.mean(diff):+.4f} ± "
                  f"{statistics.stdev(diff) if n > 1 else 0:.4f} (paired, per split); wall "
                  + ", ".join(f"{x:.2f}x" for x in ratios) + f"; median {statistics.median(ratios):.2f}x; "
                  f"CPU median {statistics.median(cpu):.2f}x")
    print_phases(results)


def print_phases(results: dict) -> None:
    """Where each embedtune row's wall went, medians over its runs (the summary's ``seconds``)."""
    parts = ("load_vectors", "count_and_import", "setup", "fit", "loop", "write", "other")
    shown = {name: runs for name, runs in results.items() if "seconds" in runs[0]}
    if shown:
        print(f"\n{'row':<24} " + " ".join(f"{p.replace('count_and_import', 'count+tf').replace('_vectors', ''):>8}"
                                         for p in parts) + f" {'cpu':>8}")
        for name, runs in shown.items():
            print(f"{name:<24} " + " ".join(f"{statistics.median(r['seconds'][p] for r in runs):>8.2f}" for p in parts)
                  + f" {statistics.median(r['cpu_seconds'] for r in runs):>8.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="choose each tool's settings on valid")
    parser.add_argument("--only-tool", choices=("fasttext", "embedtune"), help="--tune: one tool's trials")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated row names")
    parser.add_argument("--splits", type=int, help="N fresh shuffled splits of the pooled data (mean ± sd)")
    parser.add_argument("--data", choices=("glosses", "fortunes"), default="glosses")
    parser.add_argument("--vectors", choices=tuple(SPACES), default="glove50")
    parser.add_argument("--split-part", choices=("test", "valid"), default="test",
                        help="--splits: the part each split's accuracy is taken on (valid: to choose a setting)")
    args = parser.parse_args()
    if args.splits:   # where TUNED_FOR_DATA was chosen
        TUNED.update(TUNED_FOR_DATA.get(args.data, {}))
    INPUTS.update(vectors=vectors_path(args.vectors), fasttext_vectors=fasttext_vectors(args.vectors))
    INPUTS["dim"] = vectors_dim(INPUTS["vectors"])
    print(f"load before: {os.getloadavg()}; data {args.data}, vectors {args.vectors} ({INPUTS['dim']}d)", flush=True)
    split_folder = None
    if args.data != "glosses" and not args.splits:
        # --tune and the fixed rows on another task: its split 0 as the fixed split
        split_folder = tempfile.mkdtemp(prefix="classify-")
        INPUTS["train"], valid, test = write_split(pooled_lines(args.data), 0, split_folder)
        globals().update(VALID=valid, TEST=test)
    if args.tune:
        with tempfile.TemporaryDirectory() as folder:
            tune(args.only_tool, folder)
        print(f"load after: {os.getloadavg()}")
        return
    tuned = options_of(TUNED["embedtune"])
    ng2 = [*options_of({**TUNED["embedtune"], **TUNED["embedtune-ng2"]}), "--word-ngrams", "2"]
    if args.splits:
        held_rows = {
            "fasttext-tuned": lambda folder, held: run_fasttext(TUNED["fasttext"], held),
            "embedtune-tuned": lambda folder, held: run_embedtune(tuned, held, folder),
            "fasttext-25": lambda folder, held: run_fasttext(TUNED["fasttext-25"], held),
            "embedtune-25": lambda folder, held: run_embedtune(["--epochs", "25"], held, folder),
            # the new words' start classify took before it asked for the a la carte one (issue 40)
            "embedtune-form-context": lambda folder, held: run_embedtune([*tuned, "--init", "form-context"], held,
                                                                         folder),
            "embedtune-alacarte": lambda folder, held: run_embedtune([*tuned, "--init", "alacarte"], held, folder),
        }
        if args.only:
            held_rows = {k: v for k, v in held_rows.items() if k in args.only.split(",")}
        with tempfile.TemporaryDirectory() as folder:
            shuffled_splits(held_rows, args.data, args.splits, folder, args.split_part)
        return
    rows = {
        "fasttext-tuned": lambda folder: run_fasttext(TUNED["fasttext"], TEST),
        "embedtune-tuned": lambda folder: run_embedtune(tuned, TEST, folder),
        "fasttext-25": lambda folder: run_fasttext(TUNED["fasttext-25"], TEST),
        "embedtune-25": lambda folder: run_embedtune(["--epochs", "25"], TEST, folder),
        "embedtune-tuned-top10k": lambda folder: run_embedtune([*tuned, "--freeze-top", "10000"], TEST, folder),
        "fasttext-ng2": lambda folder: run_fasttext({**TUNED["fasttext"], **TUNED["fasttext-ng2"], "wordNgrams": 2},
                                                    TEST),
        "embedtune-ng2": lambda folder: run_embedtune(ng2, TEST, folder),
        "embedtune-ng2-top10k": lambda folder: run_embedtune([*ng2, "--freeze-top", "10000"], TEST, folder),
    }
    if args.only:
        rows = {k: v for k, v in rows.items() if k in args.only.split(",")}
    results = {name: [] for name in rows}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for name, run in rows.items():
                r = run(folder)
                if "top10k" in name:
                    r["first_10k_rows_identical"] = frozen_identical(r["output"], 10000)
                r.pop("output", None)
                r["load"] = os.getloadavg()[0]
                results[name].append(r)
                print(name, round_ + 1, json.dumps(r), flush=True)
    print(f"load after: {os.getloadavg()}")
    print(f"\nmedians of {args.rounds} rounds, test accuracy:")
    print(f"{'row':<24} {'accuracy':>9} {'before':>7} {'wall s':>7} {'cpu s':>7} {'train s':>8}")
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("accuracy", "wall_seconds", "cpu_seconds", "train_seconds")}
        before = f"{statistics.median(r['before'] for r in runs):.4f}" if "before" in runs[0] else ""
        print(f"{name:<24} {med['accuracy']:>9.4f} {before:>7} {med['wall_seconds']:>7.1f} {med['cpu_seconds']:>7.1f} "
              f"{med['train_seconds']:>8.1f}")
    # The wall ratio a round at a time (the two rows run one after the other), then its median.
    for mine, theirs in (("embedtune-tuned", "fasttext-tuned"), ("embedtune-25", "fasttext-25"),
                         ("embedtune-ng2", "fasttext-ng2")):
        if mine in results and theirs in results:
            for what in ("wall", "cpu"):
                ratios = [a[f"{what}_seconds"] / b[f"{what}_seconds"] for a, b in zip(results[mine], results[theirs])]
                print(f"{mine} / {theirs} {what}: " + ", ".join(f"{x:.2f}x" for x in ratios)
                      + f"; median {statistics.median(ratios):.2f}x")
    print_phases(results)


if __name__ == "__main__":
    main()
