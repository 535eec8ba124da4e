"""Retrofit benchmark: GloVe 6B 50d + WordNet lexicons, weights chosen on validation pairs, scored on test pairs.

    python data/make_sample.py --words 400000 -o benchmarks/_data/glove.6B.50d.txt   # once (171 MB)
    python benchmarks/retrofit.py [--vectors glove50|sgns100|PATH] [--wordnet /usr/share/wordnet] [--repeats 3] [--json FILE]

SimLex-999 (similarity: antonyms rate low) and WordSim-353 (relatedness), gensim's copies, are each cut
into a validation and a test half by their words: every word of either file goes to one side (a seeded
coin, then words move to the side holding more of their partners while each file keeps at least 40% of
its kept pairs on each side); a pair whose two words are on one side belongs to that side, the others
are left out. No word is in both halves, so a setting chosen on valid has never seen a test word move.
Scores are Spearman correlations by ``embedtune.compare.evaluate_similarity`` (gensim's
``evaluate_word_pairs`` figures, tests/test_compare.py).

Both methods get the same budget, TUNED settings each, and the same rule: the highest validation
SimLex-999 among the settings whose validation WordSim-353 falls by at most WORDSIM_DROP (issue 15's
goal: similarity up, relatedness kept); the chosen setting is then scored on the test halves.
  faruqui   Faruqui et al.'s retrofit.py loop as published (in place over the lexicon words, 10
            iterations, beta 1/degree), without its unit-length normalisation (embedtune keeps the
            user's norms), on the synonym lexicon; its alpha chosen from FARUQUI_ALPHAS (1 published)
  embedtune ``--objective retrofit`` with the ``--similar`` lexicons and antonyms: repel chosen from
            REPELS without frozen rows, then the frozen pull (FROZEN_PULL) from FROZEN_PULLS with the
            10,000 most frequent rows frozen (their bits checked unchanged)
The lexicons are built in the run by ``embedtune.wordnet`` from the WordNet database folder (Debian's
``wordnet-base``). Seconds: median of --repeats interleaved runs of the chosen settings; embedtune's
are the whole ``train()`` call (both lexicons read, plan, rounds, copy, frozen-row check), the vectors
already loaded; the faruqui loop's are its own.

Issue 40, relatedness (``--pairs DIR``, ``--keep-grid``): DIR is a folder of word-pair files in Faruqui's
eval-word-vectors layout (``EN-*.txt``, ``word<TAB>word<TAB>score``; see benchmarks/README.md, retrofit, for
where they come from). Its ``EN-WS-353-REL.txt`` (WordSim-353's relatedness subset, Agirre et al. 2009) is cut
by the same words into halves and its validation half joins the rule: a setting is kept only when both
WordSim-353 and its relatedness subset fall by at most WORDSIM_DROP on validation. Every other file there
that is neither SimLex-999 nor WordSim-353 (MEN, MTurk, RW, SimVerb, RG-65, MC-30, YP-130, VERB-143) is
scored only, whole, on the final rows: the "unseen" sets, never tuned on. ``--keep-grid`` chooses ``keep``
(the neighbour-preservation term) from KEEPS at the default repel, then repel from REPELS at that keep:
6 + 8 settings against Faruqui's 16 alphas.

Issue 40: ``--vectors sgns100`` is the second vector space (benchmarks/spaces.py). Every setting's validation
figures carry a 95% bootstrap interval over the words of the validation halves (BOOTSTRAP resamples of the
words, with replacement; a pair counted once per draw of each of its words), and each setting's difference
from embedtune's current default is bootstrapped paired (the same draws): ``beyond`` when that interval
excludes 0. The grids reach past the value chosen: a choice at a grid's end is flagged (extend the grid).
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import random
import sys
import tempfile
import time

import numpy as np

from embedtune import formats
from embedtune.compare import default_similarity_files, evaluate_similarity
from embedtune.config import Config, VocabConfig, resolve, train_config
from embedtune.objectives import retrofit as retrofit_module
from embedtune.training import train
from embedtune.vectors import Vectors
from embedtune.wordnet import format_lexicon, wordnet_lexicons

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spaces import vectors_path  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 26
WORDSIM_DROP = 0.01
REPELS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 4.0)
FROZEN_PULLS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
KEEPS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)   # --keep-grid: the weight of keeping the input's nearest rows
ANCHORS = (0.5, 1.0, 2.0, 4.0, 8.0)   # --anchor-grid: alpha, Faruqui's anchor (issue 40's relatedness constraint)
FARUQUI_ALPHAS = (0.1, 0.25, 0.5, 0.6, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 16.0, 32.0)  # as many as REPELS + PULLS
BOOTSTRAP = 1000
FREEZE_TOP = 10000


def faruqui_retrofit(vectors: Vectors, lexicon: dict[str, list[str]], iterations: int = 10,
                     alpha: float = 1.0) -> np.ndarray:
    """Faruqui et al.'s retrofit() (github.com/mfaruqui/retrofitting, retrofit.py), on rows of a matrix;
    alpha 1 is the published update (q_i = (deg q̂_i + sum of neighbours) / (2 deg))."""
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
            vec = alpha * len(rows) * old[i]
            for j in rows:
                vec += new[j]
            new[i] = vec / ((1 + alpha) * len(rows))
    return new.astype(np.float32)


def lowercase_lexicon(lexicon: dict[str, list[str]]) -> dict[str, list[str]]:
    """As Faruqui's read_lexicon does (GloVe is lower-case); lines of one word merged."""
    out: dict[str, dict[str, None]] = {}
    for word, neighbours in lexicon.items():
        row = out.setdefault(word.lower(), {})
        for n in neighbours:
            row[n.lower()] = None
    return {w: list(n) for w, n in out.items()}


