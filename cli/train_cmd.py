"""`embedtune train`: options, messages and exit codes; the work is embedtune.run."""

from __future__ import annotations

import signal
import sys

import click

import embedtune.run
from embedtune.checks import check_run, missing_argument
from embedtune.cli.common import (DROP_NAN_HELP, format_name, message, quiet_option, reader_options, reports_errors,
                                  show_progress, write_json)
from embedtune.config import NEGATIVES, OPTIMIZERS, Config, load_config, merge
from embedtune.errors import EmbedtuneError, TrainingInterrupted, counted
from embedtune.objectives import CHOICES as OBJECTIVES, objective_class
from embedtune.run import Reading

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
    as a shell reports it, and as every other command and phase exits)."""

    def __init__(self):
        self.requested = False
        self.code = None
        self.saved = {}

    def _handler(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            click.echo("\nStopped at once; a --resume starts from the last checkpoint written, if any.", err=True)
            raise SystemExit(130)
        if self.requested:
            return
        self.requested = True
        self.code = 128 + signum
        why = "Ctrl-C again" if signum == signal.SIGINT else "SIGTERM; Ctrl-C"
        click.echo(f"\nStopping after this step ({why} to stop at once) ...", err=True)

    def __enter__(self):
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
        # A value check, as --epochs' is (exit 1), not a command line click cannot parse (exit 2).
        raise click.ClickException(f"--workers must be between 1 and {cores} (the CPU cores this process may "
                                   f"use; each worker is a process of its own), got {value}")
    return value


@click.command("train", epilog=RULES_HELP)
@click.argument("vectors", required=False)
@click.argument("corpus", required=False)
@click.option("-o", "--output", help="Output vectors file ('-' = standard output).")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help="TOML config (see configs/default.toml); options override it.")
@click.option("--freeze-list", type=click.Path(), help="File of words to freeze, one per line.")
@click.option("--train-list", type=click.Path(), help="File of words to train; the rest are frozen.")
@click.option("--freeze-top", type=int, help="Freeze the first N rows of VECTORS (the most frequent words).")
@click.option("--freeze-pattern", help="Freeze pretrained words matching this regex.")
@click.option("--train-pattern", help="Train words matching this regex; the rest are frozen.")
@click.option("--freeze-pretrained", is_flag=True, default=None, help="Freeze every pretrained row: only new words train.")
@click.option("--min-count", type=int, help="Add corpus words seen this often as new rows. [default: 5]")
@click.option("--max-new", type=int, help="Add at most this many new words, most frequent first (0 = all).")
@click.option("--init", type=click.Choice(["alacarte", "context-mean", "form-context", "random"]),
              help="Start of new words: from their contexts (a la carte map or plain mean), from contexts and "
                   "spelling (form-context: better for rare words), or random. [default: form-context]")
@click.option("--lowercase", type=click.Choice(["auto", "yes", "no"]),
              help="Lower-case the corpus; auto follows the vectors (GloVe is lower-case). [default: auto]")
@click.option("--tokenize", type=click.Choice(["auto", "none"]),
              help="auto: a token VECTORS lacks loses its leading/trailing punctuation ('said.' -> 'said' '.'); "
                   "none: whitespace tokens as they are (pre-tokenized corpora). [default: auto]")
@click.option("--strict-lists", is_flag=True, default=None, help="A list word missing from the vocabulary is an error.")
@click.option("--objective", type=click.Choice(OBJECTIVES),
              help="sgns (skip-gram, word2vec's), glove (GloVe's least squares on co-occurrence counts) or "
                   "retrofit (to --lexicon, no CORPUS) or classify (CORPUS of labelled lines, fastText's "
                   "supervised format); auto: glove for GloVe-format VECTORS, else sgns. [default: auto]")
@click.option("--label-prefix", help="classify: tokens starting with this are labels. [default: __label__]")
@click.option("--word-ngrams", type=int, help="classify: word n-grams up to this length are features too, each a "
                                              "trainable row of the classifier (never frozen, not in the output "
                                              "vectors; fastText's -wordNgrams). [default: 1: words only]")
@click.option("--ngram-min-count", type=int, help="classify: an n-gram becomes a row at this many occurrences in "
                                                  "the training lines. [default: 1]")
@click.option("--valid", type=click.Path(), help="classify: labelled lines (same format) to report accuracy on, "
                                                 "before training (classifier alone) and after.")
@click.option("--save-classifier", type=click.Path(), help="classify: write the trained classifier here "
                                                           "('labels dim', then 'label bias w1 ... wdim' a line).")
@click.option("--lexicon", type=click.Path(), help="retrofit: synonyms, 'word neighbour neighbour ...' per line "
                                                  "(UTF-8; Faruqui's format; see `embedtune lexicon`).")
@click.option("--antonyms", type=click.Path(), help="retrofit: antonyms in the same format, pulled apart.")
@click.option("--repel", type=float, help="retrofit: weight of the antonym term. [default: 0.3]")
@click.option("--epochs", type=int, help="Passes over the corpus (glove: over the counted pairs; retrofit: rounds "
                                         "of its update). [default: 5; retrofit: 20]")
@click.option("--dim", type=int, help="Expected dimension (default: that of VECTORS); a mismatch is an error.")
@click.option("--window", type=int, help="Maximum context distance. [default: 5 sgns, 10 glove]")
@click.option("--negative", type=int, help="sgns: negative samples per pair. [default: 5]")
@click.option("--negatives", type=click.Choice(NEGATIVES),
              help="sgns: negatives drawn for each pair (word2vec's) or shared by a group of 16 pairs "
                   "(half the CPU; lower quality on the recovery benchmark). [default: per-pair]")
@click.option("--x-max", type=float, help="glove: a count x weighs min(1, (x / X_MAX)^0.75). [default: 2]")
@click.option("--sample", type=float, help="sgns: subsampling threshold for frequent words (0 = off). [default: 1e-3]")
@click.option("--lr", type=float, help="Starting learning rate, decayed linearly. "
                                        "[default: 0.025 sgd, 0.05 adagrad (0.1 with glove), 0.001 adam]")
@click.option("--batch-size", type=int, help="Pairs per step (classify: lines). [default: 4096; classify: 256]")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS),
              help="Lazy optimizer (only the batch's rows). [default: sgd for sgns, adagrad for glove, adam for "
                   "classify]")
@click.option("--clip-norm", type=float, help="Cap on each row's merged gradient L2 norm per step (0 = none). [default: 0]")
@click.option("--anchor", "anchor", type=float, metavar="RHO",
              help="Pull each trainable row toward its starting vector: RHO/2 |w - start|^2 per epoch, spread "
                   f"over the steps that read the row (0 = off). [default: 0 sgns, "
                   f"{objective_class('glove').defaults['anchor']:g} glove; retrofit: alpha of its update, "
                   f"{objective_class('retrofit').defaults['anchor']:g}]")
@click.option("--seed", type=int, help="Random seed. [default: 1]")
@click.option("--threads", type=int,
              help="CPU threads of TensorFlow's thread pools and of the compiled sgns step (plain sgd, "
                   "as gensim's workers). [default: 0 = all cores]")
@click.option("--workers", type=int, metavar="N", callback=workers_bound,
              help="Train on N local worker processes (tf.distribute, loopback ports), each on cores / N "
                   "threads; each step's gradients are exchanged. At most the CPU cores this process may "
                   "use. Under TF_CONFIG, this process is one worker of that cluster instead. [default: 1]")
@click.option("--deterministic", is_flag=True, default=None,
              help="Op determinism, a seeded data order and sgns's batch-synchronous step: two runs give "
                   "byte-identical files (slower). Without it, plain-sgd sgns with per-pair negatives "
                   "steps lock-free on --threads threads, as word2vec's do (results vary from run to run).")
@click.option("--checkpoint-dir", type=click.Path(), help="Write checkpoints to this folder.")
@click.option("--checkpoint-every", type=int, help="Steps between checkpoints. [default: every 5 minutes]")
@click.option("--resume", is_flag=True, help="Continue from the newest checkpoint in --checkpoint-dir (a damaged "
                                              "one is skipped for the one before, with a note).")
@click.option("--overwrite-checkpoints", is_flag=True,
              help="A new run (no --resume) deletes the checkpoints it finds in --checkpoint-dir; without it, "
                   "it refuses such a folder.")
@click.option("--keep-checkpoints", is_flag=True,
              help="Keep the checkpoints once the output is written (by default a run that ends deletes them; "
                   "an interrupted one keeps its newest 3).")
@click.option("--max-steps", type=int, metavar="N",
              help="Stop after N steps and write the output as a finished run does (0 = no limit); for CI.")
@click.option("--max-words", type=int, metavar="N",
              help="Stop after N corpus words (all epochs counted) and write the output (0 = no limit).")
@click.option("--logdir", type=click.Path(),
              help="Write TensorBoard scalars here (loss, words/s, lr, row changes): tensorboard --logdir DIR.")
@click.option("--dry-run", is_flag=True,
              help="Check everything that needs no training (config, files, lists, patterns, outputs), print "
                   "the plan (rows frozen / trainable / new, settings, an estimate of peak memory from the "
                   "table sizes) and stop: no TensorFlow, nothing written but --json FILE.")
@click.option("--format", "format_", help="Format of VECTORS (default: detected).", callback=format_name)
@click.option("--to", help="Output format (default: word2vec-binary for -o *.bin, fasttext for *.vec, else "
                           "that of VECTORS; --to that the name contradicts is an error).", callback=format_name)
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
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
    check_run(config, resume=resume, dry_run=dry_run, json_out=json_out, workers=workers)
    from embedtune.distribute import PEER_LOST, PeerLost, launched

    if workers > 1 and not dry_run and not launched():
        launch_workers(ctx, config, workers)   # a launched worker runs on, below
    reading = Reading(keep_first_duplicate, allow_nan, replace_bad_utf8)
    if dry_run:
        decided = embedtune.run.dry_run(config, reading=reading, resume=resume, workers=workers,
                                        on_load=say_loading, note=note)
        if json_out:
            write_json(decided.description, json_out)
            if json_out == "-":
                return
        click.echo("Dry run: every check passed; nothing trained, nothing written.")
        for line in decided.lines:
            click.echo(line)
        return

    bar = ProgressBar()
    stop = StopRequests()
    try:
        result = embedtune.run.run(config, reading=reading, resume=resume, overwrite_checkpoints=overwrite_checkpoints,
                                   keep_checkpoints=keep_checkpoints, own_process=True, on_load=say_loading,
                                   on_plan=say_plan, progress=bar, note=note, stop=stop)
    except PeerLost as lost:
        if launched():   # the launcher names the worker that went first
            ctx.exit(PEER_LOST)
        raise EmbedtuneError(str(lost)) from None
    except TrainingInterrupted as interrupted:
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
    if result.written is None:   # one worker of several: the chief writes the output and reports
        return
    for line in result.report:
        message(line)
    if json_out:
        write_json(result.stats, json_out)


def say_loading(path: str) -> None:
    message(f"Loading {path} ...")


def note(text: str) -> None:
    message(f"Note: {text}")


def say_plan(plan) -> None:
    message(f"Plan: {plan.n_frozen:,} frozen, {plan.n_trainable_pretrained:,} trainable, "
            f"{counted(plan.n_new, 'new row')}")
    for missing in plan.missing:
        message(f"Note: {counted(missing.count, 'word')} of {missing.path} "
                f"{'is' if missing.count == 1 else 'are'} not in the vocabulary (first: {', '.join(missing.first)})")


class ProgressBar:
    """The run's progress as a tqdm bar on standard error, when it is a terminal and -q was not given."""

    def __init__(self):
        self.bar = None

    def __call__(self, p) -> None:
        if not show_progress():
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=p.words_total, unit="word", unit_scale=True, file=sys.stderr, desc="train",
                            dynamic_ncols=True)
        self.bar.update(p.words_done - self.bar.n)
        self.bar.set_postfix(epoch=p.epoch, loss=f"{p.loss:.4f}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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
