"""The training config: one TOML file (stdlib tomllib) into frozen dataclasses.

Every shared key is declared here, once (``KEYS``); each objective declares its own keys on its class
(``Objective.keys``), and the dataclasses ``Config``, ``VocabConfig`` and ``TrainConfig`` are built from
both on first use, so ``config.train.word_ngrams`` works as a plain attribute. A config file holds only
what differs from the defaults; an unknown key or a value of the wrong type is an error naming the key
and the file. Command-line options override the file (see ``merge``).
Paths in a config are relative to the directory embedtune is run from.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import fields
from pathlib import Path

from embedtune import objectives as registry
from embedtune.errors import BadOption, EmbedtuneError
from embedtune.keys import FLOAT32_MAX, INT64_MAX, IO, NEW_WORDS, ROWS, RUNS, TRAINING, Key, Range

__all__ = ["Config", "TrainConfig", "VocabConfig", "RANGES", "Key", "Range", "load_config", "merge", "validate",
           "resolve", "learning_rate", "range_problem", "all_keys"]

OPTIMIZERS = ("sgd", "adagrad", "adam")
DEFAULT_LR = {"sgd": 0.025, "adagrad": 0.05, "adam": 0.001}
DEFAULT_BATCH_SIZE = 4096   # pairs a step, unless the objective's defaults say otherwise
# Each objective's defaults (window, optimizer, anchor, epochs, ...) and the learning rates it
# starts better at live on its class (embedtune/objectives/); ``resolve`` and ``learning_rate``
# read them there, and train.objective's values are that registry's names.
LOWERCASE = ("auto", "yes", "no")
TOKENIZE = ("auto", "none")   # embedtune.corpus.TOKENIZE
INITS = ("alacarte", "context-mean", "form-context", "random")   # embedtune.newwords.defaults.METHODS
AUTO = registry.AUTO

# Upper bounds guard against what would fail late or take all memory (arithmetic, not measured):
# a batch of 2^20 pairs with 5 negatives at 300 dimensions gathers 2^20 x 6 x 300 float32 context
# values, 7.5 GB; a window of 100 gives a 1M-token chunk about 10^8 (center, context) pairs (0.8 GB
# of ids). Seeds are numpy's and TensorFlow's common range. Counts that only compare with corpus
# counts go up to int64.
KEYS: tuple[Key, ...] = (
    # the file's top level: inputs and outputs (arguments and hand-written options on the command line)
    Key("vectors", str, table="", option=False, path="read", help="Pretrained vectors file."),
    Key("corpus", str, table="", option=False, path="read", help='Text corpus, one sentence or paragraph per line; "-" = stdin.'),
    Key("output", str, table="", option=False, path="write", help='Output vectors file; "-" = stdout.'),
    Key("format", str, table="", option=False, help="Input vectors format (None: detect)."),
    Key("to", str, table="", option=False, help="Output format (None: the same as the input)."),
    Key("report", str, table="", path="write", metavar="FILE", section=IO,
        help="Write an HTML page of what the run did (embedtune report's, with the run's own figures)."),
    # [vocab]: which rows may move; freeze rules win over train rules (embedtune.plan)
    Key("freeze_list", str, table="vocab", path="read", section=ROWS, help="File of words to freeze, one per line."),
    Key("train_list", str, table="vocab", path="read", section=ROWS,
        help="File of words to train; the rest are frozen."),
    Key("freeze_top", int, 0, table="vocab", range=Range(0, INT64_MAX, zero="off"), section=ROWS,
        help="Freeze the first N rows of VECTORS (the most frequent words).", shown_default="0 = off"),
    Key("freeze_pattern", str, table="vocab", section=ROWS, help="Freeze pretrained words matching this regex."),
    Key("train_pattern", str, table="vocab", section=ROWS,
        help="Train words matching this regex; the rest are frozen."),
    Key("freeze_pretrained", bool, False, table="vocab", section=ROWS,
        help="Freeze every pretrained row: only new words train."),
    Key("min_count", int, None, table="vocab", range=Range(1, INT64_MAX), section=NEW_WORDS,
        help="Add corpus words seen this often as new rows.", shown_default="5; none with --new-words"),
    Key("new_words", str, table="vocab", path="read", section=NEW_WORDS,
        help="File of words, one a line, to add as new rows whatever their count (spelling alone when the "
             "corpus lacks them); no other word is added unless --min-count is given."),
    Key("max_new", int, 0, table="vocab", range=Range(0, INT64_MAX, zero="all"), section=NEW_WORDS,
        help="Add at most this many new words, most frequent first (0 = all)."),
    Key("init", str, "form-context", table="vocab", choices=INITS, section=NEW_WORDS,
        help="Start of new words: from their contexts (a la carte map or plain mean), from contexts and "
             "spelling (form-context: better for rare words), or random (docs/new-words.md)."),
    Key("lowercase", str, "auto", table="vocab", choices=LOWERCASE, section=IO,
        help="Lower-case the corpus; auto: when the vectors' own words are lower-case."),
    Key("tokenize", str, "auto", table="vocab", choices=TOKENIZE, section=IO,
        help="auto: a token VECTORS lacks loses its leading/trailing punctuation ('said.' -> 'said' '.'); "
             "none: whitespace tokens as they are (pre-tokenized corpora)."),
    Key("strict_lists", bool, False, table="vocab", section=ROWS,
        help="A list word missing from the vocabulary is an error."),
    # [train]: the keys every objective shares; None is decided by the objective (its class's
    # ``defaults``; see ``resolve``)
    Key("objective", str, AUTO, section=TRAINING, help="What to train (each objective's options are in a "
        "section of their own below)."),
    Key("epochs", int, range=Range(1, 1_000_000), section=TRAINING,
        help="Passes over the corpus (or the objective's rounds)."),
    Key("window", int, range=Range(1, 100), section=TRAINING, help="Maximum context distance."),
    Key("lr", float, range=Range(0, FLOAT32_MAX, low_open=True), section=TRAINING,
        help="Starting learning rate, decayed linearly."),
    Key("min_lr_fraction", float, 1e-4, range=Range(0, 1), option=False,
        help="The linear decay ends at lr * this."),
    Key("batch_size", int, range=Range(1, 1 << 20), section=TRAINING,
        help="Training units (pairs, lines) per step."),
    Key("optimizer", str, choices=OPTIMIZERS, section=TRAINING,
        help="Lazy optimizer (only the batch's rows)."),
    Key("clip_norm", float, 0.0, range=Range(0, FLOAT32_MAX, zero="no cap"), section=TRAINING,
        help="Cap on each row's merged gradient L2 norm per step (0 = none; docs/training.md)."),
    Key("anchor", float, range=Range(0, FLOAT32_MAX, zero="off"), metavar="RHO", section=TRAINING,
        help="Pull each trainable row toward its starting vector: RHO/2 |w - start|^2 per epoch, spread "
             "over the steps that read the row (0 = off)."),
    Key("seed", int, 1, range=Range(0, 2**32 - 1), section=TRAINING, help="Random seed."),
    Key("dim", int, range=Range(1, 1 << 16), section=TRAINING,
        help="Expected dimension (default: that of VECTORS); a mismatch is an error."),
    Key("deterministic", bool, False, section=TRAINING,
        help="Op determinism, a seeded data order and batch-synchronous compiled steps: two runs give "
             "byte-identical files (slower). Without it, a compiled step may run lock-free on --threads "
             "threads, as word2vec's do (results vary from run to run)."),
    # TensorFlow's pools; more is a typo
    Key("threads", int, 0, range=Range(0, 1024, zero="all cores"), section=TRAINING,
        help="CPU threads of TensorFlow's thread pools and of the compiled steps (plain sgd, as gensim's "
             "workers).", shown_default="0 = all cores"),
    Key("checkpoint_dir", str, path="folder", section=RUNS, help="Write checkpoints to this folder."),
    Key("checkpoint_every", int, 0, range=Range(0, INT64_MAX, zero="every 5 minutes"), section=RUNS,
        help="Steps between checkpoints.", shown_default="every 5 minutes"),
    Key("max_steps", int, 0, range=Range(0, INT64_MAX, zero="no limit"), metavar="N", section=RUNS,
        help="Stop after N steps and write the output as a finished run does (0 = no limit); for CI."),
    Key("max_words", int, 0, range=Range(0, INT64_MAX, zero="no limit"), metavar="N", section=RUNS,
        help="Stop after N corpus words (all epochs counted) and write the output (0 = no limit)."),
    Key("sync_every", int, 100, range=Range(0, INT64_MAX, zero="gather every step's gradients"), metavar="STEPS",
        section=RUNS,
        help="--workers: steps each worker trains on its own lines between two exchanges of the rows it "
             "changed, summed on every worker (docs/workers.md); 0 = every step's gradients gathered (slower)."),
    Key("peer_timeout", float, 120.0, range=Range(0, FLOAT32_MAX, low_open=True), metavar="SECONDS", section=RUNS,
        help="--workers or TF_CONFIG: seconds each worker waits for the others to start before an error naming "
             "the missing ones (Ctrl-C stops the wait)."),
    Key("logdir", str, path="folder", section=RUNS,
        help="Write TensorBoard scalars here (loss, words/s, lr, row changes), and the projector's new and "
             "most-moved rows at the end: tensorboard --logdir DIR."),
)
# embedtune init's own options, checked against the same kind of range
INIT_RANGES = {
    "init.min_contexts": Range(1, INT64_MAX),
    "init.fit_min_count": Range(1, INT64_MAX),
    "init.sif": Range(0, FLOAT32_MAX, zero="all weigh 1"),
}


# --- the dataclasses, built from the declarations on first use --------------------------------------
# First use, not import: the registry loads objectives from other packages (entry points), whose
# modules may import this one's functions.
_built: dict = {}
_state = {"building": False}
_LAZY = ("Config", "VocabConfig", "TrainConfig", "RANGES")


def all_keys() -> tuple[Key, ...]:
    """Every key: the shared ones, then each registered objective's own, in the registry's order."""
    return _classes()["keys"]


def owners() -> dict[tuple[str, str], str]:
    """(table, name) -> the objective that declares the key, for the objectives' own keys."""
    return _classes()["owners"]