def pair_lines(path: str) -> list[tuple[str, str, str]]:
    """(word, word, line) of each scored line of a pair file, as evaluate_word_pairs reads it."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(parts) != 3:
                continue
            try:
                float(parts[2])
            except ValueError:
                continue
            out.append((parts[0].lower(), parts[1].lower(), line if line.endswith("\n") else line + "\n"))
    return out


def split_by_words(files: dict[str, list], seed: int, passes: int = 5) -> dict[str, str]:
    """word -> 'valid' or 'test' for every word of the pair files (see the module docstring)."""
    rng = random.Random(seed)
    words = sorted({w for pairs in files.values() for a, b, _ in pairs for w in (a, b)})
    side = {w: rng.choice(("valid", "test")) for w in words}
    partners: dict[str, list[tuple[str, str]]] = {w: [] for w in words}
    for name, pairs in files.items():
        for a, b, _ in pairs:
            partners[a].append((name, b))
            partners[b].append((name, a))

    def counts():
        c = {name: {"valid": 0, "test": 0} for name in files}
        for name, pairs in files.items():
            for a, b, _ in pairs:
                if side[a] == side[b]:
                    c[name][side[a]] += 1
        return c

    for _ in range(passes):
        order = words[:]
        rng.shuffle(order)
        moved = 0
        for w in order:
            here, there = side[w], "test" if side[w] == "valid" else "valid"
            if sum(side[p] == there for _, p in partners[w]) <= sum(side[p] == here for _, p in partners[w]):
                continue
            side[w] = there
            balanced = all(min(c.values()) >= 0.4 * sum(c.values()) for c in counts().values())
            if balanced:
                moved += 1
            else:
                side[w] = here
        if not moved:
            break
    return side


def write_halves(files: dict[str, list], side: dict[str, str], folder: str) -> dict[tuple[str, str], str]:
    paths = {}
    for name, pairs in files.items():
        for half in ("valid", "test"):
            paths[name, half] = os.path.join(folder, f"{name}-{half}.txt")
            with open(paths[name, half], "w", encoding="utf-8") as f:
                f.writelines(line for a, b, line in pairs if side[a] == side[b] == half)
    return paths


class PairCosines:
    """The pairs of one half file whose words are both in the vectors: rows, human scores and word ids, to
    score a matrix and resample the half's words."""

    def __init__(self, vectors: Vectors, path: str, word_ids: dict[str, int]):
        rows = {}
        for i, w in enumerate(vectors.words):   # first row of a lower-cased word, as evaluate_similarity reads
            rows.setdefault(w.lower(), i)
        a, b, human, owners = [], [], [], []
        for x, y, line in pair_lines(path):
            if x in rows and y in rows:
                a.append(rows[x])
                b.append(rows[y])
                human.append(float(line.rstrip("\n").split("\t")[2]))
                owners.append((word_ids[x], word_ids[y]))
        self.a, self.b, self.human = np.array(a), np.array(b), np.array(human)
        self.owners = np.array(owners, np.int64).reshape(-1, 2)

    def cosines(self, matrix: np.ndarray) -> np.ndarray:
        x, y = matrix[self.a].astype(np.float64), matrix[self.b].astype(np.float64)
        return (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1) + 1e-30)

    def weights(self, counts: np.ndarray) -> np.ndarray:
        """[draws, pairs]: how often each pair is in each resample."""
        return counts[:, self.owners[:, 0]] + counts[:, self.owners[:, 1]]


