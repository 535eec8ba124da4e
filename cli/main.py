"""`embedtune` command group.

Subcommands are imported only when invoked, so `embedtune --help`, `inspect` and
`convert` never pay for importing TensorFlow (seconds and hundreds of MB).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util   # importlib does not import it itself; a fresh venv has nothing that does
import os
import signal
import sys

import click

from embedtune.cli.blas_threads import one_blas_thread_for, short_blas_spin_for
from embedtune.kernels.lean_start import defer_unused_numpy_packages

one_blas_thread_for(sys.argv[1:])   # before numpy loads (cli.common imports it): see there
short_blas_spin_for(sys.argv[1:])
defer_unused_numpy_packages()   # loads numpy: after the two above

from embedtune import __version__  # noqa: E402
from embedtune._adapters.python_private import run_exit_handlers  # noqa: E402
from embedtune.cli.common import Terminated, closed_pipe, failures_in_one_line, quiet_option  # noqa: E402
from embedtune.cli.signals import not_now, send_again  # noqa: E402
from embedtune.errors import EmbedtuneError  # noqa: E402

# command name -> "module:attribute", relative to this package
COMMANDS = {
    "inspect": "formats_cmds:inspect_cmd",
    "convert": "formats_cmds:convert_cmd",
    "train": "train_cmd:train_cmd",
    "init": "init_cmd:init_cmd",
    "diff": "compare_cmds:diff_cmd",
    "eval": "compare_cmds:eval_cmd",
    "neighbors": "compare_cmds:neighbors_cmd",
    "report": "report_cmd:report_cmd",
    "lexicon": "lexicon_cmd:lexicon_cmd",
}

SHORT_HELP = {
    "inspect": "Show format, size, norms and problems of a vectors file.",
    "convert": "Convert a vectors file to another format.",
    "train": "Fine-tune vectors on a corpus, updating only the rows you choose.",
    "init": "Give new corpus words a starting vector from their contexts.",
    "diff": "Compare two vectors files row by row.",
    "eval": "Score vectors on word-similarity and analogy benchmarks.",
    "neighbors": "Show nearest neighbours of words.",
    "report": "Write one HTML page of what a fine-tune did (before/after, neighbours, map).",
    "lexicon": "Write synonym and antonym lexicons (from WordNet) for --objective retrofit.",
}


def _terminate(signum, frame):
    if not_now(frame):   # where raising would not unwind (cli/signals.py): later
        send_again(signum)
        return
    # A second SIGTERM must not cut short the cleanup the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def _interrupt(signum, frame):
    """Ctrl-C as Python's own handler raises it, but never where raising would not unwind (inside
    importlib's lock, a C extension's init, llvmlite or numba's boxing callback: cli/signals.py
    ``not_now``). The signal is taken again a moment later, once out."""
    if not_now(frame):
        send_again(signum)
        return
    raise KeyboardInterrupt


def _deliver_again(default_hook):
    """sys.unraisablehook: a Terminated or KeyboardInterrupt that the handlers above raised inside a
    callback whose exceptions Python only prints ("Exception ignored in", e.g. an import's module-lock
    weakref callback) is sent again, so that it unwinds where it can; any other goes to the default."""
    def hook(unraisable):
        error = unraisable.exc_value
        if not isinstance(error, (Terminated, KeyboardInterrupt)):
            return default_hook(unraisable)
        sig = signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT
        signal.signal(sig, _terminate if sig == signal.SIGTERM else _interrupt)
        send_again(sig)   # the main thread takes it once the callback has returned
    return hook


@contextlib.contextmanager
def interrupts_unwind():
    """Ctrl-C exits 130 and SIGTERM 143 (128 + the signal, as a shell reports them), after the
    cleanup; `embedtune train`'s loop handles both itself (a checkpoint, then the same codes)."""
    saved = {}
    saved_hook, sys.unraisablehook = sys.unraisablehook, _deliver_again(sys.unraisablehook)
    try:
        for sig, handler in ((signal.SIGTERM, _terminate), (signal.SIGINT, _interrupt)):
            saved[sig] = signal.signal(sig, handler)
    except ValueError:   # not the main thread: signals cannot be handled here anyway
        pass
    try:
        yield
    except KeyboardInterrupt:
        click.echo("\nInterrupted (Ctrl-C).", err=True)
        raise click.exceptions.Exit(130) from None
    except Terminated:
        click.echo("\nTerminated (SIGTERM).", err=True)
        raise click.exceptions.Exit(143) from None
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        sys.unraisablehook = saved_hook


