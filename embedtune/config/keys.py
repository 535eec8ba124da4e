"""One declaration per config key: its type, default, range or choices, and its command-line option.

A key is a field of a frozen dataclass declared with ``key(...)``: its name, type (the annotation) and
default are the field's, the rest (help, range, choices, option, ...) rides in the field's metadata, and
``declared(cls)`` reads them back as ``Key`` records. The shared keys are the fields of
embedtune/config/schema.py's ``Config``, ``VocabConfig`` and ``TrainConfig``; each objective declares its own as
``OwnKeys`` dataclasses (its class's ``keys``). The config's checks, ``embedtune train``'s options and
their ``--help`` all come from these declarations. A leaf module: it imports only embedtune.errors (a leaf), so
the objectives and the config can both import it.

Every declared number is checked where a config is made (``check_values``, called by each class's
``__post_init__``): finite, in range, the right sign, whatever built it (a file, the command line,
``fine_tune``, a Config made by hand). A number that is not a key (a Keras optimizer's argument) is
checked by the same rule with ``check_number``.
"""

from __future__ import annotations

import builtins
import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from embedtune.errors import BadValue

FLOAT32_MAX = 3.4028234663852886e38
INT64_MAX = 2**63 - 1

# The sections of `embedtune train --help`, in their order; each objective's own keys go under a
# section of their own, between TRAINING and RUNS.
ROWS = "Rows (freeze rules win over train rules)"
NEW_WORDS = "New words"
TRAINING = "Training"
RUNS = "Runs and checkpoints"
IO = "Input and output"