def _classes() -> dict:
    if _built:
        return _built
    if _state["building"] or registry.loading():
        # An objective module imported by the registry asked for the dataclasses, which need its keys.
        raise ImportError("embedtune.config's dataclasses are built from the objectives' keys: an objective "
                          "module must not use Config or TrainConfig at import (import them inside functions)")
    _state["building"] = True
    try:
        keys, owner = list(KEYS), {}
        seen = {(k.table, k.name): "the shared keys" for k in KEYS}
        for name, cls in registry.registered().items():
            for key in cls.keys:
                where = (key.table, key.name)
                if where in seen:
                    raise EmbedtuneError(f"objective {name}: key '{key.name}' is already one of {seen[where]}")
                seen[where] = f"objective {name}'s"
                owner[where] = name
                keys.append(key)
        vocab = _dataclass("VocabConfig", _fields(keys, "vocab"),
                           "Which rows may move. Freeze rules win over train rules; see embedtune.plan.")
        train = _dataclass("TrainConfig", _fields(keys, "train"),
                           "None: decided by the objective (its class's ``defaults``; see ``resolve``).")
        config = _dataclass("Config", [*_fields(keys, ""), ("vocab", vocab, dataclasses.field(default_factory=vocab)),
                                       ("train", train, dataclasses.field(default_factory=train))],
                            "The whole config: the file's top level, [vocab] and [train].")
        ranges = {f"{k.table}.{k.name}": k.range for k in keys if k.range is not None}
        _built.update(Config=config, VocabConfig=vocab, TrainConfig=train, RANGES={**ranges, **INIT_RANGES},
                      keys=tuple(keys), owners=owner, by_key={(k.table, k.name): k for k in keys})
        return _built
    finally:
        _state["building"] = False


