"""One declaration per config key: its type, default, range or choices, and its command-line option.

The shared keys (embedtune/config.py) and each objective's own (its class's ``keys``) are declared
with ``Key``; the config's dataclasses, their checks, ``embedtune train``'s options and their
``--help`` all come from these declarations. A leaf module: it imports nothing of embedtune's, so
the objectives and the config can both import it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Key:
    """A config key and its command-line option.

    name : the key in its TOML table and the dataclass attribute (``--name-with-dashes`` on the command line)
    type : int, float, str or bool; a ``default`` of None means "decided later" (by the objective, the
        vectors) and also allows None
    table : "train", "vocab" or "" (the file's top level)
    help : the option's help, one sentence; ``shown_default`` says what ``[default: ...]`` shows where the
        default itself says too little (None: the default, or the objectives' defaults when it is None)
    range, choices : the values allowed (ranges: ``embedtune.config.RANGES``)
    only : for an objective's key: set away from its default under another objective, it is an error
        "is <only> only by --objective <name>" ("" : no such check, the key is just not read)
    option : False: a key of the file only, or an option written by hand in cli/
    path : what the value names (click.Path on the command line): "read", a file the run reads; "write", a
        file it writes; "folder", a folder it writes into ("": not a path; True is taken as "read"). No
        output may name an input (embedtune.checks.check_names); an empty name is an error
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
    metavar: str | None = None
    section: str = ""
    shown_default: str | None = None

    @property
    def annotation(self):
        return self.type if self.default is not None else self.type | None

    @property
    def role(self) -> str:
        """"read", "write", "folder" or "" (see ``path``)."""
        return "read" if self.path is True else self.path or ""

    @property
    def flag(self) -> str:
        """The command-line option: ``--word-ngrams`` for word_ngrams."""
        return "--" + self.name.replace("_", "-")
