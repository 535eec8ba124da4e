"""The rows of a run's output for a counted corpus: the new words it picks and the freeze rules applied
(``plan.rules.make_plan``), refused when nothing would train, and the new words' starts (``decide_rows``).
``train`` and ``--dry-run`` make the same checks with the same messages, and the Keras layer's rows are
decided by the same call as the training loop's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from embedtune.config import Config
from embedtune.errors import EmbedtuneError, counted, option_name
from embedtune.plan.choose import choose_new_words
from embedtune.plan.rules import Plan, make_plan
from embedtune.vectors import Vectors, decide_lowercase

if TYPE_CHECKING:
    from embedtune.corpus import Corpus
    from embedtune.newwords.add import InitResult


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


def decide_rows(vectors: Vectors, counts: Counter, total_words: int, config: Config, corpus: Corpus, window: int, *,
                contexts: Corpus | None = None, on_plan: Callable[[Plan], None] | None = None,
                progress: Callable | None = None) -> tuple[Plan, InitResult | None]:
    """Which rows are frozen, trainable and new for a counted ``corpus`` (``plan_rows``), then the new words'
    starts (``newwords.add_new_words``, ``--init``'s method over ``window`` words each side): what the
    training loop decides before its tables and the Keras layer before its weights. ``config`` resolved.

    contexts : the corpus the new words' contexts are read from (a worker's share of it); ``corpus`` when None
    on_plan : called with the plan before the new words start (the command shows it)
    progress : newwords.add_new_words' progress (None: none shown)
    Returns the plan and the starts (None without new words).
    """
    new_words, plan = plan_rows(vectors, counts, total_words, config, corpus.path, corpus.lowercase)
    if on_plan is not None:
        on_plan(plan)
    if not new_words:
        return plan, None
    # here, not at the top: the dry run plans rows without the new-word code (numpy's starts, the passes)
    from embedtune.newwords import NewWordSettings, add_new_words

    starts = NewWordSettings(method=config.vocab.init, window=window, seed=config.train.seed)
    return plan, add_new_words(vectors, corpus if contexts is None else contexts, starts, counts=counts,
                               words=new_words, progress=progress).start