def _fields(keys: list[Key], table: str) -> list:
    return [(k.name, k.annotation, dataclasses.field(default=k.default)) for k in keys if k.table == table]


def _dataclass(name: str, fields_: list, doc: str):
    cls = dataclasses.make_dataclass(name, fields_, frozen=True)
    cls.__module__, cls.__qualname__, cls.__doc__ = __name__, name, doc   # pickled and shown by this name
    return cls


def __getattr__(name):
    if name in _LAZY:
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _key(table: str, name: str) -> Key:
    return _classes()["by_key"][(table, name)]


# --- checks -------------------------------------------------------------------------------------
def range_problem(key: str, value) -> str | None:
    """What is wrong with ``value`` for ``key`` of RANGES ("must be ..., got ..."), or None."""
    r = _classes()["RANGES"][key]
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return f"must be a finite number, got {value}"
    if isinstance(value, float) and abs(value) > FLOAT32_MAX:
        return f"is beyond float32's range (largest {FLOAT32_MAX:.4g}), got {value:g}"
    zero = f" ({r.zero})" if r.zero else ""
    if r.low_open and value <= r.low:
        return f"must be positive, got {value}"
    if r.low == 0 and r.high == 1 and not 0 <= value <= 1:
        return f"must be between 0{zero} and 1, got {value}"
    if value < r.low:
        return f"must be 0{zero} or positive, got {value}" if r.low == 0 else f"must be at least {r.low:g}, got {value}"
    if value > r.high:
        return f"must be at most {r.high:,}, got {value}"
    return None


