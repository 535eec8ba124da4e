"""Where the CPU of an sgns run goes, per (center, context) pair: the host side and each part of the step.

    python benchmarks/step_profile.py [--tokens 400000] [--threads 1] [--negatives per-pair,shared]

The case of train_speed.py's speed part (GloVe 6B 50d, a random 10% of its words trainable, new corpus
words with min_count 5, window 5, negative 5, sample 1e-3, batch 4,096, sgd) on the first ``--tokens``
tokens of benchmarks/_data/corpus.txt. Each part is timed alone over the same batches, in CPU time of
the whole process (``time.process_time``: every thread), median of ``--repeat`` rounds that take turns:

host     read+encode (corpus -> ids), pairs (subsampling, windows, shuffle), batches (fixed-size dicts),
         prepare's frozen-row gather (numpy) and its tf.constant calls
step     the whole step as train() runs it (loss read back every LOSS_EVERY steps)
parts    call: an empty tf.function with the same inputs (Python dispatch and argument handling);
         gathers: Trainer._gather alone (the rows a batch reads, and the negatives' draw);
         dense: the XLA-compiled loss and gradients from gathered rows; dense + scatters: the
         same with plain sgd's two scatter_subs in the one XLA cluster (what the step runs);
         scatters as TF kernels: the two scatter_subs as TensorFlow ops (the step before);
         "loss read every step": a host sync after every step instead of every LOSS_EVERY
kernel   the compiled step (embedtune/kernels/) over the same batches, what train() runs for plain sgd:
         batch-synchronous (--deterministic) and, per-pair negatives, lock-free (without it)
groups   (``--groups S,...``) S batches per tf.function call (Trainer.group_step), against the step

The parts overlap (dense includes the gathers), so they are not meant to add up exactly to the step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_speed as ts  # noqa: E402  (the speed case's data and settings)


def corpus_head(tokens: int) -> str:
    path = f"/tmp/embedtune-profile-{tokens}.txt"
    if not os.path.exists(path):
        done = 0
        with open(ts.CORPUS, encoding="utf-8") as src, open(path + ".part", "w", encoding="utf-8") as dst:
            for line in src:
                words = line.split()[: tokens - done]
                dst.write(" ".join(words) + "\n")
                done += len(words)
                if done >= tokens:
                    break
        os.replace(path + ".part", path)
    return path


def build(negatives: str, corpus_path: str, words, matrix, trainable_words):
    from embedtune.config import Config, VocabConfig, resolve, train_config
    from embedtune.corpus import Corpus
    from embedtune import kernels
    from embedtune.plan.rows import plan_rows
    from embedtune.training.trainer import Trainer

    kernels.KERNEL = False   # TensorFlow's step, part by part; the kernel is timed apart (profile)

    train_list = "/tmp/embedtune-profile-trainable.txt"
    with open(train_list, "w", encoding="utf-8") as f:
        f.write("\n".join(trainable_words) + "\n")
    config = resolve(Config(
        vocab=VocabConfig(train_list=train_list, min_count=ts.MIN_COUNT),
        train=train_config(epochs=1, window=ts.WINDOW, negative=ts.NEGATIVE, sample=ts.SAMPLE, lr=ts.LR,
                           optimizer="sgd", seed=ts.SEED, negatives=negatives)))
    corpus = Corpus(corpus_path)
    from embedtune.vectors import Vectors
    vectors = Vectors(list(words), matrix)
    counts, total, _ = corpus.count()
    _, plan = plan_rows(vectors, counts, total, config, corpus_path)
    return Trainer(matrix, plan, counts, config), corpus


def cpu(fn) -> float:
    began = time.process_time()
    fn()
    return time.process_time() - began


def profile(trainer, corpus, group_sizes, tf, threads: int = 1) -> dict:
    """CPU seconds of each part over the whole corpus head, and the pair count."""
    from embedtune.training.batches import LOSS_EVERY

    obj = trainer.objective
    out = {}
    chunks = []
    out["read+encode"] = cpu(lambda: chunks.extend(obj.chunks(corpus, trainer.local_index)))
    units = []
    out["pairs"] = cpu(lambda: units.extend(obj.units(c, trainer.rng) for c in chunks))
    batches = []
    out["batches"] = cpu(lambda: batches.extend(b for u in units for b in obj.batches(*u)))
    pairs = sum(b["pairs"] for b in batches)

    def frozen_gathers():
        for b in batches:
            for key in obj.word_keys:
                trainer.matrix[trainer.source_rows[b[key]]]

    out["prepare: frozen gather (numpy)"] = cpu(frozen_gathers)
    out["prepare: tf.constant"] = cpu(lambda: [{k: tf.constant(v) for k, v in b.items() if k != "pairs"}
                                                for b in batches])
    tensors = []
    out["prepare (all)"] = cpu(lambda: tensors.extend(trainer.prepare(b) for b in batches))

    lr = tf.constant(ts.LR, tf.float32)

    def steps(read_every):
        pending = []
        for i, t in enumerate(tensors):
            pending.append(trainer.step.step(t, lr))
            if (i + 1) % read_every == 0:
                float(tf.add_n(pending))
                pending = []
        if pending:
            float(tf.add_n(pending))

    empty = tf.function(lambda batch, lr: lr, autograph=False)
    gathers = tf.function(trainer.step._gather, autograph=False)
    gathered = gathers(tensors[0])
    words, word_ids, side, side_ids = gathered
    word_ids = tf.concat(word_ids, 0)

    @tf.function(autograph=False)
    def scatter_tf(word_ids, word_grads, side_ids, side_grads, lr):
        """The scatters as TensorFlow's kernels (the step before this work)."""
        trainer.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
        trainer.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
        return lr

    _, word_grads, flat_side_ids, side_grads = trainer.step.dense(tensors[0], words, side, side_ids)
    scatter_args = (word_ids, word_grads, flat_side_ids, side_grads, lr)
    dense_args = (tensors[0], words, side, side_ids)
    sgd_args = (tensors[0], words, word_ids, side, side_ids, lr)

    # Warm up (tracing, XLA compiles) outside the timings.
    for fn in (lambda: trainer.step.step(tensors[0], lr), lambda: empty(tensors[0], lr),
               lambda: gathers(tensors[0])[2], lambda: trainer.step.dense(*dense_args)[0],
               lambda: trainer.step.dense_sgd(*sgd_args), lambda: scatter_tf(*scatter_args)):
        float(tf.reduce_sum(fn()))
    for size in group_sizes:
        float(trainer.step.group_step(tensors[:size], tf.fill([size], lr))[0])

    def each(fn, last):
        def run():
            for t in tensors:
                result = fn(t)
            float(tf.reduce_sum(last(result)))
        return run

    out["step (as train runs it)"] = cpu(lambda: steps(LOSS_EVERY))
    out["step, loss read every step"] = cpu(lambda: steps(1))
    out["call (empty tf.function)"] = cpu(each(lambda t: empty(t, lr), lambda r: r))
    out["gathers + negatives (TF kernels)"] = cpu(each(gathers, lambda r: r[2]))
    out["dense (XLA)"] = cpu(each(lambda t: trainer.step.dense(*dense_args), lambda r: r[0]))
    out["dense + scatters (XLA, sgd)"] = cpu(each(lambda t: trainer.step.dense_sgd(*sgd_args), lambda r: r))
    out["scatters as TF kernels"] = cpu(each(lambda t: scatter_tf(*scatter_args), lambda r: r))
    if trainer.merge:
        out["gradients (gathers + dense)"] = cpu(each(trainer.gradients, lambda r: r[0]))
    if trainer.step.fused:
        # The compiled step (embedtune/kernels/) on copies of the same tables, as train() runs it
        # for plain sgd: the numpy batches as they are (no prepare), on --threads threads.
        from embedtune.kernels.sgns import SgnsKernel
        obj = trainer.objective
        kernel = SgnsKernel(trainer.trainable.numpy(), trainer.side.numpy(), trainer.matrix, trainer.frozen_rows,
                            trainer.n_trainable, obj.batch_size, obj.negative, obj.shared, threads)
        kernel.step(batches[0], ts.LR)   # compiled or loaded from numba's cache outside the timing
        out[f"kernel step (numba, {threads} threads)"] = cpu(lambda: [kernel.step(b, ts.LR) for b in batches])
        if not obj.shared:
            # The lock-free kernel (no --deterministic): GROUP batches a call, as Trainer.run gives them.
            from embedtune.training.batches import GROUP
            lockfree = SgnsKernel(trainer.trainable.numpy(), trainer.side.numpy(), trainer.matrix,
                                  trainer.frozen_rows, trainer.n_trainable, obj.batch_size, obj.negative, False,
                                  threads, lockfree=True, table=obj.table)
            # Its pairs come in the order made, not shuffled (SkipGram.pairs_in_order), as train() gives them.
            obj.kernel = lockfree
            state = trainer.rng.bit_generator.state
            ordered = []
            out["pairs, in order (lock-free)"] = cpu(lambda: ordered.extend(obj.units(c, trainer.rng) for c in chunks))
            trainer.rng.bit_generator.state = state
            in_order = []
            out["batches, in order (lock-free)"] = cpu(lambda: in_order.extend(b for u in ordered for b in obj.batches(*u)))
            obj.kernel = None
            lockfree.run(in_order[:GROUP], [ts.LR] * GROUP)
            out[f"kernel lock-free (numba, {threads} threads, {GROUP} batches a call)"] = cpu(
                lambda: [lockfree.run(in_order[i:i + GROUP], [ts.LR] * len(in_order[i:i + GROUP]))
                         for i in range(0, len(in_order), GROUP)])

    for size in group_sizes:
        def grouped():
            pending = []
            for start in range(0, len(tensors), size):
                group = tensors[start:start + size]
                if len(group) < size:   # the tail: one at a time (another length would trace again)
                    pending.append(tf.stack([trainer.step.step(t, lr) for t in group]))
                else:
                    pending.append(trainer.step.group_step(group, tf.fill([size], lr)))
                if len(pending) * size >= LOSS_EVERY:
                    float(tf.reduce_sum(pending[-1]))
                    pending = []
            if pending:
                float(tf.reduce_sum(pending[-1]))
        out[f"step, {size} batches per call"] = cpu(grouped)
    return out, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=400_000, help="corpus tokens profiled [400000]")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow's pools [1]: CPU of one thread")
    parser.add_argument("--negatives", default="per-pair,shared")
    parser.add_argument("--groups", default="", help="batches per call to time, e.g. 4,16 (Trainer.group_step)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from embedtune.training.host import use_threads
    from embedtune._tf import tf

    use_threads(args.threads)
    words, matrix = ts.load_glove()
    rng = np.random.default_rng(ts.SEED)
    trainable = rng.random(len(words)) < ts.TRAINABLE_FRACTION
    trainable_words = [w for w, t in zip(words, trainable) if t]
    path = corpus_head(args.tokens)
    group_sizes = [int(s) for s in args.groups.split(",") if s]
    negatives = args.negatives.split(",")
    print(f"step_profile: {args.tokens:,} tokens, threads {args.threads}, TF {tf.__version__}, "
          f"load average {os.getloadavg()[0]:.1f}")
    rounds = {n: [] for n in negatives}
    pairs = {}
    for number in range(args.repeat):
        for name in negatives:
            trainer, corpus = build(name, path, words, matrix, trainable_words)
            figures, pairs[name] = profile(trainer, corpus, group_sizes, tf, args.threads)
            rounds[name].append(figures)
            del trainer
        print(f"round {number + 1} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nus of CPU per (center, context) pair, median of {args.repeat} "
          f"(load average now {os.getloadavg()[0]:.1f}):")
    print(f"{'part':36s}" + "".join(f"{n:>12s}" for n in negatives))
    for part in rounds[negatives[0]][0]:
        values = [np.median([r[part] for r in rounds[n]]) / pairs[n] * 1e6 for n in negatives]
        print(f"{part:36s}" + "".join(f"{v:12.3f}" for v in values))
    print(f"{'pairs':36s}" + "".join(f"{pairs[n]:12,d}" for n in negatives))


if __name__ == "__main__":
    main()
