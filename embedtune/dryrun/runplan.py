"""What a training run will do, decided without TensorFlow: the corpus counted, the new words, the
freeze plan and how new words will start (``RunPlan``). ``embedtune train --dry-run`` reports it
(``dryrun.estimate``: the settings and the memory estimate) and stops. It imports numpy and the plan,
corpus and init code only, so a check of a config and its lists costs the reading of the files, not
TensorFlow's import (seconds and hundreds of MB).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from embedtune.config import Config
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.newwords.common import choose_method
from embedtune.plan.rows import plan_rows
from embedtune.plan.rules import Plan
from embedtune.training.checkpoints import folder as checkpoint
from embedtune.vectors import Vectors


@dataclass
class RunPlan:
    """A run decided but not started.

    config : the config with the objective and its defaults resolved
    plan : frozen / trainable / new rows of the output
    counts : corpus token counts; corpus_words, corpus_lines : totals
    init : how new words will start (alacarte falls back to context-mean on a small corpus)
    trainable_in_corpus, frozen_in_corpus : the rows that get a local id (trainable rows the corpus
        never shows keep their vectors)
    """

    config: Config
    plan: Plan
    counts: Counter
    corpus_words: int
    corpus_lines: int
    new_words: list[str]
    init: str
    trainable_in_corpus: int
    frozen_in_corpus: int
    reader_bytes: int = 0   # the compiled reader's kept ids and table (corpus.fast), held through training
    set_up_units: int | None = None   # what the objective's set-up holds, counted (Objective.set_up_units)


def plan_run(vectors: Vectors, corpus: Corpus, config: Config, resume: bool = False) -> RunPlan:
    """Count the corpus and apply the freeze rules: every check ``train`` makes before its tables,
    with the same messages. ``config``: resolved (``config.resolve``; ``embedtune.run`` resolves once)."""
    t = config.train
    if resume and not t.checkpoint_dir:
        raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
    if resume and checkpoint.latest(t.checkpoint_dir) is None:
        raise EmbedtuneError("--resume: no checkpoint in this folder", t.checkpoint_dir)
    counts, total_words, n_lines = corpus.count()
    new_words, plan = plan_rows(vectors, counts, total_words, config, corpus.path, corpus.lowercase)
    in_corpus = plan.row_counts(counts) > 0
    trainable = int((in_corpus & ~plan.frozen).sum())
    method, _ = choose_method(config.vocab.init, vectors, counts)   # the rule train follows
    reader = getattr(corpus, "fast", None)
    return RunPlan(config, plan, counts, total_words, n_lines, new_words, method, trainable,
                   int((in_corpus & plan.frozen).sum()), reader.held_bytes() if reader is not None else 0)
