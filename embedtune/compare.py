"""What changed between two sets of vectors, how good they are, and who their neighbours are.

Everything here works on :class:`embedtune.vectors.Vectors`; reading files is the formats' job.
Evaluation goes through gensim's ``KeyedVectors.evaluate_word_pairs`` / ``evaluate_word_analogies``
so scores match what people get from gensim directly.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

# Rows compared per step. 8192 x 300 float32 is 9 MiB per side: the temporaries stay small
# enough to be reused rather than freshly paged in, which measured 1.5x faster than 65536
# on a 400k x 300 diff (and bounds the extra memory whatever the vocabulary size).
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
    return Diff(
        old_words=len(old.index),
        new_words=len(new.index),
        dim=old.dim,
        identical=len(rc.words) - n_changed,
        changed=n_changed,
        added=n_added,
        removed=len(rc.removed_words),
        l2_max=float(np.nanmax(rc.l2)) if n_changed else None,
        l2_mean=float(np.nanmean(rc.l2)) if n_changed else None,
        cosine_min=float(np.nanmin(rc.cosine)) if n_changed else None,
        cosine_mean=float(np.nanmean(rc.cosine)) if n_changed else None,
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


def to_keyed_vectors(vectors: Vectors):
    """A gensim KeyedVectors sharing ``vectors``' word list, index and matrix (no copies).

    For read-only use (similarity, most_similar, evaluate_*): adding vectors to it would
    change ``vectors`` too.
    """
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vectors.dim, count=0, dtype=np.float32)
    kv.index_to_key = vectors.words
    kv.key_to_index = vectors.index
    kv.vectors = vectors.matrix
    kv.next_index = len(vectors.words)
    return kv


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


UTF8_BOM = b"\xef\xbb\xbf"


def _text_lines(path):
    """(line number, text) of a benchmark file; bytes that are not UTF-8 are an error naming the line
    (gensim's reader would stop with a traceback), and a byte-order mark at the start is dropped."""
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if number == 1:
                    raw = raw.removeprefix(UTF8_BOM)
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise EmbedtuneError(f"not valid UTF-8 ({err.reason} at byte {err.start + 1})", path,
                                         number) from None
    except OSError as err:
        raise EmbedtuneError(f"cannot read: {err.strerror or err}", path) from None


@contextlib.contextmanager
def _without_bom(path: str):
    """``path`` for gensim's reader, or a temporary copy without the byte-order mark it starts with
    (gensim would read it as part of the first word or header)."""
    with open(path, "rb") as f:
        if f.read(len(UTF8_BOM)) != UTF8_BOM:
            yield path
            return
        copy = tempfile.NamedTemporaryFile(prefix="embedtune-bench-", suffix=Path(path).suffix, delete=False)
        try:
            with copy:
                shutil.copyfileobj(f, copy)
            yield copy.name
        finally:
            os.unlink(copy.name)


def _count_pairs(path, delimiter: str = "\t") -> int:
    """Lines gensim's evaluate_word_pairs will read as (word, word, score), parsed the same way."""
    count = 0
    for _, line in _text_lines(path):
        if not line or line.startswith("#"):
            continue
        parts = line.split(delimiter)
        if len(parts) != 3:
            continue
        try:
            float(parts[2])
        except ValueError:
            continue
        count += 1
    return count


def evaluate_similarity(vectors: Vectors, path, case_insensitive: bool = True, kv=None) -> SimilarityScore:
    """Pearson and Spearman correlation on a ``word1<TAB>word2<TAB>score`` file ('#' lines skipped).

    The whole vocabulary is used (only analogies are restricted to the most frequent words).
    """
    path = str(path)
    total = _count_pairs(path)
    if total == 0:
        raise EmbedtuneError("no word pairs found (expected lines 'word1<TAB>word2<TAB>score')", path)
    kv = kv if kv is not None else to_keyed_vectors(vectors)
    try:
        with _without_bom(path) as readable:
            pearson, spearman, oov_percent = kv.evaluate_word_pairs(
                readable, restrict_vocab=len(vectors.words), case_insensitive=case_insensitive
            )
    except ValueError:
        # gensim's way of saying every pair had an unknown word (we know the file has pairs).
        return SimilarityScore(Path(path).stem, path, None, None, total, 0)
    used = total - round(oov_percent / 100 * total)
    return SimilarityScore(
        Path(path).stem, path, float(pearson.statistic), float(spearman.statistic), total, used
    )


def _count_questions(path) -> list[tuple[str, int]]:
    """(section, questions) per ``: section`` header, parsed as gensim's evaluate_word_analogies does."""
    sections = []
    for line_no, line in _text_lines(path):
        if line.startswith(": "):
            sections.append([line.lstrip(": ").strip(), 0])
        elif len(line.split()) == 4:
            if not sections:
                raise EmbedtuneError(
                    "analogy question before any ': section' header line", path, line_no
                )
            sections[-1][1] += 1
    if not any(n for _, n in sections):
        raise EmbedtuneError("no analogy questions found (expected lines 'a b c d' under ': section')", path)
    return [(name, n) for name, n in sections]


def evaluate_analogies(
    vectors: Vectors,
    path,
    restrict_vocab: int = RESTRICT_VOCAB,
    case_insensitive: bool = True,
    kv=None,
) -> AnalogyScore:
    """Accuracy on a word2vec-style analogy file (``: section`` lines, then ``a b c d`` lines).

    restrict_vocab : only the first this many words are candidates and only questions made of
        them are asked, as in word2vec's compute-accuracy (files are sorted by frequency).
    """
    path = str(path)
    if restrict_vocab < 1:
        raise EmbedtuneError(f"restrict_vocab must be at least 1, got {restrict_vocab}")
    counts = _count_questions(path)
    kv = kv if kv is not None else to_keyed_vectors(vectors)
    with _without_bom(path) as readable:
        _, sections = kv.evaluate_word_analogies(
            readable, restrict_vocab=restrict_vocab, case_insensitive=case_insensitive
        )
    total = sections.pop()  # gensim appends the overall figures as a last section
    result = [
        AnalogySection(name, n, len(s["correct"]) + len(s["incorrect"]), len(s["correct"]))
        for (name, n), s in zip(counts, sections, strict=True)
    ]
    return AnalogyScore(
        name=Path(path).stem,
        path=path,
        restrict_vocab=restrict_vocab,
        sections=result,
        questions=sum(n for _, n in counts),
        answered=len(total["correct"]) + len(total["incorrect"]),
        correct=len(total["correct"]),
    )


def evaluate(
    vectors: Vectors,
    similarity=None,
    analogies=None,
    restrict_vocab: int = RESTRICT_VOCAB,
    case_insensitive: bool = True,
) -> Evaluation:
    """Score ``vectors`` on word-pair and analogy files.

    similarity, analogies : lists of paths; when both are None, WordSim-353, SimLex-999 and the
        Google analogies shipped with gensim. An empty list skips that kind.
    """
    if similarity is None and analogies is None:
        similarity, analogies = default_similarity_files(), default_analogy_files()
    kv = to_keyed_vectors(vectors)
    return Evaluation(
        similarity=[evaluate_similarity(vectors, p, case_insensitive, kv=kv) for p in similarity or []],
        analogies=[
            evaluate_analogies(vectors, p, restrict_vocab, case_insensitive, kv=kv) for p in analogies or []
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
