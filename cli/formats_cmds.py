"""`embedtune inspect` and `embedtune convert`: look at a vectors file, or write it in another format.

The work is done by embedtune.formats; this layer parses options, shows progress bars on standard
error and prints the report (or JSON with --json) on standard output.
"""

from __future__ import annotations

import json
import os
import sys

import click

from embedtune.checks import check_input_file, check_writable_file
from embedtune.cli.files import FilesCommand, reads, writes
from embedtune.cli.common import (FORMAT_HELP, ProgressBar, format_name, message, quiet_option, reader_options,
                                  reading_bar, reports_errors)
from embedtune.errors import BadOption, counted

LISTED = 5  # problem rows named in the human-readable report


# ---------------------------------------------------------------------------------------------
# inspect


@click.command("inspect", cls=FilesCommand)
@click.argument("file", type=reads(allow_dash=True))
@click.option("--format", "format_", metavar="NAME", callback=format_name,
              help=f"Read FILE as this format ({FORMAT_HELP}); default: detected.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on standard output.")
@click.option("--replace-bad-utf8", is_flag=True, help="Replace bytes in words that are not UTF-8 instead of stopping.")
@quiet_option
@reports_errors
def inspect_cmd(file, format_, as_json, replace_bad_utf8):
    """Show the format, size, norms and problems (NaN/inf rows, duplicate words) of FILE.

    FILE may be .gz or .bz2 compressed, or - for standard input.

    \b
    Example:
      embedtune inspect data/sample/glove.6B.50d.20k.txt
      embedtune inspect --json vectors.bin.gz
    """
    check_input_file(file, "vectors file", missing="no such file")
    from embedtune.formats.summary import summarize_vectors

    with reading_bar(file) as bar:
        summary = summarize_vectors(file, format_, replace_bad_utf8=replace_bad_utf8, progress=bar)
    if as_json:
        click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    for line in _report_lines(summary):
        click.echo(line)


def _where(entry: dict, first: bool = False) -> str:
    key = ("first_line" if first else "line") if ("line" in entry) else ("first_record" if first else "record")
    return f"{key.split('_')[-1]} {entry[key]}"


def _report_lines(s: dict) -> list[str]:
    norm = s["norm"]
    norms = "-" if norm["min"] is None else \
        f"min {norm['min']:.4g}  median {norm['median']:.4g}  max {norm['max']:.4g}"
    nonfinite = "none"
    if s["nonfinite_rows"]:
        named = ", ".join(f"{_where(e)} {e['word']!r}" for e in s["nonfinite"][:LISTED])
        more = s["nonfinite_rows"] - min(LISTED, len(s["nonfinite"]))
        nonfinite = f"{counted(s['nonfinite_rows'], 'row', grouped=False)}: {named}" + (f", and {more} more" if more > 0 else "")
    duplicates = "none"
    if s["duplicate_words"]:
        named = ", ".join(f"{e['word']!r} on {_where(e)} (first on {_where(e, first=True)})"
                          for e in s["duplicates"][:LISTED])
        more = s["duplicate_words"] - min(LISTED, len(s["duplicates"]))
        duplicates = f"{counted(s['duplicate_words'], 'row', grouped=False)}: {named}" + (f", and {more} more" if more > 0 else "")
    rows = [
        ("file", s["file"]),
        ("format", s["format"]),
        ("words", f"{s['count']}"),
        ("dimension", f"{s['dim']}"),
        ("norm", norms),
        ("nan/inf", nonfinite),
        ("duplicates", duplicates),
    ]
    ft = s.get("fasttext")
    if ft is not None:   # a fastText model: what its subword rows are
        rows.append(("model", f"fastText version {ft['version']}, {ft['model']} ({ft['loss']} loss), "
                              f"{ft['labels']} labels, output matrix {ft['output_rows']} rows"))
        rows.append(("subwords", f"minn {ft['minn']}  maxn {ft['maxn']}  bucket {ft['bucket']}"))
    return [f"{name:<11} {value}" for name, value in rows]


# ---------------------------------------------------------------------------------------------
# convert


@click.command("convert", cls=FilesCommand)
@click.argument("input_path", metavar="IN", type=reads(allow_dash=True))
@click.argument("output_path", metavar="OUT", type=writes(allow_dash=True))
@click.option("--to", "to_format", metavar="NAME", callback=format_name,
              help=f"Write OUT in this format ({FORMAT_HELP}); default: word2vec-binary for *.bin (a fastText model from one), fasttext for "
                   "*.vec, else IN's format (--to that OUT's name contradicts is an error).")
@click.option("--format", "format_", metavar="NAME", callback=format_name,
              help=f"Read IN as this format ({FORMAT_HELP}); default: detected.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Convert only the first N vectors.")
@reader_options()
@quiet_option
@reports_errors
def convert_cmd(input_path, output_path, to_format, format_, limit, keep_first_duplicate, allow_nan,
                replace_bad_utf8):
    """Convert the vectors file IN to OUT, exactly: every float32 value comes back bit for bit.

    IN and OUT may end in .gz or .bz2 (compressed), or be - for standard input / output.
    OUT is written to a temporary file and renamed into place, so a failure leaves no partial file.

    \b
    Example:
      embedtune convert data/sample/glove.6B.50d.20k.txt sample.w2v.txt --to word2vec
      embedtune convert GoogleNews-vectors-negative300.bin news.vec.gz --to fasttext --limit 100000
    """
    from embedtune import formats

    # Names and files first: a bad --to or an unwritable OUT fails before IN is read.
    check_input_file(input_path, "vectors file", missing="no such file")
    check_writable_file(output_path, None)
    in_format = formats.check_format_name(format_) if format_ else formats.detect_format(input_path)
    out_format = formats.output_format(output_path, to_format, in_format)
    if limit is not None and out_format == "fasttext-model":
        # It wrote the whole model while it said "wrote N vectors": a model's dictionary, subword rows and
        # output matrix go together, and are written back as they were.
        raise BadOption(f"--limit {limit}: a fastText model is written whole (its dictionary, subword rows and "
                        "output matrix); drop --limit, or write the first N words' vectors as .vec (--to fasttext)")
    with reading_bar(input_path) as bar:
        vectors = formats.load_vectors(input_path, in_format, limit, keep_first_duplicate=keep_first_duplicate,
                                       allow_nan=allow_nan, replace_bad_utf8=replace_bad_utf8, progress=bar,
                                       kernels=formats.get_format(out_format).renders_ahead)   # its writer's kernel
    with ProgressBar(f"writing {os.path.basename(output_path) or output_path}", "rows") as bar:
        formats.save_vectors(vectors, output_path, out_format, progress=bar)
    if output_path == "-":
        sys.stdout.flush()
    message(f"wrote {counted(len(vectors), 'vector', grouped=False)} of dimension {vectors.dim} to "
            f"{'standard output' if output_path == '-' else output_path} as {out_format}")