def _values(config, *tables: str):
    """(key, value) for every key of these tables, in declaration order."""
    for key in all_keys():
        if key.table in tables:
            holder = getattr(config, key.table) if key.table else config
            yield key, getattr(holder, key.name)


def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _check_value(key: Key, where: str, value, source: str):
    if isinstance(value, bool) and key.type is not bool:
        raise EmbedtuneError(f"key '{where}' must be {_type_name(key.type)}, got {value!r}", path=source)
    if key.type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, key.type):
        raise EmbedtuneError(f"key '{where}' must be {_type_name(key.type)}, got {value!r}", path=source)
    if key.role and value == "":   # an empty name is never "not given": it would drop a file silently
        raise EmbedtuneError(f"key '{where}' is an empty file name", path=source)
    return value


def _build(cls, table: dict, source: str, prefix: str = ""):
    known = {f.name: f for f in fields(cls)}
    name_of = prefix.rstrip(".")
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in known:
            raise EmbedtuneError(f"unknown key '{prefix}{key}' (known: {', '.join(sorted(known))})", path=source)
        if name in ("vocab", "train") and not prefix:
            if not isinstance(value, dict):
                raise EmbedtuneError(f"'{key}' must be a table ([{key}])", path=source)
            values[name] = _build(known[name].type, value, source, prefix=f"{key}.")
        else:
            values[name] = _check_value(_key(name_of, name), prefix + key, value, source)
    return cls(**values)


def _away(t, objective: str) -> list[tuple[Key, str]]:
    """(key, owner) for the [train] keys that only their objective reads, set away from their
    defaults under ``objective``."""
    return [(key, owner) for (table, name), owner in owners().items()
            if table == "train" and owner != objective and (key := _key(table, name)).only
            and getattr(t, name) != key.default]


def validate(config, source: str | None = None, options: frozenset = frozenset()):
    """Check values that have a type but not every value makes sense.

    source : the config file the values came from; options : names given on the command line,
    which an error names as options (``--window``) rather than as keys of the file.
    An objective's key declared ``only`` is refused under another objective: a top-level one (a file
    only that objective reads) at once, "auto" included; a [train] one under "auto" in ``resolve``,
    which names the objective auto stands for.
    """
    t = config.train

    def bad(key, text):
        name = key.split(".")[-1]
        if name in options or source is None:   # a command-line value: a usage error (exit 2)
            raise BadOption(f"--{name.replace('_', '-')} {text}")
        raise EmbedtuneError(f"'{key}' {text}", path=source)

    for key, value in _values(config, "", "train", "vocab"):
        if key.role and value == "":
            bad(f"{key.table}.{key.name}".lstrip("."), "is an empty file name")
    objectives = registry.registered()
    if t.objective != AUTO and t.objective not in objectives:
        bad("train.objective", f"must be one of {', '.join((AUTO, *objectives))}, got {t.objective!r}")
    for key, value in _values(config, "train", "vocab"):
        if key.choices and value is not None and value not in key.choices:
            bad(f"{key.table}.{key.name}", f"must be one of {', '.join(key.choices)}, got {value!r}")
    for key, value in _values(config, ""):   # an objective's file, given to another objective (auto too)
        owner = owners().get(("", key.name))
        if owner and key.only and value != key.default and t.objective != owner:
            bad(key.name, f"is {key.only} only by --objective {owner} (the objective here is {t.objective})")
    for key in ("format", "to"):
        name = getattr(config, key)
        if name is not None:
            from embedtune.formats import FORMAT_NAMES   # numpy, so only when a name is given

            if name not in FORMAT_NAMES:
                bad(key, f"must be one of {', '.join(FORMAT_NAMES)}, got {name!r}")
    for key, value in _values(config, "train", "vocab"):
        if key.range is not None and value is not None:
            problem = range_problem(f"{key.table}.{key.name}", value)
            if problem:
                bad(f"{key.table}.{key.name}", problem)
    if t.objective != AUTO:   # after the ranges: a value out of range is the first thing to fix; auto: resolve
        for key, owner in _away(t, t.objective):
            bad(f"train.{key.name}", f"is {key.only} only by --objective {owner} (the objective here is {t.objective})")
    return config


