"""Helpers every command shares: error reporting, quiet mode, messages."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import stat
import sys

import click

from embedtune.errors import EmbedtuneError, counted


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


ALLOW_NAN_HELP = "Keep rows with NaN or infinity (default: error)."
DROP_NAN_HELP = ("Leave out rows with NaN or infinity, with a note naming them (default: error): such a row "
                 "cannot be used (as a context it would make NaN of every row it touches).")


def reader_options(nan_help: str = ALLOW_NAN_HELP):
    """--keep-first-duplicate, --allow-nan and --replace-bad-utf8: what the vectors reader's errors
    recommend, so every command that reads VECTORS takes them (passed on to formats.load_vectors)."""
    def decorate(command):
        for option in reversed((
                click.option("--keep-first-duplicate", is_flag=True,
                             help="Keep the first row of a repeated word (default: error)."),
                click.option("--allow-nan", is_flag=True, help=nan_help),
                click.option("--replace-bad-utf8", is_flag=True,
                             help="Replace bytes in words that are not UTF-8 (default: error)."))):
            command = option(command)
        return command

    return decorate


def load_training_vectors(path, format, keep_first_duplicate=False, allow_nan=False, replace_bad_utf8=False,
                          limit=None):
    """VECTORS as train, init, eval and neighbors read them: with --allow-nan, rows with NaN or
    infinity left out (a note), since none of them can use such a row."""
    from embedtune import formats

    vectors = formats.load_vectors(path, format=format, limit=limit, keep_first_duplicate=keep_first_duplicate,
                                   allow_nan=allow_nan, replace_bad_utf8=replace_bad_utf8)
    if allow_nan:
        vectors, left_out = formats.without_nonfinite(vectors)
        if left_out:
            message(f"Note: left out {counted(len(left_out), 'row')} with NaN or infinity (--allow-nan; "
                    f"first: {', '.join(repr(w) for w in left_out[:5])})")
    return vectors


def reports_errors(func):
    """Turn the library's EmbedtuneError into a one-line `Error: ...` and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except EmbedtuneError as err:
            raise click.ClickException(str(err)) from None

    return wrapper


CLOSED_PIPE = 141   # 128 + SIGPIPE: what a shell reports for `cat` whose reader went away


def closed_pipe() -> int:
    """`embedtune ... -o - | head`: the reader went away, so the output was cut short, and the exit
    code must say so (as `cat`'s does) for `set -o pipefail` to see it. Nothing is printed, as `cat`
    prints nothing. Both streams are pointed at /dev/null first: Python's own flush at exit would
    otherwise find the pipe closed again and print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return CLOSED_PIPE


def check_inputs_and_outputs(vectors: str, corpus: str | None, output: str, json_out: str | None,
                             other_inputs: tuple = ()) -> None:
    """Refuse, before any work, what would fail or destroy something at the end: both inputs on
    standard input, JSON and vectors both on standard output, an output that is an input (by
    samefile, not by spelling; ``other_inputs`` are inputs too), a folder, in a folder that does
    not exist or cannot be written; an input that does not exist."""
    if vectors == "-" and corpus == "-":
        raise EmbedtuneError("VECTORS and CORPUS cannot both be standard input")
    if json_out == "-" and output == "-":
        raise EmbedtuneError("standard output already carries the vectors (-o -); give --json FILE")
    for option, target in (("-o", output), ("--json", json_out)):
        if not target or target == "-":
            continue
        for source in (vectors, corpus, *other_inputs):
            if source and source != "-" and os.path.exists(source) and os.path.exists(target) \
                    and os.path.samefile(source, target):
                raise EmbedtuneError(f"output would overwrite an input; choose another {option}", target)
        check_writable_file(target, option)
    check_input_file(vectors, "vectors file", missing="no such file")   # the words of formats.io
    check_input_file(corpus, "corpus file")


# Cheap checks: each costs a stat or a compile, so every command runs them before TensorFlow is
# imported and before a vectors file is read, which take seconds.

def check_input_file(path: str | None, what: str, missing: str | None = None) -> None:
    """A file to read (not '-'): it exists, is not a folder, and may be read.

    what : "corpus file", ...; missing : the message when it does not exist (default: "no such WHAT")
    """
    if not path or path == "-":
        return
    if not os.path.exists(path):
        raise EmbedtuneError(missing or f"no such {what}", path)
    if os.path.isdir(path):
        raise EmbedtuneError(f"is a folder, expected a {what}", path)
    if not os.access(path, os.R_OK):
        raise EmbedtuneError("cannot open for reading: permission denied", path)


def check_pattern(pattern: str | None, option: str) -> None:
    if pattern is None:
        return
    from embedtune.plan import compile_pattern

    compile_pattern(pattern, option.lstrip("-").replace("-", "_"))


def check_writable_file(target: str | None, option: str | None) -> None:
    """The file ``target`` can be written where the writer will write it: its folder exists and a file
    can be created in it (tried, as the writer's temporary file is, and removed at once). A target
    that exists and is not a regular file (/dev/null, a pipe) is opened as it is, so it is left alone.
    option : the option that named it, for the message (None: an argument, named by its path only)."""
    if not target or target == "-":
        return
    prefix = f"{option}: " if option else ""
    if os.path.isdir(target):
        raise EmbedtuneError(f"{prefix}is a folder, expected a file name", target)
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise EmbedtuneError(f"{prefix}{'the ' if option else ''}folder {folder} does not exist", target)
    if os.path.exists(target) and not os.path.isfile(target):
        _try_device(target, prefix)
        return
    _try_create_in(folder, target, prefix)


def _try_device(target: str, prefix: str) -> None:
    # A device is written where it is (open_target): /dev/full refuses every write, even one of no
    # bytes, so such a write tells before the run, and writes nothing to /dev/null or a terminal.
    # A FIFO is left alone: opening it would wait for its reader.
    if not stat.S_ISCHR(os.stat(target).st_mode):
        return
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        raise EmbedtuneError(f"{prefix}cannot open for writing: {err.strerror or err}", target) from None
    try:
        os.write(fd, b"")
    except OSError as err:
        raise EmbedtuneError(f"{prefix}cannot write: {err.strerror or err}", target) from None
    finally:
        os.close(fd)


def check_writable_folder(folder: str | None, option: str) -> None:
    """A folder the run will create or write into: not a file, and its nearest existing folder
    (itself, or the one it will be made in) lets a file be created."""
    if not folder:
        return
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise EmbedtuneError(f"{option}: not a folder", folder)
    existing = os.path.abspath(folder)
    while not os.path.isdir(existing):
        parent = os.path.dirname(existing)
        if os.path.exists(existing) or parent == existing:
            raise EmbedtuneError(f"{option}: cannot be made: {existing} is not a folder", folder)
        existing = parent
    _try_create_in(existing, folder, f"{option}: ")


def _try_create_in(folder: str, target: str, prefix: str) -> None:
    # Permission bits do not tell (root ignores them; a read-only mount or /sys refuses anyway):
    # only creating a file does, exactly as the writer will at the end.
    # Removed in ``finally``: a signal (Ctrl-C, SIGTERM raised as an exception) may arrive at any point.
    probe = os.path.join(folder, f".embedtune-probe.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as err:
            raise EmbedtuneError(f"{prefix}cannot write in {folder}: {err.strerror or err}", target) from None
        os.close(fd)
    finally:
        with contextlib.suppress(OSError):   # not made (refused), or gone
            os.unlink(probe)


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
