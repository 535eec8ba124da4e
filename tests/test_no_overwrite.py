"""No output of any command may overwrite any of its inputs (issue 35): a property over every command.

The commands, their inputs and their outputs are read from the declarations (the role each argument and
option has: cli/files.py; the keys a --config names: Key.path), so a new option is covered here with no
more test code. For each command and each spelling of one file (as given, ``./``, ``../``, a symlink, a
hard link, relative to the working folder), every (input, output) pair naming that file is refused with
one `Error:` line and exit 1, before anything is read, and the input keeps its bytes. The refusal comes
before any loading, so every case runs in-process and in milliseconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from embedtune.cli.files import ConfigFile, Role, label
from embedtune.cli.main import COMMANDS, cli

CONTENT = b"the\nof\n"
SPELLINGS = ("as-given", "dot", "parent", "symlink", "hardlink", "relative")


def commands() -> list[tuple[list[str], click.Command]]:
    """(the words that invoke it, the command) for every command and subcommand."""
    ctx = click.Context(cli)
    found = []
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += [([name, sub], command.commands[sub]) for sub in sorted(command.commands)]
        else:
            found.append(([name], command))
    return found


def roles(command, role: str) -> list[click.Parameter]:
    return [p for p in command.params if isinstance(p.type, Role) and p.type.role == role]


def command_line(words, command, values: dict, folder: Path, leave_out: tuple = ()) -> list[str]:
    """The command with ``values`` (param name -> value) and a stand-in for every other argument and
    required option (but those in ``leave_out``), each its own file, so that only the pair under test
    can collide."""
    positional, options = [], []
    for param in command.params:
        if param.name in leave_out:
            continue
        value = values.get(param.name)
        if value is None and isinstance(param, click.Argument):
            value = stand_in(param, folder)
        elif value is None and param.required:
            value = stand_in(param, folder)
        if value is None:
            continue
        if isinstance(param, click.Argument):
            positional.append(str(value))
        else:
            options += [param.opts[0], str(value)]
    return [*words, *options, "--", *positional]


def stand_in(param, folder: Path) -> str:
    if not isinstance(param.type, Role):
        return "the"   # neighbors' WORDS
    path = folder / f"other-{param.name}"
    if param.type.role == "read" and param.type.inside:
        path.mkdir(exist_ok=True)
    elif param.type.role == "read":
        path.write_bytes(CONTENT)
    return str(path)


def spelled(path: Path, spelling: str, folder: Path) -> str:
    """Another name of ``path`` (which exists)."""
    if spelling == "dot":
        return f"{path.parent}/./{path.name}"
    if spelling == "parent":
        (path.parent / "sub").mkdir(exist_ok=True)
        return f"{path.parent}/sub/../{path.name}"
    if spelling == "symlink":
        link = folder / f"link-to-{path.name}"
        link.symlink_to(path)
        return str(link)
    if spelling == "hardlink" and path.is_file():
        link = folder / f"hard-{path.name}"
        os.link(path, link)
        return str(link)
    if spelling == "relative":
        return os.path.relpath(path, folder)   # the command runs in ``folder``
    return str(path)


def instance(pattern: str) -> str:
    return pattern.replace("*", "1")


def pairs(command):
    """(input param, output param) for every pair the command declares; at most one side a folder."""
    return [(read, write) for read in roles(command, "read") for write in roles(command, "write")
            if not (read.type.inside and write.type.inside)]


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink() else "other")
            for p in sorted(folder.rglob("*"))}


def assert_refused(result, target: Path, before: dict, folder: Path, what: str) -> None:
    assert result.exit_code == 1, (what, result.output)
    assert result.stdout == "", what
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), (what, result.stderr)
    assert "would overwrite an input" in lines[0] or "would write over this input" in lines[0], (what, lines[0])
    assert target.read_bytes() == CONTENT, what
    assert snapshot(folder) == before, what


@pytest.fixture(autouse=True)
def nothing_loads(monkeypatch):
    """The refusal comes before any vectors file or corpus is read."""
    import embedtune.formats
    from embedtune.corpus import Corpus

    def must_not_read(*args, **kwargs):
        raise AssertionError("an input was read before the names were checked")

    for module, name in ((embedtune.formats, "load_vectors"), (embedtune.formats, "detect_format"),
                         (Corpus, "check_start")):
        monkeypatch.setattr(module, name, must_not_read)


def run_in(folder: Path, args: list[str]):
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(cwd)


COMMANDS_WITH_OUTPUTS = [pytest.param(words, command, id=" ".join(words)) for words, command in commands()
                         if pairs(command)]


def test_every_command_that_writes_is_covered():
    """The commands that write a file declare it; a writing command with no declared output would be
    left out of the property below."""
    names = {" ".join(words) for words, command in commands() if roles(command, "write")}
    assert names == {"train", "init", "convert", "report", "lexicon wordnet"}
    for words, command in commands():   # and every file name is declared, inputs included
        for param in command.params:
            if isinstance(param, click.Argument) and param.name not in ("words",):
                assert isinstance(param.type, Role), (words, param.name)


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("words, command", COMMANDS_WITH_OUTPUTS)
def test_no_output_may_name_an_input(tmp_path, words, command, spelling):
    for read, write in pairs(command):
        folder = tmp_path / f"{read.name}-{write.name}"
        folder.mkdir()
        if write.type.inside:   # an input among the files an output folder gets
            output_folder = folder / "out"
            target = output_folder / instance(write.type.inside[0])
            target.parent.mkdir(parents=True)
            target.write_bytes(CONTENT)
            values = {read.name: target, write.name: spelled(output_folder, spelling, folder)}
        elif read.type.inside:   # an output among the files an input folder holds
            input_folder = folder / "in"
            input_folder.mkdir()
            target = input_folder / instance(read.type.inside[0])
            target.write_bytes(CONTENT)
            values = {read.name: spelled(input_folder, spelling, folder), write.name: target}
        else:
            target = folder / "taken.txt"
            target.write_bytes(CONTENT)
            values = {read.name: target, write.name: spelled(target, spelling, folder)}
        args = command_line(words, command, values, folder)
        before = snapshot(folder)
        assert_refused(run_in(folder, args), target, before, folder, f"{label(read)} = {label(write)}: {args}")


def config_keys(role: str):
    from embedtune.config import all_keys

    return [key for key in all_keys() if key.role == role]


def config_text(key, path: str) -> str:
    line = f"{key.name} = {str(path)!r}\n".replace("'", '"')
    return f"[{key.table}]\n{line}" if key.table else line


@pytest.mark.parametrize("spelling", ["as-given", "symlink", "relative"])
def test_files_a_config_names_count_too(tmp_path, spelling):
    """train: an input the --config names against every output option, and an output the --config names
    against every input option; diff and report: the word lists their --config names against -o."""
    train = cli.get_command(click.Context(cli), "train")
    cases = []
    for key in config_keys("read"):
        for write in roles(train, "write"):
            if not write.type.inside:
                cases.append((["train"], train, key, write.name, "write"))
    for key in config_keys("write") + config_keys("folder"):
        for read in roles(train, "read"):
            if not isinstance(read.type, ConfigFile):
                cases.append((["train"], train, key, read.name, "read"))
    report = cli.get_command(click.Context(cli), "report")
    for key in config_keys("read"):
        if key.name in report.params[[p.name for p in report.params].index("config_file")].type.keys:
            cases.append((["report"], report, key, "output", "write"))
    assert len(cases) > 40
    for at, (words, command, key, option, side) in enumerate(cases):
        folder = tmp_path / str(at)
        folder.mkdir()
        inside = key.role == "folder"
        target = folder / ("out/ckpt-1" if inside and key.name == "checkpoint_dir" else
                           "out/projector_config.pbtxt" if inside else "taken.txt")
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(CONTENT)
        named = target.parent if inside else target
        config = folder / "run.toml"
        config.write_text(config_text(key, spelled(named, spelling, folder)), encoding="utf-8")
        values = {"config_path" if command is train else "config_file": config, option: target}
        # the key itself not on the command line, which would override it (VECTORS, CORPUS, -o); train's
        # arguments left out (CORPUS alone would be taken for VECTORS): the refusal comes before "missing"
        leave_out = (key.name, "vectors", "corpus") if command is train and option not in ("vectors", "corpus") \
            else (key.name,)
        args = command_line(words, command, values, folder, leave_out=leave_out)
        before = snapshot(folder)
        assert_refused(run_in(folder, args), target, before, folder, f"{key.name} in --config, {option}: {args}")


def test_an_output_may_not_be_the_config_itself(tmp_path):
    config = tmp_path / "run.toml"
    config.write_bytes(CONTENT)
    for args in (["train", "v.txt", "c.txt", "-c", config, "-o", config],
                 ["report", config, config, "--config", config, "-o", f"{tmp_path}/./run.toml"]):
        before = snapshot(tmp_path)
        assert_refused(run_in(tmp_path, [str(a) for a in args]), config, before, tmp_path, str(args))


def test_a_device_is_no_file_to_overwrite(tmp_path):
    """/dev/null as a list and as the output: nothing is destroyed, so no refusal (the run goes on to
    what else is wrong: here, no vectors file)."""
    result = run_in(tmp_path, ["train", "missing.txt", "c.txt", "--freeze-list", "/dev/null", "-o", "/dev/null"])
    assert "would overwrite" not in result.output and "missing.txt: no such file" in result.output