def load_config(path: str | Path, check_values: bool = True):
    """Read a TOML config file: keys and types always, values unless ``check_values`` is False
    (when command-line options will be merged over it first; see ``merge``)."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        # A byte-order mark (Windows editors write one) is not part of the TOML.
        table = tomllib.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except FileNotFoundError:
        raise EmbedtuneError("no such config file", path=source) from None
    except IsADirectoryError:
        raise EmbedtuneError("is a folder, expected a config file", path=source) from None
    except tomllib.TOMLDecodeError as err:
        raise EmbedtuneError(f"not valid TOML: {err}", path=source) from None
    except UnicodeDecodeError as err:
        raise EmbedtuneError(f"not valid UTF-8 TOML: {err.reason}", path=source) from None
    config = _build(_classes()["Config"], table, source)
    return validate(config, source) if check_values else config


def merge(config, overrides: dict, source: str | None = None):
    """Apply command-line values (None = not given) over a config, then check the values.

    overrides : flat dict of names from Config, VocabConfig or TrainConfig.
    source : the config file ``config`` was read from, for messages.
    """
    tables = {"": {}, "vocab": {}, "train": {}}
    table_of = {k.name: k.table for k in all_keys()}
    for name, value in overrides.items():
        if value is not None:
            tables[table_of.get(name, "")][name] = value
    return validate(
        dataclasses.replace(
            config,
            **tables[""],
            vocab=dataclasses.replace(config.vocab, **tables["vocab"]),
            train=dataclasses.replace(config.train, **tables["train"]),
        ),
        source,
        frozenset(tables[""]) | frozenset(tables["vocab"]) | frozenset(tables["train"]),
    )


def resolve(config):
    """The config with every "decided later" value decided: the objective (auto: the one declared
    for ``config.format``, since that objective made such vectors, else the registry's default; see
    ``objectives.auto_objective``), then the window, optimizer and anchor that objective uses by
    default. A resolved config is returned as it is: a run resolves once (embedtune/run.py), and the
    trainer's entry points, which resolve for callers that skip the run, then read that same object."""
    t = config.train
    objective = t.objective
    if objective != AUTO and t.batch_size is not None and all(
            getattr(t, key) is not None for key in registry.objective_class(objective).defaults):
        return config
    if objective == AUTO:
        objective = registry.auto_objective(config.format)
        for key, owner in _away(t, objective):
            raise EmbedtuneError(f"{key.flag} (train.{key.name}) is {key.only} only by --objective {owner} "
                                 f"(the objective here is {objective}: give --objective {owner})")
    defaults = registry.objective_class(objective).defaults
    chosen = {key: getattr(t, key) if getattr(t, key) is not None else value for key, value in defaults.items()}
    if t.batch_size is None and "batch_size" not in chosen:
        chosen["batch_size"] = DEFAULT_BATCH_SIZE
    return dataclasses.replace(config, train=dataclasses.replace(t, objective=objective, **chosen))


def learning_rate(train) -> float:
    """The starting learning rate of a resolved config."""
    if train.lr is not None:
        return train.lr
    objective = registry.registered().get(train.objective)   # "auto" unresolved: the optimizer's own
    rates = objective.learning_rates if objective is not None else {}
    return rates.get(train.optimizer, DEFAULT_LR[train.optimizer])