def _exit_at_once(signum, frame):
    os._exit(128 + signum)


class UsageLine(click.UsageError):
    """A usage error shown as every other error is: one line, `Error: ...` (exit code 2, as click and
    shells have it), not click's usage block; the message names the option, the value and what is allowed."""

    def show(self, file=None):
        click.echo(f"Error: {self.format_message()}", err=True)


@contextlib.contextmanager
def usage_errors_in_one_line():
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:   # `embedtune` alone: the help is the answer
        raise
    except UsageLine:
        raise
    except click.UsageError as err:
        raise UsageLine(err.format_message(), err.ctx) from None


class LazyGroup(click.Group):
    def make_context(self, info_name, args, parent=None, **extra):
        with usage_errors_in_one_line():   # the group's own options and command name
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx):
        # Around the whole command: importing it, reading, spooling and writing.
        with interrupts_unwind(), usage_errors_in_one_line():
            try:
                with failures_in_one_line():   # any other exception: one line, exit 1 (docs/ci.md)
                    return super().invoke(ctx)
            except BrokenPipeError:   # before click's own handler, which exits 1 and hides the signal
                raise click.exceptions.Exit(closed_pipe()) from None

    def list_commands(self, ctx):
        return [name for name in COMMANDS if self._available(name)]

    def resolve_command(self, ctx, args):
        """click's own, with a suggestion for a mistyped command (click 8 suggests only options)."""
        name = click.utils.make_str(args[0]) if args else None
        if name is not None and name not in COMMANDS and not name.startswith("-"):
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command '{name}'; did you mean '{close[0]}'?")
        return super().resolve_command(ctx, args)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(f"{__package__}.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{module_name}":
                return None
            raise
        except EmbedtuneError as err:   # an objective's entry point that fails to load (train's options)
            raise click.ClickException(str(err)) from None
        return getattr(module, attr, None)

    def _available(self, name):
        module_name = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(f"{__package__}.{module_name}") is not None

    def format_commands(self, ctx, formatter):
        # Short help from a table, so listing the commands imports none of them.
        rows = [(name, SHORT_HELP.get(name, "")) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="embedtune")
@quiet_option
def cli():
    """Fine-tune pretrained word vectors while updating only the vocabulary you choose.

    \b
    Example:
      embedtune train --config configs/quickstart.toml
      embedtune inspect data/sample/glove.6B.50d.20k.txt
    """


def main():
    # Outside the command (its arguments parsed, or its work done and the process on its way out)
    # nothing is left to clean up: a signal ends the process at once with its code (130, 143). Python's
    # own Ctrl-C there printed a traceback, or click's "Aborted!" with exit 1.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_at_once)
    # A worker of `--workers` starts with both blocked (embedtune/distribute/launch.py): one that came
    # meanwhile is taken here, by the handler above.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        cli(prog_name="embedtune")
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    try:   # what is still buffered: its reader may be gone too
        sys.stdout.flush()
    except BrokenPipeError:
        code = closed_pipe()
    except (OSError, ValueError):   # another failure: Python's own flush at exit reports it, as before
        pass
    exit_now(code)


def exit_now(code) -> None:
    """End the command without the interpreter's teardown, which takes seconds of wall after the work
    is done where TensorFlow was imported (benchmarks/README.md, classify), and during which Python has
    put the signals' default actions back: a SIGTERM there ended the process by the signal, not with
    143 (tests/test_fault_injection.py, once commands stopped importing TensorFlow). Everything the command writes is
    closed by then (outputs are renamed into place, the corpus spool removed); the atexit handlers
    still run and the standard streams are flushed. A stream that cannot be flushed (a closed pipe)
    falls back to the usual exit, which reports it as before."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    run_exit_handlers()   # what Python's exit runs first (logging, temporary folders, multiprocessing)
    try:   # what they wrote
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if code is None:
        code = 0
    elif not isinstance(code, int):   # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr, flush=True)
        code = 1
    os._exit(code)


if __name__ == "__main__":
    main()
