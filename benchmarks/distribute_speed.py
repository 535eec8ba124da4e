"""Words/s of `embedtune train` on 1 and on 2 local workers, and the bytes each worker sends per step.

    python benchmarks/distribute_speed.py [--words 300000] [--repeat 3] [--batch-size 4096] [--parts speed,costs]

Both run one TensorFlow thread a worker (one core each) and continue the GloVe 20k sample (data/sample) with sgns on benchmarks/_data/corpus.txt (the first
``--words`` corpus words, --max-words), every pretrained word frozen but a random 10% (as train_speed.py
does), per-pair negatives, --deterministic off. The runs take turns for ``--repeat`` rounds; each round's
2-worker / 1-worker ratio of words/s (the chief's training-loop figure) and of wall time is printed, with
medians. Bytes per step: computed from the shapes of what each step all-gathers, and measured as the
TCP bytes_sent less bytes_retrans of the workers' sockets (``ss -ti``, polled every 0.2 s while the run
lasts), divided by the steps. The machine's load average is printed with each run: these are wall-clock figures.

costs: CPU ms of one step's two halves on one thread, for the projections in docs/scale-out.md: the
gradients of a batch (what a worker's share shrinks with more workers) and the merge-and-apply of the
slices (what every worker repeats for the whole global batch), at dim 50 and 300, batch 4,096, a
20,000-row table, all rows trainable, sgd, per-pair negatives (train_speed.py's fixed Zipf batch).
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
VECTORS = os.path.join(REPO, "data", "sample", "glove.6B.50d.20k.txt")
DIM, NEGATIVE = 50, 5
TRAINABLE_FRACTION = 0.10


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


def poll_sent(proc: subprocess.Popen, sent: dict, retransmitted: dict, stop: threading.Event) -> None:
    """Largest bytes sent once (bytes_sent - bytes_retrans) and retransmitted seen on each TCP connection
    of ``proc``'s descendants, keyed (pid, local, peer)."""
    while not stop.is_set():
        pids = descendants(proc.pid)
        # -O: one line a connection: its addresses, users:(("python",pid=N,...)) and its tcp_info.
        out = subprocess.run(["ss", "-tinpHO"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            owner = re.search(r"pid=(\d+)", line)
            bytes_sent = re.search(r"bytes_sent:(\d+)", line)
            if owner and bytes_sent and int(owner.group(1)) in pids:
                # State, Recv-Q, Send-Q, local, peer. (Keyed by Send-Q before, by mistake, one connection
                # was counted again under each queue length seen: the "excess" over the computed bytes.)
                fields = line.split()
                key = (int(owner.group(1)), fields[3], fields[4])
                # bytes_sent counts retransmitted bytes again; loopback drops packets on a busy machine.
                retrans = re.search(r"bytes_retrans:(\d+)", line)
                once = int(bytes_sent.group(1)) - (int(retrans.group(1)) if retrans else 0)
                sent[key] = max(sent.get(key, 0), once)
                retransmitted[key] = max(retransmitted.get(key, 0), int(retrans.group(1)) if retrans else 0)
        stop.wait(0.2)


def run(workers: int, args: list[str], workdir: str) -> dict:
    summary = os.path.join(workdir, f"summary-{workers}.json")
    command = [sys.executable, "-m", "embedtune.cli.main", "train", *args, "--json", summary, "-q",
               "-o", os.path.join(workdir, f"out-{workers}.txt")]
    # One core each: one process on one TensorFlow thread, against 2 workers on 1 thread each.
    command += ["--workers", str(workers)] if workers > 1 else ["--threads", "1"]
    sent: dict = {}
    retransmitted: dict = {}
    stop = threading.Event()
    began = time.perf_counter()
    proc = subprocess.Popen(command)
    poller = threading.Thread(target=poll_sent, args=(proc, sent, retransmitted, stop))
    if workers > 1:
        poller.start()
    if proc.wait():
        sys.exit(f"distribute_speed: {' '.join(command)} failed")
    stop.set()
    if poller.is_alive():
        poller.join()
    wall = time.perf_counter() - began
    with open(summary) as f:
        s = json.load(f)
    by_pid: dict[int, list[int]] = {}
    for key, n in sent.items():
        by_pid.setdefault(key[0], [0, 0])
        by_pid[key[0]][0] += n
        by_pid[key[0]][1] += retransmitted.get(key, 0)
    return {"words_per_second": s["words_per_second"], "wall": wall, "steps": s["steps"],
            "sent_per_worker": sorted(n for n, _ in by_pid.values()),
            "retransmitted_per_worker": sorted(r for _, r in by_pid.values()), "load": os.getloadavg()[0],
            # the collectives' connection: the rest is the coordination service's heartbeats and set-up
            "busiest_per_worker": sorted(max(n for key, n in sent.items() if key[0] == pid) for pid in by_pid)}


def computed_bytes(batch: int, workers: int) -> int:
    """What one worker sends per step in a ring all-gather of its slice (sgns, per-pair negatives):
    the loss (4 bytes), its share's position and pairs (5 int64), B/N center ids (int32) and gradients
    (float32 x dim), B/N x (1 + negative) context ids and gradients. With N workers a ring passes each
    worker N - 1 slices on."""
    part = batch // workers
    rows = part * (1 + (1 + NEGATIVE))
    return (workers - 1) * (4 + 40 + rows * (4 + 4 * DIM))


def step_costs(steps: int = 30) -> None:
    """Median CPU ms of trainer.gradients and of the whole trainer.step, on one thread."""
    import train_speed
    from embedtune._tf import tf
    from embedtune.training.host import use_threads
    from embedtune.training.step import TensorFlowStep

    use_threads(1)
    for dim in (50, 300):
        train_speed.STEP_DIM, train_speed.STEP_TRAINABLE = dim, 20_000
        trainer = train_speed.make_step_trainer(20_000, "sgd")
        # a worker's step: gradients, then the scatters (distribute.strategy.GatheredStep)
        trainer.step = TensorFlowStep(trainer, fused=False, grouped=False, distinct=False)
        data = train_speed.fixed_batch(trainer)
        lr = tf.constant(0.025, tf.float32)
        for _ in range(5):
            float(trainer.step.gradients(data)[0])
            float(trainer.step.step(data, lr))
        grads, whole = [], []
        for _ in range(5):
            began = time.process_time()
            for _ in range(steps):
                out = trainer.step.gradients(data)
            float(out[0])
            grads.append((time.process_time() - began) / steps * 1000)
            began = time.process_time()
            for _ in range(steps):
                loss = trainer.step.step(data, lr)
            float(loss)
            whole.append((time.process_time() - began) / steps * 1000)
        g, w = statistics.median(grads), statistics.median(whole)
        print(f"dim {dim}, batch {trainer.config.train.batch_size}: gradients {g:.1f} CPU ms, whole step {w:.1f}, "
              f"so merge-and-apply {w - g:.1f} ({(w - g) / w:.0%} of the step)  (load {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=300_000, help="corpus words trained (--max-words)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--parts", default="speed,costs")
    opts = parser.parse_args()
    if "costs" in opts.parts:
        step_costs()
    if "speed" not in opts.parts:
        return
    if not os.path.exists(CORPUS):
        sys.exit(f"distribute_speed: {CORPUS} not found; run: python benchmarks/make_corpus.py")
    workdir = tempfile.mkdtemp(prefix="embedtune-dist-")
    words = [line.split(" ", 1)[0] for line in open(VECTORS, encoding="utf-8")]
    rng = np.random.default_rng(1)
    trainable = rng.choice(len(words), int(TRAINABLE_FRACTION * len(words)), replace=False)
    train_list = os.path.join(workdir, "train-list.txt")
    with open(train_list, "w", encoding="utf-8") as f:
        f.write("".join(words[i] + "\n" for i in sorted(trainable)))
    args = [VECTORS, CORPUS, "--objective", "sgns", "--train-list", train_list, "--epochs", "1",
            "--max-words", str(opts.words), "--batch-size", str(opts.batch_size)]
    print(f"distribute_speed: {os.cpu_count()} cores; {opts.words:,} words of {CORPUS}, GloVe 20k sample, "
          f"batch {opts.batch_size}; {opts.repeat} rounds")
    results: dict[int, list[dict]] = {1: [], 2: []}
    for round_ in range(opts.repeat):
        for workers in (1, 2):
            r = run(workers, args, workdir)
            results[workers].append(r)
            sent = ", ".join(f"{n / r['steps']:,.0f}" for n in r["sent_per_worker"]) + " (busiest connection: " + \
                ", ".join(f"{n / r['steps']:,.0f}" for n in r["busiest_per_worker"]) + ")"
            print(f"round {round_ + 1}, {workers} worker{'s' if workers > 1 else ''}: {r['words_per_second']:,} words/s, "
                  f"{r['wall']:.1f} s wall, {r['steps']} steps" + (f", bytes sent per step by each worker: {sent}"
                                                                  if workers > 1 else "")
                  + f"  (load {r['load']:.1f})")
    one, two = results[1], results[2]
    ratios = [b["words_per_second"] / a["words_per_second"] for a, b in zip(one, two)]
    print(f"\nmedian words/s: 1 worker {statistics.median(r['words_per_second'] for r in one):,.0f}, "
          f"2 workers {statistics.median(r['words_per_second'] for r in two):,.0f}; "
          f"median ratio 2/1 {statistics.median(ratios):.2f}")
    print(f"median wall s: 1 worker {statistics.median(r['wall'] for r in one):.1f}, "
          f"2 workers {statistics.median(r['wall'] for r in two):.1f}")
    measured = [n / r["steps"] for r in two for n in r["sent_per_worker"]]
    busiest = [n / r["steps"] for r in two for n in r["busiest_per_worker"]]
    print(f"bytes sent per step by a worker: computed {computed_bytes(opts.batch_size, 2):,}, "
          f"measured median {statistics.median(measured):,.0f} (TCP bytes sent once, all connections, with start-up), "
          f"{statistics.median(busiest):,.0f} on its busiest connection (the collectives')")
    print(f"load average now: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
