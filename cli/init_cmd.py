"""`embedtune init`: options and messages; the work is embedtune.newwords.methods.

Imports no TensorFlow: giving new words a start takes seconds and needs only numpy.
"""

from __future__ import annotations

import sys

import click

from embedtune.checks import check_inputs_and_outputs
from embedtune.cli.files import FilesCommand, reads, writes
from embedtune.cli.common import (DROP_NAN_HELP, FORMAT_HELP, format_name, load_training_vectors, message, quiet_option,
                                  reader_options, reports_errors, show_progress, write_json)
from embedtune.config import range_problem
from embedtune.errors import BadOption, EmbedtuneError, counted
from embedtune.newwords.defaults import (DEFAULT_FIT_MIN_COUNT, DEFAULT_METHOD, DEFAULT_MIN_CONTEXTS, DEFAULT_SIF,
                                         DEFAULT_WINDOW, METHODS)


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
@click.option("--to", metavar="NAME", help=f"Output format, {FORMAT_HELP} (default: word2vec-binary for -o *.bin, "
                                            "fasttext for *.vec, else that of VECTORS; --to that the name "
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
    # The same ranges as train's options of the same names (embedtune.config.RANGES).
    for name, key, value in (("--min-count", "vocab.min_count", 1 if min_count is None else min_count), ("--max-new", "vocab.max_new", max_new),
                             ("--window", "train.window", window), ("--seed", "train.seed", seed),
                             ("--min-contexts", "init.min_contexts", min_contexts),
                             ("--fit-min-count", "init.fit_min_count", fit_min_count), ("--sif", "init.sif", sif)):
        problem = range_problem(key, value)
        if problem:
            raise BadOption(f"{name} {problem}")
    check_inputs_and_outputs(vectors, corpus, output, json_out, other_inputs=(new_words_file,))

    import numpy as np

    from embedtune import formats
    from embedtune.corpus import Corpus
    from embedtune.newwords.choose import (effective_min_count, listed_notes, listed_report, pick_new_words,
                                           read_new_words)
    from embedtune.newwords.methods import initial_vectors
    from embedtune.vectors import Vectors, decide_lowercase

    Corpus.check_start(corpus)   # binary data or another encoding, said before the vectors load
    in_format = format_ or formats.detect_format(vectors)
    out_format = formats.output_format(output, to, in_format)
    message(f"Loading {vectors} ...")
    pretrained = load_training_vectors(vectors, in_format, keep_first_duplicate, allow_nan, replace_bad_utf8)
    lower = decide_lowercase(lowercase, pretrained)

    with Corpus(corpus, lowercase=lower, tokenize=tokenize, vocabulary=pretrained.index) as text:
        message(f"Counting {corpus} ...")
        counts, total_words, n_lines = text.count()
        if total_words == 0:
            raise EmbedtuneError("the corpus has no words", text.path)
        lowered = []
        listed = read_new_words(new_words_file, lower, lowered) if new_words_file else None
        for note in listed_notes(new_words_file, listed, pretrained, lowered) if listed else ():
            message(f"Note: {note}")
        min_count = effective_min_count(min_count, listed is not None)
        new_words = pick_new_words(counts, pretrained, min_count, max_new, listed)
        bar = None
        if show_progress() and method != "random" and new_words:
            from tqdm import tqdm

            bar = tqdm(total=total_words, unit="word", unit_scale=True, file=sys.stderr, desc="contexts",
                       dynamic_ncols=True)
        try:
            result = initial_vectors(pretrained, text, new_words, method, window=window, min_contexts=min_contexts,
                                     counts=counts, sif=sif, fit_min_count=fit_min_count, seed=seed,
                                     progress=bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()

    out = Vectors(pretrained.words + new_words, np.vstack([pretrained.matrix, result.matrix]))
    formats.save_vectors(out, output, out_format)

    summary = {"vectors": vectors, "corpus": corpus, "output": output, "format": out_format, "lowercase": lower,
               "tokenize": tokenize, "corpus_words": total_words, "corpus_lines": n_lines, "pretrained": len(pretrained),
               "new": len(new_words), "min_count": min_count, "from_context": result.n_from_context,
               "too_few_contexts": result.n_too_few, **listed_report(listed, pretrained, counts),
               **result.stats}
    fitted = f", map fitted on {counted(result.stats['fit_words'], 'word')}" if "fit_words" in result.stats else ""
    if method == "random":
        started = ("it starts" if len(new_words) == 1 else f"all {len(new_words):,} start") + " random (--init random)"
    elif method == "form-context":
        started = (f"{result.n_from_context:,} start from their contexts and spelling (form-context, window {window}"
                   f"{fitted}, spelling fitted on {result.stats.get('form_fit_words', 0):,} words"
                   + (f", mix fitted on {result.stats['probe_words']:,} corpus words playing rare ones"
                      if result.stats.get("probe_words") else "") + "), "
                   f"{result.stats.get('from_form_only', 0):,} had fewer than {counted(min_contexts, 'context')} and "
                   f"start from their spelling alone, {result.n_too_few:,} start random")
    else:
        started = (f"{result.n_from_context:,} start from their contexts ({method}, window {window}{fitted}), "
                   f"{result.n_too_few:,} had fewer than {counted(min_contexts, 'context')} and start random")
    chosen = (f"listed in {new_words_file}" + (f" or seen {min_count}+ times" if min_count else "")
              if listed is not None else f"seen {min_count}+ times")
    message(f"Added {counted(len(new_words), 'new word')} {chosen} in {counted(total_words, 'corpus word')}: "
            f"{started}; {result.stats['seconds']:.1f} s")
    if "method_note" in result.stats:
        message(f"Note: {result.stats['method_note']}")
    if output != "-":
        message(f"Wrote {counted(len(out), 'vector')} to {output}")
    if json_out:
        write_json(summary, json_out)
