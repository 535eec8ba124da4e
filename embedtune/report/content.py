"""What the report shows, computed from BEFORE and AFTER (and the run, when known): the diff, the
frozen rows, the benchmarks before and after, the most-moved words and the new words with their
neighbours, and the 2-D map. Rendering is embedtune/report/page.py's."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from embedtune.compare import Diff, FrozenCheck, MovedWord, diff_vectors, evaluate, nearest_neighbors
from embedtune.errors import EmbedtuneError
from embedtune.report.projection import WordMap, word_map
from embedtune.report.run_info import RunInfo
from embedtune.vectors import Vectors

# Analogies are answered among the first 30,000 words, as word2vec's README runs compute-accuracy:
# all 300,000 of eval's default make the page wait on 300-dimensional vectors (docs/report.md, Speed).
RESTRICT_VOCAB = 30_000
# Most-moved pretrained words listed, and new words (in AFTER's order: a run adds them most frequent
# first): train --report's, and embedtune report's --top default.
TOP_WORDS = 20
NEIGHBORS = 8       # neighbours per listed word
MAP_WORDS = 16      # words chosen for the map when --words is not given (half new, half most moved)
MAP_NEIGHBORS = 5   # neighbours of each chosen word drawn around it


@dataclass
class MovedRow:
    moved: MovedWord
    before: list[tuple[str, float]]   # neighbours in BEFORE, (word, cosine), most similar first
    after: list[tuple[str, float]]


@dataclass
class NewRow:
    word: str
    contexts: int | None              # occurrences with a pretrained word nearby; None: not known
    start: str | None                 # "contexts", "spelling" (too few contexts), or None: not known
    neighbors: list[tuple[str, float]]   # nearest pretrained words in AFTER


@dataclass
class Report:
    before_path: str
    after_path: str
    before_shape: tuple[int, int]
    after_shape: tuple[int, int]
    diff: Diff
    frozen: FrozenCheck | None        # the frozen words checked here (--config, --check-frozen), if any
    run: RunInfo | None
    scores: list[dict]                # benchmark, metric, before, after, change
    restrict_vocab: int
    moved: list[MovedRow]
    new: list[NewRow]
    n_new: int
    map: WordMap | None
    seconds: dict = field(default_factory=dict)   # where the report's time went


def build_report(before: Vectors, after: Vectors, *, before_path: str = "BEFORE", after_path: str = "AFTER",
                 run: RunInfo | None = None, frozen_words=None, words: list[str] | None = None,
                 similarity=None, analogies=None, restrict_vocab: int = RESTRICT_VOCAB,
                 top: int = TOP_WORDS, k: int = NEIGHBORS,
                 progress=None) -> Report:
    """Everything the page shows, for ``before`` and ``after`` (Vectors, or training's PatchedVectors).

    frozen_words : words that must be bit-identical (checked here), or None
    words : the words to map (else the first new and the most-moved ones)
    top : how many most-moved words, and how many new words, are listed
    similarity, analogies : benchmark files as ``embedtune.compare.evaluate`` takes them (None, None:
        the sets ``eval`` runs by default)
    progress : told the name of each part as it starts
    """
    from embedtune.compare import check_frozen

    if before.dim != after.dim:
        raise EmbedtuneError(f"{after.dim}-dimensional vectors, but {before_path} has {before.dim}; "
                             "rows of different sizes cannot be compared", after_path)
    seconds, tell = {}, progress or (lambda name: None)
    clock = time.perf_counter()

    def lap(name):
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = round(now - clock, 3)
        clock = now

    tell("comparing rows")
    diff = diff_vectors(before, after, top=top)
    frozen = check_frozen(before, after, frozen_words) if frozen_words is not None else None
    lap("diff")
    tell("scoring benchmarks")
    scores = score_change(before, after, similarity, analogies, restrict_vocab)
    lap("benchmarks")
    tell("finding neighbours")
    moved_words = [m.word for m in diff.most_moved]
    was = _neighbors(before, moved_words, k)
    now = _neighbors(after, moved_words, k)
    moved = [MovedRow(m, was.get(m.word, []), now.get(m.word, [])) for m in diff.most_moved]
    new_words = [w for w in after.words if w not in before.index]
    new_rows = np.array([after.index[w] for w in new_words], np.int64)
    listed = new_words[:top]
    near = _neighbors(after, listed, k, exclude=new_rows)
    new = [NewRow(w, *_start(w, run), near.get(w, [])) for w in listed]
    lap("neighbours")
    tell("drawing the map")
    chosen = words if words is not None else (new_words[: MAP_WORDS // 2]
                                              + moved_words[: MAP_WORDS - min(len(new_words), MAP_WORDS // 2)])
    wmap = word_map(before, after, chosen, MAP_NEIGHBORS, exclude=new_rows) if chosen else None
    lap("map")
    return Report(before_path, after_path, (len(before.words), before.dim), (len(after.words), after.dim), diff,
                  frozen, run, scores, restrict_vocab, moved, new, len(new_words), wmap, seconds)


def score_change(before: Vectors, after: Vectors, similarity, analogies, restrict_vocab: int) -> list[dict]:
    """The benchmarks' headline figures before and after: benchmark, metric, before, after, change."""
    b = evaluate(before, similarity, analogies, restrict_vocab)
    return b.change_to(evaluate(after, similarity, analogies, restrict_vocab))


def _neighbors(vectors, words, k, exclude=None) -> dict[str, list[tuple[str, float]]]:
    if not words:
        return {}
    found = nearest_neighbors(vectors, words, k, exclude=exclude)
    return {r.word: r.neighbors for r in found.results}


def _start(word: str, run: RunInfo | None) -> tuple[int | None, str | None]:
    """(contexts, how the word started) as the run recorded them; (None, None) when it did not."""
    if run is None or word not in run.new_contexts:
        return None, None
    n = int(run.new_contexts[word])
    if n >= run.min_contexts:
        return n, "contexts"
    # Too few contexts: form-context starts the word from its spelling (random where no piece of it
    # was ever seen, counted in new_too_few_contexts); the other methods start it at random.
    return n, "spelling" if run.stats.get("init") == "form-context" else "random"
