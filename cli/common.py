"""Helpers every command shares: error reporting, quiet mode, messages."""

from __future__ import annotations

import functools
import sys

import click

from embedtune.errors import EmbedtuneError


def quiet(ctx: click.Context | None = None) -> bool:
    """True when -q was given or standard error is not a terminal (no progress bars)."""
    ctx = ctx or click.get_current_context(silent=True)
    root = ctx.find_root() if ctx else None
    return bool(root and root.obj and root.obj.get("quiet"))


def show_progress() -> bool:
    return not quiet() and sys.stderr.isatty()


def message(text: str) -> None:
    """A message for the person at the terminal: standard error, silenced by -q."""
    if not quiet():
        click.echo(text, err=True)


def reports_errors(func):
    """Turn the library's EmbedtuneError into a one-line `Error: ...` and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except EmbedtuneError as err:
            raise click.ClickException(str(err)) from None
        except BrokenPipeError:
            # `embedtune ... -o - | head`: the reader went away; not an error of ours.
            sys.stderr.close()
            sys.exit(0)

    return wrapper
