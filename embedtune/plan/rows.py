"""The rows of a run's output for a counted corpus: the new words it picks and the freeze rules applied
(``plan.rules.make_plan``), refused when nothing would train. ``train`` and ``--dry-run`` make the same
checks with the same messages, and the Keras layer's rows are chosen the same way.
"""

from __future__ import annotations

from collections import Counter

from embedtune.config import Config
from embedtune.errors import EmbedtuneError, counted, option_name
from embedtune.newwords.choose import choose_new_words
from embedtune.plan.rules import Plan, make_plan
from embedtune.vectors import Vectors, decide_lowercase


def plan_rows(vectors: Vectors, counts: Counter, total_words: int, config: Config,
              corpus_path: str | None, lowercase: bool | None = None) -> tuple[list[str], Plan]:
    """The new words and the freeze plan for a counted corpus, refused when there is nothing to
    train: the checks ``train`` and ``--dry-run`` share, with the same messages. ``lowercase``: the
    corpus's (None: embedtune.vectors.decide_lowercase)."""
    if total_words == 0:
        raise EmbedtuneError("the corpus has no words", corpus_path)
    v = config.vocab
    if v.new_words and lowercase is None:   # the list is lower-cased as the corpus is
        lowercase = decide_lowercase(config.vocab.lowercase, vectors)
    chosen = choose_new_words(vectors, counts, v.min_count, v.max_new, v.new_words, lowercase)
    new_words, min_count = chosen.words, chosen.min_count
    if not new_words and not any(w in vectors.index for w in counts):
        raise EmbedtuneError(
            f"none of its {counted(len(counts), 'distinct word')} is in the vectors, and none of the others is "
            f"seen {option_name('min_count')} ({min_count}) times", corpus_path)
    plan = make_plan(vectors, new_words, config.vocab)
    if chosen.listed is not None:   # what init's summary says too (docs/new-words.md)
        plan.listed = chosen.report
        plan.notes += chosen.notes
    seen = "seen in the corpus among the listed ones" if min_count is None else f"seen {option_name('min_count')} ({min_count}) times"
    if not (plan.row_counts(counts)[~plan.frozen] > 0).any():
        rules = [f"{k} {getattr(v, k)}" for k in ("freeze_list", "train_list", "freeze_top", "freeze_pattern",
                                                   "train_pattern", "freeze_pretrained") if getattr(v, k)]
        raise EmbedtuneError(
            f"nothing to train: the rules ({', '.join(rules) or 'none'}) freeze every corpus word in the vectors, "
            f"and no new word is {seen}", v.freeze_list or v.train_list)
    return new_words, plan
