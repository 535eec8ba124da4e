"""New words of a fastText model: the model's own subwords as the spelling start, against the fitted
spelling model (the start every other input gets), alone and mixed with the contexts (form-context).

    python benchmarks/fasttext_newwords.py [--corpus benchmarks/_data/corpus-large.txt] [--words 300] [--seed 0]

A fastText model (skipgram, dim 50, 3 epochs, minCount 5, minn 3, maxn 6, 200k buckets, 2 threads) is trained
once on the corpus with the `fasttext` package and kept under benchmarks/_data/. Test words: ``--words`` model
words seen 5-29 times (``rare``) and as many seen 100+ times outside the 100 most frequent (``frequent``), chosen
at random. They are deleted from the vectors and started as new words, in the corpus as it is; each start is
scored by the rank of the word's own vector (fastText's, the model's get_word_vector) among all the model's word
vectors by cosine: median rank, MRR, R@10.

Rows: ``spelling: subwords`` (fastText's vector for a word it lacks: its n-gram rows), ``spelling: fitted``
(embedtune.newwords.spelling.fit_form on the remaining vectors), and ``form-context`` with each of the two as
its spelling side. Caveat: the true vector is the average of the word's own row and those same n-gram rows, so
the subword start shares part of what it is scored against; that is what a user of the model gets for the word,
but it favours the subword rows over any start built from other words.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from embedtune.corpus import Corpus  # noqa: E402
from embedtune.formats import load_vectors  # noqa: E402
from embedtune.newwords.methods import initial_vectors  # noqa: E402
from embedtune.newwords.spelling import SubwordForm, fit_form  # noqa: E402
from embedtune.vectors import Vectors  # noqa: E402

RARE = (5, 29)
FREQUENT = 100
SKIP_TOP = 100


def model_path(corpus: str) -> str:
    path = os.path.join(HERE, "_data", f"ft.{os.path.basename(corpus)}.sg50.bin")
    if not os.path.exists(path):
        import fasttext

        began = time.perf_counter()
        model = fasttext.train_unsupervised(corpus, model="skipgram", dim=50, epoch=3, minCount=5, minn=3, maxn=6,
                                            bucket=200_000, thread=2, verbose=0)
        model.save_model(path)
        print(f"trained {path} in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return path


def unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1)


def scores(unit_all: np.ndarray, truth: np.ndarray, found: np.ndarray) -> dict:
    sims = unit_all @ unit_rows(found.astype(np.float32)).T
    own = sims[truth, np.arange(len(truth))]
    ranks = (sims > own).sum(axis=0) + 1
    return {"median_rank": float(np.median(ranks)), "mrr": float(np.mean(1 / ranks)),
            "r@10": float(np.mean(ranks <= 10))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "_data", "corpus-large.txt"))
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"load {' '.join(open('/proc/loadavg').read().split()[:3])}")
    vectors = load_vectors(model_path(a.corpus))
    model = vectors.model
    with Corpus(a.corpus) as corpus:
        counts = corpus.count()[0]
    rng = np.random.default_rng(a.seed)
    words = list(vectors.words)
    groups = {"rare": [w for w in words[SKIP_TOP:] if RARE[0] <= counts.get(w, 0) <= RARE[1]],
              "frequent": [w for w in words[SKIP_TOP:] if counts.get(w, 0) >= FREQUENT]}
    unit_all = unit_rows(vectors.matrix)
    for group, pool in groups.items():
        test = [pool[i] for i in sorted(rng.choice(len(pool), min(a.words, len(pool)), replace=False))]
        gone = set(test)
        keep = [i for i, w in enumerate(words) if w not in gone]
        fitted_side = Vectors([words[i] for i in keep], vectors.matrix[keep])
        subword_side = Vectors(fitted_side.words, fitted_side.matrix, model=model)
        truth = vectors.index.rows(test)
        rows = {"spelling: subwords": SubwordForm(model).predict(test),
                "spelling: fitted": fit_form(fitted_side, words=test).predict(test)}
        for name, side in (("form-context, subwords", subword_side), ("form-context, fitted", fitted_side)):
            with Corpus(a.corpus, vocabulary=side.index) as corpus:
                rows[name] = initial_vectors(side, corpus, test, "form-context", counts=counts, seed=a.seed).matrix
        print(f"{group}: {len(test)} words ({len(pool)} candidates)")
        for name, found in rows.items():
            s = scores(unit_all, truth, found)
            print(f"  {name:<24} median rank {s['median_rank']:>8.0f}  MRR {s['mrr']:.3f}  R@10 {s['r@10']:.3f}")
    print(f"load after {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
