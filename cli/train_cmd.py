"""`embedtune train`: options, messages and exit codes; the work is embedtune.run."""

from __future__ import annotations

import signal
import sys

import click

import embedtune.run
from embedtune.checks import check_run, missing_argument
from embedtune.cli.common import (DROP_NAN_HELP, FORMAT_HELP, Redrawn, Terminated, format_name, message, quiet_option,
                                  reader_options, reports_errors, show_progress, write_json)
from embedtune.cli.files import ConfigFile, reads, writes
from embedtune.cli.options import IO, RUNS, SectionedCommand, key_options, option
from embedtune.cli.signals import not_now, send_again
from embedtune.config import Config, load_config, merge
from embedtune.errors import EmbedtuneError, TrainingInterrupted, counted
from embedtune.formats import OUTLINE_SAMPLE_ROWS
from embedtune.formats.reading import Reading

RULES_HELP = """\b
Which rows move (freeze rules win over train rules):
  1. new corpus words (not in VECTORS, seen >= --min-count times) always
     train; a freeze rule naming a new word is an error;
  2. a word matched by --freeze-list/--freeze-top/--freeze-pattern/
     --freeze-pretrained is frozen;
  3. a word matched by --train-list/--train-pattern trains;
  4. any other word is frozen if a train rule was given, else it trains.
Options on the command line override the [vocab] and [train] tables of --config."""


class StopRequests:
    """Ctrl-C or SIGTERM asks the loop to stop after the current step (a second Ctrl-C stops at once).
    ``code``: the exit code of the first signal, 130 for SIGINT and 143 for SIGTERM (128 + the signal,
    as a shell reports it, and as every other command and phase exits). The training loop alone enters
    it (embedtune.training.train): before, in the set-up, a signal unwinds at once (``entered`` is False)."""

    def __init__(self):
        self.requested = False
        self.entered = False
        self.code = None
        self.saved = {}

    def _handler(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            if not_now(frame):   # where raising would not unwind (inside a kernel's boxing, llvmlite): later
                send_again(signum)
                return
            click.echo("\nStopped at once; a --resume starts from the last checkpoint written, if any.", err=True)
            raise SystemExit(130)
        if self.requested:
            return
        self.requested = True
        self.code = 128 + signum
        why = "Ctrl-C again" if signum == signal.SIGINT else "SIGTERM; Ctrl-C"
        click.echo(f"\nStopping after this step ({why} to stop at once) ...", err=True)

    def __enter__(self):
        self.entered = True
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.saved[sig] = signal.signal(sig, self._handler)
            except ValueError:   # not the main thread (e.g. inside a test runner thread)
                pass
        return self

    def __call__(self) -> bool:
        return self.requested

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def workers_bound(ctx, param, value):
    """Click callback of --workers: 1 to the CPU cores this process may use. Each worker is a process
    with its own TensorFlow runtime and at least one thread; more than the cores only take turns
    (docs/workers.md)."""
    if value is None:
        return None
    from embedtune.distribute import local_cores

    cores = local_cores()
    if not 1 <= value <= cores:
        # A value out of its range: a usage error (exit 2), as every option's (docs/ci.md).
        raise click.UsageError(f"--workers must be between 1 and {cores} (the CPU cores this process may "
                                   f"use; each worker is a process of its own), got {value}")
    return value


@click.command("train", cls=SectionedCommand, epilog=RULES_HELP)
@click.argument("vectors", required=False, type=reads(allow_dash=True))
@click.argument("corpus", required=False, type=reads(allow_dash=True))
@key_options   # every config key's option, from the declarations (embedtune/config/load.py, each objective's keys)
@option("--workers", type=int, metavar="N", callback=workers_bound, section=RUNS,
        help="Train on N local worker processes (tf.distribute, loopback ports), each on cores / N "
             "threads; the rows each changed are averaged every --sync-every steps. At most the CPU "
             "cores this process may use. Under TF_CONFIG, this process is one worker of that cluster instead. [default: 1]")
@option("--resume", is_flag=True, section=RUNS,
        help="Continue from the newest checkpoint in --checkpoint-dir (a damaged one is skipped for the one "
             "before, with a note).")
@option("--overwrite-checkpoints", is_flag=True, section=RUNS,
        help="A new run (no --resume) deletes the checkpoints it finds in --checkpoint-dir; without it, "
             "it refuses such a folder.")
@option("--keep-checkpoints", is_flag=True, section=RUNS,
        help="Keep the checkpoints once the output is written (by default a run that ends deletes them; "
             "an interrupted one keeps its newest 3).")
@option("--dry-run", is_flag=True, section=RUNS,
        help="Check everything that needs no training (config, files, lists, patterns, outputs), print "
             "the plan (rows frozen / trainable / new, settings, an estimate of peak memory from the "
             "table sizes) and stop: no TensorFlow, nothing written but --json FILE. VECTORS' words are "
             f"read, not their matrix: only the first {OUTLINE_SAMPLE_ROWS:,} rows' values are checked.")
@option("-o", "--output", type=writes(allow_dash=True), section=IO, help="Output vectors file ('-' = standard output).")
@option("-c", "--config", "config_path", type=ConfigFile(), section=IO,
        help="TOML config (see configs/default.toml); options override it.")
@option("--format", "format_", metavar="NAME", help=f"Format of VECTORS: {FORMAT_HELP} (default: detected).",
        callback=format_name, section=IO)
@option("--to", metavar="NAME", help=f"Output format, {FORMAT_HELP} (default: word2vec-binary for -o *.bin (a "
                                      "fastText model from one), fasttext for *.vec, else that of VECTORS; --to that "
                                      "the name contradicts is an error).", callback=format_name, section=IO)
@option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE]", section=IO,
        type=writes(allow_dash=True),
        help="Print the summary as JSON on standard output, or write it to FILE.")
