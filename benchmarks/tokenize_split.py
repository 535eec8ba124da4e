"""CPU time of `--tokenize auto`'s split on real text and on runs of punctuation.

    python benchmarks/tokenize_split.py [--repeat 3] [--no-runs]

Against the sample vectors' 20k words (data/sample), on the shipped texts and gensim's test corpora
(lower-cased, as for GloVe): ``Tokenizer.tokens`` over every line (each distinct token split once, then
cached, as in training), and ``Tokenizer.split`` of every distinct token with no cache (the split
itself). Then lines of punctuation runs (``--no-runs`` skips them: before issue 24's fix they took
minutes). Each figure is CPU seconds of a fresh Tokenizer, ``--repeat`` times.
"""

from __future__ import annotations

import argparse
import os
import time

import gensim.test.utils

from embedtune.corpus import Tokenizer
from embedtune.formats import load_vectors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = [os.path.join(ROOT, "data", "sample", name) for name in ("lee_background.cor", "wordnet-glosses.train.txt")]
TEXTS += [gensim.test.utils.datapath(name) for name in ("crime-and-punishment.txt", "pang_lee_polarity.cor")]
RUNS = {'20,000 "': '"' * 20_000, "1,000 ( said 1,000 )": "(" * 1_000 + "said" + ")" * 1_000,
        "8,000 \"": '"' * 8_000}


def cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-runs", action="store_true")
    args = parser.parse_args()
    vocabulary = load_vectors(os.path.join(ROOT, "data", "sample", "glove.6B.50d.20k.txt")).index
    lines = []
    for path in TEXTS:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines += [line.lower().split() for line in f]
    distinct = sorted({token for line in lines for token in line})
    print(f"{sum(map(len, lines)):,} tokens in {len(lines):,} lines, {len(distinct):,} distinct")
    for _ in range(args.repeat):
        tokens = cpu(lambda: list(map(Tokenizer(vocabulary).tokens, [*lines, *lines, *lines])))
        split = cpu(lambda: list(map(Tokenizer(vocabulary).split, distinct)))
        print(f"tokens() of every line x3: {tokens:.3f} s CPU   split() of each distinct token: {split:.3f} s CPU")
    if not args.no_runs:
        for name, line in RUNS.items():
            print(f"{name}: {cpu(lambda: Tokenizer(vocabulary).tokens(line.split())):.3f} s CPU")


if __name__ == "__main__":
    main()
