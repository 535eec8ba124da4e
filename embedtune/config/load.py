"""Loading and resolving the training config: one TOML file (stdlib tomllib) into the frozen dataclasses of
embedtune/config/schema.py.

The shared keys are the fields of ``Config``, ``VocabConfig`` and ``TrainConfig``; each objective
declares its own as an ``OwnKeys`` dataclass of its module (its class's ``keys``), and a config holds
their values as typed instances (``config.train.keys_of(SkipGramKeys).negative``). The file and the
command line stay flat: ``[train] negative = 3``, ``--negative 3``. A config file holds only what
differs from the defaults; an unknown key or a value of the wrong type is an error naming the key
and the file. Command-line options override the file (see ``merge``). In Python, ``with_values``
and ``train_config`` set keys by their flat names. Paths in a config are relative to the directory
embedtune is run from.

The registry (embedtune.objectives) is imported inside the functions that read it: importing this
module loads no objective, and no objective imports this module, only keys.py and schema.py
(tests/test_layout.py).
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import TypeVar

from embedtune.errors import BadOption, BadValue, EmbedtuneError, option_name
from embedtune.config.keys import Key, OwnKeys, Range, declared
from embedtune.config.schema import AUTO, INITS, LOWERCASE, OPTIMIZERS, TOKENIZE, Config, TrainConfig, VocabConfig

__all__ = ["Config", "TrainConfig", "VocabConfig", "Key", "Range", "load_config", "merge", "validate",
           "resolve", "learning_rate", "all_keys", "owners", "find_key", "ranges", "with_values",
           "train_config", "build_table", "AUTO", "INITS", "LOWERCASE", "OPTIMIZERS", "TOKENIZE"]

DEFAULT_LR = {"sgd": 0.025, "adagrad": 0.05, "adam": 0.001}
DEFAULT_BATCH_SIZE = 4096   # pairs a step, unless the objective's defaults say otherwise
# Each objective's defaults (window, optimizer, anchor, epochs, ...) and the learning rates it
# starts better at live on its class (embedtune/objectives/); ``resolve`` and ``learning_rate``
# read them there, and train.objective's values are that registry's names.

SHARED: tuple[type, ...] = (Config, VocabConfig, TrainConfig)   # the shared keys' classes, in --help's order
C = TypeVar("C", Config, VocabConfig, TrainConfig)


# --- the keys: the shared ones and the registered objectives' own -----------------------------------
# Gathered on first use, not import: the registry loads objectives from other packages (entry points).
@dataclasses.dataclass(frozen=True)
class _Keys:
    keys: tuple[Key, ...]                    # every key, shared first, then the objectives' in the registry's order
    owners: dict[tuple[str, str], str]       # (table, name) -> the objective declaring it
    by_key: dict[tuple[str, str], Key]
    ranges: dict[str, Range]                 # "table.key" -> its range (embedtune init's own keys too)


_built: dict[str, _Keys] = {}   # "keys": the one _Keys, once gathered


def all_keys() -> tuple[Key, ...]:
    """Every key: the shared ones, then each registered objective's own, in the registry's order."""
    return _keys().keys


def owners() -> dict[tuple[str, str], str]:
    """(table, name) -> the objective that declares the key, for the objectives' own keys."""
    return _keys().owners


def ranges() -> dict[str, Range]:
    """"table.key" -> Range for every key with one, the registered objectives' (entry points too)."""
    return _keys().ranges


def _keys() -> _Keys:
    if _built:
        return _built["keys"]
    from embedtune import objectives as registry

    if registry.loading():   # an objective's module, imported by the registry, asked: its keys are not in yet
        raise ImportError("embedtune.config's keys include the objectives': an objective module must not read them "
                          "at import (read them inside functions)")
    keys = [key for cls in SHARED for key in declared(cls)]
    seen = {(k.table, k.name): "the shared keys" for k in keys}
    owner = {}
    for name, cls in registry.registered().items():
        for holder in cls.keys:
            if not (isinstance(holder, type) and issubclass(holder, OwnKeys) and dataclasses.is_dataclass(holder)
                    and holder.table in ("", "train")):
                raise EmbedtuneError(f"objective {name}: keys holds {holder!r}; declare an objective's keys as a "
                                     "frozen dataclass of embedtune.config.keys.OwnKeys whose fields are key(...)s, of "
                                     "table 'train' or '' (the top level)")
            for key in declared(holder):
                where = (key.table, key.name)
                if where in seen:
                    raise EmbedtuneError(f"objective {name}: key '{key.name}' is already one of {seen[where]}")
                seen[where] = f"objective {name}'s"
                owner[where] = name
                keys.append(key)
    declared_ranges = {f"{k.table}.{k.name}": k.range for k in keys if k.range is not None}
    _built["keys"] = _Keys(tuple(keys), owner, {(k.table, k.name): k for k in keys}, declared_ranges)
    return _built["keys"]


