"""Retrofitting to a lexicon (Faruqui et al. 2015), with an antonym term (after counter-fitting,
Mrkšić et al. 2016), as a closed-form sparse update: no corpus, no optimizer, no TensorFlow.

Each trainable row q_i that has lexicon neighbours is pulled toward its synonyms S(i), away from
its antonyms A(i), and held near its start q̂_i:

    α |q_i - q̂_i|^2 + Σ_{j in S(i)} β_ij |q_i - q_j|^2 + Σ_{j in A(i)} γ_ij |q_i + q_j|^2
    α = anchor (Faruqui's 1); β_ij = w_j / Σ_S w (Faruqui's 1/|S(i)| when nothing is frozen);
    γ_ij = repel w_j / Σ_A w; w_j = 1, or FROZEN_PULL for a frozen neighbour

Every term is quadratic, so the minimiser over q_i with its neighbours held is exact:

    q_i <- (α q̂_i + Σ_S β_ij q_j - Σ_A γ_ij q_j) / (α + [S(i) nonempty] + repel [A(i) nonempty])

With ``keep`` > 0 each moving row also keeps its offsets to its KEEP_NEIGHBOURS nearest rows in the input
N(i) (by cosine, among the file's first KEEP_POOL rows), each neighbour held where it is:

    + (keep / |N(i)|) Σ_{j in N(i)} |(q_i - q_j) - (q̂_i - q̂_j)|^2

counter-fitting's vector space preservation (Mrkšić et al. 2016) made quadratic, so the update stays
exact: a word moves with the words it was near, and keeps its relatedness to them. Synonyms alone
pull a word toward one sense (bank toward depository) and away from its topic (money); WordSim-353's
relatedness and word-pair sets nobody tuned on lost that (benchmarks/README.md, retrofit). The
numerator gains keep (q̂_i - mean_N q̂_j) + keep mean_N q_j, the denominator keep.

One round updates every moving row at once (Jacobi) with one sparse product, [moving, local] x
[local, dim]; ``epochs`` rounds are made (20 by default). Without antonyms and frozen rows this is
Faruqui's update (his script sweeps the rows in place, Gauss-Seidel; Jacobi has the same fixed
point and is one matmul; a round shrinks the largest distance to it by a factor
(1 + repel + keep) / (α + 1 + repel + keep) at least).

The antonym term pulls q_i toward -q_j: on GloVe 6B 50d with WordNet it raises the SimLex-999 gain
over synonyms alone about as much as counter-fitting's hinge on the cosine, for less WordSim-353 lost
(benchmarks/retrofit.py; benchmarks/README.md, retrofit). The quadratic term keeps the update exact
and was kept.

The closed form is exact where the sparse step would only approach the same minimiser, and takes
seconds (benchmarks/README.md, retrofit); so there are no batches, learning rate or checkpoints. Frozen rows are
read as neighbours and never written: they pull their neighbours and keep their bits. Lexicon
words that are not in the vectors are counted and reported, never added.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from embedtune.config.keys import FLOAT32_MAX, OwnKeys, Range, key
from embedtune.config.schema import Config
from embedtune.errors import EmbedtuneError, counted
from embedtune.objectives.base import ClosedForm, Modes, Objective
from embedtune.objectives.describe import Describe
from embedtune.plan.rules import Plan, make_plan
from embedtune.vectors import Vectors, VectorsOutline, decide_lowercase

UNKNOWN_SHOWN = 5   # lexicon words missing from the vectors, shown by name in the summary


@dataclass(frozen=True)
class RetrofitFiles(OwnKeys):
    """retrofit's own keys of the file's top level: the lexicons it reads instead of a corpus."""

    table = ""
    lexicon: str | None = key(path="read", only="read",
                              help="Synonyms, 'word neighbour neighbour ...' per line (UTF-8; Faruqui's format; see "
                                   "`embedtune lexicon`).")
    antonyms: str | None = key(path="read", only="read", help="Antonyms in the same format, pulled apart.")


@dataclass(frozen=True)
class RetrofitKeys(OwnKeys):
    """retrofit's own keys of [train]."""

    repel: float | None = key(range=Range(0, FLOAT32_MAX, zero="off"), help="Weight of the antonym term.")
    keep: float | None = key(range=Range(0, FLOAT32_MAX, zero="off"),
                             help="Weight of keeping each moving row's offsets to its 10 nearest rows in the input "
                                  "(its relatedness to them).")


