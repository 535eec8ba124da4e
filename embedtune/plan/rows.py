"""The rows of a run's output for a counted corpus: the new words it picks and the freeze rules applied
(``plan.rules.make_plan``), refused when nothing would train. ``train`` and ``--dry-run`` make the same
checks with the same messages, and the Keras layer's rows are chosen the same way.
"""

from __future__ import annotations

from collections import Counter

from embedtune.config import Config
from embedtune.errors import EmbedtuneError, counted
from embedtune.init import is_lowercase_vocabulary
from embedtune.newwords import effective_min_count, listed_notes, listed_report, pick_new_words, read_new_words
from embedtune.plan.rules import Plan, make_plan
from embedtune.vectors import Vectors


def decide_lowercase(config: Config, vectors: Vectors) -> bool:
    """--lowercase yes/no, or auto: as the vectors' vocabulary is (GloVe's is lower-case). Decided
    once a run (embedtune.run), and the corpus opened so."""
    lowercase = {"yes": True, "no": False}.get(config.vocab.lowercase)
    return is_lowercase_vocabulary(vectors) if lowercase is None else lowercase


def plan_rows(vectors: Vectors, counts: Counter, total_words: int, config: Config,
              corpus_path: str | None, lowercase: bool | None = None) -> tuple[list[str], Plan]:
    """The new words and the freeze plan for a counted corpus, refused when there is nothing to
    train: the checks ``train`` and ``--dry-run`` share, with the same messages. ``lowercase``: the
    corpus's (None: ``decide_lowercase``)."""
    if total_words == 0:
        raise EmbedtuneError("the corpus has no words", corpus_path)
    v = config.vocab
    listed, lowered = None, []
    if v.new_words:   # lower-cased as the corpus is
        if lowercase is None:
            lowercase = decide_lowercase(config, vectors)
        listed = read_new_words(v.new_words, lowercase, lowered)
    min_count = effective_min_count(v.min_count, listed is not None)
    new_words = pick_new_words(counts, vectors, min_count, v.max_new, listed)
    if not new_words and not any(w in vectors.index for w in counts):
        raise EmbedtuneError(
            f"none of its {counted(len(counts), 'distinct word')} is in the vectors, and none of the others is "
            f"seen --min-count ({min_count}) times", corpus_path)
    plan = make_plan(vectors, new_words, config.vocab)
    if listed is not None:   # what init's summary says too (docs/new-words.md)
        plan.listed = listed_report(listed, vectors, counts)
        plan.notes += listed_notes(v.new_words, listed, vectors, lowered)
    seen = "seen in the corpus among the listed ones" if min_count is None else f"seen --min-count ({min_count}) times"
    if not (plan.row_counts(counts)[~plan.frozen] > 0).any():
        rules = [f"{k} {getattr(v, k)}" for k in ("freeze_list", "train_list", "freeze_top", "freeze_pattern",
                                                   "train_pattern", "freeze_pretrained") if getattr(v, k)]
        raise EmbedtuneError(
            f"nothing to train: the rules ({', '.join(rules) or 'none'}) freeze every corpus word in the vectors, "
            f"and no new word is {seen}", v.freeze_list or v.train_list)
    return new_words, plan
