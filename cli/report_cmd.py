"""`embedtune report`: one HTML page of what a fine-tune did. The work is embedtune.report's."""

from __future__ import annotations

import click

from embedtune.cli.common import DROP_NAN_HELP, FORMAT_HELP, format_name, load_training_vectors, message, quiet_option, \
    reader_options, reports_errors
from embedtune.checks import check_inputs_and_outputs
from embedtune.cli.compare_cmds import CONFIG, benchmark_files, config_words, frozen_rules
from embedtune.cli.files import FilesCommand, reads, writes
from embedtune.errors import EmbedtuneError

INPUT = reads(exists=True, dir_okay=False)


@click.command("report", cls=FilesCommand)
@click.argument("before", type=INPUT)
@click.argument("after", type=INPUT)
@click.option("-o", "--output", required=True, type=writes(dir_okay=False, allow_dash=True), metavar="FILE",
              help="The HTML page to write ('-': standard output).")
@click.option("--run", "run_file", type=INPUT, metavar="FILE",
              help="The run's summary (embedtune train --json FILE): its settings, rows, time and loss curve.")
@click.option("--config", "config_file", type=CONFIG, metavar="FILE",
              help="Check the words this training config's [vocab] rules freeze, bit for bit.")
@click.option("--check-frozen", "frozen_file", type=INPUT, metavar="FILE",
              help="Check these words (one per line) are bit-identical in AFTER.")
@click.option("--words", "words_file", type=INPUT, metavar="FILE",
              help="Words to map, one per line (default: the first new words and the most-moved ones).")
@click.option("--similarity", "similarity_files", multiple=True, type=INPUT, metavar="FILE",
              help="Word-pair file, as embedtune eval takes it. Repeatable.")
@click.option("--analogy", "analogy_files", multiple=True, type=INPUT, metavar="FILE",
              help="Analogy file, as embedtune eval takes it. Repeatable.")
@click.option("--restrict-vocab", default=30_000, show_default=True, type=click.IntRange(min=1), metavar="N",
              help="Analogies use only the first N words (word2vec's compute-accuracy is run so).")
@click.option("--top", type=click.IntRange(min=0), metavar="N",
              help="How many most-moved words (and new words) to list.  [default: 20, as train --report lists]")
@click.option("-k", "k", default=8, show_default=True, type=click.IntRange(min=1), metavar="N",
              help="Neighbours per listed word.")
@click.option("--format", "format_", metavar="NAME", callback=format_name,
              help=f"Format of the vectors files: {FORMAT_HELP} (default: detected from each file).")
@reader_options(DROP_NAN_HELP)
@quiet_option
@reports_errors
def report_cmd(before, after, output, run_file, config_file, frozen_file, words_file, similarity_files,
               analogy_files, restrict_vocab, top, k, format_, **reading):
    """Write one HTML page of what a fine-tune did: the run and its loss, the frozen rows checked,
    benchmarks before and after, the most-moved words and the new words with their neighbours, and
    a map of chosen words before and after. The page needs nothing at view time: open it in a browser.

    Without --similarity or --analogy, scores the sets embedtune eval runs by default.
    `embedtune train ... --report FILE` writes the same page with the run's own figures (the new
    words' contexts among them).

    \b
    Example:
      embedtune train --config configs/quickstart.toml --json run.json
      embedtune report data/sample/glove.6B.50d.20k.txt quickstart-out.txt --run run.json -o report.html
    """
    from embedtune.plan.rules import read_word_list
    from embedtune.report import build_report, from_summary, write_report

    frozen_words, config = frozen_rules(frozen_file, config_file)
    # -o: not an input, and writable, before the files are loaded and scored
    check_inputs_and_outputs(before, None, output, None, other_inputs=(
        after, run_file, config_file, frozen_file, words_file, *similarity_files, *analogy_files))
    similarity, analogies = benchmark_files(similarity_files, analogy_files)
    run = from_summary(run_file) if run_file else None
    words = [w for _, w in read_word_list(words_file)] if words_file else None
    vectors = []
    for path in (before, after):
        message(f"reading {path}")
        vectors.append(load_training_vectors(path, format_, **reading))
    report = build_report(*vectors, before_path=before, after_path=after, run=run,
                          frozen_words=config_words(frozen_words, config, vectors[0]), words=words,
                          similarity=similarity, analogies=analogies, restrict_vocab=restrict_vocab,
                          **({} if top is None else {"top": top}), k=k, progress=message)
    write_report(report, output)
    if report.frozen is not None and not report.frozen.ok:
        raise EmbedtuneError(f"{len(report.frozen.changed) + len(report.frozen.removed)} frozen words changed or "
                             f"removed (the page lists them)", after)
    if output != "-":
        message(f"wrote {output}")
