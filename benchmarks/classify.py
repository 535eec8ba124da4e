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

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "_data")
TRAIN, VALID, TEST = (os.path.join(DATA, f"wordnet-noun-glosses.{part}.txt") for part in ("train", "valid", "test"))
GLOVE = os.path.join(DATA, "glove.6B.50d.txt")
GLOVE_W2V = os.path.join(DATA, "glove.6B.50d.w2v.txt")   # the same rows with a "400000 50" header

# The grids (--tune): the same number of trials for both tools. fastText's defaults are lr 0.1 and 5
# epochs, embedtune's adam at 0.01, 5 epochs, 256 lines a step.
FASTTEXT_GRID = [{"lr": lr, "epoch": epoch} for epoch in (5, 25) for lr in (0.1, 0.25, 0.5, 1.0)]
EMBEDTUNE_GRID = [{"lr": lr, "epochs": epochs} for epochs in (5, 25) for lr in (0.003, 0.01, 0.03, 0.1)]
FASTTEXT_NG2_LRS = (0.1, 0.25, 0.5, 1.0)
EMBEDTUNE_NG2_LRS = (0.006, 0.012, 0.024, 0.048)

# What --tune chose on valid (benchmarks/README.md, classify, has every trial).
TUNED = {
    "fasttext": {"lr": 0.5, "epoch": 5},
    "fasttext-25": {"lr": 0.1, "epoch": 25},
    "embedtune": {"lr": 0.01, "epochs": 5},   # its defaults (batch 256 lines a step as well)
    "fasttext-ng2": {"lr": 0.5},
    "embedtune-ng2": {"lr": 0.024},
}

FASTTEXT = r"""
import json, sys, time
import fasttext
began = time.perf_counter()
model = fasttext.train_supervised(input=sys.argv[1], pretrainedVectors=sys.argv[3], dim=50, thread=2, verbose=0,
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
    out = subprocess.run([sys.executable, "-c", FASTTEXT, TRAIN, held, GLOVE_W2V, json.dumps(options)],
                         check=True, capture_output=True, text=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["wall_seconds"], figures["cpu_seconds"] = time.perf_counter() - began, children_cpu() - cpu
    return figures


def options_of(settings: dict) -> list[str]:
    return [x for key, value in settings.items() for x in (f"--{key.replace('_', '-')}", str(value))]


def run_embedtune(args: list[str], held: str, folder: str) -> dict:
    output = os.path.join(folder, "tuned.txt")
    summary = os.path.join(folder, "summary.json")
    began, cpu = time.perf_counter(), children_cpu()
    subprocess.run([sys.executable, "-m", "embedtune.cli.main", "train", GLOVE, TRAIN, "--objective", "classify",
                    "--valid", held, "-o", output, "--json", summary, "--threads", "2", "-q", *args],
                   check=True, capture_output=True, text=True)
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
    with open(GLOVE, "rb") as a, open(output, "rb") as b:
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
                    lambda lr=lr: run_embedtune(options_of({**chosen, "lr": lr}) + ["--word-ngrams", "2"], VALID,
                                                folder))
              for lr in EMBEDTUNE_NG2_LRS]
        print(f"embedtune with bigrams chose {best(ng)}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="choose each tool's settings on valid")
    parser.add_argument("--only-tool", choices=("fasttext", "embedtune"), help="--tune: one tool's trials")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated row names")
    args = parser.parse_args()
    if not os.path.exists(GLOVE_W2V):
        with open(GLOVE, "rb") as src, open(GLOVE_W2V + ".part", "wb") as dst:
            dst.write(b"400000 50\n")
            while block := src.read(1 << 24):
                dst.write(block)
        os.replace(GLOVE_W2V + ".part", GLOVE_W2V)
    print(f"load before: {os.getloadavg()}", flush=True)
    if args.tune:
        with tempfile.TemporaryDirectory() as folder:
            tune(args.only_tool, folder)
        print(f"load after: {os.getloadavg()}")
        return
    tuned = options_of(TUNED["embedtune"])
    ng2 = [*options_of({**TUNED["embedtune"], **TUNED["embedtune-ng2"]}), "--word-ngrams", "2"]
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
    parts = ("load_vectors", "count_and_import", "setup", "fit", "loop", "write", "other")
    shown = {name: runs for name, runs in results.items() if "seconds" in runs[0]}
    if shown:
        print(f"\n{'row':<24} " + " ".join(f"{p.replace('count_and_import', 'count+tf').replace('_vectors', ''):>8}"
                                         for p in parts))
        for name, runs in shown.items():
            print(f"{name:<24} " + " ".join(f"{statistics.median(r['seconds'][p] for r in runs):>8.2f}" for p in parts))


if __name__ == "__main__":
    main()
