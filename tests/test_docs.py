"""The docs cover the tool and quote only what exists (sqlite-utils keeps its docs so): every `embedtune`
command (from the click group) is shown in README.md or docs/; every option a quoted `embedtune ...` or
`python benchmarks/X.py ...` command line uses is one the command or script has (the history in
benchmarks/log/ too); benchmarks/README.md opens with a current figure for every benchmark script, one sentence
a cell, and links every log file; docs/architecture.md places every module; the README stays short, its
headline cells short, each linking its row in docs/speed.md. Reads text and click's option tables only: no
TensorFlow, no runs."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from embedtune.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LOG = sorted((ROOT / "benchmarks" / "log").glob("*.md"))   # the benchmarks' history, a file a topic
QUOTING = [*DOCS, ROOT / "benchmarks" / "README.md", *LOG, ROOT / "data" / "README.md"]
README_MAX_LINES = 250
CELL_MAX_CHARS = 70   # a headline cell's text, link targets left out

# `embedtune [global options] COMMAND rest-of-the-command`, up to the end of the line, a code span's end, a
# pipe, a redirection, a comment or a closing bracket.
COMMAND_LINE = re.compile(r"(?<![\w/.-])embedtune((?:\s+-{1,2}[\w-]+)*)\s+([a-z]+)\b([^\n`|;&#)>]*)")
SCRIPT_LINE = re.compile(r"(?:python3?|bash)\s+((?:benchmarks|data)/[\w.-]+\.(?:py|sh))\b([^\n`|;&#)>]*)")
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
QUOTED = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")


def text_of(page: Path) -> str:
    # A line continued with a backslash reads as one line; the same length, so offsets still give line numbers.
    return page.read_text(encoding="utf-8").replace("\\\n", "  ")


def where(page: Path, text: str, offset: int) -> str:
    return f"{page.relative_to(ROOT)} line {text.count(chr(10), 0, offset) + 1}"


def commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def option_names(command: click.Command) -> set[str]:
    names = {"-h", "--help"}   # the group's help_option_names, given to every command
    for param in command.params:
        names.update(param.opts, param.secondary_opts)
    return names


def command_names() -> list[str]:
    return cli.list_commands(click.Context(cli))   # the group's table: nothing imported


def test_the_commands_are_found():
    # Guards the test below against an empty list (a group that lists nothing documents nothing).
    assert {"train", "init", "diff", "report", "lexicon"} <= set(command_names())


@pytest.mark.parametrize("name", command_names())
def test_every_command_is_documented(name):
    """`embedtune NAME` shown in README.md or docs/*.md; for a group (`lexicon`), each of its subcommands."""
    command = commands()[name]
    paths = [f"{name} {sub}" for sub in command.commands] if isinstance(command, click.Group) else [name]
    assert paths
    texts = [text_of(p) for p in DOCS]
    for path in paths:
        shown = re.compile(r"(?<![\w/.-])embedtune(?:\s+-{1,2}[\w-]+)*\s+" + r"\s+".join(path.split()) + r"\b")
        assert any(shown.search(t) for t in texts), f"`embedtune {path}` appears in neither README.md nor docs/*.md"


def quoted_command_options():
    """(where, command path, option) for every option of every `embedtune ...` line the docs quote."""
    table, group_options = commands(), option_names(cli)
    for page in QUOTING:
        text = text_of(page)
        for m in COMMAND_LINE.finditer(text):
            global_options, name, rest = m.groups()
            command, path = table.get(name), name
            if command is None:
                continue   # prose: "embedtune with the bench extra"
            if isinstance(command, click.Group) and rest.split()[:1] and rest.split()[0] in command.commands:
                path = f"{name} {rest.split()[0]}"
                command = command.commands[rest.split()[0]]
            known = option_names(command)
            for option in OPTION.findall(global_options):
                yield where(page, text, m.start()), "embedtune", option, group_options
            for option in OPTION.findall(QUOTED.sub("", rest)):
                yield where(page, text, m.start()), path, option, known


def test_every_quoted_embedtune_option_exists():
    quoted = list(quoted_command_options())
    assert len(quoted) > 50   # the README alone quotes more: the pattern still finds them
    wrong = [f"{at}: `embedtune {path}` has no {option}" for at, path, option, known in quoted if option not in known]
    assert not wrong, "\n".join(wrong)


def quoted_script_options():
    for page in QUOTING:
        text = text_of(page)
        for m in SCRIPT_LINE.finditer(text):
            script, rest = m.groups()
            yield where(page, text, m.start()), script, OPTION.findall(QUOTED.sub("", rest))


def test_every_quoted_benchmark_command_exists():
    """`python benchmarks/X.py --opt` quoted anywhere: X exists and defines --opt (argparse takes its options
    as literal strings in these scripts; `python benchmarks/X.py --help` lists the same)."""
    quoted, wrong = list(quoted_script_options()), []
    assert len(quoted) > 50
    for at, script, options in quoted:
        path = ROOT / script
        if not path.is_file():
            wrong.append(f"{at}: {script}: no such script")
            continue
        source = path.read_text(encoding="utf-8")
        wrong += [f"{at}: {script} has no {o}" for o in options if f'"{o}"' not in source and f"'{o}'" not in source]
    assert not wrong, "\n".join(wrong)


def section(page: Path, heading: str) -> str:
    text = page.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{page.relative_to(ROOT)} has no '{heading}'"
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> list[list[str]]:
    rows = [line.strip().strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return rows[1:]   # the header; the |---| line does not start with "| "


def test_benchmarks_readme_opens_with_a_current_figure_for_every_script():
    bench = ROOT / "benchmarks"
    assert bench.joinpath("README.md").read_text(encoding="utf-8").startswith("# Benchmarks\n\n## Current figures\n")
    rows = {row[0].strip("` "): row for row in table_rows(section(bench / "README.md", "## Current figures"))}
    scripts = sorted(p.name for p in [*bench.glob("*.py"), *bench.glob("*.sh")])
    missing = [s for s in scripts if s not in rows]
    assert not missing, (f"benchmarks/README.md's 'Current figures' has no row for {missing}: add one (the figure that "
                         "holds now, its command, the date and commit it was measured at, its section)")
    wrong = [s for s in scripts if f"benchmarks/{s}" not in rows[s][2]]
    assert not wrong, f"the command cell of these rows does not run the script: {wrong}"


def sentences(cell: str) -> int:
    """Sentences in a table cell: a full stop, question or exclamation mark at a sentence's end, code spans and
    numbers (0.91, 1.5x) left out."""
    text = re.sub(r"`[^`]*`", "code", cell)
    return len(re.findall(r"[.!?](?=\s|$)", text))


def test_sentences_counts_sentences():
    assert sentences("Takes 0.54 µs of CPU a pair (`--threads 1`), 1.2x gensim's.") == 1
    assert sentences("The loop makes 1.34x. Two workers 1.08x.") == 2
    assert sentences("No full stop") == 0


def test_benchmarks_readme_cells_are_one_sentence_and_the_log_is_all_linked():
    """The current-figures table keeps one sentence a figure and a measurement (the figure, its ratio, the
    date and the load), the history staying in benchmarks/log/; every log file is reached from the README."""
    bench = ROOT / "benchmarks"
    rows = table_rows(section(bench / "README.md", "## Current figures"))
    assert len(rows) >= 25
    for row in rows:
        assert len(row) == 5, row
        name, figure, _, measured, _ = row
        assert sentences(figure) == 1, f"{name}: the figure cell is not one sentence: {figure}"
        assert sentences(measured) == 1, f"{name}: the measured cell is not one sentence: {measured}"
        if not figure.startswith("No figure"):
            assert re.search(r"\b2026-\d\d-\d\d\b", measured) and "load" in measured, f"{name}: no date or load: {measured}"
    readme = (bench / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in LOG if f"](log/{p.name}" not in readme]
    assert LOG and not unlinked, f"benchmarks/README.md links no row or entry to these log files: {unlinked}"


def test_the_readme_is_short_and_its_headline_cells_link_docs_speed():
    readme = ROOT / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    rows = table_rows(section(readme, "## Headline figures"))
    assert len(rows) >= 10
    for row in rows:
        assert len(row) == 3, row
        for cell in row:
            shown = re.sub(r"\]\([^)]*\)", "]", cell)
            assert len(shown) <= CELL_MAX_CHARS, f"a long headline cell ({len(shown)} characters): {cell}"
        assert re.search(r"\]\(docs/speed\.md#[\w-]+\)", row[1]), f"the figure links no row of docs/speed.md: {row}"


def test_each_headline_figure_is_the_one_its_docs_speed_row_gives():
    """A headline quotes its row: each number of the link's text is one that row's figure cell gives, and a
    goal the row says is not met is not met in the headline either (the README once showed six figures of
    rows measured again since, classify's wall among them at 2.00x "not met" where its row said 0.99x)."""
    speed = {m.group(1): line.strip().strip("|").split(" | ")
             for line in (ROOT / "docs" / "speed.md").read_text(encoding="utf-8").splitlines()
             if (m := re.search(r'<a id="([\w-]+)"></a>', line))}
    number = re.compile(r"(?<![\w.])[+-]?\d+(?:\.\d+)?(?![\d])")
    for what, figure, goal in table_rows(section(ROOT / "README.md", "## Headline figures")):
        shown, anchor = re.search(r"\[([^\]]*)\]\(docs/speed\.md#([\w-]+)\)", figure).groups()
        assert anchor in speed, f"{what}: docs/speed.md has no row '{anchor}'"
        given = set(number.findall(speed[anchor][0].replace("**", "")))
        stale = [n for n in number.findall(shown) if n not in given]
        assert not stale, f"{what}: {stale} of '{shown}' are not in docs/speed.md#{anchor}'s figure: quote the row"
        assert ("not met" in goal) == ("not met" in speed[anchor][1]), \
            f"{what}: the goal cell '{goal}' and docs/speed.md#{anchor}'s '{speed[anchor][1]}' disagree on 'not met'"


def architecture_paths() -> list[tuple[int, str]]:
    """(line, path) for each file or folder docs/architecture.md names: `embedtune/...` and `cli/...`, and a
    bare `name.py` beside them on its line, read inside the last folder named before it there."""
    found = []
    for number, line in enumerate(text_of(ROOT / "docs" / "architecture.md").splitlines(), 1):
        folder = None
        for token in re.findall(r"`([^`\s]+)`", line):
            if token.startswith(("embedtune/", "cli/")):
                found.append((number, token))
                folder = token if token.endswith("/") else folder
            elif token.endswith(".py") and folder:
                found.append((number, folder + token))
    return found


def test_every_module_the_architecture_page_names_exists():
    paths = architecture_paths()
    assert len(paths) > 40, "docs/architecture.md names fewer modules than it should: was it parsed?"
    missing = [f"line {number}: {path}" for number, path in paths if not (ROOT / path).exists()]
    assert not missing, "docs/architecture.md names what is not in the tree (moved? update the page): " + "; ".join(missing)


def library_modules() -> list[str]:
    """Every module of the library, as a path: `embedtune/cli` is a link to `cli/`, whose modules the page
    names on its own line."""
    package = ROOT / "embedtune"
    return sorted(p.relative_to(ROOT).as_posix() for p in package.rglob("*.py")
                  if "__pycache__" not in p.parts and p.relative_to(package).parts[0] != "cli")


def test_the_architecture_page_places_every_module():
    """Each module named, none exempt; a package's `__init__.py` is placed by its folder's name, except the
    library's own (`embedtune/__init__.py`, its public face), which the page names."""
    named = {path.rstrip("/") for _, path in architecture_paths()}
    modules = library_modules()
    assert len(modules) > 100 and "embedtune/_tf.py" in modules, "the library's modules were not found"
    placed = named | {n + "/__init__.py" for n in named if n != "embedtune"}
    unplaced = [m for m in modules if m not in placed]
    assert not unplaced, f"docs/architecture.md does not say where these live: {unplaced}"
