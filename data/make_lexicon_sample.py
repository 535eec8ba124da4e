"""Make data/sample/wordnet-{synonyms,antonyms}.10k.txt: WordNet lexicons cut to GloVe's first 10,000 words.

`embedtune lexicon wordnet /usr/share/wordnet --single-words` writes the whole lexicons (1.8 MB
and 0.1 MB); the samples keep the lines whose word is one of the first 10,000 words of
data/sample/glove.6B.50d.20k.txt, with only the neighbours that are too (lines left with none
are dropped), so the tests and the README example run on small real files.

    python data/make_lexicon_sample.py [--wordnet /usr/share/wordnet] [--words 10000]

Needs Debian's wordnet-base (WordNet 3.0 database files in /usr/share/wordnet).
"""

from __future__ import annotations

import argparse
import os

from embedtune.wordnet import format_lexicon, wordnet_lexicons

HERE = os.path.dirname(os.path.abspath(__file__))
GLOVE_SAMPLE = os.path.join(HERE, "sample", "glove.6B.50d.20k.txt")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wordnet", default="/usr/share/wordnet")
    parser.add_argument("--words", type=int, default=10000)
    args = parser.parse_args()
    with open(GLOVE_SAMPLE, encoding="utf-8") as f:
        keep = {line.split(" ", 1)[0] for _, line in zip(range(args.words), f)}
    synonyms, antonyms = wordnet_lexicons(args.wordnet, single_words=True)
    for name, lexicon in (("synonyms", synonyms), ("antonyms", antonyms)):
        cut = {w: [n for n in neighbours if n in keep] for w, neighbours in lexicon.items() if w in keep}
        path = os.path.join(HERE, "sample", f"wordnet-{name}.{args.words // 1000}k.txt")
        with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(format_lexicon(cut))
        os.replace(path + ".tmp", path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
