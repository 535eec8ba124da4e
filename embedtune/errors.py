"""The library's one exception type: every bad input becomes an EmbedtuneError.

The command layer turns it into a one-line ``Error: ...`` and a non-zero exit code;
nothing else in the library catches broadly.
"""

from __future__ import annotations

import contextlib
import contextvars

# How messages spell an option: the command line's ``--freeze-top``, or, inside ``python_names()`` (the
# Keras layer), the Python keyword ``freeze_top`` the user typed. A context variable, so that the
# messages made deep in the config and the freeze rules need no argument threaded through every call.
_SPELLING = contextvars.ContextVar("embedtune_option_spelling", default="command")


class EmbedtuneError(Exception):
    """Bad input or an impossible request, with the file and line where known.

    ``str(err)`` reads ``FILE line N: message`` (or ``FILE: message``, or just the message).
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or ""
        if self.line is not None:
            where = f"{where} line {self.line}" if where else f"line {self.line}"
        return f"{where}: {self.message}" if where else self.message


class BadOption(EmbedtuneError):
    """A value given on the command line (or to ``fine_tune``) that is not allowed: out of its range,
    not among the choices, an empty file name. The command layer exits 2 for it, as for every usage
    error; a bad value read from a file is a plain EmbedtuneError (exit 1)."""


class BadValue(BadOption, ValueError):
    """A value its key's declaration refuses (out of range, not finite, an empty name, a pattern re cannot
    compile), raised where a config is made (``embedtune.config.keys.check_values``), whatever made it. ``key``:
    the key's name; ``problem``: "must be ...". The entry points name the value as their user wrote
    it (``--lr``, a file's ``train.lr``, ``lr=``): ``embedtune.config`` catches it and says so."""

    def __init__(self, holder: str, key: str, problem: str):
        self.holder, self.key, self.problem = holder, key, problem
        super().__init__(f"{holder}.{key} {problem}")

    def __reduce__(self):   # pickled as made (a process pool's worker may raise it)
        return BadValue, (self.holder, self.key, self.problem)


class TrainingInterrupted(Exception):
    """The run was asked to stop; a checkpoint was written at ``checkpoint`` (None without a folder).
    Here, not in the trainer, so that a command catches it without importing TensorFlow."""

    def __init__(self, checkpoint: str | None, position):
        self.checkpoint = checkpoint
        self.position = position   # embedtune.training.checkpoints.state.Position; None: before the first step
        super().__init__(f"stopped at step {position.steps}" if position is not None else "stopped before training")


def counted(n: int, noun: str, plural: str | None = None, grouped: bool = True) -> str:
    """'1 word', '2,000 words' ('2000 words' unless ``grouped``): a count and its noun, for messages."""
    number = f"{n:,}" if grouped else f"{n}"
    return f"{number} {noun if n == 1 else plural or noun + 's'}"


def option_name(name: str) -> str:
    """``name`` (a key: ``freeze_top``) as the user wrote it: ``--freeze-top`` on the command line,
    ``freeze_top`` inside ``python_names()``."""
    return name if _SPELLING.get() == "python" else "--" + name.replace("_", "-")


@contextlib.contextmanager
def python_names():
    """Messages made inside name options as Python keywords (``freeze_top``), not as flags."""
    token = _SPELLING.set("python")
    try:
        yield
    finally:
        _SPELLING.reset(token)