@dataclass
class Lexicon:
    """The pairs of a lexicon file between rows of the vectors.

    rows, cols : int arrays of shape = [n_pairs]; row i lists col j (i != j; repeats possible)
    unknown : distinct lexicon words not in the vectors; unknown_first: the first few of them
    """

    path: str
    lines: int
    rows: np.ndarray
    cols: np.ndarray
    words: int = 0
    unknown: int = 0
    unknown_first: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"lines": self.lines, "words": self.words, "pairs_in_vectors": len(self.rows),
                "words_not_in_vectors": self.unknown, "first_not_in_vectors": self.unknown_first}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_lexicon(path: str, index: dict[str, int], lowercase: bool = False) -> Lexicon:
    """Read ``word neighbour neighbour ...`` lines (UTF-8, whitespace-separated; Faruqui's format).

    A line with a word and no neighbour adds nothing. Words are lower-cased when ``lowercase``.
    """
    rows, cols = [], []
    unknown: dict[str, None] = {}
    seen: set[str] = set()
    lines = 0
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise EmbedtuneError(f"not valid UTF-8 ({err.reason} at byte {err.start}); a lexicon is UTF-8 "
                                         "text, 'word neighbour neighbour ...' per line", path, number) from None
                if lowercase:
                    text = text.lower()
                words = text.split()
                if not words:
                    continue
                lines += 1
                if len(words) > 2 and all(_is_number(w) for w in words[1:]):
                    raise EmbedtuneError(f"'{words[0]}' is followed by {len(words) - 1} numbers: this looks like a "
                                         "vectors file; a lexicon has 'word neighbour neighbour ...' per line",
                                         path, number)
                head = index.get(words[0])
                for word in words:
                    if word not in seen:
                        seen.add(word)
                        if word not in index:
                            unknown[word] = None
                if head is None:
                    continue
                for word in words[1:]:
                    other = index.get(word)
                    if other is not None and other != head:
                        rows.append(head)
                        cols.append(other)
    except FileNotFoundError:
        raise EmbedtuneError("no such lexicon file", path) from None
    except IsADirectoryError:
        raise EmbedtuneError("is a folder, expected a lexicon file", path) from None
    return Lexicon(path, lines, np.array(rows, np.int64), np.array(cols, np.int64), len(seen), len(unknown),
                   list(unknown)[:UNKNOWN_SHOWN])


def adjacency(lexicon: Lexicon, n: int) -> scipy.sparse.csr_matrix:
    """[n, n] 0/1, symmetric: a pair listed either way (or twice) is one edge both ways, so a
    frozen word pulls its neighbours even when their lines do not name it."""
    import scipy.sparse

    a = scipy.sparse.coo_matrix((np.ones(len(lexicon.rows)), (lexicon.rows, lexicon.cols)), shape=(n, n)).tocsr()
    a = a + a.T
    a.data[:] = 1.0
    return a


FROZEN_PULL = 8.0
"""How much more a frozen neighbour weighs than a moving one, within the same total (1 for synonyms,
repel for antonyms): two rows that both move each cover half the distance between them, a frozen one
cannot, so the moving row goes most of the way to it. Chosen from 1, 2, 4, 8 on validation halves of
SimLex-999 and WordSim-353, GloVe's 10,000 most frequent rows frozen (benchmarks/retrofit.py;
benchmarks/README.md, retrofit). Without frozen rows it changes nothing."""


def _pull(graph: scipy.sparse.csr_matrix, moving: np.ndarray, frozen: np.ndarray, total: float,
          to_local: np.ndarray, n_local: int) -> scipy.sparse.csr_matrix:
    """[moving, local]: each moving row's neighbours weighted 1 (FROZEN_PULL if frozen), scaled to ``total``."""
    import scipy.sparse

    rows = graph[moving]
    weights = np.where(frozen[rows.indices], FROZEN_PULL, 1.0)
    row_of = np.repeat(np.arange(len(moving)), np.diff(rows.indptr))
    sums = np.bincount(row_of, weights, minlength=len(moving))
    weights *= total / sums[row_of]
    return scipy.sparse.csr_matrix((weights, to_local[rows.indices], rows.indptr), shape=(len(moving), n_local))


