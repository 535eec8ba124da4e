"""`embedtune train`: options and messages; the work is embedtune.train."""

from __future__ import annotations

import dataclasses
import signal
import sys

import click

from embedtune.cli.common import check_inputs_and_outputs, message, reports_errors, show_progress, write_json
from embedtune.config import OBJECTIVE_DEFAULTS, OBJECTIVES, OPTIMIZERS, Config, load_config, merge
from embedtune.errors import EmbedtuneError

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
    """Ctrl-C or SIGTERM asks the loop to stop after the current step (a second Ctrl-C stops at once)."""

    def __init__(self):
        self.requested = False
        self.saved = {}

    def _handler(self, signum, frame):
        if self.requested and signum == signal.SIGINT:
            click.echo("\nStopped at once; a --resume starts from the last checkpoint written, if any.", err=True)
            raise SystemExit(130)
        self.requested = True
        click.echo("\nStopping after this step (Ctrl-C again to stop at once) ...", err=True)

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.saved[sig] = signal.signal(sig, self._handler)
            except ValueError:   # not the main thread (e.g. inside a test runner thread)
                pass
        return lambda: self.requested

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


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
@click.option("--init", type=click.Choice(["alacarte", "context-mean", "random"]),
              help="Start of new words: from their contexts (a la carte map or plain mean) or random. [default: alacarte]")
@click.option("--lowercase", type=click.Choice(["auto", "yes", "no"]),
              help="Lower-case the corpus; auto follows the vectors (GloVe is lower-case). [default: auto]")
@click.option("--strict-lists", is_flag=True, default=None, help="A list word missing from the vocabulary is an error.")
@click.option("--objective", type=click.Choice(OBJECTIVES),
              help="sgns (skip-gram, word2vec's) or glove (GloVe's least squares on co-occurrence counts); "
                   "auto: glove for GloVe-format VECTORS, else sgns. [default: auto]")
@click.option("--epochs", type=int, help="Passes over the corpus (glove: over the counted pairs). [default: 5]")
@click.option("--dim", type=int, help="Expected dimension (default: that of VECTORS); a mismatch is an error.")
@click.option("--window", type=int, help="Maximum context distance. [default: 5 sgns, 10 glove]")
@click.option("--negative", type=int, help="sgns: negative samples per pair. [default: 5]")
@click.option("--x-max", type=float, help="glove: a count x weighs min(1, (x / X_MAX)^0.75). [default: 2]")
@click.option("--sample", type=float, help="sgns: subsampling threshold for frequent words (0 = off). [default: 1e-3]")
@click.option("--lr", type=float, help="Starting learning rate, decayed linearly. "
                                        "[default: 0.025 sgd, 0.05 adagrad (0.1 with glove), 0.001 adam]")
@click.option("--batch-size", type=int, help="Pairs per step. [default: 4096]")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS),
              help="Lazy optimizer (only the batch's rows). [default: sgd for sgns, adagrad for glove]")
@click.option("--clip-norm", type=float, help="Cap on each row's merged gradient L2 norm per step (0 = none). [default: 0]")
@click.option("--anchor", "anchor", type=float, metavar="RHO",
              help="Pull each trainable row toward its starting vector: RHO/2 |w - start|^2 per epoch, spread "
                   f"over the steps that read the row (0 = off). [default: 0 sgns, "
                   f"{OBJECTIVE_DEFAULTS['glove']['anchor']:g} glove]")
@click.option("--seed", type=int, help="Random seed. [default: 1]")
@click.option("--deterministic", is_flag=True, default=None,
              help="Op determinism and a seeded data order: two runs give byte-identical files. Costs about 20% "
                   "of the speed (60k vs 74k words/s measured on 2 cores).")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), help="Write checkpoints to this folder.")
