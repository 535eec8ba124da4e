"""`embedtune train`'s options from the config's declarations (embedtune.config.keys.Key), and its --help in sections.

Every config key with an option becomes one click option named after it (``word_ngrams`` ->
``--word-ngrams``); an objective's own keys come from its class and go under a section of their own.
Options written by hand (arguments, flags of the command itself) take a ``section`` too.
"""

from __future__ import annotations

import click

from embedtune import objectives as registry
from embedtune.cli.files import FilesCommand, key_type
from embedtune.config import DEFAULT_BATCH_SIZE, DEFAULT_LR, all_keys, owners
from embedtune.config.keys import IO, NEW_WORDS, ROWS, RUNS, TRAINING, Key

OTHER = "Other options"


def objective_section(name: str) -> str:
    cls = registry.objective_class(name)
    return f"--objective {name}" + (f" ({cls.help})" if cls.help else "")


def sections() -> list[str]:
    """The sections of --help in their order: the shared ones, each objective's own before RUNS."""
    return [ROWS, NEW_WORDS, TRAINING, *(objective_section(name) for name in registry.registered()), RUNS, IO, OTHER]


class SectionedOption(click.Option):
    """A click option that says under which section of --help it is listed."""

    def __init__(self, *args, section: str = OTHER, **kwargs):
        super().__init__(*args, **kwargs)
        self.section = section


class SectionedCommand(FilesCommand):
    """A command whose --help lists its options by section (click has one "Options" list)."""

    def format_options(self, ctx, formatter):
        groups: dict[str, list] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                groups.setdefault(getattr(param, "section", OTHER), []).append(record)
        order = sections()
        for title in sorted(groups, key=lambda t: order.index(t) if t in order else len(order)):
            with formatter.section(title):
                formatter.write_dl(groups[title])


def option(*decls, section: str = OTHER, **kwargs):
    """click.option, listed under ``section`` of --help."""
    return click.option(*decls, cls=SectionedOption, section=section, **kwargs)


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _by_objective(values: dict[str, object]) -> str:
    """{objective: value} as "5 a, c; 10 b": objectives with the same value together."""
    groups: dict[object, list[str]] = {}
    for name, value in values.items():
        groups.setdefault(value, []).append(name)
    return "; ".join(f"{_number(value)} {', '.join(names)}" for value, names in groups.items())


def shown_default(key: Key) -> str | None:
    """What ``[default: ...]`` says for a key: its own text, its value, or each objective's value."""
    if key.shown_default is not None:
        return key.shown_default
    if key.type is bool:
        return None
    if key.default is not None:
        return _number(key.default)
    objectives = registry.registered()
    if key.name == "lr":   # the optimizer's own rate, unless the objective starts better at another
        own = "; ".join(f"{name}: {optimizer} {_number(rate)}" for name, cls in objectives.items()
                        for optimizer, rate in cls.learning_rates.items())
        return ", ".join(f"{_number(rate)} {optimizer}" for optimizer, rate in DEFAULT_LR.items()) + (
            f"; {own}" if own else "")
    if key.name == "init":   # the new words' start each objective takes
        return _by_objective({name: cls.new_word_start for name, cls in objectives.items() if not cls.closed_form})
    fallback = {"batch_size": DEFAULT_BATCH_SIZE}.get(key.name)
    values = {name: cls.defaults.get(key.name, None if cls.closed_form else fallback)
              for name, cls in objectives.items()}
    values = {name: value for name, value in values.items() if value is not None}
    return _by_objective(values) if values else None


def objective_help() -> str:
    objectives = registry.registered()
    listing = ", ".join(f"{name} ({cls.help})" if cls.help else name for name, cls in objectives.items())
    by_format = [f"{name} for {'/'.join(cls.for_formats)}-format VECTORS" for name, cls in objectives.items()
                 if cls.for_formats]
    default = registry.auto_objective(None)
    auto = f"{', '.join(by_format)}, else {default}" if by_format else default
    return f"{listing}; auto: {auto}. Each one's own options are in its section below. [default: {registry.AUTO}]"


def key_option(key: Key, section: str):
    """The click option of a declared key: its name, type, choices, help and [default: ...]."""
    kwargs: dict = {"section": section, "metavar": key.metavar}
    if key.name == "objective":
        kwargs.update(type=click.Choice(registry.choices()), help=objective_help())
        return option(key.flag, key.name, **kwargs)
    if key.type is bool:
        kwargs.update(is_flag=True, default=None)
    elif key.choices:
        kwargs["type"] = click.Choice(key.choices)
    elif key.role:   # what the run does with the file: checked against every other name (cli/files.py)
        kwargs["type"] = key_type(key)
    elif key.type is not str:
        kwargs["type"] = key.type
    shown = shown_default(key)
    kwargs["help"] = key.help + (f" [default: {shown}]" if shown else "")
    return option(key.flag, key.name, **kwargs)


def key_options(command):
    """Every declared key's option: the shared keys in their sections, then each objective's own
    keys under its section."""
    owner = owners()
    made = []
    for key in all_keys():
        if key.option:
            name = owner.get((key.table, key.name))
            made.append(key_option(key, objective_section(name) if name and not key.section else key.section or OTHER))
    for decorate in reversed(made):   # click lists options in decorator order, top first
        command = decorate(command)
    return command


__all__ = ["IO", "NEW_WORDS", "ROWS", "RUNS", "TRAINING", "SectionedCommand", "key_options", "option"]