@reader_options(DROP_NAN_HELP)
@click.pass_context
@quiet_option
@reports_errors
def train_cmd(ctx, vectors, corpus, output, config_path, format_, json_out, resume, dry_run, overwrite_checkpoints,
              keep_checkpoints, workers, keep_first_duplicate, allow_nan, replace_bad_utf8, **options):
    """Fine-tune VECTORS on CORPUS, updating only the rows the rules allow.

    CORPUS is a text file (gzip or bzip2 too) or '-' for standard input: one sentence
    or paragraph per line, whitespace tokens. Frozen rows are written back
    bit-identical: each is read back from the bytes written and compared bit
    for bit with the input as read (a difference is an error, no output).
    --objective retrofit reads --lexicon (and --antonyms) instead of a CORPUS.

    \b
    Examples:
      embedtune train --config configs/quickstart.toml
      embedtune train glove.txt corpus.txt --freeze-top 20000 -o tuned.txt
      zcat corpus.gz | embedtune train vecs.bin - --freeze-pretrained -o - > new.bin
      embedtune train --config configs/quickstart.toml --dry-run --json
      embedtune train glove.txt --objective retrofit --lexicon syn.txt --antonyms ant.txt -o retro.txt
      embedtune train glove.txt train.txt --objective classify --valid valid.txt --save-classifier clf.txt -o tuned.txt
    """
    config = load_config(config_path, check_values=False) if config_path else Config()
    config = merge(config, {"vectors": vectors, "corpus": corpus, "output": output, "format": format_, **options},
                   source=config_path)
    if problem := missing_argument(config):
        raise click.UsageError(problem)
    workers = workers or 1
    from embedtune.distribute import cluster_from_env, launched, server_cluster_from_env

    try:   # an environment that makes no sense is a usage error (exit 2), as a bad option is
        servers = server_cluster_from_env()   # TF_CONFIG names ps tasks
        cluster_from_env()
    except EmbedtuneError as err:
        raise click.UsageError(str(err)) from None
    if servers is not None and not servers.chief:   # reads no file: serves and ends there
        serve_task(ctx, config, resume, workers, servers, dry_run)
    check_run(config, resume=resume, dry_run=dry_run, json_out=json_out, workers=workers, config_path=config_path)
    if servers is not None:   # the chief: what the mode does not build, refused before it loads anything
        serve_task(ctx, config, resume, workers, servers, dry_run)
    if workers > 1 and not dry_run and not launched():
        launch_workers(ctx, config, workers)   # a launched worker runs on, below
    reading = Reading(keep_first_duplicate, allow_nan, replace_bad_utf8)
    if dry_run:
        show_dry_run(config, reading, resume, workers, json_out)
        return
    result, stop = train_until_stopped(ctx, config, reading, resume, overwrite_checkpoints, keep_checkpoints)
    if result.written is not None:   # else one worker of several: the chief writes the output and reports
        for line in result.report:
            message(line)
        if json_out:
            write_json(result.stats, json_out)
    if stop.requested:   # after the loop's last look at it: the run is whole, the exit code still says
        message("Note: the stop request came after the last step; the run finished.")
        ctx.exit(stop.code)