@click.option("--checkpoint-every", type=int, help="Steps between checkpoints. [default: every 5 minutes]")
@click.option("--resume", is_flag=True, help="Continue from the newest checkpoint in --checkpoint-dir.")
@click.option("--format", "format_", help="Format of VECTORS (default: detected).")
@click.option("--to", help="Output format (default: that of VECTORS).")
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              help="Print the summary as JSON on standard output, or write it to FILE.")
@click.pass_context
@reports_errors
def train_cmd(ctx, vectors, corpus, output, config_path, format_, json_out, resume, **options):
    """Fine-tune VECTORS on CORPUS, updating only the rows the rules allow.

    CORPUS is a text file (.gz/.bz2 too) or '-' for standard input: one sentence
    or paragraph per line, whitespace tokens. Frozen rows are written back
    bit-identical: each is read back from the bytes written and compared bit
    for bit with the input as read (a difference is an error, no output).

    \b
    Examples:
      embedtune train --config configs/quickstart.toml
      embedtune train glove.txt corpus.txt --freeze-top 20000 -o tuned.txt
      zcat corpus.gz | embedtune train vecs.bin - --freeze-pretrained -o - > new.bin
    """
    config = load_config(config_path, check_values=False) if config_path else Config()
    config = merge(config, {"vectors": vectors, "corpus": corpus, "output": output, "format": format_, **options},
                   source=config_path)
    for key in ("vectors", "corpus", "output"):
        if getattr(config, key) is None:
            raise click.UsageError(f"missing {key.upper()} (give it as an argument{'' if key != 'output' else ' (-o)'} or in --config)")
    # Everything about the outputs is checked before hours of training, not after.
    check_inputs_and_outputs(config.vectors, config.corpus, config.output, json_out)

    from embedtune import formats
    from embedtune.corpus import Corpus
    from embedtune.init import is_lowercase_vocabulary
    from embedtune.train import FrozenRowsCheck, TrainingInterrupted, train

    in_format = config.format or formats.detect_format(config.vectors)
    out_format = config.to or in_format
    try:
        formats.check_format_name(out_format)
    except EmbedtuneError as err:
        raise EmbedtuneError(f"--to: {err}") from None
    config = dataclasses.replace(config, format=in_format)   # --objective auto follows it
    message(f"Loading {config.vectors} ...")
    vectors = formats.load_vectors(config.vectors, format=in_format)
    lowercase = {"yes": True, "no": False}.get(config.vocab.lowercase)
    if lowercase is None:
        lowercase = is_lowercase_vocabulary(vectors)

    bar = None

    def on_plan(plan):
        message(f"Plan: {plan.n_frozen:,} frozen, {plan.n_trainable_pretrained:,} trainable, "
                f"{plan.n_new:,} new rows")
        for missing in plan.missing:
            message(f"Note: {missing.count:,} words of {missing.path} are not in the vocabulary "
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

    with Corpus(config.corpus, lowercase=lowercase) as corpus, StopRequests() as stop:
        try:
            result = train(vectors, corpus, config, progress=on_progress, on_plan=on_plan,
                           resume=resume, stop=stop)
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
            ctx.exit(130)
        finally:
            if bar is not None:
                bar.close()
    # The frozen rows are checked as written (read back from the output's bytes) against the input
    # as read; a difference is an error before the output is renamed into place.
    written = FrozenRowsCheck(vectors.matrix, result.plan.frozen)

    def check_block(start, stop, rows):
        written(start, stop, rows)
        if written.changed:
            what = "1 frozen row" if written.changed == 1 else f"{written.changed:,} frozen rows"
            left = "nothing was written" if config.output != "-" else "the output stops here"
            raise EmbedtuneError(f"{what} would be written changed (largest change {written.worst:.3g}); {left}",
                                 config.output)

    formats.save_vectors(result.vectors, config.output, out_format, on_written=check_block)

    s = result.stats
    s.update(vectors=config.vectors, corpus=config.corpus, output=config.output, format=out_format,
             lowercase=lowercase, max_frozen_change=written.worst, frozen_rows_checked=written.checked)
    message(
        f"Trained {s['trained_rows']:,} rows ({s['new']:,} new) with {s['objective']} over {s['epochs']} epoch{'s' if s['epochs'] != 1 else ''} of "
        f"{s['corpus_words']:,} words: {s['words_per_second']:,} words/s, {s['train_seconds']:.1f} s "
        f"({s['total_seconds']:.1f} s with counting and starts); "
        f"loss {s['loss_first']:.4f} -> {s['loss_last']:.4f}; "
        f"{s['frozen_rows_checked']:,} frozen rows read back from the output as written: all bit-identical "
        f"to the input as read")
    if s["new"]:
        message(f"New words: {s['new_from_context']:,} started from their contexts ({s['init']}), "
                f"{s['new_too_few_contexts']:,} had too few contexts and started random")
    if config.output != "-":
        message(f"Wrote {len(result.vectors):,} vectors to {config.output}")
    if json_out:
        write_json(s, json_out)