def spearman_draws(cos: np.ndarray, human: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Spearman's rho over each resample's pairs (weights: [draws, pairs] multiplicities)."""
    from scipy.stats import rankdata

    out = np.empty(len(weights))
    for d, w in enumerate(weights):
        take = np.repeat(np.arange(len(cos)), w)
        x, y = rankdata(cos[take]), rankdata(human[take])
        x, y = x - x.mean(), y - y.mean()
        out[d] = (x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum() + 1e-30)
    return out


def interval(x: np.ndarray) -> list[float]:
    lo, hi = np.percentile(x, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", default="glove50", help="glove50, sgns100 (benchmarks/spaces.py) or a path")
    parser.add_argument("--wordnet", default="/usr/share/wordnet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=SEED, help="of the valid/test split")
    parser.add_argument("--no-faruqui-grid", action="store_true",
                        help="skip the tuning of Faruqui's alpha (its published 1 is scored), the slowest grid")
    parser.add_argument("--anchor-grid", action="store_true",
                        help="also choose embedtune's anchor (ANCHORS) at the chosen repel, before the frozen pull")
    parser.add_argument("--keep-grid", action="store_true",
                        help="choose keep (KEEPS) at the default repel, then repel at that keep")
    parser.add_argument("--pairs", help="a folder of EN-*.txt pair files: WS-353-REL joins the rule, the rest "
                                        "(not SimLex, not WordSim) are scored as unseen sets")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    args.vectors = vectors_path(args.vectors)

    print(f"load average at start {os.getloadavg()}; loading {args.vectors} ...", file=sys.stderr, flush=True)
    vectors = formats.load_vectors(args.vectors)
    folder = tempfile.mkdtemp(prefix="retrofit-bench-")
    lexicons = {}
    for similar in (False, True):
        synonyms, antonyms = wordnet_lexicons(args.wordnet, similar=similar)
        for kind, lexicon in (("syn", synonyms), ("ant", antonyms)):
            lexicons[kind, similar] = os.path.join(folder, f"{kind}{'-similar' if similar else ''}.txt")
            with open(lexicons[kind, similar], "w", encoding="utf-8") as f:
                f.writelines(format_lexicon(lexicon))
        if not similar:
            faruqui_lexicon = lowercase_lexicon(synonyms)

    simlex_file, wordsim_file = default_similarity_files()[1], default_similarity_files()[0]
    files = {"simlex": pair_lines(simlex_file), "wordsim": pair_lines(wordsim_file)}
    unseen, related_file = [], None
    if args.pairs:
        related_file = os.path.join(args.pairs, "EN-WS-353-REL.txt")
        if not os.path.exists(related_file):
            sys.exit(f"{related_file} is missing: --pairs wants Faruqui's data/word-sim folder")
        unseen = sorted(p for p in glob.glob(os.path.join(args.pairs, "EN-*.txt"))
                        if not any(k in os.path.basename(p) for k in ("SIMLEX", "WS-353")))
    side = split_by_words(files, args.seed)
    if related_file:   # a subset of WordSim-353's pairs: its words are already on a side
        files["related"] = pair_lines(related_file)
    halves = write_halves(files, side, folder)
    sizes = {f"{name} {half}": sum(1 for _ in open(path, encoding="utf-8")) for (name, half), path in halves.items()}
    print("pairs: " + ", ".join(f"{k} {v}" for k, v in sizes.items())
          + f" (of {len(files['simlex'])} and {len(files['wordsim'])}); halves in {folder}", flush=True)

    valid_words = sorted({w for pairs in files.values() for a, b, _ in pairs for w in (a, b)
                          if side[a] == side[b] == side[w] == "valid"})
    word_ids = {w: i for i, w in enumerate(valid_words)}
    rng = np.random.default_rng([args.seed, 40])
    draws = rng.integers(0, len(valid_words), (BOOTSTRAP, len(valid_words)))
    counts = np.zeros((BOOTSTRAP, len(valid_words)), np.int64)
    np.add.at(counts, (np.arange(BOOTSTRAP)[:, None], draws), 1)
    valid_pairs = {name: PairCosines(vectors, halves[name, "valid"], word_ids) for name in files}
    pair_weights = {name: p.weights(counts) for name, p in valid_pairs.items()}

    def valid_draws(matrix) -> dict[str, np.ndarray]:
        """Each validation half's rho over each resample of its words."""
        return {name: spearman_draws(p.cosines(matrix), p.human, pair_weights[name]) for name, p in valid_pairs.items()}

    def score(matrix) -> dict[str, float]:
        v = Vectors(vectors.words, matrix)
        out = {f"{name} {half}": evaluate_similarity(v, path).spearman for (name, half), path in halves.items()}
        out["simlex all"] = evaluate_similarity(v, simlex_file).spearman
        out["wordsim all"] = evaluate_similarity(v, wordsim_file).spearman
        if related_file:
            out["related all"] = evaluate_similarity(v, related_file).spearman
        for path in unseen:
            out[os.path.basename(path)[3:-4]] = evaluate_similarity(v, path).spearman
        return out

    def embedtune_run(similar=True, antonyms=True, freeze_top=0, repel=None, pull=None, anchor=None, keep=None):
        files = retrofit_module.RetrofitFiles(lexicon=lexicons["syn", similar],
                                              antonyms=lexicons["ant", similar] if antonyms else None)
        config = resolve(Config(vocab=VocabConfig(freeze_top=freeze_top), own=(files,),
                                train=train_config(objective="retrofit", repel=repel, anchor=anchor, keep=keep)))
        default_pull = retrofit_module.FROZEN_PULL
        retrofit_module.FROZEN_PULL = default_pull if pull is None else pull
        try:
            return train(vectors, None, config)
        finally:
            retrofit_module.FROZEN_PULL = default_pull

    # The tuning runs share their nearest rows (they depend on the moving rows only): found once per set of rows.
    # The timed runs below look them up again each time.
    nearest_rows, found = retrofit_module.nearest_rows, {}

    def nearest_once(matrix, rows, k, pool):
        key = (len(matrix), hash(rows.tobytes()), k, pool)
        if key not in found:
            found[key] = nearest_rows(matrix, rows, k, pool)
        return found[key]

    def matrix_of(out):
        return out if isinstance(out, np.ndarray) else out.vectors.matrix

    before = score(vectors.matrix)
    before_draws = valid_draws(vectors.matrix)

    def choose(label, settings, make, default):
        """Score each setting on valid; the best SimLex among those keeping WordSim (see the docstring). Each
        setting's figures carry their bootstrap interval, and its difference from ``default`` a paired one."""
        rows, per, score_of = [], {}, {}
        for value in settings:
            matrix = matrix_of(make(value))
            s = score_of[value] = score(matrix)
            per[value] = valid_draws(matrix)
            rows.append({"setting": value, "simlex valid": s["simlex valid"],
                         "wordsim valid change": s["wordsim valid"] - before["wordsim valid"],
                         "simlex valid interval": interval(per[value]["simlex"]),
                         "wordsim valid change interval": interval(per[value]["wordsim"] - before_draws["wordsim"])})
        for r, value in zip(rows, settings):
            if related_file:
                r["related valid change"] = score_of[value]["related valid"] - before["related valid"]
                r["related valid change interval"] = interval(per[value]["related"] - before_draws["related"])
        base = per.get(default)
        for r in rows:
            if base is not None:
                for name in files:
                    d = per[r["setting"]][name] - base[name]
                    r[f"{name} minus default"] = interval(d)
            r1 = r.get("simlex minus default", [0, 0])
            r2 = r.get("wordsim minus default", [0, 0])
            print(f"  {label} {r['setting']:g}: valid SimLex {r['simlex valid']:.3f} {r['simlex valid interval']}, "
                  f"WordSim change {r['wordsim valid change']:+.3f} {r['wordsim valid change interval']}; "
                  f"minus default {default:g}: SimLex [{r1[0]:+.3f}, {r1[1]:+.3f}] WordSim [{r2[0]:+.3f}, {r2[1]:+.3f}]"
                  + (f"; relatedness subset change {r['related valid change']:+.3f} {r['related valid change interval']}"
                     if related_file else ""), flush=True)
        kept = [r for r in rows if r["wordsim valid change"] >= -WORDSIM_DROP
                and r.get("related valid change", 0) >= -WORDSIM_DROP] or rows
        chosen = max(kept, key=lambda r: r["simlex valid"])["setting"]
        if chosen == max(settings):
            print(f"  note: {label} chose {chosen:g}, the largest value tried: extend the grid", flush=True)
        return chosen, rows

    print("tuning on the validation halves:", flush=True)
    retrofit_module.nearest_rows = nearest_once
    default_repel, default_pull = retrofit_module.Retrofit.defaults["repel"], retrofit_module.FROZEN_PULL
    alpha, alpha_rows = (1.0, []) if args.no_faruqui_grid else choose(
        "faruqui alpha", FARUQUI_ALPHAS, lambda a: faruqui_retrofit(vectors, faruqui_lexicon, alpha=a), 1.0)
    default_keep = retrofit_module.Retrofit.defaults["keep"]
    keep, keep_rows = (default_keep, []) if not args.keep_grid else choose(
        f"embedtune keep (repel {default_repel:g})", KEEPS, lambda k: embedtune_run(repel=default_repel, keep=k),
        default_keep)
    repel, repel_rows = choose(f"embedtune repel (keep {keep:g})", REPELS, lambda r: embedtune_run(repel=r, keep=keep),
                               default_repel)
    default_anchor = retrofit_module.Retrofit.defaults["anchor"]
    anchor, anchor_rows = (default_anchor, []) if not args.anchor_grid else choose(
        f"embedtune anchor (repel {repel:g})", ANCHORS, lambda a: embedtune_run(repel=repel, anchor=a, keep=keep),
        default_anchor)
    pull, pull_rows = choose(f"embedtune frozen pull (top {FREEZE_TOP:,} frozen, repel {repel:g}, anchor {anchor:g})",
                             FROZEN_PULLS, lambda p: embedtune_run(freeze_top=FREEZE_TOP, repel=repel, pull=p,
                                                                   anchor=anchor, keep=keep), default_pull)
    print(f"chosen: faruqui alpha {alpha:g}; keep {keep:g}, repel {repel:g}, anchor {anchor:g}, frozen pull {pull:g} "
          f"(defaults: keep {default_keep:g}, repel {default_repel:g}, "
          f"frozen pull {retrofit_module.FROZEN_PULL:g})", flush=True)

    runs = {
        f"faruqui (alpha {alpha:g}, chosen)": lambda: faruqui_retrofit(vectors, faruqui_lexicon, alpha=alpha),
        "faruqui (alpha 1, published)": lambda: faruqui_retrofit(vectors, faruqui_lexicon),
        "synonyms (keep 0: Faruqui's update)": lambda: embedtune_run(similar=False, antonyms=False, keep=0.0),
        f"synonyms (keep {keep:g})": lambda: embedtune_run(similar=False, antonyms=False, keep=keep),
        f"defaults (repel {default_repel:g}, keep {default_keep:g})": lambda: embedtune_run(),
        "defaults, keep 0 (before issue 40)": lambda: embedtune_run(keep=0.0),
        f"defaults top10k (pull {default_pull:g})": lambda: embedtune_run(freeze_top=FREEZE_TOP),
        f"+antonyms (repel {repel:g}, keep {keep:g})": lambda: embedtune_run(similar=False, repel=repel, keep=keep),
        f"similar (repel {repel:g}, anchor {anchor:g}, keep {keep:g})": lambda: embedtune_run(
            repel=repel, anchor=anchor, keep=keep),
        f"similar top10k (pull {pull:g}, keep {keep:g})": lambda: embedtune_run(
            freeze_top=FREEZE_TOP, repel=repel, pull=pull, anchor=anchor, keep=keep),
    }
    retrofit_module.nearest_rows = nearest_rows
    seconds = {name: [] for name in runs}
    outputs = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            began = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - began)

    rows = [{"row": os.path.basename(args.vectors), **before, "seconds": None}]
    for name, out in outputs.items():
        row = {"row": name, **score(matrix_of(out)), "seconds": float(np.median(seconds[name]))}
        if not isinstance(out, np.ndarray):
            row["trained_rows"] = out.stats["trained_rows"]
            if out.stats["frozen"]:
                k = out.stats["frozen"]   # checked here too, bit for bit, not only by the summary
                row["frozen_bit_identical"] = bool(np.array_equal(
                    out.vectors.matrix[:k].view(np.uint32), vectors.matrix[:k].view(np.uint32)))
        rows.append(row)

    # Test halves' intervals: each row's change from the input, bootstrapped over the test words (the same
    # draws for every row, so two rows' intervals can be compared draw by draw: "paired" below).
    test_words = sorted({w for pairs in files.values() for a, b, _ in pairs for w in (a, b)
                         if side[a] == side[b] == side[w] == "test"})
    test_ids = {w: i for i, w in enumerate(test_words)}
    test_draws = np.random.default_rng([args.seed, 41]).integers(0, len(test_words), (BOOTSTRAP, len(test_words)))
    test_counts = np.zeros((BOOTSTRAP, len(test_words)), np.int64)
    np.add.at(test_counts, (np.arange(BOOTSTRAP)[:, None], test_draws), 1)
    test_pairs = {name: PairCosines(vectors, halves[name, "test"], test_ids) for name in files}
    test_weights = {name: p.weights(test_counts) for name, p in test_pairs.items()}

    def test_rho(matrix):
        return {name: spearman_draws(p.cosines(matrix), p.human, test_weights[name]) for name, p in test_pairs.items()}

    input_rho = test_rho(vectors.matrix)
    row_rho = {name: test_rho(matrix_of(out)) for name, out in outputs.items()}
    reference = next(name for name in outputs if name.startswith("faruqui (alpha 1, published"))
    print(f"\ntest halves, 95% bootstrap over the test words: change from the input; minus {reference}, paired")
    for row in rows[1:]:
        rho = row_rho[row["row"]]
        for name in files:
            row[f"{name} test change interval"] = interval(rho[name] - input_rho[name])
            row[f"{name} test minus faruqui interval"] = interval(rho[name] - row_rho[reference][name])
        print(f"{row['row']:<44} " + "; ".join(
            f"{name} {row[f'{name} test change interval']} minus faruqui {row[f'{name} test minus faruqui interval']}"
            for name in files))

    print(f"\n{'row':<44} {'SimLex test':>11} {'gain':>7} {'WS test':>8} {'change':>7} "
          f"{'SimLex all':>10} {'WS all':>7} {'seconds':>8}  notes")
    for row in rows:
        gain = "" if row is rows[0] else f"{row['simlex test'] - before['simlex test']:+.3f}"
        change = "" if row is rows[0] else f"{row['wordsim test'] - before['wordsim test']:+.3f}"
        secs = "" if row["seconds"] is None else f"{row['seconds']:.2f}"
        notes = f"{row['trained_rows']:,} rows moved" if "trained_rows" in row else ""
        if "frozen_bit_identical" in row:
            notes += f", frozen bit-identical: {row['frozen_bit_identical']}"
        print(f"{row['row']:<44} {row['simlex test']:>11.3f} {gain:>7} {row['wordsim test']:>8.3f} {change:>7} "
              f"{row['simlex all']:>10.3f} {row['wordsim all']:>7.3f} {secs:>8}  {notes}")
    if unseen:
        names = [os.path.basename(p)[3:-4] for p in unseen]
        print(f"\n{'row':<44} {'REL all':>8} {'unseen mean':>11}  " + " ".join(f"{n[:9]:>9}" for n in names))
        for row in rows:
            d = [row[n] - before[n] for n in names]
            row["unseen mean change"] = float(np.mean(d)) if row is not rows[0] else None
            rel = row["related all"] - (0 if row is rows[0] else before["related all"])
            mean = "" if row is rows[0] else f"{np.mean(d):+.4f}"
            print(f"{row['row']:<44} {rel:>+8.3f} {mean:>11}  " + " ".join(
                f"{(row[n] if row is rows[0] else x):>+9.3f}" for n, x in zip(names, d)))
    print(f"load average at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"vectors": args.vectors, "pairs": sizes, "seed": args.seed, "chosen": {"alpha": alpha, "keep": keep, "repel": repel, "anchor": anchor,
                                                                           "pull": pull},
                       "tuning": {"alpha": alpha_rows, "keep": keep_rows, "repel": repel_rows, "anchor": anchor_rows,
                                  "pull": pull_rows},
                       "rows": rows, "load_average": os.getloadavg()}, f, indent=2)


if __name__ == "__main__":
    main()