def show_dry_run(config, reading, resume, workers, json_out) -> None:
    """What --dry-run says: the plan's lines, or its description as JSON (alone, on standard output)."""
    bar = ProgressBar()
    try:
        decided = embedtune.run.dry_run(config, reading=reading, resume=resume, workers=workers,
                                        on_load=say_loading, note=note, on_phase=bar.show_phase)
    finally:
        bar.close()
    if json_out:
        write_json(decided.description, json_out)
        if json_out == "-":
            return
    click.echo("Dry run: every check passed; nothing trained, nothing written.")
    for line in decided.lines:
        click.echo(line)


def train_until_stopped(ctx, config, reading, resume, overwrite_checkpoints, keep_checkpoints):
    """The run with its progress bar and stop requests: (its result, the requests). A signal before the
    loop, or a stop asked in it, ends the command here with its message and exit code."""
    from embedtune.distribute import PEER_LOST, PeerLost, launched, tell_launcher

    bar = ProgressBar()
    stop = StopRequests()
    try:
        result = embedtune.run.run(config, reading=reading, resume=resume, overwrite_checkpoints=overwrite_checkpoints,
                                   keep_checkpoints=keep_checkpoints, own_process=True, on_load=say_loading,
                                   on_plan=say_plan, progress=bar, note=note, stop=stop,
                                   on_phase=bar.show_phase)
    except PeerLost as lost:
        if launched():   # the launcher names the worker that went first, with this reason if it was this one
            tell_launcher(str(lost))
            ctx.exit(PEER_LOST)
        raise EmbedtuneError(str(lost)) from None
    except (KeyboardInterrupt, Terminated) as signalled:
        if stop.entered:   # after the loop: writing the output (cli/main.py says it)
            raise
        bar.close()   # loading, counting, the wait for other workers, the new words' starts, the tables
        click.echo("\nInterrupted before training began; nothing was saved.", err=True)
        ctx.exit(143 if isinstance(signalled, Terminated) else 130)
    except TrainingInterrupted as interrupted:   # asked in the loop (the set-up never polls a request: see above)
        bar.close()
        where = f"step {interrupted.position.steps}, epoch {interrupted.position.epoch}"
        if interrupted.checkpoint:
            click.echo(f"Interrupted at {where}; checkpoint written to {interrupted.checkpoint}.\n"
                       f"Resume with the same command and --resume.", err=True)
        else:
            click.echo(f"Interrupted at {where}; no --checkpoint-dir was given, so nothing was saved.", err=True)
        ctx.exit(stop.code or 130)
    finally:
        bar.close()
    return result, stop


def say_loading(path: str) -> None:
    message(f"Loading {path} ...")


def note(text: str) -> None:
    message(f"Note: {text}")


