"""Retrofit benchmark: GloVe 6B 50d + WordNet lexicons -> SimLex-999 and WordSim-353, before and after.

    python data/make_sample.py --words 400000 -o benchmarks/_data/glove.6B.50d.txt   # once (171 MB)
    python benchmarks/retrofit.py [--vectors PATH] [--wordnet /usr/share/wordnet] [--repeats 3] [--json FILE]

Every row is scored with gensim's ``evaluate_word_pairs`` (Spearman, restrict_vocab 400000) on
gensim's copies of SimLex-999 (similarity: antonyms rate low) and WordSim-353 (relatedness).
The lexicons are built in the run by ``embedtune.wordnet`` from the WordNet database folder
(Debian's ``wordnet-base``): synonyms = words sharing a synset, antonyms = WordNet's ``!`` pointers.

Rows:
  faruqui        Faruqui et al.'s retrofit.py loop as published (in place over the lexicon words,
                 10 iterations, alpha 1, beta 1/degree), without its unit-length normalisation
                 (embedtune keeps the user's norms), on the synonym lexicon; the baseline
  synonyms       embedtune train --objective retrofit --lexicon SYN (defaults)
  +antonyms      ... --antonyms ANT (defaults: repel 0.3)
  +antonyms top10k   the same with --freeze-top 10000; its frozen rows are checked bit-identical
Seconds are the median of --repeats runs, taken in turn (interleaved): embedtune's are the whole
``train()`` call (reading both lexicons, the plan, the rounds, the copy and the frozen-row check),
the vectors file already loaded; the faruqui loop's are its own.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np

from embedtune import formats
from embedtune.config import Config, TrainConfig, VocabConfig
from embedtune.training import train
from embedtune.vectors import Vectors
from embedtune.wordnet import format_lexicon, wordnet_lexicons

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VECTORS = os.path.join(HERE, "_data", "glove.6B.50d.txt")
GOALS = {"simlex_gain": 0.10, "wordsim_drop": 0.01, "simlex_gain_top10k": 0.05, "seconds": 10.0}


def faruqui_retrofit(vectors: Vectors, lexicon: dict[str, list[str]], iterations: int = 10) -> np.ndarray:
    """Faruqui et al.'s retrofit() (github.com/mfaruqui/retrofitting, retrofit.py), on rows of a matrix."""
    old = vectors.matrix.astype(np.float64)
    new = old.copy()
    index = vectors.index
    loop = [w for w in lexicon if w in index]
    neighbours = {w: [index[n] for n in dict.fromkeys(lexicon[w]) if n in index] for w in loop}
    for _ in range(iterations):
        for word in loop:
            rows = neighbours[word]
            if not rows:
                continue
            i = index[word]
            vec = len(rows) * old[i]
            for j in rows:
                vec += new[j]
            new[i] = vec / (2 * len(rows))
    return new.astype(np.float32)


def lowercase_lexicon(lexicon: dict[str, list[str]]) -> dict[str, list[str]]:
    """As Faruqui's read_lexicon does (GloVe is lower-case); lines of one word merged."""
    out: dict[str, dict[str, None]] = {}
    for word, neighbours in lexicon.items():
        row = out.setdefault(word.lower(), {})
        for n in neighbours:
            row[n.lower()] = None
    return {w: list(n) for w, n in out.items()}


