"""Helpers every command shares: error reporting, quiet mode, messages."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading

import click

from embedtune.errors import BadOption, EmbedtuneError
from embedtune.formats import FORMAT_NAMES


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


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (cli/main.py) so that it unwinds like Ctrl-C's KeyboardInterrupt:
    every `finally` and `with` runs, and no temporary output or spool file is left behind (the default
    action would end the process on the spot)."""


def show_progress() -> bool:
    return not quiet() and sys.stderr.isatty()


# Seconds between redraws of an open bar: a library that reports once per chunk, a chunk that takes seconds on a
# loaded machine, or tqdm's own skipping of updates (its miniters) leave the terminal still for no longer than this
# (issue 48.7: no silence over ~2 s at any size).
REDRAW_EVERY = 0.5


class Redrawn:
    """Redraws a tqdm bar from a thread of its own every REDRAW_EVERY seconds until ``close``: its elapsed time
    moves while the work between two of the library's reports goes on (the bar's count and rate stay the
    library's). A bar with tqdm's ``delay`` appears once that has passed, even before the first report."""

    def __init__(self, bar):
        self.bar = bar
        self.shown = False
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._redraw, name="embedtune-progress", daemon=True)
        self._thread.start()

    def _redraw(self) -> None:
        while not self._closed.wait(REDRAW_EVERY):
            with self._lock:
                if not self._closed.is_set() and self.bar.format_dict["elapsed"] >= self.bar.delay:
                    self.bar.refresh()
                    self.shown = True

    def close(self) -> None:
        """Stop redrawing, and close the bar (cleared from the terminal if it was shown)."""
        with self._lock:
            self._closed.set()
        self._thread.join()
        bar = self.bar
        if self.shown and bar.last_print_t < bar.start_t + bar.delay:
            # Shown by the redraws alone: tqdm clears only a bar its updates showed.
            bar.last_print_t = bar.start_t + bar.delay
        bar.close()


class ProgressBar:
    """A `progress(done, total)` callable for the library: a tqdm bar on standard error that appears
    only once the work has taken a second (from entering the block, before the library's first report),
    redrawn while it is open, and never with -q or when standard error is not a terminal."""

    def __init__(self, description: str, unit: str):
        self.description = description
        self.unit = unit
        self.enabled = show_progress()
        self.bar = None
        self.redrawn = None

    def __call__(self, done: int, total) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            self.__enter__()
        if self.bar.total is None and total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def __enter__(self):
        if self.enabled and self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=None, desc=self.description, unit=self.unit, unit_scale=True,
                            unit_divisor=1024 if self.unit == "B" else 1000, file=sys.stderr, delay=1.0,
                            leave=False, dynamic_ncols=True)
            self.redrawn = Redrawn(self.bar)
        return self

    def __exit__(self, *exc):
        if self.redrawn is not None:
            self.redrawn.close()
            self.bar = self.redrawn = None


def reading_bar(path) -> ProgressBar:
    """A vectors file's read, in bytes (the readers' ``progress``): every command that loads one shows it."""
    return ProgressBar(f"reading {os.path.basename(str(path)) or path}", "B")


def message(text: str) -> None:
    """A message for the person at the terminal: standard error, silenced by -q."""
    if not quiet():
        say(text)


def say(text: str) -> None:
    """A line on standard error, above any bar being drawn there (the bar cleared first, then drawn again below
    it), so that a message never lands on a bar's line."""
    tqdm = sys.modules.get("tqdm")   # a bar exists only once tqdm is imported
    if tqdm is not None:
        tqdm.tqdm.write(text, file=sys.stderr)
    else:
        click.echo(text, err=True)


FORMAT_HELP = ", ".join(FORMAT_NAMES[:-1]) + " or " + FORMAT_NAMES[-1]   # --format and --to list the choices


def format_name(ctx, param, value):
    """Click callback of --format and --to: an unknown format name is a usage error (exit 2, one line)
    naming the option and the choices."""
    if value is None:
        return None
    if value not in FORMAT_NAMES:
        raise click.UsageError(f"{param.opts[0]}: unknown format '{value}' "
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
                          limit=None, kernels=False):
    """VECTORS as train, init, eval and neighbors read them (embedtune.formats.reading.load_training_vectors), its
    notes said; ``kernels``: the command loads numba anyway."""
    from embedtune.formats.reading import Reading, load_training_vectors as load

    with reading_bar(path) as bar:
        return load(path, format, Reading(keep_first_duplicate, allow_nan, replace_bad_utf8), limit=limit,
                    note=lambda text: message(f"Note: {text}"), progress=bar, kernels=kernels)


def say_compiling() -> None:
    """numba compiling one of our kernels (its cache lacks it): seconds a kernel, said once (kernels/compiling.py)."""
    say("Compiling kernels (first run only) ...")


def reports_errors(func):
    """Turn the library's EmbedtuneError into a one-line `Error: ...` and exit code 1, or 2 for a
    BadOption (a value on the command line that is not allowed: a usage error, docs/ci.md)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from embedtune.kernels.compiling import tell_when_compiling

        tell_when_compiling(None if quiet() else say_compiling)
        try:
            return func(*args, **kwargs)
        except BadOption as err:
            raise click.UsageError(str(err)) from None
        except EmbedtuneError as err:
            raise click.ClickException(str(err)) from None

    return wrapper


DEBUG = "EMBEDTUNE_DEBUG"   # set to 1: an exception that is not the library's own shows its traceback


def failure_line(err: Exception) -> str:
    """One line saying what failed, for an exception that is not the library's own EmbedtuneError: the
    machine (a full disk, memory, a resource TensorFlow could not get), or a bug of ours, said as one."""
    def one_line(text) -> str:
        return " ".join(str(text).split())

    if isinstance(err, OSError):   # a full disk (ENOSPC), a file gone or denied mid-run, ...
        what = one_line(err.strerror or err)
        return f"{err.filename}: {what}" if err.filename else what
    if isinstance(err, MemoryError):
        return "out of memory" + (f": {one_line(err)}" if str(err) else "")
    kind = type(err)
    if kind.__module__.startswith("tensorflow") and hasattr(err, "message"):   # tf.errors.OpError, unimported
        first = one_line(str(err.message).strip().splitlines()[0] if str(err.message).strip() else kind.__name__)
        if kind.__name__ == "ResourceExhaustedError":
            return f"TensorFlow ran out of a resource (memory or disk): {first}"
        return f"TensorFlow failed ({kind.__name__}): {first}"
    return (f"internal error ({kind.__name__}: {one_line(err)}); this is a bug in embedtune: rerun with "
            f"{DEBUG}=1 for the traceback, and report it")


@contextlib.contextmanager
def failures_in_one_line():
    """Around a whole command (cli/main.py): every exception that reaches it, not only the library's
    EmbedtuneError, ends as one `Error: ...` line and exit code 1 (docs/ci.md), never a traceback; the
    outputs are temporary files until renamed into place, so a failure leaves none. Ctrl-C and SIGTERM
    (BaseExceptions), click's own exits and a closed pipe (cli/main.py) pass through. EMBEDTUNE_DEBUG=1
    lets every other exception through, with its traceback, for a developer."""
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
        raise
    except EmbedtuneError as err:   # a command without reports_errors, or raised outside it
        if isinstance(err, BadOption):
            raise click.UsageError(str(err)) from None
        raise click.ClickException(str(err)) from None
    except Exception as err:
        if os.environ.get(DEBUG, "") not in ("", "0"):
            raise
        raise click.ClickException(failure_line(err)) from None


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
