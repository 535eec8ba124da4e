"""`embedtune diff`, `eval` and `neighbors`: look at vectors before shipping them.

The work is done by embedtune.compare; this layer loads files, prints tables (or JSON with
--json) and picks exit codes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys

import click

from embedtune.checks import check_input_file, check_pattern
from embedtune.cli.files import ConfigFile, FilesCommand, reads
from embedtune.cli.common import (DROP_NAN_HELP, FORMAT_HELP, Redrawn, format_name, load_training_vectors, message,
                                  quiet, quiet_option, reader_options, reading_bar, reports_errors)
from embedtune.errors import EmbedtuneError, counted

INPUT = reads(exists=True, dir_okay=False, allow_dash=True)  # "-": standard input
# The config's keys that diff and report read: its word lists (diff's OLD and NEW defaults are inputs too,
# but neither command writes a file those could be)
CONFIG = ConfigFile(keys=("freeze_list", "train_list"), exists=True)
# Container objects allocated between two passes of Python's cycle collector over the youngest objects, for eval
# (CPython's default: 700). numba's import and first call make a few hundred thousand objects that live as long
# as the process; at the default the collector went through them in about 30 passes over the younger ones and
# two full passes, about a twentieth of eval's CPU (gc.callbacks), finding next to nothing to collect
# (benchmarks/log/eval_speed.md). The cycles eval does make are still collected, a pass every this many objects.
EVAL_GC_YOUNGEST = 50_000


@contextlib.contextmanager
def _fewer_collections():
    """The cycle collector's first threshold EVAL_GC_YOUNGEST while eval runs (as a decorator), put back after it:
    a caller's own process (click's CliRunner, a Python caller of main) keeps its own settings."""
    saved = gc.get_threshold()
    gc.set_threshold(max(saved[0], EVAL_GC_YOUNGEST), *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def _load(path, format=None, limit=None, drop_nan=False, kernels=False, **reading):
    """A vectors file; ``reading``: the reader options (--keep-first-duplicate, --allow-nan,
    --replace-bad-utf8); ``drop_nan``: --allow-nan leaves NaN/inf rows out (eval, neighbors cannot
    score them) instead of keeping them (diff compares their bits); ``kernels``: the command loads numba
    anyway (eval's analogies), so a big text file is read by the compiled parse."""
    from embedtune.formats import load_vectors

    message(f"reading {path}")
    if drop_nan:
        return load_training_vectors(path, format, limit=limit, kernels=kernels, **reading)
    with reading_bar(path) as bar:
        return load_vectors(path, format=format, limit=limit, progress=bar, **reading)


FORMAT = click.option(
    "--format",
    "format_",
    metavar="NAME",
    callback=format_name,
    help=f"Format of the vectors files: {FORMAT_HELP} (default: detected from each file).",
)


def benchmark_files(similarity_files, analogy_files) -> tuple[list | None, list | None]:
    """--similarity and --analogy as the library takes them (eval, report): neither given, None for both (the
    benchmarks shipped with gensim); either given, only the files given, and none of the other kind."""
    if not similarity_files and not analogy_files:
        return None, None
    return list(similarity_files), list(analogy_files)


def _echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, allow_nan=False))


def _table(rows, align) -> list[str]:
    """Rows of cells as aligned lines; ``align`` holds '<' or '>' per column."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(align))]
    lines = []
    for row in rows:
        cells = [f"{str(c):{a}{w}}" for c, a, w in zip(row, align, widths)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# ---------------------------------------------------------------------------------------------
# diff


def frozen_rules(frozen_file: str | None, config_file: str | None):
    """--check-frozen or --config, as diff and report take them: (the listed words, None) or (None,
    the config, its word lists and patterns checked), read before any vectors file."""
    if frozen_file and config_file:
        raise click.UsageError("give --check-frozen or --config, not both")
    if frozen_file:
        from embedtune.plan.rules import read_word_list

        return [word for _, word in read_word_list(frozen_file)], None
    if not config_file:
        return None, None
    from embedtune.config import load_config

    config = load_config(config_file)
    check_input_file(config.vocab.freeze_list, "word-list file")
    check_input_file(config.vocab.train_list, "word-list file")
    check_pattern(config.vocab.freeze_pattern, "--freeze-pattern")
    check_pattern(config.vocab.train_pattern, "--train-pattern")
    return None, config


def config_words(listed: list[str] | None, config, old_vectors) -> list[str] | None:
    """The words to check: ``listed`` (--check-frozen), or those the config's rules freeze in OLD."""
    if config is None:
        return listed
    from embedtune.compare import config_frozen_words

    return config_frozen_words(old_vectors, config.vocab)