def scores(vectors: Vectors) -> tuple[float, float]:
    from gensim.models import KeyedVectors
    from gensim.test.utils import datapath

    kv = KeyedVectors(vectors.dim)
    kv.add_vectors(vectors.words, vectors.matrix)
    simlex = kv.evaluate_word_pairs(datapath("simlex999.txt"), restrict_vocab=400000)[1][0]
    wordsim = kv.evaluate_word_pairs(datapath("wordsim353.tsv"), restrict_vocab=400000)[1][0]
    return float(simlex), float(wordsim)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", default=DEFAULT_VECTORS)
    parser.add_argument("--wordnet", default="/usr/share/wordnet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--repel", type=float, nargs="*", default=[],
                        help="also run the similar lexicons at these antonym weights")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)   # gensim's per-call INFO lines
    if not os.path.exists(args.vectors):
        sys.exit(f"{args.vectors} is missing: python data/make_sample.py --words 400000 -o {args.vectors}")

    print(f"load average {os.getloadavg()[0]:.2f}; loading {args.vectors} ...", file=sys.stderr)
    vectors = formats.load_vectors(args.vectors)
    folder = tempfile.mkdtemp(prefix="retrofit-bench-")
    paths = {}
    for similar in (False, True):
        synonyms, antonyms = wordnet_lexicons(args.wordnet, similar=similar)
        for kind, lexicon in (("syn", synonyms), ("ant", antonyms)):
            paths[kind, similar] = os.path.join(folder, f"{kind}{'-similar' if similar else ''}.txt")
            with open(paths[kind, similar], "w", encoding="utf-8") as f:
                f.writelines(format_lexicon(lexicon))
        if not similar:
            faruqui_lexicon = lowercase_lexicon(synonyms)

    def embedtune_run(similar, antonyms=True, freeze_top=0, repel=None):
        config = Config(lexicon=paths["syn", similar], antonyms=paths["ant", similar] if antonyms else None,
                        vocab=VocabConfig(freeze_top=freeze_top), train=TrainConfig(objective="retrofit", repel=repel))
        return train(vectors, None, config)

    runs = {
        "faruqui": lambda: faruqui_retrofit(vectors, faruqui_lexicon),
        "synonyms": lambda: embedtune_run(False, antonyms=False),
        "+antonyms": lambda: embedtune_run(False),
        "+antonyms top10k": lambda: embedtune_run(False, freeze_top=10000),
        "similar": lambda: embedtune_run(True),
        "similar top10k": lambda: embedtune_run(True, freeze_top=10000),
    }
    for repel in args.repel:
        runs[f"similar repel {repel:g}"] = lambda repel=repel: embedtune_run(True, repel=repel)
        runs[f"similar repel {repel:g} top10k"] = lambda repel=repel: embedtune_run(True, repel=repel,
                                                                                   freeze_top=10000)
    seconds = {name: [] for name in runs}
    outputs = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            began = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - began)

    before = scores(vectors)
    rows = [{"row": "GloVe 6B 50d", "simlex": before[0], "wordsim": before[1], "seconds": None}]
    for name, out in outputs.items():
        matrix = out if isinstance(out, np.ndarray) else out.vectors.matrix
        simlex, wordsim = scores(Vectors(vectors.words, matrix))
        row = {"row": name, "simlex": simlex, "wordsim": wordsim,
               "simlex_gain": simlex - before[0], "wordsim_change": wordsim - before[1],
               "seconds": float(np.median(seconds[name]))}
        if not isinstance(out, np.ndarray):
            s = out.stats
            row.update(trained_rows=s["trained_rows"], frozen=s["frozen"], max_frozen_change=s["max_frozen_change"],
                       synonym_pairs=s["lexicon"]["pairs_in_vectors"],
                       lexicon_words_not_in_vectors=s["lexicon"]["words_not_in_vectors"])
            if s["frozen"]:
                # Checked here too, bit for bit, not only by the summary.
                k = s["frozen"]
                row["frozen_bit_identical"] = bool(np.array_equal(
                    matrix[:k].view(np.uint32), vectors.matrix[:k].view(np.uint32)))
        rows.append(row)

    print(f"{'row':<26} {'SimLex-999':>10} {'gain':>7} {'WS-353':>7} {'change':>7} {'seconds':>8}  notes")
    for row in rows:
        gain = f"{row['simlex_gain']:+.3f}" if "simlex_gain" in row else ""
        change = f"{row['wordsim_change']:+.3f}" if "wordsim_change" in row else ""
        secs = f"{row['seconds']:.2f}" if row["seconds"] is not None else ""
        notes = ""
        if "trained_rows" in row:
            notes = f"{row['trained_rows']:,} rows moved"
        if "frozen_bit_identical" in row:
            notes += f", {row['frozen']:,} frozen, bit-identical: {row['frozen_bit_identical']}"
        print(f"{row['row']:<26} {row['simlex']:>10.3f} {gain:>7} {row['wordsim']:>7.3f} {change:>7} {secs:>8}  {notes}")
    best = {r["row"]: r for r in rows}
    full, top = best["similar"], best["similar top10k"]
    print(f"\ngoals: SimLex gain {full['simlex_gain']:+.3f} (>= +{GOALS['simlex_gain']}), "
          f"WordSim change {full['wordsim_change']:+.3f} (>= -{GOALS['wordsim_drop']}), "
          f"top10k gain {top['simlex_gain']:+.3f} (>= +{GOALS['simlex_gain_top10k']}, frozen bit-identical "
          f"{top.get('frozen_bit_identical')}), seconds {full['seconds']:.2f} (<= {GOALS['seconds']:g}); "
          f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "goals": GOALS, "load_average": os.getloadavg()}, f, indent=2)


if __name__ == "__main__":
    main()
