"""`embedtune train`: options and messages; the work is embedtune.training."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import signal
import sys
import time

import click

from embedtune.cli.common import (DROP_NAN_HELP, check_input_file, check_inputs_and_outputs, check_pattern,
                                  check_writable_file, check_writable_folder, format_name, load_training_vectors,
                                  message, quiet_option, reader_options, reports_errors, show_progress, write_json)
from embedtune.config import NEGATIVES, OPTIMIZERS, Config, load_config, merge
from embedtune.errors import EmbedtuneError, counted
from embedtune.objectives import CHOICES as OBJECTIVES, check_corpus_start, objective_class

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
    retrofit = config.train.objective == "retrofit"   # reads a lexicon, not a corpus
    for key in ("vectors", "output") if retrofit else ("vectors", "corpus", "output"):
        if getattr(config, key) is None:
            raise click.UsageError(f"missing {key.upper()} (give it as an argument{'' if key != 'output' else ' (-o)'} or in --config)")
    if retrofit and config.lexicon is None:
        raise click.UsageError("--objective retrofit needs --lexicon FILE (or lexicon = in --config)")
    if retrofit and config.corpus is not None:
        raise click.UsageError("--objective retrofit reads no CORPUS; give --lexicon (and --antonyms) instead")
    if retrofit and (resume or config.train.checkpoint_dir):
        raise EmbedtuneError("retrofit takes seconds and keeps no checkpoints; drop --resume and --checkpoint-dir")
    # Everything about the inputs and outputs is checked before hours of training, not after, and
    # before TensorFlow and the vectors load: each check costs a stat or a compile.
    # A dry run writes no vectors, so its plan may go to standard output whatever -o says.
    check_inputs_and_outputs(config.vectors, config.corpus, config.output,
                             None if dry_run and json_out == "-" else json_out,
                             other_inputs=(config.lexicon, config.antonyms, config.valid))
    check_input_file(config.valid, "--valid file")
    if config.save_classifier and not dry_run:
        check_writable_file(config.save_classifier, "--save-classifier")
    v, t = config.vocab, config.train
    check_input_file(v.freeze_list, "word-list file")   # a stat: a list may be a pipe, read once
    check_input_file(v.train_list, "word-list file")
    check_pattern(v.freeze_pattern, "--freeze-pattern")
    check_pattern(v.train_pattern, "--train-pattern")
    check_writable_folder(t.checkpoint_dir, "--checkpoint-dir")
    check_writable_folder(t.logdir, "--logdir")
    if resume and not t.checkpoint_dir:
        raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
    if resume and not os.path.exists(t.checkpoint_dir):
        raise EmbedtuneError("--resume: no such folder (no checkpoint was written there)", t.checkpoint_dir)
    if not retrofit:   # binary data or another encoding shows in the first bytes (pipes are not peeked)
        check_corpus_start(config)
    if workers and workers > 1 and not os.environ.get("EMBEDTUNE_LAUNCHED"):
        if dry_run:
            check_workers(config, workers)
        else:
            launch_workers(ctx, config, workers)   # a launched worker runs on, below

    from embedtune import formats
    from embedtune.init import is_lowercase_vocabulary

    in_format = config.format or formats.detect_format(config.vectors)
    out_format = formats.output_format(config.output, config.to, in_format)   # --to, else -o's extension
    config = dataclasses.replace(config, format=in_format)   # --objective auto follows it
    message(f"Loading {config.vectors} ...")
    began = time.perf_counter()
    vectors = load_training_vectors(config.vectors, in_format, keep_first_duplicate, allow_nan, replace_bad_utf8)
    seconds = {"load_vectors": time.perf_counter() - began}   # where the command's time goes (--json)
    lowercase = {"yes": True, "no": False}.get(config.vocab.lowercase)
    if lowercase is None:
        lowercase = is_lowercase_vocabulary(vectors)
    if dry_run:
        _dry_run(vectors, config, lowercase, out_format, resume, json_out, workers or 1)
        return

    from embedtune import distribute
    from embedtune.distribute import PEER_LOST, PeerLost, is_chief, launched

    bar = None

    def on_plan(plan):
        message(f"Plan: {plan.n_frozen:,} frozen, {plan.n_trainable_pretrained:,} trainable, "
                f"{counted(plan.n_new, 'new row')}")
        for missing in plan.missing:
            message(f"Note: {counted(missing.count, 'word')} of {missing.path} "
                    f"{'is' if missing.count == 1 else 'are'} not in the vocabulary "
                    f"(first: {', '.join(missing.first)})")

    def on_progress(p):
        nonlocal bar
        if not show_progress():
            return
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=p.words_total, unit="word", unit_scale=True, file=sys.stderr, desc="train",
                       dynamic_ncols=True)
        bar.update(p.words_done - bar.n)
        bar.set_postfix(epoch=p.epoch, loss=f"{p.loss:.4f}", refresh=False)

    if retrofit:   # seconds, no loop: no progress bar, no stop requests, no checkpoints
        from embedtune.training import train

        result = train(vectors, None, config, on_plan=on_plan, resume=resume)
        finish_retrofit(result, vectors, config, out_format, json_out)
        return
    # Counted before the stop requests are taken over: a Ctrl-C there interrupts at once, as before.
    with open_corpus(config, lowercase, vectors) as corpus, counted_first(corpus, seconds), StopRequests() as stop:
        from embedtune.training import TrainingInterrupted, train   # imported by now (count_while_importing)

        try:
            result = train(vectors, corpus, config, progress=on_progress, on_plan=on_plan,
                           resume=resume, stop=stop, overwrite_checkpoints=overwrite_checkpoints,
                           note=lambda text: message(f"Note: {text}"), strategy=distribute.strategy_from_env())
        except PeerLost as lost:
            if launched():   # the launcher names the worker that went first
                ctx.exit(PEER_LOST)
            raise EmbedtuneError(str(lost)) from None
        except TrainingInterrupted as interrupted:
            if bar is not None:
                bar.close()
                bar = None
            where = f"step {interrupted.position.steps}, epoch {interrupted.position.epoch}"
            if interrupted.checkpoint:
                click.echo(f"Interrupted at {where}; checkpoint written to {interrupted.checkpoint}.\n"
                           f"Resume with the same command and --resume.", err=True)
            else:
                click.echo(f"Interrupted at {where}; no --checkpoint-dir was given, so nothing was saved.",
                           err=True)
            ctx.exit(stop.code or 130)
        finally:
            if bar is not None:
                bar.close()
    if not is_chief():   # one worker of several: the chief writes the output and reports
        return
    began = time.perf_counter()
    written = save_checked(result.vectors, vectors, result.plan, config.output, out_format)
    seconds["write"] = time.perf_counter() - began
    if config.train.checkpoint_dir and not keep_checkpoints:
        from embedtune import checkpoint

        # Only now: until the output is written, the checkpoints are all there is of the run.
        if not checkpoint.remove(config.train.checkpoint_dir):
            message(f"Note: another run is using {config.train.checkpoint_dir}; its checkpoints were left")

    s = result.stats
    s.update(vectors=config.vectors, corpus=config.corpus, output=config.output, format=out_format,
             lowercase=lowercase, tokenize=config.vocab.tokenize, max_frozen_change=written.worst,
             frozen_rows_checked=written.checked)
    # The count was made before train() (while TensorFlow imported): total_seconds counts it, as
    # train() alone does; "seconds" splits the command (the loop is train_seconds).
    s["total_seconds"] = round(s["total_seconds"] + seconds["count_and_import"], 3)
    seconds.update(setup=s["total_seconds"] - seconds["count_and_import"] - s["train_seconds"],
                   loop=s["train_seconds"])
    s["seconds"] = {key: round(value, 3) for key, value in seconds.items()}
    over = f"{s['epochs']} epoch{'s' if s['epochs'] != 1 else ''} of {s['corpus_words']:,} words"
    if s["stopped_at_limit"]:
        limit = s["stopped_at_limit"]
        over = (f"{s['steps']:,} steps, {s['words_done']:,} of {s['corpus_words'] * s['epochs']:,} words "
                f"(stopped at --{limit.replace('_', '-')} {getattr(config.train, limit):,})")
    message(
        f"Trained {counted(s['trained_rows'], 'row')} ({s['new']:,} new) with {s['objective']} over {over}: "
        f"{s['words_per_second']:,} words/s, {s['train_seconds']:.1f} s "
        f"({s['total_seconds']:.1f} s with counting and starts); "
        f"loss {s['loss_first']:.4f} -> {s['loss_last']:.4f}; "
        f"{s['frozen_rows_checked']:,} frozen rows read back from the output as written: all bit-identical "
        f"to the input as read")
    if s["new"]:
        spelling = (f"{s['new_from_spelling_only']:,} had too few contexts and started from their spelling alone, "
                    if s["init"] == "form-context" else "")
        message(f"New words: {s['new_from_context']:,} started from their contexts ({s['init']}), {spelling}"
                f"{s['new_too_few_contexts']:,} had too few contexts and started random")
    if s.get("init_note"):
        message(f"Note: {s['init_note']}")
    if config.output != "-":
        message(f"Wrote {len(result.vectors):,} vectors to {config.output}")
    if s["objective"] == "classify":
        report_classify(result, config)
    if json_out:
        write_json(s, json_out)


def check_workers(config, workers: int):
    """What --workers N refuses, before any work (a dry run checks it too); returns the resolved
    train config."""
    from embedtune import distribute

    if os.environ.get("TF_CONFIG"):
        raise EmbedtuneError("--workers starts its own workers; under TF_CONFIG run one process per worker")
    if config.train.objective == "retrofit":
        raise EmbedtuneError("--workers: retrofit runs in one process (it takes seconds)")
    for key in ("vectors", "corpus"):
        path = getattr(config, key)
        if path == "-" or not os.path.isfile(path):   # a pipe (<(...), a FIFO) is read once
            raise EmbedtuneError(f"--workers: every worker reads {key.upper()}, so it must be a file, "
                                 f"not {'standard input' if path == '-' else 'a pipe'}")
    from embedtune.config import resolve

    t = resolve(config).train   # the batch size is the objective's unless given
    if t.objective == "classify" and t.word_ngrams > 1:
        raise EmbedtuneError("--workers: --word-ngrams runs in one process (the workers would need the "
                             "n-gram rows' list gathered as the labels are; not built)")
    distribute.batch_part(t, workers)
    return t


def launch_workers(ctx, config, workers: int) -> None:
    """`--workers N`: run this same command as N local workers and end as they do."""
    from embedtune import distribute

    t = check_workers(config, workers)
    threads = t.threads or distribute.worker_threads(workers, distribute.local_cores())
    message(f"Starting {workers} workers ({threads} thread{'s' if threads != 1 else ''} each); "
            "worker 0 reports")
    run = distribute.launch(distribute.worker_command(sys.argv[1:]), workers, threads)
    if run.failure:
        raise EmbedtuneError(run.failure)
    ctx.exit(run.code)


def count_while_importing(corpus) -> float:
    """Count the corpus (Corpus.count keeps its figures for train) while TensorFlow and the trainer
    import on a thread: the import needs nothing from the corpus, and train() counts first. Both are
    mostly Python and share the GIL, still together they take less time than in series
    (benchmarks/README.md, classify). Nothing is printed
    until the import is done (TensorFlow's import points fd 2 at a sink: embedtune._tf), and an
    error, a Ctrl-C or a SIGTERM (raised by cli/main.py) in the count or the wait is raised after the
    import; a failed import is raised again by the caller's own. Returns the seconds until both were done.
    One worker of several (TF_CONFIG) only imports here: it counts its share of the lines in train
    (distribute.strategy.Worker.count), and a whole pass would undo what the shares save."""
    import importlib
    import threading

    from embedtune.distribute import cluster_from_env

    done = threading.Event()

    def load():
        try:
            importlib.import_module("embedtune.training.loop")
        except BaseException:   # imported again, and raised there, by the caller
            pass
        finally:
            done.set()   # after the import restored fd 2

    began = time.perf_counter()
    # Python's cyclic collector is off while both run, and what they made is frozen after (gc.freeze:
    # kept for the run, never scanned again). Its full collections re-scanned the growing heap
    # (TensorFlow's modules, the corpus's lines) with the GIL held and found nothing to free
    # (benchmarks/README.md, classify).
    collecting = gc.isenabled()
    gc.disable()
    thread = threading.Thread(target=load, name="embedtune-import", daemon=True)
    thread.start()
    pending = None
    try:
        if cluster_from_env() is None:
            corpus.count()
    except BaseException as err:
        pending = err
    # Waited for on an Event: a Thread.join interrupted by Ctrl-C marks the thread stopped while it
    # runs on (CPython 3.11's _wait_for_tstate_lock), so is_alive() could not be trusted after it.
    while not done.is_set():   # seconds at most: the import's
        try:
            done.wait()
        except BaseException as err:   # Ctrl-C or SIGTERM while waiting
            pending = pending or err
    gc.freeze()
    if collecting:
        gc.enable()
    if pending is not None:
        raise pending
    return time.perf_counter() - began


@contextlib.contextmanager
def counted_first(corpus, seconds: dict):
    """count_while_importing as a step of a ``with``: its seconds in seconds["count_and_import"]."""
    seconds["count_and_import"] = count_while_importing(corpus)
    yield


def open_corpus(config, lowercase: bool, vectors):
    """The corpus as the objective reads it (Objective.open_corpus: plain text, or labelled lines for classify)."""
    from embedtune.config import resolve

    objective = objective_class(resolve(config).train.objective)
    return objective.open_corpus(config.corpus, config, lowercase=lowercase, tokenize=config.vocab.tokenize,
                                 vocabulary=vectors.index)


def report_classify(result, config) -> None:
    """classify's own lines: labels, skipped lines, --valid before and after; --save-classifier written."""
    from embedtune.objectives.classify import save_classifier, valid_note

    s = result.stats
    message(f"Classifier: {counted(s['labels'], 'label')} ({s['loss_kind']}), {s['train_lines']:,} training lines"
            + (f", {counted(s['train_lines_no_known_word'], 'line')} with no known word skipped"
               if s["train_lines_no_known_word"] else "")
            + (f", {counted(s['ngram_rows'], 'n-gram row')} (up to {s['word_ngrams']} words)" if s["ngram_rows"] else ""))
    v = s["valid"]
    if v is not None:
        def figure(f):
            if f["accuracy"] is None:
                return "no line"
            r1 = f"; P@1 {f['precision_at_1']:.4f}, R@1 {f['recall_at_1']:.4f}" if s["loss_kind"] == "one-vs-all" else ""
            return f"{f['accuracy']:.4f}{r1}"
        message(f"Valid {v['path']} ({v['after']['lines']:,} lines): accuracy before {figure(v['before'])} "
                f"(classifier alone), after {figure(v['after'])}")
        if note := valid_note(s):
            message(f"Note: {note}")
    if config.save_classifier:
        save_classifier(result.model, config.save_classifier)
        message(f"Wrote the classifier to {config.save_classifier}")


def save_checked(out, vectors, plan, output: str, out_format: str):
    """Write ``out`` with its frozen rows checked as written (read back from the output's bytes)
    against the input as read; a difference is an error before the output is renamed into place.
    Returns the check (checked: rows compared, worst: the largest change, 0.0)."""
    from embedtune import formats
    from embedtune.training import FrozenRowsCheck

    written = FrozenRowsCheck(vectors.matrix, plan.frozen)

    def check_block(start, stop, rows):
        written(start, stop, rows)
        if written.changed:
            what = "1 frozen row" if written.changed == 1 else f"{written.changed:,} frozen rows"
            left = "nothing was written" if output != "-" else "the output stops here"
            raise EmbedtuneError(f"{what} would be written changed (largest change {written.worst:.3g}); {left}",
                                 output)

    # Only blocks holding a frozen row are read back: the check compares nothing else.
    formats.save_vectors(out, output, out_format, on_written=check_block, check_rows=plan.frozen)
    return written


def _dry_run(vectors, config, lowercase, out_format, resume, json_out, workers):
    """Count the corpus, apply the rules and report the plan; train nothing, write nothing."""
    from embedtune.runplan import describe, plan_run

    if config.train.objective == "retrofit":
        _dry_run_retrofit(vectors, config, out_format, json_out)
        return
    with open_corpus(config, lowercase, vectors) as corpus:
        run = plan_run(vectors, corpus, config, resume=resume)
        if config.valid:   # classify: its lines are checked as training would read them
            for _ in corpus.valid_examples():
                pass
    d = describe(run, vectors, workers)
    d.update(dry_run=True, to=out_format, lowercase=lowercase)
    if json_out:
        write_json(d, json_out)
        if json_out == "-":
            return
    settings = ", ".join(f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"
                         for key, value in d["settings"].items())
    limits = [f"{d[k]:,} {k.split('_')[1]}" for k in ("max_steps", "max_words") if d[k]]
    mib = 2**20
    lines = [
        ("vectors", f"{d['vectors']} ({d['format']}, {d['rows']:,} rows, {d['dim']} dimensions)"),
        ("corpus", f"{d['corpus']} ({d['corpus_words']:,} words, {d['corpus_lines']:,} lines, "
                   f"{d['distinct_words']:,} distinct{', lower-cased' if lowercase else ''})"),
        ("output", f"{d['output']} ({out_format})"),
        ("rows", f"{d['frozen']:,} frozen, {d['trainable']:,} trainable, {d['new']:,} new; in the corpus: "
                 f"{d['trainable_in_corpus']:,} to train, {d['frozen_in_corpus']:,} frozen"),
        *[("missing", f"{m['count']:,} words of {path} are not in the vocabulary (first: {', '.join(m['first'])})")
          for path, m in d["missing_list_words"].items()],
        ("new words", f"start: {d['init']}" if d["new"] else "none"),
        ("objective", f"{d['objective']}: {settings}"),
        ("stop", f"after {' or '.join(limits)}" if limits else f"after {d['settings']['epochs']} epochs"),
        ("memory", f"about {d['memory_estimate_bytes'] / mib:,.0f} MiB at the peak "
                   + (f"in all: {workers} worker processes of {d['memory_per_worker_bytes'] / mib:,.0f} MiB each and "
                      f"the launcher's {d['memory_launcher_bytes'] / mib:,.0f} " if workers > 1 else "")
                   + "(an estimate from the table sizes, MiB" + (" a worker" if workers > 1 else "") + ": "
                   + ", ".join(f"{k.replace('_', ' ')} {v / mib:,.1f}"
                               for k, v in d["memory_parts_bytes"].items() if v) + ")"),
    ]
    click.echo("Dry run: every check passed; nothing trained, nothing written.")
    for name, value in lines:
        click.echo(f"{name:<10} {value}")


def _dry_run_retrofit(vectors, config, out_format, json_out):
    """Read the lexicons and apply the rules; retrofit nothing, write nothing."""
    from embedtune.config import resolve
    from embedtune.objectives.retrofit import plan_retrofit

    config = resolve(config)
    plan, lowercase, synonyms, antonyms = plan_retrofit(vectors, config)
    t = config.train
    d = {**plan.summary(), "dry_run": True, "objective": "retrofit", "vectors": config.vectors,
         "output": config.output, "to": out_format, "lowercase": lowercase,
         "settings": {"epochs": t.epochs, "anchor": t.anchor, "repel": t.repel if antonyms else None},
         "lexicon": synonyms.summary(), "antonyms": antonyms.summary() if antonyms else None}
    if json_out:
        write_json(d, json_out)
        if json_out == "-":
            return
    click.echo("Dry run: every check passed; nothing trained, nothing written.")
    click.echo(f"{'rows':<10} {d['frozen']:,} frozen, {d['trainable']:,} trainable")
    for key in ("lexicon", "antonyms"):
        lex = d[key]
        if lex is not None:
            click.echo(f"{key:<10} {getattr(config, key)}: {lex['lines']:,} lines, {lex['pairs_in_vectors']:,} pairs "
                       f"in the vectors, {lex['words_not_in_vectors']:,} words not in the vectors")
    click.echo(f"{'objective':<10} retrofit: {t.epochs} rounds, anchor {t.anchor:g}"
               + (f", repel {t.repel:g}" if antonyms else ""))


def finish_retrofit(result, vectors, config, out_format: str, json_out: str | None) -> None:
    """Write the output, the report and the JSON summary of a retrofit run."""
    written = save_checked(result.vectors, vectors, result.plan, config.output, out_format)
    s = result.stats
    s.update(vectors=config.vectors, output=config.output, format=out_format, max_frozen_change=written.worst,
             frozen_rows_checked=written.checked)
    for key in ("lexicon", "antonyms"):
        lex = s[key]
        if lex is None:
            continue
        message(f"{getattr(config, key)}: {lex['lines']:,} lines, {lex['words']:,} words, "
                f"{lex['pairs_in_vectors']:,} pairs in the vectors; {lex['words_not_in_vectors']:,} words not in "
                f"the vectors (not added)" + (f", first: {', '.join(lex['first_not_in_vectors'])}"
                                                if lex["first_not_in_vectors"] else ""))
    message(f"Retrofitted {s['trained_rows']:,} rows in {s['epochs']} rounds (anchor {s['anchor']:g}"
            + (f", repel {s['repel']:g}" if s["repel"] is not None else "") + f"), {s['train_seconds']:.2f} s; "
            f"largest change in the last round: {s['round_changes'][-1]:.2g}; "
            f"largest change on a frozen row: {s['max_frozen_change']}")
    if config.output != "-":
        message(f"Wrote {counted(len(result.vectors), 'vector')} to {config.output}")
    if json_out:
        write_json(s, json_out)