KEEP_NEIGHBOURS = 10
"""How many nearest rows of the input a moving row keeps its offsets to (``keep``). 10 and 20 scored
alike on GloVe 6B 50d's validation halves (benchmarks/README.md, retrofit)."""
KEEP_POOL = 50_000
"""The neighbours are looked for among the file's first rows: word vector files list the most frequent
words first, and a pool of 20,000, 50,000 or 100,000 gave the same figures on GloVe 6B 50d at a
cost that grows with it (benchmarks/README.md, retrofit)."""
NEAREST_BLOCK = 512   # moving rows scored against the pool at once: one float32 [512, pool] block, reused


def nearest_rows(matrix: np.ndarray, rows: np.ndarray, k: int, pool: int) -> np.ndarray:
    """int64 [len(rows), k']: each row's k' = min(k, pool - 1) nearest rows by cosine among
    matrix[:pool], itself left out."""
    from numba import get_num_threads

    from embedtune.kernels.nearest import top_k_columns

    threads = get_num_threads()   # the threads numba's parallel loop took here (NUMBA_NUM_THREADS, or as set)

    def unit(part):
        norms = np.sqrt(np.einsum("ij,ij->i", part, part))
        norms[norms == 0] = 1.0   # a zero row scores 0 against everything
        return (part / norms[:, None]).astype(np.float32)

    pool = min(pool, len(matrix))
    k = min(k, pool - 1)
    out = np.empty((len(rows), max(k, 0)), np.int64)
    if k < 1:
        return out
    candidates = unit(matrix[:pool]).T.copy()
    buffer = np.empty((min(NEAREST_BLOCK, len(rows)), pool), np.float32)   # one block's scores, reused
    for start in range(0, len(rows), NEAREST_BLOCK):
        block = rows[start:start + NEAREST_BLOCK]
        scores = np.matmul(unit(matrix[block]), candidates, out=buffer[:len(block)])
        inside = block < pool
        scores[np.flatnonzero(inside), block[inside]] = -np.inf
        top_k_columns(scores, k, out[start:start + len(block)], threads)
    return out


def retrofit(matrix: np.ndarray, synonyms: scipy.sparse.csr_matrix, antonyms: scipy.sparse.csr_matrix | None,
             frozen: np.ndarray, rounds: int, anchor: float = 1.0, repel: float = 0.0, keep: float = 0.0):
    """The rounds of the update above, on the rows that are not frozen and have a neighbour.

    matrix : float32 [n, dim] (read only); synonyms, antonyms : [n, n] 0/1 adjacency
    frozen : bool [n]
    Returns (moving row ids [m], their new rows float32 [m, dim], largest change per round).
    """
    import scipy.sparse

    n = len(matrix)
    frozen = frozen[:n]
    has_s = np.diff(synonyms.indptr) > 0
    has_a = np.diff(antonyms.indptr) > 0 if antonyms is not None and repel else np.zeros(n, bool)
    moving = np.flatnonzero(~frozen & (has_s | has_a))
    if not len(moving):
        return moving, np.empty((0, matrix.shape[1]), np.float32), []
    nearest = nearest_rows(matrix, moving, KEEP_NEIGHBOURS, KEEP_POOL) if keep else np.empty((len(moving), 0), np.int64)
    # Work on the moving rows and their neighbours only (local ids), never on all n rows.
    graphs = [synonyms] + ([antonyms] if has_a.any() else [])
    local = np.union1d(moving, np.concatenate([g[moving].indices for g in graphs] + [nearest.ravel()]))
    to_local = np.full(n, -1, np.int64)
    to_local[local] = np.arange(len(local))
    # One product per round: attract, repel and keep in one matrix.
    pull = _pull(synonyms, moving, frozen, 1.0, to_local, len(local))
    denominator = anchor + has_s[moving]
    if has_a.any():
        pull = pull - _pull(antonyms, moving, frozen, repel, to_local, len(local))
        denominator = denominator + repel * has_a[moving]
    x = matrix[local].astype(np.float64)
    at = to_local[moving]
    start = anchor * x[at]
    if nearest.shape[1]:
        k = nearest.shape[1]
        near = scipy.sparse.csr_matrix((np.full(nearest.size, keep / k), to_local[nearest].ravel(),
                                        np.arange(0, nearest.size + 1, k)), shape=(len(moving), len(local)))
        pull = pull + near
        start = start + keep * x[at] - near @ x
        denominator = denominator + keep
    changes = []
    for _ in range(rounds):
        new = (start + pull @ x) / denominator[:, None]
        changes.append(float(np.abs(new - x[at]).max()))
        x[at] = new
    return moving, x[at].astype(np.float32), changes


