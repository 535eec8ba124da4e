"""What a run recorded, as the report shows it: from a finished run (``train --report``) or from
the summary ``train --json`` wrote (``embedtune report --run``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from embedtune.errors import EmbedtuneError

# Summary keys shown as the run's settings when only the summary is at hand (it holds no config).
SUMMARY_SETTINGS = ("objective", "optimizer", "lr", "window", "anchor", "epochs", "init", "format", "lowercase",
                    "tokenize", "corpus_words", "corpus_lines", "steps", "pairs", "workers", "stopped_at_limit")
# The summary's figures the page computes with, and what each must be.
SUMMARY_FIGURES = {"frozen": "count", "trainable": "count", "new": "count", "frozen_rows_checked": "count",
                   "total_seconds": "number", "seconds": "numbers by name", "loss_history": "list of numbers"}


@dataclass
class RunInfo:
    """The run behind a report.

    command : the run as one command line (rebuilt from its settings), or None
    settings : (key, value) pairs, as text
    stats : the run's summary (``train --json``): plan counts, loss_history, seconds, ...
    new_contexts : new word -> occurrences with a pretrained word nearby (embedtune.newwords.methods), when known
    min_contexts : fewer contexts than this: the word started from its spelling (form-context) or at random
    """

    command: str | None
    settings: list[tuple[str, str]]
    stats: dict
    new_contexts: dict[str, int] = field(default_factory=dict)
    min_contexts: int = 1

    @property
    def loss_history(self) -> list[float]:
        return [float(x) for x in self.stats.get("loss_history") or []]


def from_summary(path: str) -> RunInfo:
    """A run from its ``--json`` summary file."""
    try:
        with open(path, encoding="utf-8") as f:
            stats = json.load(f)
    except OSError as err:
        raise EmbedtuneError(f"cannot read: {err.strerror}", path) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise EmbedtuneError(f"not a JSON summary (embedtune train --json FILE writes one): {err}", path) from None
    if not isinstance(stats, dict) or "frozen" not in stats or "trainable" not in stats:
        raise EmbedtuneError("not a summary of embedtune train (no 'frozen' and 'trainable' counts)", path)
    for key, what in SUMMARY_FIGURES.items():
        if key in stats and not _is(stats[key], what):
            raise EmbedtuneError(f"'{key}' is {json.dumps(stats[key])[:40]}, not a {what} (is this a summary of "
                                 "embedtune train?)", path)
    settings = [(key, _text(stats[key])) for key in SUMMARY_SETTINGS if key in stats]
    return RunInfo(None, settings, stats)


def from_run(result, init=None) -> RunInfo:
    """A run from ``embedtune.run.run``'s result; ``init``: its embedtune.newwords.common.InitResult (the new
    words' contexts), None without new words."""
    from embedtune.config import all_keys

    config = result.config
    settings = []
    for table in ("", "vocab", "train"):
        for key in all_keys():
            value = config.value(key)
            if key.table == table and value is not None:
                settings.append((f"{table}.{key.name}" if table else key.name, _text(value)))
    new_contexts, min_contexts = {}, 1   # embedtune.newwords' default
    if init is not None:
        new_words = result.plan.words[result.plan.n_pretrained:]
        new_contexts = dict(zip(new_words, np.asarray(init.contexts).tolist()))
        min_contexts = init.stats.get("min_contexts", 1)
    return RunInfo(command_line(config), settings, result.stats, new_contexts, min_contexts)


def command_line(config) -> str:
    """``embedtune train`` with the options that give ``config`` (a resolved Config): every key whose
    value is not its declared default (nor, when that is "decided later", the objective's)."""
    import shlex

    from embedtune.config import all_keys
    from embedtune.objectives import objective_class

    objective = objective_class(config.train.objective)
    defaults = {**objective.defaults, "init": objective.new_word_start}   # the keys it decides (config.resolve)
    words = ["embedtune", "train", config.vectors or "VECTORS"]
    if config.corpus:
        words.append(config.corpus)
    if config.output:
        words += ["-o", config.output]
    for key in all_keys():
        if not key.option:
            continue
        value = config.value(key)
        if value is None or value == key.default or (key.default is None and value == defaults.get(key.name)):
            continue
        if key.name == "batch_size" and key.default is None and "batch_size" not in defaults:
            from embedtune.config import DEFAULT_BATCH_SIZE

            if value == DEFAULT_BATCH_SIZE:
                continue
        words += [key.flag] if value is True else [key.flag, _text(value)]
    return shlex.join(str(w) for w in words)


def _is(value, what: str) -> bool:
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if what == "count":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if what == "number":
        return number(value)
    if what == "numbers by name":
        return isinstance(value, dict) and all(map(number, value.values()))
    return isinstance(value, list) and all(map(number, value))


def _text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
