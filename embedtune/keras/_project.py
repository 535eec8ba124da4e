"""The one place embedtune.keras imports the rest of the project: the options and their config, the
freeze rules, the new words and their starts, the output's format, and the lazy optimizers' arithmetic.
A move of those modules touches this file only. (The frozen rows' proof and checked write,
embedtune.frozen, the layer imports itself: it sits below all of them and imports none.)

``layer_rows`` is what ``embedtune train`` decides before its tables (training/loop.py -> plan.rows.decide_rows
-> plan.rules.make_plan, newwords.add_new_words), by the same call, for a layer: which rows are frozen,
which train, which words are new and where they start.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np

from embedtune.config import DEFAULT_LR, NOT_OPTIONS, from_options
from embedtune.corpus.sentences import checked_sentences
from embedtune.errors import EmbedtuneError, counted, python_names
from embedtune.formats.reading import Reading, check_dimension, load_training_vectors
from embedtune.plan.choose import listed_notes, read_new_words
from embedtune.plan.rows import decide_rows
from embedtune.plan.rules import Plan, make_plan, plan_notes
from embedtune.training.optimizers import OPTIMIZERS, cap_rows, make_optimizer, merge_rows
from embedtune.vectors import PatchedVectors, Vectors, decide_lowercase

__all__ = ["DEFAULT_LR", "EmbedtuneError", "LayerRows", "OPTIMIZERS", "Plan", "PatchedVectors", "Reading", "Vectors",
           "cap_rows", "check_not_input", "counted", "layer_rows", "make_optimizer", "merge_rows", "output_format",
           "plan_notes", "python_names"]

# The options a layer takes: the vocabulary's ([vocab] of the config: freeze and train rules, new words,
# how the corpus is read), the vectors' format, the expected dimension and the seed of random starts.
# The others are the training loop's (epochs, lr, ...): the user's model trains the layer.
TOP_LEVEL = ("format",)
TRAIN_KEYS = ("dim", "seed")


@dataclass
class LayerRows:
    """A layer's rows decided.

    vectors : the pretrained vectors as read (their matrix is the reference of the frozen check)
    plan : frozen / trainable / new rows, pretrained first (embedtune.plan.rules.Plan)
    new_start : float32 [n_new, dim], the new words' starting vectors
    source : the vectors' path (None for a Vectors object); format : its format (None: unknown)
    init : how the new words started (their InitResult's stats: embedtune.newwords), None without new words
    """

    vectors: Vectors
    plan: Plan
    new_start: np.ndarray
    source: str | None
    format: str | None
    init: dict | None


def _layer_options() -> set[str]:
    from embedtune.config import all_keys

    return {key.name for key in all_keys() if key.table == "vocab"} | set(TOP_LEVEL) | set(TRAIN_KEYS)


def check_options(options: dict) -> None:
    """An option of ``embedtune train`` that a layer has no use for (the loop's: epochs, lr, ...) is an
    error naming it; an unknown name is from_options' error (with its closest match)."""
    from embedtune.config import all_keys

    allowed = _layer_options()
    known = {key.name for key in all_keys()} - NOT_OPTIONS
    for name in options:
        if name in known and name not in allowed:
            raise EmbedtuneError(f"option '{name}' of `embedtune train` has no use in a layer (your model's training "
                                 f"moves it); the layer takes the vocabulary's: {', '.join(sorted(allowed))}")


def layer_rows(vectors, options: dict, config=None, corpus=None, reading: Reading = Reading()) -> LayerRows:
    """The rows of a layer over ``vectors`` (a path or a Vectors) chosen by ``options`` (fine_tune's
    names for the vocabulary) over ``config`` (a TOML file or a Config), with new words taken from
    ``corpus`` (a path or sentences) as ``embedtune train`` takes them; the same checks and messages."""
    check_options(options)
    config = from_options(options, config)
    source = None
    if not isinstance(vectors, Vectors):
        source = os.fspath(vectors)
        from embedtune import formats

        config = dataclasses.replace(config, vectors=source, format=config.format or formats.detect_format(source))
        vectors = load_training_vectors(source, config.format, reading)
    from embedtune.config import resolve

    config = resolve(config)   # once: the layer's rows are chosen from this config
    check_dimension(vectors, config.train.dim, source, option="dim")
    if corpus is None:
        return _rows_without_corpus(vectors, config, source)
    return _rows_from_corpus(vectors, config, source, corpus)


def _rows_without_corpus(vectors: Vectors, config, source) -> LayerRows:
    """No corpus: the listed new words (``new_words``) only, started at random (their contexts and
    spelling fit need a corpus)."""
    v = config.vocab
    new_words, notes = [], []
    if v.new_words:
        lowered: list = []
        listed = read_new_words(v.new_words, decide_lowercase(v.lowercase, vectors), lowered)
        new_words = [w for w in listed if w not in vectors.index]
        notes = listed_notes(v.new_words, listed, vectors, lowered)   # what train notes about the list
    if v.min_count is not None:
        raise EmbedtuneError("min_count picks new words from a corpus: pass corpus= (a path or sentences)")
    init = None
    new_start = np.zeros((0, vectors.dim), np.float32)
    if new_words:
        if v.init != "random":
            raise EmbedtuneError(f"new words start from their contexts in a corpus (init {v.init}): pass corpus= "
                                 "(a path or sentences), or init='random'", v.new_words)
        from embedtune.newwords.methods import initial_vectors

        result = initial_vectors(vectors, None, new_words, method="random", seed=config.train.seed)
        new_start, init = result.matrix, result.stats
    plan = make_plan(vectors, new_words, v)
    plan.notes += notes
    return LayerRows(vectors, plan, new_start, source, config.format, init)


def _rows_from_corpus(vectors: Vectors, config, source, corpus) -> LayerRows:
    """With a corpus: counted, planned and the new words started as ``embedtune train`` does before
    its first step (plan.rows.decide_rows, the training loop's call), with the objective's window."""
    from embedtune.objectives import objective_class

    objective = objective_class(config.train.objective)
    sentences = os.fspath(corpus) if isinstance(corpus, (str, os.PathLike)) else checked_sentences(corpus)
    lowercase = decide_lowercase(config.vocab.lowercase, vectors)
    with objective.open_corpus(sentences, config, lowercase=lowercase, tokenize=config.vocab.tokenize,
                               vocabulary=vectors.index) as opened:
        counts, total_words, _ = opened.count()
        plan, start = decide_rows(vectors, counts, total_words, config, opened, objective.init_window(config.train))
    if start is None:
        return LayerRows(vectors, plan, np.zeros((0, vectors.dim), np.float32), source, config.format, None)
    return LayerRows(vectors, plan, start.matrix, source, config.format, start.stats)


def output_format(path, to: str | None, in_format: str | None) -> str:
    """The format ``save_vectors`` writes: ``to``, else the one the name's extension means, else the
    input's (text word2vec's for vectors that came without a file)."""
    from embedtune import formats

    return formats.output_format(path, to, in_format or "word2vec")


def check_not_input(path, source: str | None) -> None:
    """``save_vectors``' ``path`` is not the vectors file the layer was made from (``source``): the check
    every command makes of its outputs (embedtune.checks.check_names: symlinks, spellings, hard links)."""
    from embedtune.checks import Named, check_names

    if source is not None:
        check_names([Named("the layer's vectors", source)], [Named("path", os.fspath(path))])
