"""The objectives of ``embedtune train``, by name: the one registry.

The config's ``train.objective`` values, its keys and per-objective defaults, and the CLI's
``--objective`` choices and options all come from this table. Adding an objective is one file and
one line here (see embedtune/objectives/base.py), or, outside this package, an entry point in the
group ``embedtune.objectives`` naming its class (loaded once, on first use). Importing it imports no
TensorFlow.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from embedtune.config.schema import AUTO   # the objective declared for the vectors' format, else the default one
from embedtune.errors import EmbedtuneError
from embedtune.objectives.base import Objective
from embedtune.objectives.classify import Classify
from embedtune.objectives.glove import GloVe
from embedtune.objectives.retrofit import Retrofit
from embedtune.objectives.sgns import SkipGram

OBJECTIVES: dict[str, type[Objective]] = {
    "sgns": SkipGram,
    "glove": GloVe,
    "retrofit": Retrofit,
    "classify": Classify,
}
GROUP = "embedtune.objectives"   # the entry-point group of objectives from other packages
_plugins = {"state": "not loaded"}   # then "loading", then "loaded"


def loading() -> bool:
    """True while the entry points' objectives load (the registry is not whole yet)."""
    return _plugins["state"] == "loading"


def registered() -> dict[str, type[Objective]]:
    """OBJECTIVES, with the entry points' objectives added on the first call. An entry point that
    fails to load, or names no Objective, is an error naming it (and is tried again next time)."""
    if _plugins["state"] != "not loaded":   # loading: a plugin importing embedtune sees the built-in ones
        return OBJECTIVES
    _plugins["state"] = "loading"
    try:
        for point in entry_points(group=GROUP):
            if point.name in OBJECTIVES:
                continue
            try:
                cls = point.load()
            except Exception as err:
                raise EmbedtuneError(f"objective '{point.name}' (entry point {point.value} in group {GROUP}) "
                                     f"failed to load: {type(err).__name__}: {err}") from err
            if not (isinstance(cls, type) and issubclass(cls, Objective)) or cls.name != point.name:
                raise EmbedtuneError(f"objective '{point.name}' (entry point {point.value} in group {GROUP}) "
                                     f"is not an Objective class named '{point.name}'")
            OBJECTIVES[point.name] = cls
    except BaseException:
        _plugins["state"] = "not loaded"
        raise
    _plugins["state"] = "loaded"
    return OBJECTIVES


def choices() -> tuple[str, ...]:
    """What train.objective and --objective accept."""
    return (AUTO, *registered())


def objective_class(name: str) -> type[Objective]:
    """The class registered as ``name`` (a resolved objective, not "auto")."""
    return registered()[name]


def auto_objective(format: str | None) -> str:
    """What "auto" means for vectors of this format: the objective whose ``for_formats`` holds it
    (that objective made such vectors), else the one declared ``auto_default``."""
    objectives = registered()
    for name, cls in objectives.items():
        if format is not None and format in cls.for_formats:
            return name
    return next(name for name, cls in objectives.items() if cls.auto_default)


def check_corpus_start(config) -> None:
    """The first bytes of the config's corpus (and its objective's files read as one, such as
    classify's --valid), as its objective reads them (auto: plain text), checked before the vectors
    load (Corpus.check_start); standard input and pipes are left alone."""
    objective = config.train.objective
    reader = Objective if objective == AUTO else objective_class(objective)
    reader.check_corpus_start(config)


def __getattr__(name):
    if name == "CHOICES":   # with the entry points' objectives, so read on use
        return choices()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
