"""Make labelled text for `embedtune train --objective classify`: WordNet noun glosses labelled by
their lexicographer file (noun.animal, noun.artifact, ...: 26 classes), in fastText's supervised format.

    __label__noun.animal a small carnivorous mammal ...

One line per noun synset of WordNet 3.0: the label, then the gloss (definition and quoted
examples) lower-cased and split as embedtune's corpus reader splits it (``--tokenize auto`` against
the vocabulary of VOCABULARY, a vectors file whose first token per line is the word), so fastText
and embedtune read the same tokens. The synsets are split 80/20 into train and valid by a seeded
permutation (numpy, seed 0), each part in the permutation's order (WordNet's file order groups the
synsets by lexicographer file, and fastText reads its training file in order, unshuffled).

    python data/make_glosses.py                        # the full split into benchmarks/_data/
                                                       # (wordnet-noun-glosses.{train,valid,test}.txt)
    python data/make_glosses.py --sample               # also data/sample/wordnet-glosses.{train,valid}.txt

The sample is the first SAMPLE_TRAIN lines of the train part and the first SAMPLE_VALID of the
valid part. Needs Debian's wordnet-base (/usr/share/wordnet).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from embedtune.corpus import Tokenizer
from embedtune.wordnet import read_glosses

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GLOVE_SAMPLE = os.path.join(HERE, "sample", "glove.6B.50d.20k.txt")
SAMPLE_TRAIN, SAMPLE_VALID = 3000, 500
SEED = 0
HELD_SHARE = 0.2   # valid and test together


def read_vocabulary(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        return {line.split(" ", 1)[0] for line in f}


def labelled_lines(folder: str, vocabulary: set[str]) -> list[str]:
    tokenizer = Tokenizer(vocabulary)
    lines = []
    for _, lexname, gloss in read_glosses(folder, "noun"):
        tokens = [piece for raw in gloss.lower().split() for piece in tokenizer[raw]]
        lines.append(" ".join([f"__label__{lexname}", *tokens]) + "\n")
    return lines


def split(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(train, valid, test): a seeded 80/10/10 split, each part in the permutation's order; valid and
    test the first and second half of the held-out part."""
    order = np.random.default_rng(SEED).permutation(len(lines))
    n_held = int(round(len(lines) * HELD_SHARE))
    held = [lines[i] for i in order[:n_held]]
    return [lines[i] for i in order[n_held:]], held[: n_held // 2], held[n_held // 2:]


def write(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
    print(f"wrote {path}: {len(lines):,} lines, {os.path.getsize(path):,} bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordnet", default="/usr/share/wordnet")
    parser.add_argument("--vocabulary", default=GLOVE_SAMPLE, help="vectors file whose words guide the split")
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "benchmarks", "_data"))
    parser.add_argument("--sample", action="store_true", help="also write the sample into data/sample/")
    args = parser.parse_args()
    train, valid, test = split(labelled_lines(args.wordnet, read_vocabulary(args.vocabulary)))
    write(os.path.join(args.out_dir, "wordnet-noun-glosses.train.txt"), train)
    write(os.path.join(args.out_dir, "wordnet-noun-glosses.valid.txt"), valid)
    write(os.path.join(args.out_dir, "wordnet-noun-glosses.test.txt"), test)
    if args.sample:
        write(os.path.join(HERE, "sample", "wordnet-glosses.train.txt"), train[:SAMPLE_TRAIN])
        write(os.path.join(HERE, "sample", "wordnet-glosses.valid.txt"), valid[:SAMPLE_VALID])


if __name__ == "__main__":
    main()