def say_plan(plan) -> None:
    message(f"Plan: {plan.n_frozen:,} frozen, {plan.n_trainable_pretrained:,} trainable, "
            f"{counted(plan.n_new, 'new row')}")
    from embedtune.plan.rules import plan_notes

    for text in plan_notes(plan):
        message(f"Note: {text}")


class ProgressBar:
    """The run's progress as a tqdm bar on standard error, when it is a terminal and -q was not given: a
    set-up phase's (``show_phase``, given an embedtune.phases.Phase) once it has lasted a second,
    gone when it ends; then the training's."""

    def __init__(self):
        self.bar = None
        self.redrawn = None   # the bar redrawn while open (cli/common.py)
        self.phase = None   # the set-up phase the bar shows (None: the training's bar)

    def __call__(self, p) -> None:
        if not show_progress():
            return
        if self.bar is None or self.phase is not None:
            from tqdm import tqdm

            self.close()
            self.bar = tqdm(total=p.words_total, unit="word", unit_scale=True, file=sys.stderr, desc="train",
                            dynamic_ncols=True)
            self.redrawn = Redrawn(self.bar)
        self.bar.update(p.words_done - self.bar.n)
        self.bar.set_postfix(epoch=p.epoch, loss=f"{p.loss:.4f}", refresh=False)

    def show_phase(self, p) -> None:
        """A set-up phase's bar (``on_phase``); a moment with nothing to count (not ``counted``), one line."""
        if not p.counted:
            self.close()
            message(f"{p.name[:1].upper()}{p.name[1:]} ...")
            return
        if not show_progress():
            return
        if p.finished:
            if self.phase == p.name:
                self.close()
                self.working()
            return
        if self.phase != p.name:
            from tqdm import tqdm

            self.close()
            self.phase = p.name
            # A phase without a unit counts nothing: its bar is the time it has taken.
            self.bar = tqdm(total=p.total or None, unit=p.unit or "it", unit_scale=True, file=sys.stderr,
                            desc=p.name, delay=1.0, leave=False, dynamic_ncols=True,
                            bar_format=None if p.unit else "{desc} [{elapsed}]")
            self.redrawn = Redrawn(self.bar)
        self.bar.update(p.done - self.bar.n)

    def working(self) -> None:
        """Between two phases (the work no phase counts: the vectors' checks, the new words' choice), a bar of
        the elapsed time after a second, until the next phase or the training's bar takes its place."""
        from tqdm import tqdm

        self.phase = ""   # not the training's bar: its first report replaces this one
        self.bar = tqdm(total=None, desc="working", bar_format="{desc} [{elapsed}]", file=sys.stderr, delay=1.0,
                        leave=False, dynamic_ncols=True)
        self.redrawn = Redrawn(self.bar)

    def close(self) -> None:
        if self.redrawn is not None:
            self.redrawn.close()
            self.bar = self.redrawn = None
        self.phase = None


def serve_task(ctx, config, resume: bool, workers: int, servers, dry_run: bool) -> None:
    """A parameter-server cluster's task: what the mode refuses, refused in every task; a ps or worker
    task then serves until the chief is gone (docs/scale-out.md, section 5). The chief returns and trains."""
    from embedtune.distribute import local_cores, serve

    serve.check_server_run(config, resume, workers, servers)
    if servers.chief or dry_run:
        return
    message(f"Serving as {servers.kind} task {servers.index} at {servers.address} until the chief is gone")
    message(serve.serve(servers, config.train.threads or local_cores(), config.train.peer_timeout))
    ctx.exit(0)


def launch_workers(ctx, config, workers: int) -> None:
    """`--workers N`: run this same command as N local workers and end as they do."""
    from embedtune import distribute

    threads = config.train.threads or distribute.worker_threads(workers, distribute.local_cores())
    message(f"Starting {workers} workers ({threads} thread{'s' if threads != 1 else ''} each); "
            "worker 0 reports")
    run = distribute.launch(distribute.worker_command(sys.argv[1:]), workers, threads)
    if run.failure:
        raise EmbedtuneError(run.failure)
    ctx.exit(run.code)