def plan_retrofit(vectors: Vectors | VectorsOutline, config: Config, on_plan=None):
    """The plan and the lexicons read against the vectors: every check ``fit`` makes before its
    update (``train --dry-run`` stops here). Returns (plan, lowercase, synonyms, antonyms or None)."""
    lowercase = decide_lowercase(config.vocab.lowercase, vectors)
    plan = make_plan(vectors, [], config.vocab)
    if on_plan is not None:
        on_plan(plan)
    files = config.keys_of(RetrofitFiles)
    synonyms = read_lexicon(files.lexicon, vectors.index, lowercase)
    antonyms = read_lexicon(files.antonyms, vectors.index, lowercase) if files.antonyms else None
    if not len(synonyms.rows) and (antonyms is None or not len(antonyms.rows)):
        raise EmbedtuneError(f"no pair of its {synonyms.words:,} words is in the vectors "
                             f"({synonyms.unknown:,} of them are not)", files.lexicon)
    return plan, lowercase, synonyms, antonyms


def fit(vectors: Vectors, config: Config, on_plan=None, resume: bool = False) -> tuple[Vectors, Plan, dict]:
    """Retrofit ``vectors`` to the lexicon (and the antonyms) of ``config`` (``RetrofitFiles``), resolved.

    Lexicon words are lower-cased when the vectors are (``vocab.lowercase`` auto), as a corpus is.
    Returns (vectors: same words, moved rows replaced; the plan; summary figures).
    """
    began = time.perf_counter()
    t, own = config.train, config.train.keys_of(RetrofitKeys)
    repel, keep = own.repel, own.keep
    if not config.keys_of(RetrofitFiles).lexicon:
        raise EmbedtuneError("the retrofit objective needs a lexicon (--lexicon FILE or lexicon = in the config)")
    if resume or t.checkpoint_dir:
        raise EmbedtuneError("retrofit takes seconds and keeps no checkpoints; drop --resume and --checkpoint-dir")
    plan, lowercase, synonyms, antonyms = plan_retrofit(vectors, config, on_plan)
    n = len(vectors)
    train_began = time.perf_counter()
    moving, rows, changes = retrofit(vectors.matrix, adjacency(synonyms, n),
                                     adjacency(antonyms, n) if antonyms is not None else None,
                                     plan.frozen, t.epochs, t.anchor, repel, keep)
    if not len(moving):
        raise EmbedtuneError("nothing to train: every row with a lexicon neighbour is frozen by the rules",
                             config.vocab.freeze_list or config.vocab.train_list)
    matrix = vectors.matrix.copy()
    matrix[moving] = rows
    train_seconds = time.perf_counter() - train_began
    stats = {
        **plan.summary(),
        "objective": "retrofit",
        "lowercase": lowercase,
        "anchor": t.anchor,
        "repel": repel if antonyms is not None else None,
        "keep": keep,
        "epochs": t.epochs,
        "lexicon": synonyms.summary(),
        "antonyms": antonyms.summary() if antonyms is not None else None,
        "trained_rows": int(len(moving)),
        "round_changes": changes,
        "train_seconds": round(train_seconds, 3),
        "total_seconds": round(time.perf_counter() - began, 3),
    }
    return Vectors(list(vectors.words), matrix), plan, stats


def dry_run(vectors: Vectors | VectorsOutline, config: Config, lowercase: bool, resume: bool, workers: int) -> dict:
    """The rules applied and the lexicons read against the vectors' words (the dry run's outline: no matrix
    read); nothing retrofitted."""
    plan, lowercase, synonyms, antonyms = plan_retrofit(vectors, config)
    t = config.train
    return {**plan.summary(), "dry_run": True, "objective": "retrofit", "vectors": config.vectors,
            "output": config.output, "to": None, "lowercase": lowercase,
            "settings": {"epochs": t.epochs, "anchor": t.anchor,
                         "repel": t.keys_of(RetrofitKeys).repel if antonyms else None,
                         "keep": t.keys_of(RetrofitKeys).keep},
            "lexicon": synonyms.summary(), "antonyms": antonyms.summary() if antonyms else None}


