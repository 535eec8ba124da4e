"""`embedtune lexicon`: build lexicons for `train --objective retrofit`; the work is embedtune.wordnet."""

from __future__ import annotations

import click

from embedtune.checks import check_writable_file
from embedtune.cli.files import FilesCommand, folder, writes
from embedtune.cli.common import message, quiet_option, reports_errors, write_json
from embedtune.errors import EmbedtuneError

WORDNET_FILES = ("data.*", "index.*")   # what a WordNet database folder holds (embedtune.wordnet reads data.*)


@click.group("lexicon")
@quiet_option
def lexicon_cmd():
    """Write synonym and antonym lexicons for `embedtune train --objective retrofit`."""


@lexicon_cmd.command("wordnet", cls=FilesCommand)
@click.argument("folder", type=folder("read", WORDNET_FILES, exists=True, file_okay=False))
@click.option("-o", "--output", required=True, type=writes(allow_dash=True),
              help="Synonym lexicon to write ('-' = standard output).")
@click.option("--antonyms", type=writes(allow_dash=True), help="Also write the antonym lexicon to this file.")
@click.option("--single-words", is_flag=True,
              help="Leave out multi-word lemmas (natural_object), which most word vectors do not hold.")
@click.option("--similar", is_flag=True,
              help="Follow adjectives' 'similar to' pointers: huge is a synonym of large and an antonym of "
                   "small (a larger SimLex-999 gain: benchmarks/README.md).")
@click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE]",
              type=writes(allow_dash=True), help="Print counts as JSON on standard output, or write them to FILE.")
@quiet_option
@reports_errors
def wordnet_cmd(folder, output, antonyms, single_words, similar, json_out):
    """Synonyms and antonyms from a WordNet database FOLDER (its data.noun, data.verb, data.adj,
    data.adv files; Debian's wordnet-base installs /usr/share/wordnet).

    Synonyms are the words of one synset; antonyms WordNet's antonym pointers (!); with
    --similar also adjective satellites and their heads (&), and WordNet's indirect antonyms.
    Both files have 'word neighbour neighbour ...' per line (Faruqui et al.'s format), both ways.

    \b
    Example:
      embedtune lexicon wordnet /usr/share/wordnet -o syn.txt --antonyms ant.txt --similar --single-words
      embedtune train glove.txt --objective retrofit --lexicon syn.txt --antonyms ant.txt -o retro.txt
    """
    from embedtune.wordnet import write_wordnet_lexicons

    if "-" in (antonyms, json_out) and output == "-" or antonyms == json_out == "-":
        raise EmbedtuneError("only one output can go to standard output")
    for option, target in (("-o", output), ("--antonyms", antonyms), ("--json", json_out)):
        check_writable_file(target, option)   # before WordNet is read, not after
    summary = write_wordnet_lexicons(folder, output, antonyms, single_words, similar)
    for kind, part in summary.items():
        if part and part["path"] != "-":
            message(f"Wrote {kind}: {part['words']:,} lines, {part['neighbours']:,} neighbours, to {part['path']}")
    if json_out:
        write_json(summary, json_out)