def _diff_lines(old_path, new_path, d, frozen) -> list[str]:
    lines = _table(
        [
            ("old", old_path, counted(d.old_words, "word", grouped=False)),
            ("new", new_path, counted(d.new_words, "word", grouped=False)),
        ],
        "<<>",
    )
    lines[0] += f", {counted(d.dim, 'dimension')}"
    changed_note = ""
    if d.changed:
        changed_note = (
            f"L2 change max {_num(d.l2_max)} mean {_num(d.l2_mean)}; "
            f"cosine to old min {_num(d.cosine_min)} mean {_num(d.cosine_mean)}"
        )

    def examples(words, total):
        more = f", ... ({total - len(words)} more)" if total > len(words) else ""
        return ", ".join(words) + more

    lines += [""] + _table(
        [
            ("identical", d.identical, ""),
            ("changed", d.changed, changed_note),
            ("added", d.added, examples(d.added_words, d.added)),
            ("removed", d.removed, examples(d.removed_words, d.removed)),
        ],
        "<><",
    )
    if d.most_moved:
        lines += ["", "most moved:"]
        rows = [("  word", "L2 change", "cosine to old")]
        rows += [(f"  {m.word}", _num(m.l2), _num(m.cosine)) for m in d.most_moved]
        lines += _table(rows, "<>>")
    if frozen is not None:
        lines += [
            "",
            f"frozen words: {frozen.checked} checked, {len(frozen.changed)} changed, "
            f"{len(frozen.removed)} removed",
        ]
        lines += [f"  changed  {w}" for w in frozen.changed]
        lines += [f"  removed  {w}" for w in frozen.removed]
        if frozen.unknown:
            lines.append(
                f"  ({counted(len(frozen.unknown), 'listed word is', 'listed words are', grouped=False)} not in {old_path}: "
                f"{', '.join(frozen.unknown[:10])}{', ...' if len(frozen.unknown) > 10 else ''})"
            )
    return lines


@click.command("diff", cls=FilesCommand)
@click.argument("old", type=INPUT, required=False)
@click.argument("new", type=INPUT, required=False)
@click.option(
    "--check-frozen",
    "frozen_file",
    type=INPUT,
    metavar="FILE",
    help="Words that must be bit-identical in NEW, one per line (every non-empty line is a word, '#...' "
         "too: GloVe holds such words); exit 1 if any is not.",
)
@click.option(
    "--config",
    "config_file",
    type=CONFIG,
    metavar="FILE",
    help="Check the words a training config's [vocab] rules freeze; OLD and NEW default to its "
    "'vectors' and 'output'.",
)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=0), metavar="N", help="How many most-moved words to list.")
@FORMAT
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON on standard output.")
@reader_options()
@quiet_option
@reports_errors
def diff_cmd(old, new, frozen_file, config_file, top, format_, as_json, **reading):
    """Compare two vectors files row by row, matching rows by word.

    Counts rows that are bit-identical, changed (with the largest and mean L2 change and the
    smallest and mean cosine to the old vector), added and removed, and lists the most-moved
    words. With --check-frozen or --config, exits 1 and lists every frozen word whose vector
    changed or disappeared; exits 0 when all stayed put.

    \b
    Example:
      embedtune diff glove.6B.50d.txt tuned.txt --check-frozen frozen.txt
      embedtune diff --config configs/quickstart.toml
      embedtune diff glove.6B.50d.txt tuned.txt --json | jq .changed
    """
    from embedtune.compare import diff_file

    frozen_words, config = frozen_rules(frozen_file, config_file)
    if config is not None:
        old = old or config.vectors
        if new is None and config.output not in (None, "-"):
            new = config.output
    if old is None or new is None:
        raise click.UsageError(
            "OLD and NEW are required (or --config with 'vectors' and 'output' set)"
        )
    if config is not None:   # the config's own files, before two vectors files are read
        for path in (old, new):
            check_input_file(path, "vectors file", missing="no such file")
    if config is not None and format_ is None:
        format_ = config.format
    old_vectors = _load(old, format_, **reading)
    frozen_words = config_words(frozen_words, config, old_vectors)
    message(f"reading {new}")
    with reading_bar(new) as bar:
        d, frozen = diff_file(old_vectors, new, format=format_, frozen_words=frozen_words, top=top, old_name=old,
                              progress=bar, **reading)

    if as_json:
        data = {"old": old, "new": new, **d.to_dict()}
        if frozen is not None:
            data["frozen"] = frozen.to_dict()
        _echo_json(data)
    else:
        click.echo("\n".join(_diff_lines(old, new, d, frozen)))
    if frozen is not None and not frozen.ok:
        bad = len(frozen.changed) + len(frozen.removed)
        # Not silenced by -q: this is the reason for the exit code.
        click.echo(f"Error: {bad} of {counted(frozen.checked, 'frozen word', grouped=False)} changed or removed in {new}",
                   err=True)
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# eval