class RetrofitDescribe(Describe):
    """retrofit's: the lexicons read, its rounds and the largest changes (no corpus, no loop). ``files``:
    retrofit's top-level keys (the lexicons' names)."""

    files = RetrofitFiles

    @classmethod
    def dry_run_lines(cls, d: dict, config) -> list[str]:
        lines = [f"{'rows':<10} {d['frozen']:,} frozen, {d['trainable']:,} trainable"]
        files = config.keys_of(cls.files)
        for key in ("lexicon", "antonyms"):
            lex = d[key]
            if lex is not None:
                lines.append(f"{key:<10} {getattr(files, key)}: {lex['lines']:,} lines, {lex['pairs_in_vectors']:,} "
                             f"pairs in the vectors, {lex['words_not_in_vectors']:,} words not in the vectors")
        s = d["settings"]
        lines.append(f"{'objective':<10} retrofit: {s['epochs']} rounds, anchor {s['anchor']:g}"
                     + (f", repel {s['repel']:g}" if d["antonyms"] else "")
                     + (f", keep {s['keep']:g}" if s.get("keep") else ""))
        return lines

    @classmethod
    def report_lines(cls, result, config) -> list[str]:
        s, files = result.stats, config.keys_of(cls.files)
        lines = []
        for key in ("lexicon", "antonyms"):
            lex = s[key]
            if lex is None:
                continue
            lines.append(f"{getattr(files, key)}: {counted(lex['lines'], 'line')}, {counted(lex['words'], 'word')}, "
                         f"{counted(lex['pairs_in_vectors'], 'pair')} in the vectors; "
                         f"{counted(lex['words_not_in_vectors'], 'word')} not in the vectors (not added)"
                         + (f", first: {', '.join(lex['first_not_in_vectors'])}" if lex["first_not_in_vectors"] else ""))
        lines.append(f"Retrofitted {counted(s['trained_rows'], 'row')} in {counted(s['epochs'], 'round')} (anchor {s['anchor']:g}"
                     + (f", repel {s['repel']:g}" if s["repel"] is not None else "")
                     + (f", keep {s['keep']:g}" if s.get("keep") else "") + f"), {s['train_seconds']:.2f} s; "
                     f"largest change in the last round: {s['round_changes'][-1]:.2g}; "
                     f"largest change on a frozen row: {s['max_frozen_change']}")
        if config.output != "-":
            lines.append(f"Wrote {counted(len(result.vectors), 'vector')} to {config.output}")
        return lines


class Retrofit(Objective):
    """Retrofitting as an objective of ``embedtune train``: fitted in closed form by ``fit`` above,
    never by the loop (no corpus, batches, learning rate or checkpoints)."""

    name = "retrofit"
    help = "to --lexicon, no CORPUS"
    keys = (RetrofitFiles, RetrofitKeys)
    # Faruqui et al.'s anchor (alpha = 1); 20 rounds: each shrinks the distance to the update's fixed
    # point by (1 + repel + keep) / (2 + repel + keep) at least, (5/7)^20 = 1e-3 at repel 1, keep 0.5;
    # repel chosen from 0 to 4 on validation halves of SimLex-999 and WordSim-353; keep, from 0 to 4, the
    # smallest that holds WordSim-353 and its relatedness subset within 0.01 on the validation halves of
    # both spaces, GloVe 6B 50d and a skip-gram space (benchmarks/retrofit.py --keep-grid,
    # benchmarks/README.md, retrofit).
    defaults = {"anchor": 1.0, "repel": 1.0, "keep": 0.5, "epochs": 20}
    settings = ("repel", "keep")
    closed_form = ClosedForm(fit=fit, dry_run=dry_run)
    modes = Modes(corpus=False)
    describe = RetrofitDescribe

    # --- what a run reads, refuses and reports (Objective's hooks) ----------------------------------
    @classmethod
    def argument_problem(cls, config: Config) -> str | None:
        if config.keys_of(RetrofitFiles).lexicon is None:
            return "--objective retrofit needs --lexicon FILE (or lexicon = in --config)"
        if config.corpus is not None:
            return "--objective retrofit reads no CORPUS; give --lexicon (and --antonyms) instead"
        return None

    @classmethod
    def input_files(cls, config: Config) -> list[tuple[str | None, str]]:
        files = config.keys_of(RetrofitFiles)
        return [(files.lexicon, "lexicon file"), (files.antonyms, "lexicon file")]

    @classmethod
    def check_run(cls, config, resume: bool, workers: int) -> None:
        if resume or config.train.checkpoint_dir:
            raise EmbedtuneError("retrofit takes seconds and keeps no checkpoints; drop --resume and --checkpoint-dir")
        if workers > 1:
            raise EmbedtuneError("--workers: retrofit runs in one process (it takes seconds)")
