"""A Keras text classifier over GloVe with three embedding layers: frozen, fully trainable, and
embedtune's (the N most frequent words frozen, the rest and the corpus's new words trainable).

Data (data/README.md): the WordNet glosses shipped in data/sample, a gloss's lexicographer class to
predict; the first 2,500 lines of wordnet-glosses.train.txt train, its last 500 are the held-out test
split, wordnet-glosses.valid.txt (500 lines) chooses the settings. Words: the shipped GloVe sample
(20k rows; --vectors names another file, GloVe 6B 50d's 400k for one), a padding row 0 (masked), and
the training split's words GloVe lacks, seen twice or more, as new rows started from their contexts
and spelling (embedtune's starts). The three models start from that same table.

Model: ids -> embedding -> masked mean -> Dense(softmax), Adam. Each layer gets the same tuning budget:
every learning rate of --lrs, --seeds seeds, up to --epochs epochs with the epoch of the best
validation accuracy kept; the learning rate of the best mean validation accuracy is chosen, and its
test accuracy reported (mean and spread over the seeds). Then the proof: embedtune's layer reads its
frozen rows back and writes the table out with the frozen read-back check.

Run: python examples/keras_classifier.py   (a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(os.path.dirname(HERE), "data", "sample")
TOKEN = re.compile(r"[\w'-]+|[^\w\s]")
MAX_LEN = 32
PAD = "<pad>"


def read(path: str) -> tuple[list[str], list[list[str]]]:
    labels, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, _, text = line.strip().partition(" ")
            labels.append(label.removeprefix("__label__"))
            texts.append(TOKEN.findall(text.lower()))
    return labels, texts


def splits():
    labels, texts = read(os.path.join(SAMPLE, "wordnet-glosses.train.txt"))
    valid = read(os.path.join(SAMPLE, "wordnet-glosses.valid.txt"))
    return {"train": (labels[:2500], texts[:2500]), "valid": valid, "test": (labels[2500:], texts[2500:])}


def ids_of(layer, texts: list[list[str]]) -> np.ndarray:
    """[n, MAX_LEN] ids, padded with 0 (masked); words the layer lacks are dropped."""
    index = {w: i for i, w in enumerate(layer.vocabulary)}
    out = np.zeros((len(texts), MAX_LEN), np.int32)
    for row, tokens in enumerate(texts):
        known = [index[t] for t in tokens if t in index][:MAX_LEN]
        out[row, :len(known)] = known
    return out


def embedtune_layer(vectors_path: str, train_texts, freeze_top: int):
    from embedtune.keras import Embedding

    # mask_token: a frozen zero row 0 for the padding; freeze_top still counts GloVe's words
    return Embedding.from_vectors(vectors_path, corpus=train_texts, freeze_top=freeze_top, min_count=2,
                                  mask_token=PAD, mask_zero=True, seed=1)


def build(kind: str, layer, n_labels: int, lr: float):
    import keras
    from embedtune.keras import Embedding, LazyRows

    if kind == "embedtune":
        embedding = Embedding.from_config(layer.get_config())   # a fresh copy of the starting layer (its words too)
        embedding.build()
        embedding.set_weights(layer.get_weights())
        optimizer = LazyRows(keras.optimizers.Adam(lr), rows="adam", learning_rate=lr)
    else:
        embedding = keras.layers.Embedding(layer.input_dim, layer.output_dim, mask_zero=True,
                                           trainable=kind == "trainable")
        embedding.build()
        embedding.embeddings.assign(layer.embeddings)   # embedtune's whole table, as it starts
        optimizer = keras.optimizers.Adam(lr)
    model = keras.Sequential([keras.Input((MAX_LEN,), dtype="int32"), embedding,
                              keras.layers.GlobalAveragePooling1D(),
                              keras.layers.Dense(n_labels, activation="softmax")])
    model.compile(optimizer, "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def fit(kind, layer, data, n_labels, lr, seed, epochs):
    import keras
    from embedtune.keras import FrozenRowsCallback

    keras.utils.set_random_seed(seed)
    model = build(kind, layer, n_labels, lr)
    keep = keras.callbacks.EarlyStopping("val_accuracy", patience=5, mode="max", restore_best_weights=True)
    callbacks = [keep] + ([FrozenRowsCallback()] if kind == "embedtune" else [])
    began = time.perf_counter()
    model.fit(*data["train"], validation_data=data["valid"], epochs=epochs, batch_size=32, verbose=0,
              callbacks=callbacks)
    wall = time.perf_counter() - began
    valid = model.evaluate(*data["valid"], verbose=0)[1]
    test = model.evaluate(*data["test"], verbose=0)[1]
    state = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.optimizer.variables)
    trainable = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
    return {"valid": valid, "test": test, "wall": wall, "state": state, "trainable": trainable, "model": model}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", default=os.path.join(SAMPLE, "glove.6B.50d.20k.txt"))
    parser.add_argument("--freeze-top", type=int, default=5000)
    parser.add_argument("--lrs", default="0.003,0.01,0.03")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    text = splits()
    names = sorted(set(text["train"][0]))
    began = time.perf_counter()
    layer = embedtune_layer(args.vectors, text["train"][1], args.freeze_top)
    print(f"layer: {layer.input_dim:,} rows ({layer.input_dim - layer.reserved - layer.n_pretrained:,} new words), "
          f"{layer.trainable_rows:,} trainable, made in {time.perf_counter() - began:.1f} s", flush=True)
    data = {part: (ids_of(layer, texts), np.array([names.index(x) if x in names else -1 for x in labels]))
            for part, (labels, texts) in text.items()}
    dropped = {}
    for part in data:   # a class training never shows, or a line with no known word (a masked mean of nothing)
        keep = (data[part][1] >= 0) & (data[part][0] > 0).any(axis=1)
        dropped[part] = int((~keep).sum())
        data[part] = (data[part][0][keep], data[part][1][keep])
    print(f"{len(names)} classes; train/valid/test lines {', '.join(str(len(d[1])) for d in data.values())} "
          f"(dropped: {', '.join(str(n) for n in dropped.values())})")
    lrs = [float(x) for x in args.lrs.split(",")]
    print(f"{'layer':10s} {'lr':>6s} {'valid':>7s} {'test':>14s} {'fit s':>6s} {'trainable':>10s} {'opt state':>10s}")
    for kind in ("frozen", "trainable", "embedtune"):
        by_lr = {lr: [fit(kind, layer, data, len(names), lr, seed, args.epochs) for seed in range(args.seeds)]
                 for lr in lrs}
        lr = max(lrs, key=lambda x: statistics.mean(r["valid"] for r in by_lr[x]))
        runs = by_lr[lr]
        tests = [r["test"] for r in runs]
        spread = statistics.stdev(tests) if len(tests) > 1 else 0.0
        print(f"{kind:10s} {lr:6g} {statistics.mean(r['valid'] for r in runs):7.3f} "
              f"{statistics.mean(tests):7.3f} ± {spread:.3f} {statistics.median(r['wall'] for r in runs):6.1f} "
              f"{runs[0]['trainable'] / 2**20:8.2f}MB {runs[0]['state'] / 2**20:8.2f}MB", flush=True)
        if kind == "embedtune":
            trained = runs[0]["model"].layers[0]
            with tempfile.TemporaryDirectory() as tmp:
                written = trained.save_vectors(os.path.join(tmp, "tuned.txt"))
            print(f"frozen proof: {trained.check_frozen():,} frozen rows read through the layer, bit-identical to "
                  f"the input; {written.checked:,} read back from the written file (largest change {written.worst})")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; load {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
