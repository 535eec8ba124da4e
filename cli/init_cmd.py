"""`embedtune init`: options and messages; the work is embedtune.newwords.add_new_words.

Imports no TensorFlow: giving new words a start takes seconds and needs only numpy.
"""

from __future__ import annotations

import contextlib
import sys

import click

from embedtune.checks import check_inputs_and_outputs
from embedtune.cli.files import FilesCommand, reads, writes
from embedtune.cli.common import (DROP_NAN_HELP, FORMAT_HELP, format_name, load_training_vectors, message, quiet_option,
                                  reader_options, reports_errors, show_progress, write_json)
from embedtune.config import ranges
from embedtune.config.keys import FLOAT32_MAX, INT64_MAX, Range
from embedtune.errors import BadOption, counted
from embedtune.newwords.defaults import (DEFAULT_FIT_MIN_COUNT, DEFAULT_METHOD, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF,
                                         DEFAULT_WINDOW, METHODS)

# init's own options (train has none of these names), checked by the same kind of range as train's keys
INIT_RANGES = {
    "init.min_contexts": Range(1, INT64_MAX),
    "init.fit_min_count": Range(1, INT64_MAX),
    "init.sif": Range(0, FLOAT32_MAX, zero="all weigh 1"),
}


@click.command("init", cls=FilesCommand)
@click.argument("vectors", type=reads(allow_dash=True))
@click.argument("corpus", type=reads(allow_dash=True))
@click.option("-o", "--output", required=True, type=writes(allow_dash=True), help="Output vectors file ('-' = standard output).")
@click.option("--init", "method", type=click.Choice(METHODS), default=DEFAULT_METHOD, show_default=True,
              help="alacarte: a linear map fitted on pretrained words turns a word's mean context into its "
                   "vector; context-mean: the mean context itself; form-context: alacarte mixed with a start "
                   "from the word's spelling (character n-grams fitted to VECTORS), the spelling weighing more "
                   "for rarer words; random: word2vec's uniform start.")
@click.option("--min-count", type=int, default=None, show_default="5; none with --new-words",
              help="A corpus word missing from VECTORS becomes a new word when seen this often.")
@click.option("--new-words", "new_words_file", type=reads(), default=None,
              help="File of words, one a line, to add whatever their count (spelling alone when CORPUS lacks "
                   "them); no other word is added unless --min-count is given.")
@click.option("--max-new", type=int, default=0, show_default=True,
              help="Add at most this many new words, most frequent first (0 = all).")
@click.option("--window", type=int, default=DEFAULT_WINDOW, show_default=True,
              help="Context words on each side of an occurrence (never across a line).")
@click.option("--min-contexts", type=int, default=DEFAULT_MIN_CONTEXTS, show_default=True,
              help="A new word with fewer contexts (occurrences with a pretrained word nearby) starts random.")
@click.option("--sif", type=float, default=DEFAULT_SIF, show_default=True,
              help="A context word seen n times in CORPUS weighs A/(A + n), so frequent words count less "
                   "(0 = all weigh 1).", metavar="A")
@click.option("--fit-min-count", type=int, default=DEFAULT_FIT_MIN_COUNT, show_default=True,
              help="alacarte fits its map on pretrained words seen this often in the corpus.")
@click.option("--lowercase", type=click.Choice(["auto", "yes", "no"]), default="auto", show_default=True,
              help="Lower-case the corpus; auto follows the vectors (GloVe is lower-case).")
@click.option("--tokenize", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
              help="auto: a token VECTORS lacks loses its leading/trailing punctuation ('said.' -> 'said' '.'); "
                   "none: whitespace tokens as they are (pre-tokenized corpora).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random starts.")
@click.option("--format", "format_", metavar="NAME", help=f"Format of VECTORS: {FORMAT_HELP} (default: detected).",
              callback=format_name)
