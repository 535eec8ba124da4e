"""`embedtune train --workers 2` against one process: words/s, where the CPU goes, what a sync sends, the quality.

    python benchmarks/distribute_speed.py [--parts speed,quality,costs] [--repeat 3] [--objectives sgns,glove]
                                          [--sync-every 100[,400]] [--corpus large|small] [--words 0]

speed    2 workers of one thread each (--workers 2, the default averaging every --sync-every steps)
         against one process of one thread (--threads 1), taking turns for --repeat rounds: the GloVe 20k
         sample (data/sample) continued on benchmarks/_data/corpus-large.txt (5.1M tokens; --corpus small:
         corpus.txt, 1.5M; --words: only the first N, --max-words), one epoch, every pretrained word frozen
         but a random 10% (train_speed.py's setting); sgns (per-pair negatives, the compiled lock-free step)
         and glove (its defaults: adagrad, anchor, TensorFlow's step). Each run's words/s is the chief's
         training loop's (corpus words done over the loop's wall: from its first batch to its last sync;
         the set-up and the output's writing are not in it); the whole command's wall is printed beside.
         Every process runs through a profiling hook (``profiled``) that splits its training loop's CPU:
         the step, the batch thread, the syncs, the other threads; from that split, the ratio 2 free cores
         would give. Per sync: the bytes each worker sent (its payload, and measured: TCP bytes sent once,
         ``ss -ti`` polled every 0.2 s, all its connections over the run, divided by the syncs), the
         collective calls, the chief's ms (packing, the collectives with the wait, adding); and that the
         two workers' tables are the same bits (tests/debug_worker.py's hash of each worker's tables) and
         that no frozen row changed (read back from the output).
quality  a smaller recovery.py: 200 words of the GloVe 20k sample seen >= 30 times in
         benchmarks/_data/corpus-large.txt (5.1M tokens) are deleted, every other row frozen, and sgns
         (2 epochs, form-context start) gives them vectors again, on one process and on 2 workers at each
         --sync-every; R@10 (the true vector among the 10 nearest of the 20k rows by cosine), mean cosine
         and median rank; frozen rows and the workers' tables checked as in speed.
costs    the compiled sgns step's CPU per pair at dim 50 and 300 on 1 and 2 threads (lock-free, per-pair
         negatives, 4,096 pairs a batch, 10 a call, a 100k-row table), and the sync's cost against its bytes
         from the speed runs: the constants of docs/scale-out.md's model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "_data", "corpus.txt")
CORPUS_LARGE = os.path.join(HERE, "_data", "corpus-large.txt")
VECTORS = os.path.join(REPO, "data", "sample", "glove.6B.50d.20k.txt")
TRAINABLE_FRACTION = 0.10
GATHER_PIECE = 1 << 24   # embedtune.distribute.collectives.GATHER_PIECE


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def poll_sent(proc: subprocess.Popen, sent: dict, stop: threading.Event) -> None:
    """Largest bytes sent once (bytes_sent - bytes_retrans) seen on each TCP connection of ``proc``'s
    descendants, keyed (pid, local, peer)."""
    while not stop.is_set():
        pids = descendants(proc.pid)
        out = subprocess.run(["ss", "-tinpHO"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            owner = re.search(r"pid=(\d+)", line)
            bytes_sent = re.search(r"bytes_sent:(\d+)", line)
            if owner and bytes_sent and int(owner.group(1)) in pids:
                fields = line.split()
                key = (int(owner.group(1)), fields[3], fields[4])
                retrans = re.search(r"bytes_retrans:(\d+)", line)
                once = int(bytes_sent.group(1)) - (int(retrans.group(1)) if retrans else 0)
                sent[key] = max(sent.get(key, 0), once)
        stop.wait(0.2)


CPU_PARTS = ("loop", "step", "batch_thread", "sync", "other")
PROFILE = "DISTRIBUTE_SPEED_PROFILE"   # a folder: each process of a run writes where its CPU went there


def profiled(argv: list[str]) -> None:
    """`embedtune` (``argv``) with the CPU of the training loop split by what spent it, written at exit
    to $DISTRIBUTE_SPEED_PROFILE/<launcher or worker index>.json: the step (the thread that calls it:
    the compiled step's own work on one thread), the batch thread (pairs, negatives, the share's ids),
    the syncs (the caller's thread: finding, packing, adding the changes, waiting in the collectives'
    calls) and the rest (every other thread: TensorFlow's runtime, gRPC). The workers are
    tests/debug_worker.py's (each writes a hash of its tables) run through this same hook."""
    import atexit

    sys.path.insert(0, os.path.join(REPO, "tests"))
    import debug_worker
    from embedtune import distribute
    from embedtune.distribute import averaging
    from embedtune.training import batches, loop, step

    cpu: dict[str, float] = {}

    def add(key: str, seconds: float) -> None:
        cpu[key] = cpu.get(key, 0.0) + seconds

    made = batches.prefetch

    threads: dict[int, float] = {}   # each batch thread's CPU, as last seen on it

    def prefetch(items, depth=batches.PREFETCH):
        def counted():
            for item in items:
                threads[threading.get_ident()] = time.thread_time()
                yield item
            threads[threading.get_ident()] = time.thread_time()
        return made(counted(), depth)

    def timed(cls, name, key):
        inner = getattr(cls, name)

        def wrapper(self, *a, **k):
            began = time.thread_time()
            try:
                return inner(self, *a, **k)
            finally:
                add(key, time.thread_time() - began)
        setattr(cls, name, wrapper)

    timed(step.CompiledStep, "run", "step")
    timed(step.TensorFlowStep, "run", "step")
    timed(averaging.Averaging, "sync", "sync")
    epochs = loop.run_epochs

    def run_epochs(*a, **k):
        began = time.process_time()
        try:
            return epochs(*a, **k)
        finally:
            add("loop", time.process_time() - began)

    loop.prefetch, loop.run_epochs = prefetch, run_epochs
    distribute.strategy_from_env = debug_worker.strategy_from_env
    distribute.worker_command = lambda args: [sys.executable, os.path.abspath(__file__), "--profiled", *args]

    def write():
        if "loop" not in cpu or not os.environ.get(PROFILE):
            return
        cpu.setdefault("sync", 0.0)
        cpu["batch_thread"] = sum(threads.values())
        cpu["other"] = cpu["loop"] - sum(cpu.get(k, 0.0) for k in ("step", "batch_thread", "sync"))
        task = json.loads(os.environ["TF_CONFIG"])["task"]["index"] if "TF_CONFIG" in os.environ else "one"
        with open(os.path.join(os.environ[PROFILE], f"{task}.json"), "w") as f:
            json.dump(cpu, f)

    atexit.register(write)
    sys.argv = [sys.argv[0], *argv]
    from embedtune.cli.main import main as command

    command()


def run(workers: int, args: list[str], workdir: str, name: str) -> dict:
    """One `embedtune train` through ``profiled`` (2 workers: tests/debug_worker.py's, each hashing its
    tables): its summary, wall, the CPU split of each process, and the workers' hashes and bytes sent."""
    summary, out = os.path.join(workdir, f"{name}.json"), os.path.join(workdir, f"{name}.txt")
    profile = os.path.join(workdir, f"{name}-profile")
    os.makedirs(profile, exist_ok=True)
    env = dict(os.environ, **{PROFILE: profile})
    command = [sys.executable, os.path.abspath(__file__), "--profiled", "train", *args]
    if workers > 1:
        hashes = os.path.join(workdir, f"{name}-hashes")
        os.makedirs(hashes, exist_ok=True)
        env["EMBEDTUNE_DEBUG_TABLE_HASH"] = hashes
        command += ["--workers", str(workers)]
    else:
        command += ["--threads", "1"]
    command += ["--json", summary, "-q", "-o", out]
    sent: dict = {}
    stop = threading.Event()
    began = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    poller = threading.Thread(target=poll_sent, args=(proc, sent, stop), daemon=True)
    if workers > 1:
        poller.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - began
    stop.set()
    if proc.returncode:
        sys.exit(f"distribute_speed: {' '.join(command)} failed:\n{err[-3000:]}")
    if poller.is_alive():
        poller.join()
    with open(summary) as f:
        s = json.load(f)
    s["output"], s["load"], s["wall"] = out, os.getloadavg()[0], wall
    s["cpu"] = [json.load(open(os.path.join(profile, name))) for name in sorted(os.listdir(profile))]
    if workers > 1:
        reports = [json.load(open(os.path.join(hashes, f"worker-{k}.json"))) for k in range(workers)]
        s["tables_identical"] = len({r["sha256"] for r in reports}) == 1
        by_pid: dict[int, int] = {}
        for key, n in sent.items():
            by_pid[key[0]] = by_pid.get(key[0], 0) + n
        s["measured_sent"] = sorted(by_pid.values())
    return s


def ceiling_pair(args: list[str], workdir: str, name: str) -> list[dict]:
    """Two whole one-process runs at once, each on every word: the words/s the machine gives two copies of
    the single process's step, the most a split of the corpus over 2 workers could make of it."""
    results: list = [None, None]

    def one(i: int) -> None:
        results[i] = run(1, args, workdir, f"{name}-{i}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def frozen_identical(vectors: str, output: str, trainable: set[str]) -> bool:
    """Every pretrained row not in ``trainable`` is written as it was read, byte for byte."""
    given = {line.split(" ", 1)[0]: line for line in open(vectors, encoding="utf-8")}
    for line in open(output, encoding="utf-8"):
        word = line.split(" ", 1)[0]
        if word in given and word not in trainable and line != given[word]:
            return False
    return True


def speed(opts, workdir: str) -> list[dict]:
    words = [line.split(" ", 1)[0] for line in open(VECTORS, encoding="utf-8")]
    rng = np.random.default_rng(1)
    trainable = {words[i] for i in rng.choice(len(words), int(TRAINABLE_FRACTION * len(words)), replace=False)}
    train_list = os.path.join(workdir, "train-list.txt")
    with open(train_list, "w", encoding="utf-8") as f:
        f.write("".join(w + "\n" for w in sorted(trainable)))
    rows = []
    for objective in opts.objectives:
        corpus = CORPUS_LARGE if opts.corpus == "large" else CORPUS
        args = [VECTORS, corpus, "--objective", objective, "--train-list", train_list, "--epochs", "1",
                "--sync-every", str(opts.sync_every[0])] + (["--max-words", str(opts.words)] if opts.words else [])
        one, two, pairs = [], [], []
        for r in range(opts.repeat):
            for workers, runs in ((1, one), (2, two)):
                s = run(workers, args, workdir, f"{objective}-{workers}-{r}")
                runs.append(s)
                line = f"{objective}, round {r + 1}, {workers} worker{'s' if workers > 1 else ''}: " \
                       f"{s['words_per_second']:,} words/s, {s['train_seconds']:.1f} s training, {s['steps']} steps, " \
                       f"{s['wall']:.1f} s the whole command"
                if workers > 1:
                    syncs = max(s["syncs"], 1)
                    line += (f", {s['syncs']} syncs: {s['sync_bytes_sent'] / syncs:,.0f} bytes sent a sync "
                             f"(measured over all connections: {statistics.median(s['measured_sent']) / syncs:,.0f}), "
                             f"{s['sync_seconds'] / syncs * 1000:.1f} ms a sync on the chief (pack "
                             f"{s['sync_pack_seconds'] / syncs * 1000:.1f}, gather {s['sync_gather_seconds'] / syncs * 1000:.1f}"
                             f", combine {s['sync_combine_seconds'] / syncs * 1000:.1f}); tables identical "
                             f"{s['tables_identical']}")
                line += f"; frozen rows identical {frozen_identical(VECTORS, s['output'], trainable)}; CPU s " + \
                    " | ".join(", ".join(f"{k} {p.get(k, 0):.2f}" for k in CPU_PARTS) for p in s["cpu"])
                print(line + f"  (load {s['load']:.1f})", flush=True)
            if opts.ceiling:
                pair = ceiling_pair(args, workdir, f"{objective}-pair-{r}")
                pairs.append(sum(p["words_per_second"] for p in pair) / one[-1]["words_per_second"])
                print(f"{objective}, round {r + 1}, two independent 1-thread processes at once: "
                      f"{', '.join(format(p['words_per_second'], ',') for p in pair)} words/s, together "
                      f"{pairs[-1]:.2f}x the one process alone  (load {os.getloadavg()[0]:.1f})", flush=True)
        if pairs:
            print(f"{objective}: ceiling of any 2-process split of this step on this machine: median "
                  f"{statistics.median(pairs):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in pairs)})", flush=True)
        ratios = [b["words_per_second"] / a["words_per_second"] for a, b in zip(one, two)]
        walls = [a["wall"] / b["wall"] for a, b in zip(one, two)]
        # Words per CPU second (every thread of the process; the chief's own share, its syncs included): on
        # a busy machine two processes get more of it than one, so wall ratios run high; this one does not.
        cpu_one = statistics.median(s["words_done"] / s["train_cpu_seconds"] for s in one)
        cpu_two = statistics.median(s["words_done"] / 2 / s["train_cpu_seconds"] for s in two)
        per_sync = [b["sync_bytes_sent"] / max(b["syncs"], 1) for b in two]
        # On 2 free cores: one process's step runs on one core, its batch thread and the runtime's threads on
        # the other; each worker's whole loop CPU on a core of its own, the slower worker setting the pace.
        free = [max(a["cpu"][0]["step"], a["cpu"][0]["loop"] - a["cpu"][0]["step"]) / max(p["loop"] for p in b["cpu"])
                for a, b in zip(one, two)]
        row = {"objective": objective, "one": statistics.median(s["words_per_second"] for s in one),
               "two": statistics.median(s["words_per_second"] for s in two), "ratio": statistics.median(ratios),
               "bytes_per_sync": statistics.median(per_sync),
               "calls_per_sync": 1 + -(-int(statistics.median(per_sync)) // GATHER_PIECE),
               "sync_ms": statistics.median(b["sync_seconds"] / max(b["syncs"], 1) * 1000 for b in two),
               "loss_one": statistics.median(s["loss_last"] for s in one),
               "loss_two": statistics.median(s["loss_last"] for s in two), "cpu_one": cpu_one, "cpu_two": cpu_two,
               "wall_one": statistics.median(s["wall"] for s in one), "wall_two": statistics.median(s["wall"] for s in two),
               "wall_ratio": statistics.median(walls), "free_ratio": statistics.median(free),
               "split_one": {k: statistics.median(a["cpu"][0].get(k, 0) for a in one) for k in CPU_PARTS},
               "split_two": {k: statistics.median(p.get(k, 0) for b in two for p in b["cpu"]) for k in CPU_PARTS}}
        print(f"{objective}: median words/s 1 process {row['one']:,.0f}, 2 workers {row['two']:,.0f}; median ratio "
              f"{row['ratio']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in ratios)}); a sync: "
              f"{row['bytes_per_sync']:,.0f} bytes sent by a worker in {row['calls_per_sync']} collective calls, "
              f"{row['sync_ms']:.1f} ms; last loss {row['loss_one']:.4f} / {row['loss_two']:.4f}; words per CPU second "
              f"{cpu_one:,.0f} (1 process) and {cpu_two:,.0f} (a worker's share), so 2 x {cpu_two / cpu_one:.2f} = "
              f"{2 * cpu_two / cpu_one:.2f} on 2 free cores; the whole command: {row['wall_one']:.1f} s (1 process) and "
              f"{row['wall_two']:.1f} s (2 workers), median ratio {row['wall_ratio']:.2f}; the training loop's CPU s, "
              f"1 process: {', '.join(f'{k} {v:.2f}' for k, v in row['split_one'].items())}; a worker: "
              f"{', '.join(f'{k} {v:.2f}' for k, v in row['split_two'].items())}; so on 2 free cores (a process's step "
              f"on a core, the rest of it beside; a worker's whole loop on a core) {row['free_ratio']:.2f} (median of the "
              f"rounds: {', '.join(f'{x:.2f}' for x in free)})\n", flush=True)
        rows.append(row)
    return rows


def unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def quality(opts, workdir: str) -> None:
    from embedtune.corpus import Corpus

    lines = open(VECTORS, encoding="utf-8").read().splitlines()
    words = [line.split(" ", 1)[0] for line in lines]
    truth = np.array([[float(x) for x in line.split()[1:]] for line in lines], np.float32)
    counts = Corpus(CORPUS_LARGE, lowercase=True).count()[0]
    candidates = [i for i, w in enumerate(words[100:], 100) if w.isalpha() and counts.get(w, 0) >= 30]
    chosen = sorted(np.random.default_rng(0).choice(candidates, 200, replace=False).tolist())
    gone = set(chosen)
    deleted = os.path.join(workdir, "deleted.txt")
    with open(deleted, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for i, line in enumerate(lines) if i not in gone))
    args = [deleted, CORPUS_LARGE, "--objective", "sgns", "--epochs", str(opts.quality_epochs), "--freeze-pretrained"]
    unit_truth = unit(truth)
    # (workers, K): one process, then 2 workers at each --sync-every given
    settings = [(1, 0)] + [(2, k) for k in opts.sync_every]
    results: dict[tuple, list] = {setting: [] for setting in settings}
    for r in range(opts.quality_repeat):
        for workers, k in settings:
            s = run(workers, args + (["--sync-every", str(k)] if workers > 1 else []), workdir,
                    f"quality-{workers}-{k}-{r}")
            found = {}
            for line in open(s["output"], encoding="utf-8"):
                word, rest = line.split(" ", 1)
                if word in counts:
                    found[word] = rest
            vecs = np.array([[float(x) for x in found[words[i]].split()] for i in chosen], np.float32)
            sims = unit_truth @ unit(vecs).T   # [20k, 200]
            own = sims[chosen, np.arange(len(chosen))]
            ranks = (sims > own).sum(axis=0) + 1
            figures = {"r10": float(np.mean(ranks <= 10)), "cos": float(np.mean(own)), "rank": float(np.median(ranks)),
                       "frozen": frozen_identical(deleted, s["output"], set()), "wps": s["words_per_second"],
                       "identical": s.get("tables_identical")}
            results[workers, k].append(figures)
            print(f"quality, round {r + 1}, {workers} worker{'s' if workers > 1 else ''}"
                  f"{f', K {k}' if workers > 1 else ''}: R@10 {figures['r10']:.3f}, "
                  f"mean cosine {figures['cos']:.3f}, median rank {figures['rank']:.0f}, {figures['wps']:,} words/s; "
                  f"frozen rows identical {figures['frozen']}"
                  + (f", tables identical {figures['identical']}" if workers > 1 else "") + f"  (load {s['load']:.1f})",
                  flush=True)
    for workers, k in settings:
        rs = results[workers, k]
        print(f"quality, {workers} worker{'s' if workers > 1 else ''}{f', K {k}' if workers > 1 else ''}: median R@10 "
              f"{statistics.median(x['r10'] for x in rs):.3f}, mean cosine {statistics.median(x['cos'] for x in rs):.3f}, "
              f"median rank {statistics.median(x['rank'] for x in rs):.0f}")
    print()


def costs(rows: list[dict], kernel_part: bool = True) -> None:
    """The compiled step's CPU per pair (lock-free sgns), by dim and threads; a sync's CPU per byte."""
    from embedtune.kernels.sgns import SgnsKernel, seed_mix
    from embedtune.objectives.sgns import unigram_table

    rng = np.random.default_rng(0)
    n_rows, batch, negative, calls = 100_000, 4096, 5, 10
    for dim in (50, 300) if kernel_part else ():
        words = (rng.random((n_rows + 1, dim), np.float32) - 0.5) / dim
        side = np.zeros((n_rows + 1, dim), np.float32)
        ranks = np.arange(1, n_rows + 1)
        p = 1 / ranks / np.sum(1 / ranks)   # Zipf ids, as a corpus gives them
        # The kernel draws each batch's negatives from the unigram table by the batch's seed.
        table = unigram_table(np.round(1e9 * p).astype(np.int64))
        batches = [{"center": rng.choice(n_rows, batch, p=p).astype(np.int32),
                    "context": rng.choice(n_rows, batch, p=p).astype(np.int32), "seed": seed_mix(number),
                    "weight": np.ones(batch, np.float32)} for number in range(10)]
        for threads in (1, 2):
            kernel = SgnsKernel(words, side, words, np.zeros(1, np.int64), n_rows, batch, negative, False, threads,
                                lockfree=True, table=table)
            kernel.run(batches, [0.025] * 10)
            cpu, wall = [], []
            for _ in range(5):
                began, began_wall = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    kernel.run(batches, [0.025] * 10)
                cpu.append((time.process_time() - began) / (calls * 10 * batch) * 1e9)
                wall.append((time.perf_counter() - began_wall) / (calls * 10 * batch) * 1e9)
            print(f"compiled sgns step, dim {dim}, {threads} thread{'s' if threads > 1 else ''}: "
                  f"{statistics.median(cpu):.0f} CPU ns a pair, {statistics.median(wall):.0f} wall ns a pair  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    # A sync's own CPU (find the changed rows, pack them, add up N workers' changes, write them back), in
    # one process with N simulated workers: the c of a + c * bytes without the network.
    from types import SimpleNamespace

    from embedtune.distribute.averaging import HEADER, Averaging, Tables

    for dim, n_rows, changed in ((50, 60_000, 30_000), (300, 60_000, 30_000)):
        for n in (2, 8):
            tables, syncs = [], []
            for _ in range(n):
                kernel = SimpleNamespace(words=rng.standard_normal((n_rows, dim)).astype(np.float32),
                                         side=np.zeros((n_rows, dim), np.float32), word_state={}, side_state={})
                kernel.words[:] = tables[0][1].words if tables else kernel.words
                t = Tables(SimpleNamespace(compiled=True, kernel=kernel), None)
                a = Averaging(t, None)
                a.snapshot()
                tables.append((t, kernel))
                syncs.append(a)
            warm = syncs[0].payload(np.zeros(HEADER, np.int64), tables[0][0].read())   # numba's first calls
            syncs[0].combine([warm], tables[0][0].read())
            for _, kernel in tables:
                kernel.words[rng.choice(n_rows, changed, replace=False)] += 0.01
                kernel.side[rng.choice(n_rows, changed, replace=False)] += 0.01
            began = time.process_time()
            payloads = [a.payload(np.zeros(HEADER, np.int64), t.read()) for a, (t, _) in zip(syncs, tables)]
            packed = time.process_time() - began
            began = time.process_time()
            syncs[0].combine(payloads, tables[0][0].read())
            combined = time.process_time() - began
            size = payloads[0].nbytes
            print(f"sync CPU, dim {dim}, {n} workers, {2 * changed:,} rows changed of {2 * n_rows:,} ({size:,} bytes a "
                  f"worker): pack {packed / n * 1000:.0f} ms, combine {combined * 1000:.0f} ms = "
                  f"{(packed / n + combined) / (size * n) * 1e9:.2f} CPU ns a byte received", flush=True)
    for row in rows:
        print(f"{row['objective']} sync: {row['sync_ms']:.1f} ms for {row['bytes_per_sync']:,.0f} bytes "
              f"({row['bytes_per_sync'] / max(row['sync_ms'], 1e-9) / 1e3:,.1f} MB/s on loopback, the other worker's "
              "wait included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="speed,quality,costs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--objectives", type=lambda s: s.split(","), default=["sgns", "glove"])
    parser.add_argument("--sync-every", type=lambda v: [int(k) for k in v.split(",")], default=[100],
                        help="K (speed: the first; quality: each)")
    parser.add_argument("--corpus", choices=("large", "small"), default="large",
                        help="speed: corpus-large.txt (5.1M tokens) or corpus.txt (1.5M)")
    parser.add_argument("--quality-repeat", type=int, default=1, help="quality rounds (the runs are deterministic)")
    parser.add_argument("--words", type=int, default=0, help="corpus words trained in the speed part (0: all)")
    parser.add_argument("--quality-epochs", type=int, default=2)
    parser.add_argument("--ceiling", action="store_true",
                        help="speed: also two one-process runs at once each round (the machine's own ceiling)")
    opts = parser.parse_args()
    for path in (CORPUS, CORPUS_LARGE):
        if not os.path.exists(path):
            sys.exit(f"distribute_speed: {path} not found; run: python benchmarks/make_corpus.py [--large]")
    workdir = tempfile.mkdtemp(prefix="embedtune-dist-")
    print(f"distribute_speed: {os.cpu_count()} cores; --sync-every {','.join(map(str, opts.sync_every))}; "
          f"{opts.repeat} rounds; speed on corpus-{opts.corpus}; "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows = speed(opts, workdir) if "speed" in opts.parts else []
    if "quality" in opts.parts:
        quality(opts, workdir)
    if "costs" in opts.parts or "synccost" in opts.parts:
        costs(rows, "costs" in opts.parts)
    print(f"load average now: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--profiled"]:
        profiled(sys.argv[2:])
    else:
        main()
