"""The training config, one package: how a key is declared (``keys.py``: ``key``, ``Key``, ``OwnKeys``,
``Range``), the config's classes with the shared keys as their fields (``schema.py``: ``Config``,
``VocabConfig``, ``TrainConfig``), loading a file, merging options, checking and resolving (``load.py``,
which reads the objectives' registry inside its functions), and a config from Python options
(``options.py``: ``from_options``, for ``fine_tune`` and the Keras layer).

The objectives import ``keys.py`` and ``schema.py`` only (their declarations and types); importing them
runs this file, which loads no objective.
"""

from embedtune.config.load import (AUTO, DEFAULT_BATCH_SIZE, DEFAULT_LR, INITS, LOWERCASE, OPTIMIZERS, SHARED,
                                   TOKENIZE, Config, Key, Range, TrainConfig, VocabConfig, all_keys, build_table,
                                   find_key, learning_rate, load_config, merge, owners, ranges, resolve,
                                   train_config, validate, with_values)
from embedtune.config.options import NOT_OPTIONS, from_options, option_names

__all__ = ["Config", "TrainConfig", "VocabConfig", "Key", "Range", "load_config", "merge", "validate", "resolve",
           "learning_rate", "all_keys", "owners", "find_key", "ranges", "with_values", "train_config", "build_table",
           "from_options", "option_names", "NOT_OPTIONS", "AUTO", "INITS", "LOWERCASE", "OPTIMIZERS", "TOKENIZE", "DEFAULT_LR",
           "DEFAULT_BATCH_SIZE", "SHARED"]