@click.option("--to", metavar="NAME", help=f"Output format, {FORMAT_HELP} (default: word2vec-binary for -o *.bin "
                                            "(a fastText model from one), fasttext for *.vec, else that of VECTORS; --to that the name "
                                            "contradicts is an error).", callback=format_name)
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              type=writes(allow_dash=True), help="Print the summary as JSON on standard output, or write it to FILE.")
@reader_options(DROP_NAN_HELP)
@quiet_option
@reports_errors
def init_cmd(vectors, corpus, output, method, min_count, new_words_file, max_new, window, min_contexts, sif, fit_min_count,
             lowercase, tokenize, seed, format_, to, json_out, keep_first_duplicate, allow_nan, replace_bad_utf8):
    """Add CORPUS's new words to VECTORS, each starting from its contexts and spelling.

    A new word is a CORPUS word missing from VECTORS seen at least --min-count
    times. Its vector comes from the pretrained vectors of the words around
    its occurrences and, the more so the rarer it is, of words spelt like it; training (`embedtune train`) can go on from there. The
    pretrained rows are written back bit-identical, the new words after them.

    \b
    Examples:
      embedtune init glove.txt corpus.txt -o glove+new.txt
      embedtune init vecs.bin corpus.txt.gz --init context-mean --json -o out.bin
    """
    # The same ranges as train's options of the same names (embedtune.config.ranges()), and init's own.
    checks = {**ranges(), **INIT_RANGES}
    for name, key, value in (("--min-count", "vocab.min_count", 1 if min_count is None else min_count), ("--max-new", "vocab.max_new", max_new),
                             ("--window", "train.window", window), ("--seed", "train.seed", seed),
                             ("--min-contexts", "init.min_contexts", min_contexts),
                             ("--fit-min-count", "init.fit_min_count", fit_min_count), ("--sif", "init.sif", sif)):
        problem = checks[key].problem(value)
        if problem:
            raise BadOption(f"{name} {problem}")
    check_inputs_and_outputs(vectors, corpus, output, json_out, other_inputs=(new_words_file,))

    from embedtune import formats
    from embedtune.corpus import Corpus
    from embedtune.newwords import NewWordSettings, add_new_words
    from embedtune.vectors import decide_lowercase

    Corpus.check_start(corpus)   # binary data or another encoding, said before the vectors load
    in_format = format_ or formats.detect_format(vectors)
    out_format = formats.output_format(output, to, in_format)
    message(f"Loading {vectors} ...")
    pretrained = load_training_vectors(vectors, in_format, keep_first_duplicate, allow_nan, replace_bad_utf8)
    from embedtune.formats.reading import check_model_output

    check_model_output(pretrained, out_format, output)   # a fastText model is written from one only
    lower = decide_lowercase(lowercase, pretrained)
    settings = NewWordSettings(method=method, window=window, min_contexts=min_contexts, sif=sif,
                               fit_min_count=fit_min_count, seed=seed, min_count=min_count, max_new=max_new,
                               new_words=new_words_file)
    with Corpus(corpus, lowercase=lower, tokenize=tokenize, vocabulary=pretrained.index) as text:
        message(f"Counting {corpus} ...")
        added = add_new_words(pretrained, text, settings, progress=progress_bar if show_progress() else None,
                              note=lambda note: message(f"Note: {note}"))

    out = added.appended_to(pretrained)
    formats.save_vectors(out, output, out_format)
    for line in added.report():
        message(line)
    if output != "-":
        message(f"Wrote {counted(len(out), 'vector')} to {output}")
    if json_out:
        write_json({"vectors": vectors, "corpus": corpus, "output": output, "format": out_format, "lowercase": lower,
                    "tokenize": tokenize, **added.summary(pretrained)}, json_out)


@contextlib.contextmanager
def progress_bar(total_words: int):
    """The context pass's progress on standard error, in corpus words."""
    from tqdm import tqdm

    with tqdm(total=total_words, unit="word", unit_scale=True, file=sys.stderr, desc="contexts",
              dynamic_ncols=True) as bar:
        yield bar.update
