"""A config from Python options: ``fine_tune``'s and the Keras layer's names (the command line's, underscored:
``freeze_top=5000``) checked as the command checks its own, so the two cannot drift apart."""

from __future__ import annotations

import difflib
import os

from embedtune.config.load import all_keys, build_table, find_key, load_config, merge
from embedtune.config.schema import Config
from embedtune.errors import EmbedtuneError

# Keys of Config that are arguments or outputs of fine_tune and the layer, not options.
NOT_OPTIONS = frozenset({"vectors", "corpus", "output", "to"})


def option_names() -> dict[str, str]:
    """option name -> the config table it belongs to ("" for the top level): every declared key,
    the shared ones and the registered objectives' own."""
    return {key.name: key.table for key in all_keys() if key.name not in NOT_OPTIONS}


def from_options(options: dict, config: Config | str | os.PathLike | None = None) -> Config:
    """The Config that ``embedtune train`` builds from these options over ``config`` (a Config, a
    TOML file, or None for the defaults). An unknown name, a wrong type or a bad value is an
    EmbedtuneError naming the option."""
    source = None
    if isinstance(config, (str, os.PathLike)):
        source = str(config)
        config = load_config(config, check_values=False)
    config = config if config is not None else Config()
    known = option_names()
    table: dict = {"vocab": {}, "train": {}}
    for name, value in options.items():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise EmbedtuneError(f"unknown option '{name}'{hint}; options are those of `embedtune train`, "
                                 f"underscored: {', '.join(sorted(known))}")
        if value is None:
            continue
        (table[known[name]] if known[name] else table)[name] = value
    typed = build_table(Config, table, "fine_tune()", python=True)   # types checked, ints taken as floats where floats go
    flat = {name: typed.value(find_key(known[name], name)) for name in options if options[name] is not None}
    return merge(config, flat, source=source, python=True)