def find_key(table: str, name: str) -> Key:
    """The declared key ``name`` of ``table`` ("", "vocab" or "train"), shared or an objective's (KeyError if none)."""
    return _keys().by_key[(table, name)]


def with_values(holder: C, **values) -> C:
    """``holder`` (a Config, VocabConfig or TrainConfig) with keys of its own table set by their flat
    names, the shared ones and the objectives' own alike: ``with_values(train, window=3, negative=2)``.
    An unknown name is a TypeError, as ``dataclasses.replace``'s."""
    shared: dict = {}
    own: dict[type, dict] = {}
    for name, value in values.items():
        key = _keys().by_key.get((holder.table, name))
        if key is None or key.holder is None or not issubclass(key.holder, OwnKeys):
            shared[name] = value   # a shared key (dataclasses.replace names an unknown one)
        else:
            own.setdefault(key.holder, {})[name] = value
    if own:
        assert not isinstance(holder, VocabConfig)   # an objective's keys are of [train] or the top level
        kept: list[OwnKeys] = [keys for keys in holder.own if type(keys) not in own]
        shared["own"] = (*kept, *(dataclasses.replace(holder.keys_of(cls), **changed) for cls, changed in own.items()))
    return dataclasses.replace(holder, **shared) if shared else holder


def train_config(**values) -> TrainConfig:
    """A TrainConfig from flat names, the objectives' own keys included: ``train_config(negative=3)``."""
    return with_values(TrainConfig(), **values)


# --- checks -------------------------------------------------------------------------------------
def _values(config: Config, *tables: str):
    """(key, value) for every key of these tables, in declaration order."""
    for key in all_keys():
        if key.table in tables:
            yield key, config.value(key)


def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _check_value(key: Key, where: str, value, source: str):
    if isinstance(value, bool) and key.type is not bool:
        raise EmbedtuneError(f"key '{where}' must be {_type_name(key.type)}, got {value!r}", path=source)
    if key.type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, key.type):
        raise EmbedtuneError(f"key '{where}' must be {_type_name(key.type)}, got {value!r}", path=source)
    problem = key.empty_problem(value)
    if problem:
        raise EmbedtuneError(f"key '{where}' is {problem}", path=source)
    return value


_TABLES = {"vocab": VocabConfig, "train": TrainConfig}


def build_table(cls: type[C], table: dict, source: str, prefix: str = "", python: bool = False) -> C:
    """One table of the file (flat names, the objectives' own keys among the shared ones) as ``cls``.
    python : the values are a Python caller's options (``fine_tune``'s), named as such in an error."""
    known = {k.name for k in all_keys() if k.table == cls.table} | (set(_TABLES) if cls is Config else set())
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in known:
            raise EmbedtuneError(f"unknown key '{prefix}{key}' (known: {', '.join(sorted(known))})", path=source)
        if name in _TABLES and cls is Config:
            if not isinstance(value, dict):
                raise EmbedtuneError(f"'{key}' must be a table ([{key}])", path=source)
            values[name] = build_table(_TABLES[name], value, source, prefix=f"{key}.", python=python)
        else:
            values[name] = _check_value(find_key(cls.table, name), prefix + key, value, source)
    try:
        return with_values(cls(), **values)
    except BadValue as err:   # the declaration's check (embedtune.config.keys.check_values), named as the user wrote it
        if python:
            raise BadOption(f"{err.key} {err.problem}") from None
        raise EmbedtuneError(f"'{prefix}{err.key}' {err.problem}", path=source) from None


def _away(t: TrainConfig, objective: str) -> list[tuple[Key, str]]:
    """(key, owner) for the [train] keys that only their objective reads, set away from their
    defaults under ``objective``."""
    return [(key, owner) for (table, name), owner in owners().items()
            if table == "train" and owner != objective and (key := find_key(table, name)).only
            and t.value(key) != key.default]


def validate(config: Config, source: str | None = None, options: frozenset = frozenset(),
             python: bool = False) -> Config:
    """Check values that have a type but not every value makes sense.

    source : the config file the values came from; options : names given on the command line,
    which an error names as options (``--window``) rather than as keys of the file; python : they
    were given in Python (``fine_tune``, the Keras layer), so an error names them as there (``window``).
    Each value alone passed its declaration's check when the config was made (``Key.problem``: range,
    finite, sign, empty name, pattern); what is checked here takes more than one value, or the registry.
    An objective's key declared ``only`` is refused under another objective: a top-level one (a file
    only that objective reads) at once, "auto" included; a [train] one under "auto" in ``resolve``,
    which names the objective auto stands for.
    """
    t = config.train

    def bad(key, text):
        _refuse(key, text, source, options, python)

    from embedtune import objectives as registry

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
    if t.objective != AUTO:   # a value out of range, the first thing to fix, was refused already; auto: resolve
        for key, owner in _away(t, t.objective):
            bad(f"train.{key.name}", f"is {key.only} only by --objective {owner} (the objective here is {t.objective})")
    return config