@dataclass(frozen=True)
class Range:
    """The values a number may take: low..high; ``low_open``: low itself is not allowed;
    ``zero``: what 0 means, where it is allowed and means something special."""

    low: float
    high: float
    low_open: bool = False
    zero: str = ""

    def text(self) -> str:
        """The range as docs/training.md and --help say it."""
        low = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        return low if self.high in (INT64_MAX, FLOAT32_MAX) else f"{self.low:g} .. {self.high:,}"

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` here ("must be ..., got ..."), or None: a number that is not
        finite, beyond float32, below or above the range. The one range check of every entry point
        (the command line, a config file, ``fine_tune``, the Keras layer: ``check_number``)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {value}"
        if isinstance(value, float) and abs(value) > FLOAT32_MAX:
            return f"is beyond float32's range (largest {FLOAT32_MAX:.4g}), got {value:g}"
        zero = f" ({self.zero})" if self.zero else ""
        if self.low_open and value <= self.low:
            return f"must be positive, got {value}" if self.low == 0 else f"must be above {self.low:g}, got {value}"
        if self.low == 0 and self.high == 1 and not 0 <= value <= 1:
            return f"must be between 0{zero} and 1, got {value}"
        if value < self.low:
            return (f"must be 0{zero} or positive, got {value}" if self.low == 0
                    else f"must be at least {self.low:g}, got {value}")
        if value > self.high:
            return f"must be at most {self.high:,}, got {value}"
        return None


def check_number(name: str, value, range: Range) -> None:
    """Raise ValueError("NAME must be ..., got ...") unless ``value`` lies in ``range`` (finite, the
    right sign, not beyond float32): for a number that enters outside the config's keys (a Keras
    optimizer's argument, ...), checked as every key's is. ``name`` is the caller's own name for it.
    A leaf module raises ValueError; embedtune's callers turn it into their error type where they need to."""
    problem = range.problem(value)
    if problem:
        raise ValueError(f"{name} {problem}")


@dataclass(frozen=True)
class Key:
    """A config key and its command-line option, as ``declared`` reads it from a ``key(...)`` field.

    name : the key in its TOML table and the dataclass attribute (``--name-with-dashes`` on the command line)
    type : int, float, str or bool; a ``default`` of None means "decided later" (by the objective, the
        vectors) and also allows None
    table : "train", "vocab" or "" (the file's top level)
    help : the option's help, one sentence; ``shown_default`` says what ``[default: ...]`` shows where the
        default itself says too little (None: the default, or the objectives' defaults when it is None)
    range, choices : the values allowed (ranges: ``embedtune.config.ranges()``)
    only : for an objective's key: set away from its default under another objective, it is an error
        "is <only> only by --objective <name>" ("" : no such check, the key is just not read)
    option : False: a key of the file only, or an option written by hand in cli/
    path : what the value names (click.Path on the command line): "read", a file the run reads; "write", a
        file it writes; "folder", a folder it writes into ("": not a path; True is taken as "read"). No
        output may name an input (embedtune.checks.check_names); an empty name is an error
    pattern : the value is a regular expression over words (re.search); an empty one would match every
        word, so it is an error, as an empty file name is (``empty_problem``)
    metavar, section : of the option in --help (section: "" = the objective's own section)
    """

    name: str
    type: type
    default: object = None
    help: str = ""
    table: str = "train"
    range: Range | None = None
    choices: tuple = ()
    only: str = ""
    option: bool = True
    path: str | bool = ""
    pattern: bool = False
    metavar: str | None = None
    section: str = ""
    shown_default: str | None = None
    # the dataclass declaring it: an objective's OwnKeys class (read through the config's ``keys_of``),
    # or one of the config's own classes (None: a Key made by hand, read as the config's attribute)
    holder: builtins.type | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def role(self) -> str:
        """"read", "write", "folder" or "" (see ``path``)."""
        return "read" if self.path is True else self.path or ""

    def empty_problem(self, value) -> str | None:
        """What an empty string given for this key is ("an empty file name", ...), or None where "" is a value.
        An empty name or pattern is never "not given": it would drop a file, or match every word, silently."""
        if value != "":
            return None
        if self.role:
            return "an empty file name"
        if self.pattern:
            return "an empty pattern (it would match every word)"
        return None

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` for this key, whatever entered it ("must be a finite number, got
        nan", "is an empty file name", "is not a valid regular expression: ..."), or None; None is
        "decided later" and passes. The value's type is checked where it is read (a file, the options)."""
        if value is None:
            return None
        problem = self.empty_problem(value)
        if problem:
            return f"is {problem}"
        if self.range is not None:
            return self.range.problem(value)
        if self.pattern:
            return pattern_problem(value)
        return None

    @property
    def flag(self) -> str:
        """The command-line option: ``--word-ngrams`` for word_ngrams."""
        return "--" + self.name.replace("_", "-")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be compiled as a regular expression, or None. re raises OverflowError for a
    repeat count beyond its limit (a{4294967296}) and RecursionError for nesting too deep, not re.error."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as err:
        return f"{pattern!r} is not a valid regular expression: {err}"
    return None


def key(default: Any = None, **declaration: Any) -> Any:
    """A config key as a dataclass field: ``negative: int = key(5, range=Range(1, 100), help="...")``.

    default : the field's default (None: "decided later", and the annotation must allow None);
    declaration : the rest of ``Key`` (help, range, choices, only, option, path, metavar, section,
    shown_default). The name and type come from the field, the table from the class (``table``)."""
    unknown = set(declaration) - {f.name for f in dataclasses.fields(Key)} - {"name", "type", "default", "table",
                                                                            "holder"}
    assert not unknown, f"key(): unknown declaration {sorted(unknown)}"
    return dataclasses.field(default=default, metadata={"key": declaration})


@dataclass(frozen=True)
class OwnKeys:
    """An objective's own keys: subclass it as a frozen dataclass whose fields are ``key(...)``s.

    table : the TOML table they sit in: "train" ([train], ``config.train.keys_of(cls)``) or "" (the
    file's top level, ``config.keys_of(cls)``); a class holds the keys of one table. The file and the
    command line stay flat (``[train] negative = 3``, ``--negative 3``); in Python the values are a
    typed instance: ``config.train.keys_of(SkipGramKeys).negative``."""

    table: ClassVar[str] = "train"

    def __post_init__(self) -> None:
        check_values(self)


def check_values(holder) -> None:
    """Raise BadValue for the first key of the dataclass ``holder`` whose value its declaration refuses
    (``Key.problem``). Each config class calls it as it is made, so no entry point can skip it."""
    for declared_key in declared(type(holder)):
        problem = declared_key.problem(getattr(holder, declared_key.name))
        if problem:
            raise BadValue(type(holder).__name__, declared_key.name, problem)


def _base_type(annotation) -> tuple[type, bool]:
    """(the type, whether None is allowed) of an annotation such as ``int`` or ``int | None``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
        raise TypeError(f"a key's type is one of int, float, str, bool, or that | None; got {annotation}")
    return annotation, False


_declared: dict[type, tuple[Key, ...]] = {}


def declared(cls: type) -> tuple[Key, ...]:
    """The ``Key`` of each ``key(...)`` field of the dataclass ``cls``, in declaration order (fields
    without a key's metadata, such as Config's ``vocab``, are left out). A default of None needs an
    annotation that allows None, and only it."""
    if cls not in _declared:
        _declared[cls] = _declare(cls)
    return _declared[cls]


def _declare(cls: type) -> tuple[Key, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "key" not in f.metadata:
            continue
        tp, optional = _base_type(hints[f.name])
        if tp not in (int, float, str, bool) or optional != (f.default is None):
            raise TypeError(f"{cls.__qualname__}.{f.name}: annotate a key as int, float, str or bool, with "
                            f"| None exactly when its default is None (got {hints[f.name]}, default {f.default!r})")
        table = cls.table   # type: ignore[attr-defined]   # a ClassVar of every class declaring keys
        out.append(Key(f.name, tp, f.default, table=table, holder=cls, **f.metadata["key"]))
    return tuple(out)
