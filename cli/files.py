"""What each command's arguments and options name, read from their declarations: an input, an output,
an output folder or a config (whose own file names count too). Every command is a ``FilesCommand``, so
its names are checked in one place (embedtune.checks.check_names) before its body runs: before a vectors
file is read or TensorFlow imported. A new option of one of these types is checked with no more code.
"""

from __future__ import annotations

import click

from embedtune.checks import FOLDER_FILES, Named, check_names, config_files
from embedtune.errors import BadOption, EmbedtuneError


class Role(click.Path):
    """click.Path that says what the command does with the file: ``role`` "read" or "write";
    ``inside``: for a folder, the names it reads or writes there (first level, shell patterns).
    An empty name is a usage error naming the argument or option, never "not given"."""

    def __init__(self, role: str, inside: tuple[str, ...] = (), **kwargs):
        super().__init__(**kwargs)
        self.role = role
        self.inside = inside

    def convert(self, value, param, ctx):
        if value == "":
            raise click.UsageError(f"{label(param)}: empty file name", ctx)
        if not (value == "-" and self.allow_dash):
            self._check_exists(value, label(param))
        return super().convert(value, param, ctx)

    def _check_exists(self, value, named: str) -> None:
        """A file that is missing or of the wrong kind is an error in the files (exit 1), as every
        command's own checks say it, not a usage error (click.Path's exit 2)."""
        import os

        if self.exists and not os.path.exists(value):
            raise click.ClickException(f"{value}: {named}: no such {'file' if self.file_okay else 'folder'}")
        if os.path.isdir(value) and not self.dir_okay:
            raise click.ClickException(f"{value}: {named}: is a folder, expected a file")
        if os.path.exists(value) and not os.path.isdir(value) and not self.file_okay:
            raise click.ClickException(f"{value}: {named}: is a file, expected a folder")
        if self.readable and os.path.exists(value) and not os.access(value, os.R_OK):
            raise click.ClickException(f"{value}: {named}: cannot open for reading: permission denied")


def reads(**kwargs) -> Role:
    """A file the command reads (click.Path's keywords: exists=True, allow_dash=True, ...)."""
    return Role("read", **kwargs)


def writes(**kwargs) -> Role:
    """A file the command writes (it need not be readable: the writer checks what it needs)."""
    return Role("write", **{"readable": False, **kwargs})


def folder(role: str, inside: tuple[str, ...], **kwargs) -> Role:
    """A folder; a file given as a folder the run writes into is refused by embedtune.checks (exit 1)."""
    return Role(role, inside, **kwargs)


class ConfigFile(Role):
    """--config: read, and the files it names are the command's too. ``keys``: the names of the keys
    this command reads from it (None: every key, as train takes them; each by its declared role)."""

    def __init__(self, keys: tuple[str, ...] | None = None, **kwargs):
        super().__init__("read", dir_okay=False, **kwargs)
        self.keys = keys

    def named(self, path: str, params: dict) -> tuple[list[Named], list[Named]]:
        """(reads, writes) the config adds: each key the command line does not override."""
        from embedtune.config import load_config

        try:
            config = load_config(path, check_values=False)   # keys and types; an empty name is refused there
        except EmbedtuneError:   # the command reads it, and says what is wrong, after its own usage checks
            return [], []
        return config_files(config, source=path, given=lambda name: params.get(name) is not None
                            or (self.keys is not None and name not in self.keys))


def key_type(key) -> Role:
    """The option type of a declared config key with a path (embedtune.config.keys.Key.path)."""
    if key.role == "folder":
        return folder("write", FOLDER_FILES.get(key.name, ()), readable=False)
    return reads() if key.role == "read" else writes()


def label(param) -> str:
    """How an error names the argument (VECTORS) or option (-o, as every message says; else its long name)."""
    if isinstance(param, click.Option):
        if "-o" in param.opts:
            return "-o"
        return next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
    return param.human_readable_name


def named_files(ctx: click.Context) -> tuple[list[Named], list[Named]]:
    """(reads, writes): every file the command's arguments and options name, in their order, and
    those a --config names."""
    found: dict[str, list[Named]] = {"read": [], "write": []}
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(param.type, Role) or value is None:
            continue
        for path in value if param.multiple or param.nargs == -1 else (value,):
            found[param.type.role].append(Named(label(param), path, param.type.inside))
        if isinstance(param.type, ConfigFile):
            more_reads, more_writes = param.type.named(value, ctx.params)
            found["read"] += more_reads
            found["write"] += more_writes
    return found["read"], found["write"]


class FilesCommand(click.Command):
    """A command whose file names are checked (check_names) before its body runs: an empty name or two
    standard inputs exit 2, an output naming an input exits 1, each with one `Error:` line."""

    def invoke(self, ctx):
        try:
            check_names(*named_files(ctx))
        except BadOption as err:
            raise click.UsageError(str(err), ctx) from None
        except EmbedtuneError as err:
            raise click.ClickException(str(err)) from None
        return super().invoke(ctx)