def _refuse(key: str, text: str, source: str | None, options: frozenset, python: bool):
    """Raise the error for ``key`` ("train.window") whose value is wrong (``text``: "must be ..."), named
    as the user wrote it: an option given on the command line (``--window``, a usage error), in Python
    (``window``), or a key of the config file ``source``."""
    name = key.split(".")[-1]
    if python and (name in options or source is None):   # fine_tune(window=0), or a Config passed in
        raise BadOption(f"{name if name in options else key} {text}")
    if name in options or source is None:   # a command-line value: a usage error (exit 2)
        raise BadOption(f"{option_name(name)} {text}")
    raise EmbedtuneError(f"'{key}' {text}", path=source)


def load_config(path: str | Path, check_values: bool = True) -> Config:
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
    config = build_table(Config, table, source)
    return validate(config, source) if check_values else config


def merge(config: Config, overrides: dict, source: str | None = None, python: bool = False) -> Config:
    """Apply command-line values (None = not given) over a config, then check the values.

    overrides : flat dict of names from Config, VocabConfig or TrainConfig.
    source : the config file ``config`` was read from, for messages.
    python : the overrides are a Python caller's (an error names ``window``, not ``--window``).
    """
    tables: dict[str, dict] = {"": {}, "vocab": {}, "train": {}}
    table_of = {k.name: k.table for k in all_keys()}
    for name, value in overrides.items():
        if value is not None:
            tables[table_of.get(name, "")][name] = value
    given = frozenset(tables[""]) | frozenset(tables["vocab"]) | frozenset(tables["train"])
    try:
        merged = with_values(config, **tables[""], vocab=with_values(config.vocab, **tables["vocab"]),
                             train=with_values(config.train, **tables["train"]))
    except BadValue as err:   # the declaration's check (embedtune.config.keys.check_values), named as it was given
        table = {"VocabConfig": "vocab", "TrainConfig": "train"}.get(err.holder, table_of.get(err.key, ""))
        _refuse(f"{table}.{err.key}".lstrip("."), err.problem, source, given, python)
    return validate(merged, source, given, python)


def resolve(config: Config) -> Config:
    """The config with every "decided later" value decided: the objective (auto: the one declared
    for ``config.format``, since that objective made such vectors, else the registry's default; see
    ``objectives.auto_objective``), then the window, optimizer and anchor that objective uses by
    default, and the new words' start (``vocab.init``) it takes by default. A resolved config is returned as
    it is: a run resolves once (embedtune/run.py), and the trainer's entry points, which resolve for callers
    that skip the run, then read that same object."""
    from embedtune import objectives as registry

    t = config.train
    objective = t.objective
    if objective != AUTO and t.batch_size is not None and config.vocab.init is not None and all(
            t.value(find_key("train", key)) is not None for key in registry.objective_class(objective).defaults):
        return config
    if objective == AUTO:
        objective = registry.auto_objective(config.format)
        for key, owner in _away(t, objective):
            raise EmbedtuneError(f"{key.flag} (train.{key.name}) is {key.only} only by --objective {owner} "
                                 f"(the objective here is {objective}: give --objective {owner})")
    defaults = registry.objective_class(objective).defaults
    given = {key: t.value(find_key("train", key)) for key in defaults}
    chosen = {key: given[key] if given[key] is not None else value for key, value in defaults.items()}
    if t.batch_size is None and "batch_size" not in chosen:
        chosen["batch_size"] = DEFAULT_BATCH_SIZE
    vocab = config.vocab
    if vocab.init is None:
        vocab = dataclasses.replace(vocab, init=registry.objective_class(objective).new_word_start)
    return dataclasses.replace(config, vocab=vocab, train=with_values(t, objective=objective, **chosen))


def learning_rate(train: TrainConfig) -> float:
    """The starting learning rate of a resolved config."""
    from embedtune import objectives as registry

    if train.lr is not None:
        return train.lr
    objective = registry.registered().get(train.objective)   # "auto" unresolved: the optimizer's own
    rates = objective.learning_rates if objective is not None else {}
    return rates.get(train.optimizer, DEFAULT_LR[train.optimizer])
