"""Helpers every command shares: error reporting, quiet mode, messages."""

from __future__ import annotations

import functools
import json
import os
import sys

import click

from embedtune.errors import EmbedtuneError


QUIET = "embedtune.quiet"   # key of click's ctx.meta, which every context of one invocation shares


def quiet(ctx: click.Context | None = None) -> bool:
    """True when -q was given, before the command's name or after it."""
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(QUIET))


def _set_quiet(ctx, param, value):
    if value:
        ctx.meta[QUIET] = True


def quiet_option(command):
    """-q/--quiet on a command, so `embedtune inspect -q FILE` works as `embedtune -q inspect FILE` does."""
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, is_eager=True, callback=_set_quiet,
                        help="No progress bars or messages on standard error.")(command)


def show_progress() -> bool:
    return not quiet() and sys.stderr.isatty()


def message(text: str) -> None:
    """A message for the person at the terminal: standard error, silenced by -q."""
    if not quiet():
        click.echo(text, err=True)


def format_name(ctx, param, value):
    """Click callback of --format and --to: an unknown format name is an error naming the option."""
    if value is None:
        return None
    from embedtune.formats import FORMATS, FORMAT_NAMES

    if value not in FORMATS:
        # One `Error:` line and exit 1, like every other bad input (not click's usage block).
        raise click.ClickException(f"{param.opts[0]}: unknown format '{value}' "
                                   f"(expected one of {', '.join(FORMAT_NAMES)})")
    return value


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


def check_inputs_and_outputs(vectors: str, corpus: str, output: str, json_out: str | None) -> None:
    """Refuse, before any work, what would fail or destroy something at the end: a missing input,
    both inputs on standard input, JSON and vectors both on standard output, an output that is an input (by
    samefile, not by spelling), a folder, or in a folder that does not exist."""
    if vectors == "-" and corpus == "-":
        raise EmbedtuneError("VECTORS and CORPUS cannot both be standard input")
    for source, missing in ((vectors, "no such file"), (corpus, "no such corpus file")):
        if source and source != "-" and not os.path.exists(source):
            raise EmbedtuneError(missing, source)   # before loading the other input, not after
    if json_out == "-" and output == "-":
        raise EmbedtuneError("standard output already carries the vectors (-o -); give --json FILE")
    for option, target in (("-o", output), ("--json", json_out)):
        if not target or target == "-":
            continue
        for source in (vectors, corpus):
            if source and source != "-" and os.path.exists(source) and os.path.exists(target) \
                    and os.path.samefile(source, target):
                raise EmbedtuneError(f"output would overwrite an input; choose another {option}", target)
        if os.path.isdir(target):
            raise EmbedtuneError(f"{option}: is a folder, expected a file name", target)
        folder = os.path.dirname(target) or "."
        if not os.path.isdir(folder):
            raise EmbedtuneError(f"{option}: the folder {folder} does not exist", target)


def write_json(summary: dict, target: str) -> None:
    """A JSON summary on standard output ('-') or in a file written atomically."""
    text = json.dumps(summary, indent=2) + "\n"
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from embedtune.formats.io import open_target

    with open_target(target) as f:   # temporary file, renamed into place
        f.write(text.encode("utf-8"))
