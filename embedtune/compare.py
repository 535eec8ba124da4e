"""What changed between two sets of vectors, how good they are, and who their neighbours are.

Everything here works on :class:`embedtune.vectors.Vectors`; reading files is the formats' job.
Evaluation gives the figures of gensim's ``KeyedVectors.evaluate_word_pairs`` /
``evaluate_word_analogies`` (tested equal), with analogies answered in batches of matrix products.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

# Rows compared per step. 8192 x 300 float32 is 9 MiB per side: the temporaries stay small
# enough to be reused rather than freshly paged in, faster than larger steps (benchmarks/README.md,
# eval_speed), and the extra memory is bounded whatever the vocabulary size.
CHUNK_ROWS = 8192
# Query words scored per matrix product in nearest_neighbors: 256 x 400k float32 scores is 400 MiB.
QUERY_CHUNK = 256
# gensim's default, and about what word2vec's compute-accuracy is run with on large models.
RESTRICT_VOCAB = 300_000


def _gensim_datapath(name: str) -> str:
    from gensim.test.utils import datapath

    return datapath(name)


def default_similarity_files() -> list[str]:
    """WordSim-353 and SimLex-999 as shipped with gensim (``gensim/test/test_data``)."""
    return [_gensim_datapath("wordsim353.tsv"), _gensim_datapath("simlex999.txt")]


def default_analogy_files() -> list[str]:
    """The Google analogy set (``questions-words.txt``) as shipped with gensim."""
    return [_gensim_datapath("questions-words.txt")]


def _finite(x: float | None) -> float | None:
    # JSON has no NaN; a score that does not exist is null.
    return None if x is None or not math.isfinite(x) else float(x)


# ---------------------------------------------------------------------------------------------
# diff


@dataclass
class MovedWord:
    word: str
    l2: float  # ||new - old||
    cosine: float  # cosine(new, old)


@dataclass
class Diff:
    """Rows of two vector sets matched by word.

    ``identical`` rows are bit-identical; L2 and cosine figures cover the ``changed`` rows only
    and are None when none changed. ``added_words`` / ``removed_words`` are the first few in
    file order, ``most_moved`` the rows with the largest L2 change, largest first.
    """

    old_words: int
    new_words: int
    dim: int
    identical: int
    changed: int
    added: int
    removed: int
    l2_max: float | None
    l2_mean: float | None
    cosine_min: float | None
    cosine_mean: float | None
    most_moved: list[MovedWord]
    added_words: list[str]
    removed_words: list[str]

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("l2_max", "l2_mean", "cosine_min", "cosine_mean"):
            d[key] = _finite(d[key])
        for row in d["most_moved"]:
            row["l2"], row["cosine"] = _finite(row["l2"]), _finite(row["cosine"])
        return d


@dataclass
class _RowChanges:
    """Matched rows and, for the changed ones, how far they moved.

    words : list of str, the m words both sets hold
    changed : int64 array of shape [c], positions into ``words`` of rows not bit-identical
    l2, cosine : float64 arrays of shape [c], ||new - old|| and cosine(new, old) of those rows
    removed_words : words the old set (or the asked-for list) has and the new set lacks
    """

    words: list[str]
    changed: np.ndarray
    l2: np.ndarray
    cosine: np.ndarray
    removed_words: list[str]


def _check_dims(old: Vectors, new: Vectors) -> None:
    if old.dim != new.dim:
        raise EmbedtuneError(
            f"vectors have {new.dim} dimensions, but the other file's have {old.dim}; "
            "rows of different sizes cannot be compared"
        )


def _match(old: Vectors, new: Vectors, words: list[str] | None = None):
    """Rows of ``old`` and ``new`` holding the same word.

    Returns (words, old_rows, new_rows, missing): old_rows/new_rows int64 arrays of shape [m]
    (None for both when the word lists are identical, so rows pair up by position), and the
    words that ``new`` lacks (in ``old``'s order, or ``words``' order when given).
    """
    if words is None:
        if old.words == new.words and len(old.index) == len(old.words):
            return old.words, None, None, []
        words = list(old.index)
        old_rows = np.fromiter(old.index.values(), dtype=np.int64, count=len(words))
    else:
        old_rows = np.fromiter((old.index[w] for w in words), dtype=np.int64, count=len(words))
    get = new.index.get
    new_rows = np.fromiter((get(w, -1) for w in words), dtype=np.int64, count=len(words))
    found = new_rows >= 0
    if found.all():
        return words, old_rows, new_rows, []
    missing = [words[i] for i in np.flatnonzero(~found)]
    keep = np.flatnonzero(found)
    return [words[i] for i in keep], old_rows[keep], new_rows[keep], missing


def _row_changes(old: Vectors, new: Vectors, words: list[str] | None = None) -> _RowChanges:
    """Compare every word both sets hold (or only ``words``), CHUNK_ROWS rows at a time."""
    _check_dims(old, new)
    matched_words, old_rows, new_rows, missing = _match(old, new, words)
    m = len(matched_words)
    changed, l2s, cosines = [], [], []
    for start in range(0, m, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, m)
        if old_rows is None:
            a, b = old.matrix[start:stop], new.matrix[start:stop]
        else:
            a, b = old.matrix[old_rows[start:stop]], new.matrix[new_rows[start:stop]]
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        # Bits, not values: -0.0 vs 0.0 or a NaN payload is a change a frozen row must not have.
        differs = (a.view(np.uint32) != b.view(np.uint32)).any(axis=1)
        pos = np.flatnonzero(differs)
        if pos.size == 0:
            continue
        if pos.size < differs.size:
            a, b = a[pos], b[pos]
        # float32 sums over one row lose ~1e-6 relative: plenty for a report, and converting
        # to float64 first would triple the time of a diff where every row moved.
        delta = b - a
        l2 = np.sqrt(np.einsum("ij,ij->i", delta, delta).astype(np.float64))
        na = np.sqrt(np.einsum("ij,ij->i", a, a).astype(np.float64))
        nb = np.sqrt(np.einsum("ij,ij->i", b, b).astype(np.float64))
        denom = na * nb
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.einsum("ij,ij->i", a, b).astype(np.float64) / denom
        # A zero vector has no direction: two zeros point the same way, one zero does not.
        cos = np.where(denom > 0, cos, np.where((na == 0) & (nb == 0), 1.0, 0.0))
        changed.append(pos + start)
        l2s.append(l2)
        cosines.append(np.clip(cos, -1.0, 1.0))
    return _RowChanges(
        words=matched_words,
        changed=np.concatenate(changed) if changed else np.zeros(0, np.int64),
        l2=np.concatenate(l2s) if l2s else np.zeros(0),
        cosine=np.concatenate(cosines) if cosines else np.zeros(0),
        removed_words=missing,
    )


def diff_vectors(old: Vectors, new: Vectors, top: int = 10, examples: int = 10) -> Diff:
    """Match rows by word and say which are identical, changed, added and removed.

    top : how many of the most-moved words to list
    examples : how many added and removed words to list

    Two 400k x 300 sets take about a second: matching is one dict pass (none when the word
    lists are equal), identity is a uint32 comparison, distances are computed in chunks
    for the changed rows only.
    """
    rc = _row_changes(old, new)
    n_changed = int(rc.changed.size)
    most_moved = []
    if n_changed:
        k = min(top, n_changed)
        # NaN sorts as the largest move: a row that became NaN moved more than any other.
        order = np.nan_to_num(rc.l2, nan=np.inf)
        best = np.argpartition(-order, k - 1)[:k] if k < n_changed else np.arange(n_changed)
        best = best[np.argsort(-order[best], kind="stable")]
        most_moved = [
            MovedWord(rc.words[rc.changed[i]], float(rc.l2[i]), float(rc.cosine[i])) for i in best
        ]
    added_words = []
    n_added = len(new.index) - len(rc.words)
    if n_added:
        for w in new.index:
            if w not in old.index:
                added_words.append(w)
                if len(added_words) == examples:
                    break
    with warnings.catch_warnings():
        # Rows kept with NaN (--allow-nan) have no change to measure: when every changed row is one,
        # the figure is NaN, which is the answer, not a warning on standard error.
        warnings.simplefilter("ignore", RuntimeWarning)
        figures = (np.nanmax(rc.l2), np.nanmean(rc.l2), np.nanmin(rc.cosine), np.nanmean(rc.cosine)) \
            if n_changed else (None,) * 4
    l2_max, l2_mean, cosine_min, cosine_mean = (None if f is None else float(f) for f in figures)
    return Diff(
        old_words=len(old.index),
        new_words=len(new.index),
        dim=old.dim,
        identical=len(rc.words) - n_changed,
        changed=n_changed,
        added=n_added,
        removed=len(rc.removed_words),
        l2_max=l2_max,
        l2_mean=l2_mean,
        cosine_min=cosine_min,
        cosine_mean=cosine_mean,
        most_moved=most_moved,
        added_words=added_words,
        removed_words=rc.removed_words[:examples],
    )


# ---------------------------------------------------------------------------------------------
# frozen words


@dataclass
class FrozenCheck:
    """Frozen words checked between an old and a new set of vectors.

    changed : frozen words whose vector is not bit-identical in the new set
    removed : frozen words the old set has and the new one lacks
    unknown : listed words the old set does not have (nothing to keep; not a failure)
    """

    checked: int
    changed: list[str]
    removed: list[str]
    unknown: list[str]

    @property
    def ok(self) -> bool:
        return not self.changed and not self.removed

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def check_frozen(old: Vectors, new: Vectors, words) -> FrozenCheck:
    """Which of ``words`` (iterable of str; order kept, repeats dropped) did not stay bit-identical."""
    words = list(dict.fromkeys(words))
    known = [w for w in words if w in old.index]
    unknown = [w for w in words if w not in old.index]
    rc = _row_changes(old, new, known)
    return FrozenCheck(
        checked=len(known),
        changed=[rc.words[i] for i in rc.changed],
        removed=rc.removed_words,
        unknown=unknown,
    )


def config_frozen_words(vectors: Vectors, vocab) -> list[str]:
    """The words of ``vectors`` that a training config's freeze rules (``vocab``: a
    :class:`embedtune.config.VocabConfig`) keep frozen, in file order.

    Only pretrained words can be frozen, so the plan is made without corpus words.
    """
    from embedtune.plan import make_plan

    plan = make_plan(vectors, [], vocab)
    return [vectors.words[i] for i in np.flatnonzero(plan.frozen[: plan.n_pretrained])]


# ---------------------------------------------------------------------------------------------
# evaluation


@dataclass
class SimilarityScore:
    """Correlation of cosine similarity with human judgements on one word-pair file.

    pearson / spearman are None when no pair is in the vocabulary.
    """

    name: str
    path: str
    pearson: float | None
    spearman: float | None
    pairs: int  # valid lines in the file
    pairs_used: int  # of those, pairs with both words in the vocabulary

    @property
    def oov_ratio(self) -> float:
        return 1.0 - self.pairs_used / self.pairs

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pearson"], d["spearman"] = _finite(self.pearson), _finite(self.spearman)
        d["oov_ratio"] = self.oov_ratio
        return d


@dataclass
class AnalogySection:
    name: str
    questions: int  # in the file
    answered: int  # with all four words among the restricted vocabulary
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None

    def to_dict(self) -> dict:
        return {**asdict(self), "accuracy": self.accuracy}


@dataclass
class AnalogyScore:
    """3CosAdd analogy accuracy (gensim's evaluate_word_analogies), per section and overall.

    Questions with a word outside the first ``restrict_vocab`` words are skipped, as word2vec's
    compute-accuracy does; ``answered`` counts the rest.
    """

    name: str
    path: str
    restrict_vocab: int
    sections: list[AnalogySection]
    questions: int
    answered: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.answered if self.answered else None

    @property
    def oov_ratio(self) -> float:
        return 1.0 - self.answered / self.questions

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sections"] = [s.to_dict() for s in self.sections]
        d["accuracy"], d["oov_ratio"] = self.accuracy, self.oov_ratio
        return d


@dataclass
class Evaluation:
    similarity: list[SimilarityScore]
    analogies: list[AnalogyScore]

    def to_dict(self) -> dict:
        return {
            "similarity": [s.to_dict() for s in self.similarity],
            "analogies": [a.to_dict() for a in self.analogies],
        }

    def headline(self) -> list[tuple[str, str, float | None]]:
        """(benchmark, metric, value) rows: the figures a before/after table compares."""
        rows = []
        for s in self.similarity:
            rows += [(s.name, "pearson", _finite(s.pearson)), (s.name, "spearman", _finite(s.spearman))]
            rows.append((s.name, "oov_ratio", s.oov_ratio))
        for a in self.analogies:
            rows += [(a.name, "accuracy", a.accuracy), (a.name, "oov_ratio", a.oov_ratio)]
            rows += [(f"{a.name}: {s.name}", "accuracy", s.accuracy) for s in a.sections]
        return rows


# Analogy questions are answered ANALOGY_BATCH at a time, each batch one (batch x dim) @ (dim x
# TILE_ROWS) product per tile of the vocabulary: 256 x 65536 float32 scores is 64 MiB, and the
# product then runs near the machine's matrix-product speed (one question at a time, as gensim
# does, is a matrix-vector product per question; benchmarks/README.md, eval_speed).
ANALOGY_BATCH = 256
TILE_ROWS = 65536
# A question's first threshold is its 8th best score among the first SEED_ROWS words (the most
# frequent, where answers usually are); only words scoring above it are kept as candidates.
SEED_ROWS = 4096
# gensim's most_similar(topn=5) ranks the 5 + 3 best words, then drops the question's own three.
_TOP = 8
# Candidates are picked on scores computed from pre-normalised rows, then re-scored the way gensim
# computes them (dot with the mean, divided by the norm); the two differ by float32 rounding
# (~1e-7), so any word within this margin of the threshold is kept and re-scored.
_MARGIN = 1e-4


def _first_rows(vectors: Vectors, case_insensitive: bool) -> dict[str, int]:
    """Benchmark word -> the first row holding it (upper-cased words when ``case_insensitive``).

    This is gensim's ``ok_vocab`` for the whole file: a word is among the first r words when its
    row is below r. Inserting in reverse order leaves the first row of a word that occurs twice.
    """
    words = [w.upper() for w in vectors.words] if case_insensitive else vectors.words
    return dict(zip(reversed(words), range(len(words) - 1, -1, -1)))


def _text_lines(path: str):
    """(line number, text) of a benchmark file, UTF-8; a byte-order mark at the start is not part of
    a word, and bytes that are not UTF-8 are an error naming the line."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, 1):
            if line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise EmbedtuneError(f"not valid UTF-8 text: {err.reason}", path, line_no) from None


def _read_pairs(path: str, case_insensitive: bool, delimiter: str = "\t") -> list[tuple[str, str, float]]:
    """(word, word, score) for each line gensim's evaluate_word_pairs reads, parsed as it does:
    '#' lines skipped, exactly three fields, a score that parses as a number."""
    triples = []
    for _, line in _text_lines(path):
        if not line or line.startswith("#"):
            continue
        parts = line.split(delimiter)
        if len(parts) != 3:
            continue
        if case_insensitive:
            parts = [part.upper() for part in parts]
        try:
            score = float(parts[2])
        except ValueError:
            continue
        triples.append((parts[0], parts[1], score))
    return triples


def evaluate_similarity(vectors: Vectors, path, case_insensitive: bool = True, rows=None) -> SimilarityScore:
    """Pearson and Spearman correlation on a ``word1<TAB>word2<TAB>score`` file ('#' lines skipped).

    The same figures as gensim's ``evaluate_word_pairs`` with ``restrict_vocab`` = the whole
    vocabulary (only analogies are restricted to the most frequent words): the cosine of each pair
    computed as gensim does, the correlations by scipy.stats as gensim calls it.
    rows : ``_first_rows(vectors, case_insensitive)``, when the caller has it already
    """
    from gensim.matutils import unitvec
    from scipy import stats

    path = str(path)
    pairs = _read_pairs(path, case_insensitive)
    if not pairs:
        raise EmbedtuneError("no word pairs found (expected lines 'word1<TAB>word2<TAB>score')", path)
    rows = rows if rows is not None else _first_rows(vectors, case_insensitive)
    matrix = vectors.matrix
    gold, model = [], []
    for a, b, score in pairs:
        ia, ib = rows.get(a), rows.get(b)
        if ia is None or ib is None:
            continue
        gold.append(score)
        model.append(np.dot(unitvec(matrix[ia]), unitvec(matrix[ib])))
    if not gold:
        return SimilarityScore(Path(path).stem, path, None, None, len(pairs), 0)
    pearson, spearman = stats.pearsonr(gold, model), stats.spearmanr(gold, model)
    return SimilarityScore(
        Path(path).stem, path, float(pearson.statistic), float(spearman.statistic), len(pairs), len(gold)
    )


def _read_analogies(path: str, case_insensitive: bool) -> list[tuple[str, list[tuple[str, ...]]]]:
    """(section, questions) per ``: section`` header, each question four words, parsed as gensim's
    evaluate_word_analogies does (lines of other lengths skipped)."""
    sections: list[tuple[str, list]] = []
    for line_no, line in _text_lines(path):
        if line.startswith(": "):
            sections.append((line.lstrip(": ").strip(), []))
            continue
        words = line.split()
        if len(words) != 4:
            continue
        if not sections:
            raise EmbedtuneError("analogy question before any ': section' header line", path, line_no)
        sections[-1][1].append(tuple(w.upper() for w in words) if case_insensitive else tuple(words))
    if not any(questions for _, questions in sections):
        raise EmbedtuneError("no analogy questions found (expected lines 'a b c d' under ': section')", path)
    return sections


def _kth_largest(question: np.ndarray, score: np.ndarray, n_questions: int, k: int) -> np.ndarray:
    """Per question, the k-th largest of its scores (-inf when it has fewer than k).

    question : int array of shape [c], which question each score belongs to; score : shape [c]
    """
    kth = np.full(n_questions, -np.inf, dtype=np.float32)
    if question.size == 0:
        return kth
    order = np.lexsort((-score, question))
    counts = np.bincount(question, minlength=n_questions)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    enough = counts >= k
    kth[enough] = score[order][starts[enough] + k - 1]
    return kth


def _analogy_answers(matrix: np.ndarray, restrict: int, abc: np.ndarray, progress=None) -> list[list[int]]:
    """gensim's ``most_similar(positive=[b, c], negative=[a], topn=5, restrict_vocab=restrict)`` for
    every question, as rows.

    abc : int array of shape [m, 3], the rows of a, b and c (each below ``restrict``)
    Returns m lists of up to 5 rows, best first, the question's own rows left out.

    The mean vector of each question is computed with gensim's own operations, so it has the same
    bits. The vocabulary is then scored a batch of questions and a tile of rows at a time; words
    scoring below a question's running 8th best are dropped at once, and the few kept are
    re-scored with gensim's formula (the matrix-vector product of their rows with the unit mean,
    divided by their norms). Two rows whose scores are equal, or within a float32 rounding of
    each other (where BLAS may sum a row in another order than in gensim's one product over all
    rows), may be ranked the other way round; no answer differed on the sample, nor on every 20th
    Google question with the 400k file (benchmarks/eval_speed.py).
    """
    from gensim.matutils import unitvec

    m, dim = abc.shape[0], matrix.shape[1]
    if m == 0:
        return []
    top = min(_TOP, restrict)
    norms = np.linalg.norm(matrix, axis=1)  # gensim's fill_norms
    with np.errstate(divide="ignore", invalid="ignore"):
        # get_mean_vector(pre_normalize=True) of positive [b, c] and negative [a], in its order.
        means = np.zeros((m, dim), matrix.dtype)
        total_weight = 0
        for weight, column in zip(np.concatenate((np.ones(2), -1.0 * np.ones(1))), (1, 2, 0)):
            rows = abc[:, column]
            means += weight * (matrix[rows] / norms[rows, None])
            total_weight += abs(weight)
        means = means / total_weight
        queries = np.stack([unitvec(q).astype(np.float32) for q in means])
        tiles = []
        for start in range(0, restrict, TILE_ROWS):
            stop = min(start + TILE_ROWS, restrict)
            unit = matrix[start:stop] / norms[start:stop, None]
            unit[~np.isfinite(unit).all(axis=1)] = 0.0  # a zero row has no direction; gensim scores it NaN
            tiles.append((start, np.ascontiguousarray(unit.T)))
    scores_buffer = np.empty(min(ANALOGY_BATCH, m) * min(TILE_ROWS, restrict), np.float32)
    hits_buffer = np.empty(scores_buffer.size, bool)
    own_rows = abc.tolist()
    answers: list[list[int]] = []
    for first in range(0, m, ANALOGY_BATCH):
        batch = queries[first : first + ANALOGY_BATCH]
        b = batch.shape[0]
        threshold = None
        kept_q, kept_row, kept_score = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        for start, tile in tiles:
            width = tile.shape[1]
            scores = np.matmul(batch, tile, out=scores_buffer[: b * width].reshape(b, width))
            parts = [(0, width)]
            if threshold is None:
                # A first threshold: the smallest of the maxima of `top` disjoint blocks of the first
                # words (at least `top` scores reach it, so it is at most the top-th best; a max is
                # far cheaper than np.partition). Those first words are then kept and the threshold
                # tightened to their top-th best before the rest of the tile is compared with it.
                block = min(SEED_ROWS, width) // top
                if block:
                    seed = scores[:, : block * top].reshape(b, top, block)
                    threshold = seed.max(axis=2).min(axis=1) - _MARGIN
                    parts = [(0, block * top), (block * top, width)]
                else:
                    threshold = np.full(b, -np.inf, np.float32)
            for lo, hi in parts:
                if hi <= lo:
                    continue
                hits = np.greater_equal(scores[:, lo:hi], threshold[:, None],
                                        out=hits_buffer[: b * (hi - lo)].reshape(b, hi - lo))
                # flatnonzero, then divmod: np.nonzero on the 2-D mask is far slower (benchmarks/README.md,
                # eval_speed).
                q, col = np.divmod(np.flatnonzero(hits), hi - lo)
                col += lo
                kept_q = np.concatenate((kept_q, q))
                kept_row = np.concatenate((kept_row, col + start))
                kept_score = np.concatenate((kept_score, scores[q, col]))
                threshold = np.maximum(threshold, _kth_largest(kept_q, kept_score, b, top) - _MARGIN)
                keep = kept_score >= threshold[kept_q]
                kept_q, kept_row, kept_score = kept_q[keep], kept_row[keep], kept_score[keep]
        order = np.lexsort((kept_row, kept_q))
        kept_q, kept_row = kept_q[order], kept_row[order]
        bounds = np.searchsorted(kept_q, np.arange(b + 1))
        for j in range(b):
            candidates = kept_row[bounds[j] : bounds[j + 1]]
            with np.errstate(divide="ignore", invalid="ignore"):
                exact = matrix[candidates] @ batch[j] / norms[candidates]
            best = candidates[np.lexsort((candidates, -exact))][:top].tolist()
            own = own_rows[first + j]
            answers.append([i for i in best if i not in own][:5])
        if progress is not None:
            progress(b)
    return answers


def evaluate_analogies(
    vectors: Vectors,
    path,
    restrict_vocab: int = RESTRICT_VOCAB,
    case_insensitive: bool = True,
    rows=None,
    progress=None,
) -> AnalogyScore:
    """Accuracy on a word2vec-style analogy file (``: section`` lines, then ``a b c d`` lines).

    The same figures as gensim's ``evaluate_word_analogies`` (3CosAdd), answered in batches.
    restrict_vocab : only the first this many words are candidates and only questions made of
        them are asked, as in word2vec's compute-accuracy (files are sorted by frequency).
    rows : ``_first_rows(vectors, case_insensitive)``, when the caller has it already
    progress : called with the number of questions answered since the last call
    """
    path = str(path)
    if restrict_vocab < 1:
        raise EmbedtuneError(f"restrict_vocab must be at least 1, got {restrict_vocab}")
    return _score_analogies(vectors, path, _read_analogies(path, case_insensitive), restrict_vocab,
                            case_insensitive, rows, progress)


def _score_analogies(vectors, path, sections, restrict_vocab, case_insensitive, rows, progress) -> AnalogyScore:
    rows = rows if rows is not None else _first_rows(vectors, case_insensitive)
    restrict = min(restrict_vocab, len(vectors.words))
    asked, abc = [], []  # (section, expected word, a b c words) and a b c rows of the questions asked
    for number, (_, questions) in enumerate(sections):
        for a, b, c, expected in questions:
            found = [rows.get(w, restrict) for w in (a, b, c, expected)]
            if max(found) < restrict:
                asked.append((number, expected, {a, b, c}))
                abc.append(found[:3])
    answers = _analogy_answers(vectors.matrix, restrict, np.array(abc, np.int64).reshape(-1, 3), progress)
    correct = [0] * len(sections)
    answered = [0] * len(sections)
    for (number, expected, ignore), sims in zip(asked, answers):
        predicted = None
        # gensim's choice: the first of the 5 that is not one of the question's words, or else the last.
        for i in sims:
            predicted = vectors.words[i].upper() if case_insensitive else vectors.words[i]
            if predicted not in ignore:
                break
        answered[number] += 1
        correct[number] += predicted == expected
    result = [
        AnalogySection(name, len(questions), answered[i], correct[i])
        for i, (name, questions) in enumerate(sections)
    ]
    return AnalogyScore(
        name=Path(path).stem,
        path=path,
        restrict_vocab=restrict_vocab,
        sections=result,
        questions=sum(len(questions) for _, questions in sections),
        answered=sum(answered),
        correct=sum(correct),
    )


def evaluate(
    vectors: Vectors,
    similarity=None,
    analogies=None,
    restrict_vocab: int = RESTRICT_VOCAB,
    case_insensitive: bool = True,
    progress=None,
) -> Evaluation:
    """Score ``vectors`` on word-pair and analogy files.

    similarity, analogies : lists of paths; when both are None, WordSim-353, SimLex-999 and the
        Google analogies shipped with gensim. An empty list skips that kind.
    progress : called as ``progress(advance, total)`` with analogy questions answered since the
        last call and the total to answer (all files are read first, so bad files fail at once)
    """
    if similarity is None and analogies is None:
        similarity, analogies = default_similarity_files(), default_analogy_files()
    if restrict_vocab < 1:
        raise EmbedtuneError(f"restrict_vocab must be at least 1, got {restrict_vocab}")
    read = [(str(p), _read_analogies(str(p), case_insensitive)) for p in analogies or []]
    rows = _first_rows(vectors, case_insensitive)
    restrict = min(restrict_vocab, len(vectors.words))
    total = sum(
        all(rows.get(w, restrict) < restrict for w in question)
        for _, sections in read for _, questions in sections for question in questions
    )
    step = None if progress is None else (lambda advance: progress(advance, total))
    return Evaluation(
        similarity=[evaluate_similarity(vectors, p, case_insensitive, rows=rows) for p in similarity or []],
        analogies=[
            _score_analogies(vectors, p, sections, restrict_vocab, case_insensitive, rows, step)
            for p, sections in read
        ],
    )


# ---------------------------------------------------------------------------------------------
# nearest neighbours


@dataclass
class WordNeighbors:
    word: str
    neighbors: list[tuple[str, float]]  # (word, cosine), most similar first

    def to_dict(self) -> dict:
        return {"word": self.word, "neighbors": [{"word": w, "cosine": c} for w, c in self.neighbors]}


@dataclass
class Neighbors:
    k: int
    results: list[WordNeighbors]
    unknown: list[str]  # asked-for words the vectors do not have

    def to_dict(self) -> dict:
        return {"k": self.k, "results": [r.to_dict() for r in self.results], "unknown": self.unknown}


def nearest_neighbors(vectors: Vectors, words, k: int = 10) -> Neighbors:
    """The ``k`` words with the highest cosine to each of ``words``, over the whole vocabulary.

    A word is not its own neighbour. Norms are computed once; each block of query words is
    one (queries x dim) @ (dim x n) product and an argpartition, so the cost is a few
    matrix products whatever the vocabulary size.
    """
    if k < 1:
        raise EmbedtuneError(f"k must be at least 1, got {k}")
    words = list(words)
    known = [w for w in words if w in vectors.index]
    unknown = [w for w in words if w not in vectors.index]
    n = len(vectors.words)
    k_eff = min(k, n - 1)
    results = []
    if not known or k_eff < 1:
        return Neighbors(k, [WordNeighbors(w, []) for w in known], unknown)
    matrix = vectors.matrix
    # einsum, unlike linalg.norm, makes no n x dim temporary of squares.
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    # Zero rows score 0 against everything instead of dividing by zero.
    norms[norms == 0] = 1.0
    for start in range(0, len(known), QUERY_CHUNK):
        block = known[start : start + QUERY_CHUNK]
        rows = np.array([vectors.index[w] for w in block], dtype=np.int64)
        queries = matrix[rows] / norms[rows, None]
        scores = queries @ matrix.T  # [len(block), n]
        scores /= norms
        scores[np.arange(len(block)), rows] = -np.inf
        if k_eff < n - 1:
            # The k largest land in the last k places; partitioning `scores` itself, not
            # `-scores`, saves a copy of the whole block.
            top = np.argpartition(scores, n - k_eff, axis=1)[:, n - k_eff :]
        else:
            top = np.tile(np.arange(n), (len(block), 1))
        for word, row_scores, cand in zip(block, scores, top):
            cand = cand[np.isfinite(row_scores[cand])]
            cand = cand[np.argsort(-row_scores[cand], kind="stable")][:k_eff]
            results.append(WordNeighbors(word, [(vectors.words[j], float(row_scores[j])) for j in cand]))
    return Neighbors(k, results, unknown)
