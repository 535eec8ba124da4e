"""How good a set of vectors is: word-pair similarity and analogies, the figures of gensim's
``KeyedVectors.evaluate_word_pairs`` / ``evaluate_word_analogies`` (tested equal), with analogies
answered all at once (analogy_search.py)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from embedtune.compare.gensim_compat import gensim_datapath
from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors


# gensim's default, and about what word2vec's compute-accuracy is run with on large models.
RESTRICT_VOCAB = 300_000


def default_similarity_files() -> list[str]:
    """WordSim-353 and SimLex-999 as shipped with gensim (``gensim/test/test_data``)."""
    return [gensim_datapath("wordsim353.tsv"), gensim_datapath("simlex999.txt")]


def default_analogy_files() -> list[str]:
    """The Google analogy set (``questions-words.txt``) as shipped with gensim."""
    return [gensim_datapath("questions-words.txt")]


def _finite(x: float | None) -> float | None:
    # JSON has no NaN; a score that does not exist is null.
    return None if x is None or not math.isfinite(x) else float(x)


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

    def change_to(self, after: Evaluation) -> list[dict]:
        """The headline figures of this evaluation (before) and ``after``'s, of the same sets:
        benchmark, metric, before, after, change (None where either is None)."""
        rows = []
        for (bench, metric, x), (_, _, y) in zip(self.headline(), after.headline(), strict=True):
            rows.append({"benchmark": bench, "metric": metric, "before": x, "after": y,
                         "change": None if x is None or y is None else y - x})
        return rows


def format_score(metric: str, x: float | None, signed: bool = False) -> str:
    """A headline figure as eval's table and the report's page show it: accuracies and shares of
    unknown words in per cent (a change in points), correlations to 4 places; "-" for None."""
    if x is None:
        return "-"
    if metric == "accuracy" or metric.endswith("oov_ratio"):
        return f"{100 * x:+.1f} pts" if signed else f"{100 * x:.1f}%"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


# Words per dict.update in _first_rows: between two slices other threads get the GIL.
_FIRST_ROWS_SLICE = 1 << 16


def _first_rows(vectors: Vectors, case_insensitive: bool, wanted=None) -> dict[str, int]:
    """Benchmark word -> the first row holding it (upper-cased words when ``case_insensitive``).

    This is gensim's ``ok_vocab`` for the whole file: a word is among the first r words when its
    row is below r. Inserting in reverse order leaves the first row of a word that occurs twice.
    wanted : a set of the words to be looked up (None: every word); the others are left out, which
    spares a dict of the whole vocabulary (most of this function's time).
    """
    words = vectors.words
    # Built a slice at a time, last slice first (the same insertions in the same order as one
    # reversed pass): one dict(zip(...)) call over millions of words holds the GIL throughout, so
    # the cli's bar-redraw thread could not run and a terminal stayed silent while it built.
    rows: dict[str, int] = {}
    for stop in range(len(words), 0, -_FIRST_ROWS_SLICE):
        start = max(0, stop - _FIRST_ROWS_SLICE)
        part = [w.upper() for w in words[start:stop]] if case_insensitive else words[start:stop]
        if wanted is None:
            rows.update(zip(reversed(part), range(stop - 1, start - 1, -1)))
        else:
            rows.update(reversed([(w, i) for i, w in enumerate(part, start) if w in wanted]))
    return rows


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
    '#' lines skipped, exactly three fields, a score that parses as a number. A score that parses but
    is not finite (nan, inf) is an error naming the line: scipy would make the correlation nan."""
    triples = []
    for line_no, line in _text_lines(path):
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
        if not math.isfinite(score):
            raise EmbedtuneError(f"score {parts[2].strip()!r} is not a finite number", path, line_no)
        triples.append((parts[0], parts[1], score))
    return triples


def evaluate_similarity(vectors: Vectors, path, case_insensitive: bool = True, rows=None) -> SimilarityScore:
    """Pearson and Spearman correlation on a ``word1<TAB>word2<TAB>score`` file ('#' lines skipped).

    The same figures as gensim's ``evaluate_word_pairs`` with ``restrict_vocab`` = the whole
    vocabulary (only analogies are restricted to the most frequent words): the cosine of each pair
    computed as gensim does, the correlations as scipy.stats computes them for gensim (pearson, spearman).
    rows : ``_first_rows(vectors, case_insensitive)``, when the caller has it already
    """
    path = str(path)
    pairs = _read_word_pairs(path, case_insensitive)
    rows = rows if rows is not None else _first_rows(vectors, case_insensitive, _pair_words(pairs))
    return _score_pairs(vectors, path, pairs, rows)


def _read_word_pairs(path: str, case_insensitive: bool) -> list[tuple[str, str, float]]:
    """_read_pairs, and an error when the file has none."""
    pairs = _read_pairs(path, case_insensitive)
    if not pairs:
        raise EmbedtuneError("no word pairs found (expected lines 'word1<TAB>word2<TAB>score')", path)
    return pairs


def _pair_words(pairs) -> set[str]:
    return {w for a, b, _ in pairs for w in (a, b)}


def _question_words(sections) -> set[str]:
    return {w for _, questions in sections for question in questions for w in question}


def _score_pairs(vectors: Vectors, path: str, pairs, rows) -> SimilarityScore:
    from embedtune.compare.gensim_compat import unitvec

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
    _check_correlatable(gold, model, path)
    return SimilarityScore(Path(path).stem, path, pearson(gold, model), spearman(gold, model), len(pairs), len(gold))


def average_ranks(values) -> np.ndarray:
    """float64 ranks from 1, equal values sharing the mean of their ranks: scipy.stats.rankdata's
    'average' method (tests/test_compare.py compares them on tied data)."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))   # where each run of equals begins
    stops = np.append(starts[1:], len(values))
    ranks = np.empty(len(values), np.float64)
    ranks[order] = np.repeat((starts + 1 + stops) / 2.0, stops - starts)   # the mean of ranks starts+1 .. stops
    return ranks


# Pearson and Spearman as scipy.stats computes them for gensim's evaluate_word_pairs, step for step, so the
# figures keep their bits (tests/test_compare.py): `import scipy.stats` cost eval more than scoring the pairs
# (benchmarks/log/eval_speed.md). Both take at least 2 pairs, neither side constant (_check_correlatable).


def pearson(x, y) -> float:
    """scipy.stats.pearsonr(x, y).statistic: float64, centred, each side scaled by its largest deviation
    before its norm, the dot of the two unit vectors clipped to [-1, 1] (exactly +-1 for two pairs)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    xm, ym = x - x.mean(keepdims=True), y - y.mean(keepdims=True)
    xmax, ymax = np.abs(xm).max(keepdims=True), np.abs(ym).max(keepdims=True)
    normxm = xmax * np.linalg.norm(xm / xmax, axis=-1, keepdims=True)
    normym = ymax * np.linalg.norm(ym / ymax, axis=-1, keepdims=True)
    r = float(np.clip(((xm / normxm)[None, :] @ (ym / normym)[:, None])[0, 0], -1.0, 1.0))
    return float(np.round(r)) if len(x) == 2 else r


def spearman(x, y) -> float:
    """scipy.stats.spearmanr(x, y).statistic: numpy's correlation of the average ranks."""
    return float(np.corrcoef(np.stack([average_ranks(x), average_ranks(y)]))[1, 0])


def _check_correlatable(gold: list[float], model: list, path: str) -> None:
    """What scipy answers with a traceback (fewer than 2 pairs) or a warning and nan (constant input),
    as one error naming the file."""
    if len(gold) < 2:
        raise EmbedtuneError("only 1 pair has both words in the vocabulary; Pearson and Spearman correlations "
                             "need at least 2", path)
    if min(gold) == max(gold):
        raise EmbedtuneError(f"every pair in the vocabulary has the same score ({gold[0]:g}); a correlation "
                             "with constant scores is undefined", path)
    if min(model) == max(model):
        raise EmbedtuneError(f"every pair in the vocabulary has the same cosine similarity ({float(model[0]):g}); "
                             "a correlation with constant similarities is undefined", path)


def _read_analogies(path: str, case_insensitive: bool) -> list[tuple[str, list[tuple[str, ...]]]]:
    """(section, questions) per ``: section`` header, each question four words, parsed as gensim's
    evaluate_word_analogies does (lines of other lengths skipped)."""
    sections: list[tuple[str, list]] = []
    for line_no, line in _text_lines(path):
        if line.startswith(": "):
            sections.append((line.lstrip(": ").strip(), []))
            continue
        # str.upper neither makes nor takes away a space (tests/test_compare.py): the line's words upper-cased
        words = (line.upper() if case_insensitive else line).split()
        if len(words) != 4:
            continue
        if not sections:
            raise EmbedtuneError("analogy question before any ': section' header line", path, line_no)
        sections[-1][1].append(tuple(words))
    if not any(questions for _, questions in sections):
        raise EmbedtuneError("no analogy questions found (expected lines 'a b c d' under ': section')", path)
    return sections


def evaluate_analogies(
    vectors: Vectors,
    path,
    restrict_vocab: int = RESTRICT_VOCAB,
    case_insensitive: bool = True,
    rows=None,
    progress=None,
) -> AnalogyScore:
    """Accuracy on a word2vec-style analogy file (``: section`` lines, then ``a b c d`` lines).

    The same figures as gensim's ``evaluate_word_analogies`` (3CosAdd), all questions at once.
    restrict_vocab : only the first this many words are candidates and only questions made of
        them are asked, as in word2vec's compute-accuracy (files are sorted by frequency).
    rows : ``_first_rows(vectors, case_insensitive)``, when the caller has it already
    progress : called with the number of questions answered since the last call
    """
    path = str(path)
    if restrict_vocab < 1:
        raise EmbedtuneError(f"restrict_vocab must be at least 1, got {restrict_vocab}")
    sections = _read_analogies(path, case_insensitive)
    rows = rows if rows is not None else _first_rows(vectors, case_insensitive, _question_words(sections))
    restrict = min(restrict_vocab, len(vectors.words))
    return _score_analogies(vectors, path, sections, _asked(sections, rows, restrict), restrict_vocab,
                            case_insensitive, progress)


def _asked(sections, rows, restrict: int) -> tuple[list, list, list]:
    """The questions asked, those whose four words are all among the first ``restrict`` rows: their sections'
    numbers, the questions themselves and the rows of their a b c words, three a question (flat lists: no
    object made a question, which made Python's cycle collector go through every object eval holds)."""
    numbers, asked, abc = [], [], []
    get = rows.get
    for number, (_, questions) in enumerate(sections):
        for question in questions:
            a, b, c, expected = question
            ra, rb, rc = get(a, restrict), get(b, restrict), get(c, restrict)
            if ra < restrict and rb < restrict and rc < restrict and get(expected, restrict) < restrict:
                numbers.append(number)
                asked.append(question)
                abc += ra, rb, rc
    return numbers, asked, abc


def _score_analogies(vectors, path, sections, asked_abc, restrict_vocab, case_insensitive, progress) -> AnalogyScore:
    """asked_abc : _asked(sections, ...), the questions asked and their a b c rows."""
    from embedtune.compare.analogy_search import answer_analogies

    numbers, asked, abc = asked_abc
    restrict = min(restrict_vocab, len(vectors.words))
    answers = answer_analogies(vectors.matrix, restrict, np.array(abc, np.int64).reshape(-1, 3), progress)
    correct = [0] * len(sections)
    answered = [0] * len(sections)
    words = vectors.words
    for number, (a, b, c, expected), sims in zip(numbers, asked, answers):
        predicted = None
        # gensim's choice: the first of the 5 that is not one of the question's words, or else the last.
        for i in sims:
            predicted = words[i].upper() if case_insensitive else words[i]
            if predicted != a and predicted != b and predicted != c:
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
    pair_files = [(str(p), _read_word_pairs(str(p), case_insensitive)) for p in similarity or []]
    # Only the benchmarks' words are looked up: a few thousand, where the vocabulary may hold millions.
    wanted = set().union(*(_question_words(sections) for _, sections in read),
                         *(_pair_words(pairs) for _, pairs in pair_files))
    rows = _first_rows(vectors, case_insensitive, wanted)
    restrict = min(restrict_vocab, len(vectors.words))
    asked = [_asked(sections, rows, restrict) for _, sections in read]
    total = sum(len(questions) for _, questions, _ in asked)
    step = None if progress is None else (lambda advance: progress(advance, total))
    return Evaluation(
        similarity=[_score_pairs(vectors, p, pairs, rows) for p, pairs in pair_files],
        analogies=[
            _score_analogies(vectors, p, sections, asked_abc, restrict_vocab, case_insensitive, step)
            for (p, sections), asked_abc in zip(read, asked)
        ],
    )