def _eval_lines(e) -> list[str]:
    lines = []
    if e.similarity:
        rows = [("word similarity", "Pearson", "Spearman", "pairs used", "OOV")]
        rows += [
            (s.name, _num(s.pearson), _num(s.spearman), f"{s.pairs_used}/{s.pairs}", _pct(s.oov_ratio))
            for s in e.similarity
        ]
        lines += _table(rows, "<>>>>")
    for a in e.analogies:
        if lines:
            lines.append("")
        rows = [(f"analogies (first {a.restrict_vocab} words)", "accuracy", "correct/answered", "OOV")]
        rows.append((a.name, _pct(a.accuracy), f"{a.correct}/{a.answered}", _pct(a.oov_ratio)))
        rows += [
            (f"  {s.name}", _pct(s.accuracy), f"{s.correct}/{s.answered}", _pct(1 - s.answered / s.questions) if s.questions else "-")
            for s in a.sections
        ]
        lines += _table(rows, "<>>>")
    return lines


def _change_lines(rows, before_path, after_path) -> list[str]:
    from embedtune.compare import format_score

    table = [("benchmark", "metric", "before", "after", "change")]
    for r in rows:
        m = r["metric"]
        table.append((r["benchmark"], m, format_score(m, r["before"]), format_score(m, r["after"]),
                      format_score(m, r["change"], signed=True)))
    return [f"before: {before_path}", f"after:  {after_path}", ""] + _table(table, "<<>>>")


@click.command("eval", cls=FilesCommand)
@click.argument("vectors", type=INPUT)
@click.argument("vectors2", type=INPUT, required=False)
@click.option(
    "--similarity",
    "similarity_files",
    multiple=True,
    type=INPUT,
    metavar="FILE",
    help="Word-pair file (word1 TAB word2 TAB score; '#' lines skipped). Repeatable.",
)
@click.option(
    "--analogy",
    "analogy_files",
    multiple=True,
    type=INPUT,
    metavar="FILE",
    help="Analogy file (': section' lines, then 'a b c d' lines). Repeatable.",
)
@click.option(
    "--restrict-vocab",
    default=300_000,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Analogies use only the first N words, as word2vec's compute-accuracy does.",
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Read only the first N words of each file.")
@click.option("--case-sensitive", is_flag=True, help="Match benchmark words exactly (default: ignore case).")
@FORMAT
@click.option("--json", "as_json", is_flag=True, help="Print the scores as JSON on standard output.")
@reader_options(DROP_NAN_HELP)
@quiet_option
@reports_errors
@_fewer_collections()
def eval_cmd(
    vectors, vectors2, similarity_files, analogy_files, restrict_vocab, limit, case_sensitive, format_, as_json,
    **reading
):
    """Score vectors on word-similarity and analogy benchmarks (gensim's figures, fast).

    Word-pair files give Pearson and Spearman correlations with the share of pairs that have
    an unknown word; analogy files give 3CosAdd accuracy per section and overall. Without
    --similarity or --analogy, runs WordSim-353, SimLex-999 and the Google analogies that ship
    with gensim; with either, runs only the files given. With two files, prints a before/after
    table with the differences.

    \b
    Example:
      embedtune eval glove.6B.50d.txt
      embedtune eval glove.6B.50d.txt tuned.txt --similarity my_pairs.tsv
    """
    from tqdm import tqdm

    from embedtune.compare import evaluate

    similarity, analogies = benchmark_files(similarity_files, analogy_files)

    def score(path):
        # the analogy search is compiled (compare/analogy_search.py); word pairs alone need no kernel
        v = _load(path, format_, limit, drop_nan=True, kernels=analogies is None or bool(analogies), **reading)
        message(f"scoring {path}")
        # Shown only when scoring takes over a second (delay=1), on a terminal, without -q; redrawn while open, as
        # the similarity files' scoring (scipy's import: seconds on a loaded machine) reports nothing.
        with tqdm(desc="scoring", unit="question", file=sys.stderr, delay=1, dynamic_ncols=True,
                  disable=True if quiet() else None) as bar:
            redrawn = None if bar.disable else Redrawn(bar)

            def progress(advance, total):
                bar.total = total
                bar.update(advance)

            try:
                return evaluate(v, similarity, analogies, restrict_vocab, case_insensitive=not case_sensitive,
                                progress=progress)
            finally:
                if redrawn is not None:
                    redrawn.close()

    before = score(vectors)
    if vectors2 is None:
        if as_json:
            _echo_json({"file": vectors, **before.to_dict()})
        else:
            click.echo("\n".join(_eval_lines(before)))
        return
    after = score(vectors2)
    change = before.change_to(after)
    if as_json:
        _echo_json(
            {
                "before": {"file": vectors, **before.to_dict()},
                "after": {"file": vectors2, **after.to_dict()},
                "change": change,
            }
        )
    else:
        click.echo("\n".join(_change_lines(change, vectors, vectors2)))


# ---------------------------------------------------------------------------------------------
# neighbors


def _report_unknown(path, vectors, unknown) -> None:
    for word in unknown:
        hint = f' (did you mean "{word.lower()}"?)' if word.lower() != word and word.lower() in vectors else ""
        click.echo(f'{path}: no vector for "{word}"{hint}', err=True)


def _neighbor_lines(words, sides, k) -> list[str]:
    """One block per word: rank, then (neighbour, cosine) per file side by side."""
    lines = []
    for word in words:
        found = [side.get(word) for _, side in sides]
        if all(f is None for f in found):
            continue
        rows = [("", *sum(([path, "cosine"] for path, _ in sides), []))]
        # -k beyond the vocabulary gives every word: as many ranks as the longest list, not k
        ranks = min(k, max(len(f) for f in found if f is not None))
        for rank in range(ranks):
            row = [str(rank + 1)]
            for f in found:
                if f is None:
                    row += ["(not in file)" if rank == 0 else "", ""]
                elif rank < len(f):
                    row += [f[rank][0], _num(f[rank][1])]
                else:
                    row += ["", ""]
            rows.append(tuple(row))
        if lines:
            lines.append("")
        lines.append(word)
        lines += ["  " + line for line in _table(rows, ">" + "<>" * len(sides))]
    return lines


@click.command("neighbors", cls=FilesCommand)
@click.argument("vectors", type=INPUT)
@click.argument("words", nargs=-1, required=True)
@click.option("-k", "k", default=10, show_default=True, type=click.IntRange(min=1), metavar="N", help="Neighbours per word.")
@click.option("--against", type=INPUT, metavar="OTHER", help="Show the same words' neighbours in OTHER side by side.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Read only the first N words of each file.")
@FORMAT
@click.option("--json", "as_json", is_flag=True, help="Print the neighbours as JSON on standard output.")
@reader_options(DROP_NAN_HELP)
@quiet_option
@reports_errors
def neighbors_cmd(vectors, words, k, against, limit, format_, as_json, **reading):
    """Show the nearest neighbours of WORDS by cosine over the whole vocabulary.

    Words missing from a file are reported on standard error; the others are still shown.
    Exits 1 only when no word is found at all.

    \b
    Example:
      embedtune neighbors glove.6B.50d.txt france frog -k 5
      embedtune neighbors glove.6B.50d.txt france --against tuned.txt
    """
    from embedtune.compare import nearest_neighbors

    words = list(dict.fromkeys(words))
    paths = [vectors] + ([against] if against else [])
    results = []
    for path in paths:
        v = _load(path, format_, limit, drop_nan=True, **reading)
        result = nearest_neighbors(v, words, k=k)
        _report_unknown(path, v, result.unknown)
        results.append(result)
    if all(not r.results for r in results):
        raise EmbedtuneError(f"none of the {counted(len(words), 'word')} has a vector" if len(words) != 1
                             else f"the word {words[0]!r} has no vector", path=" and ".join(paths))

    if as_json:
        data = [{"file": path, **r.to_dict()} for path, r in zip(paths, results)]
        _echo_json(data[0] if not against else {**data[0], "against": data[1]})
        return
    sides = [(path, {r.word: r.neighbors for r in res.results}) for path, res in zip(paths, results)]
    click.echo("\n".join(_neighbor_lines(words, sides, k)))
