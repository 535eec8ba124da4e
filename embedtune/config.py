"""The training config: one TOML file (stdlib tomllib) into frozen dataclasses.

Every default lives here, once. A config file holds only what differs from these
defaults; an unknown key or a value of the wrong type is an error naming the key
and the file. Command-line options override the file (see ``merge``).
Paths in a config are relative to the directory embedtune is run from.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from embedtune.errors import EmbedtuneError


@dataclass(frozen=True)
class VocabConfig:
    """Which rows may move. Freeze rules win over train rules; see embedtune.plan."""

    freeze_list: str | None = None      # file, one word per line: these rows frozen
    train_list: str | None = None       # file, one word per line: these rows trainable, the rest frozen
    freeze_top: int = 0                 # freeze the first N rows of the vectors file (most frequent)
    freeze_pattern: str | None = None   # regex (re.search): matching pretrained words frozen
    train_pattern: str | None = None    # regex: matching words trainable, the rest frozen
    freeze_pretrained: bool = False     # freeze every pretrained row: only new words train
    min_count: int = 5                  # a corpus word not in the vectors becomes a new row at this count
    max_new: int = 0                    # keep at most this many new words, most frequent first (0 = all)
    init: str = "alacarte"              # start of new words: alacarte | context-mean | random (see README)
    lowercase: str = "auto"             # auto (follow the vectors: GloVe is lower-case) | yes | no
    strict_lists: bool = False          # a list word missing from the vocabulary is an error, not a note


@dataclass(frozen=True)
class TrainConfig:
    """None: decided by the objective (OBJECTIVE_DEFAULTS; see ``resolve``)."""

    objective: str = "auto"             # auto (glove for GloVe-format vectors, else sgns) | sgns | glove
    epochs: int = 5
    window: int | None = None           # maximum distance; None: 5 for sgns (each center draws 1..5), 10 for glove
    negative: int = 5                   # negative samples per (center, context) pair
    negatives: str = "per-pair"         # sgns: per-pair (word2vec's) | shared by 16 pairs: half the CPU, lower
                                        # recovery R@10 (0.28 vs 0.34; benchmarks/README.md), so not the default
    sample: float = 1e-3                # frequent-word subsampling threshold (0 = off)
    lr: float | None = None             # None: 0.025 for sgd, 0.05 for adagrad (glove: 0.1), 0.001 for adam
    min_lr_fraction: float = 1e-4       # linear decay ends at lr * this
    batch_size: int = 4096              # pairs per step
    optimizer: str | None = None        # sgd | adagrad | adam, all lazy (only the batch's rows)
    clip_norm: float = 0.0              # cap on each merged row gradient's L2 norm (0 = no cap; see README)
    anchor: float | None = None         # L2 pull of each trainable row toward its start, per epoch (0 = off)
    x_max: float = 2.0                  # glove: a co-occurrence count weighs min(1, (count / x_max)^0.75)
                                        # (GloVe's own default is 100; 2 was best on held-out words)
    context_init: str = "zeros"         # zeros (word2vec) | word: measured on data/sample, 3 epochs: loss 2.73 vs 24.0
    seed: int = 1
    dim: int | None = None              # None: the dimension of the vectors file
    deterministic: bool = False         # op determinism: two runs give byte-identical output (slower)
    threads: int = 0                    # CPU threads of TensorFlow's pools (0 = all cores)
    checkpoint_dir: str | None = None   # write checkpoints here (and --resume from here)
    checkpoint_every: int = 0           # steps between checkpoints (0 = every 5 minutes)


@dataclass(frozen=True)
class Config:
    vectors: str | None = None          # pretrained vectors file
    corpus: str | None = None           # text corpus, one sentence or paragraph per line; "-" = stdin
    output: str | None = None           # output vectors file; "-" = stdout
    format: str | None = None           # input vectors format (None: detect)
    to: str | None = None               # output format (None: same as the input)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


OPTIMIZERS = ("sgd", "adagrad", "adam")
DEFAULT_LR = {"sgd": 0.025, "adagrad": 0.05, "adam": 0.001}
# Where an objective starts better elsewhere: glove with adagrad at 0.1 (recovery benchmark,
# validation words; see OBJECTIVE_DEFAULTS). sgd at 0.01-0.1 and adam at 0.001-0.03 did worse
# there (1.5M tokens: R@10 <= 0.46 and <= 0.48 against adagrad's 0.50).
OBJECTIVE_LR = {("glove", "adagrad"): 0.1}
OBJECTIVES = ("auto", "sgns", "glove")
# What None means for these keys, by objective. sgns's are word2vec's. glove's anchor (with
# x_max 2 and adagrad at 0.1) was chosen on the recovery benchmark's validation words
# (benchmarks/recovery.py --sweep-train; benchmarks/README.md): on 5.1M tokens anchor 8 gave
# R@10 0.60 (median rank 5), anchors 0.5-16 0.57-0.60; on 1.5M tokens all gave 0.46-0.48.
OBJECTIVE_DEFAULTS = {
    "sgns": {"window": 5, "optimizer": "sgd", "anchor": 0.0},
    "glove": {"window": 10, "optimizer": "adagrad", "anchor": 8.0},
}
LOWERCASE = ("auto", "yes", "no")
INITS = ("alacarte", "context-mean", "random")   # embedtune.init.METHODS
CONTEXT_INITS = ("zeros", "word")
NEGATIVES = ("shared", "per-pair")   # embedtune.objectives.sgns.NEGATIVES


def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _allowed_types(annotation: str):
    # Annotations are strings (from __future__ import annotations): "int", "float | None", ...
    names = [part.strip() for part in annotation.split("|")]
    table = {"int": int, "float": float, "str": str, "bool": bool, "None": type(None)}
    return [table[name] for name in names if name in table]


def _check_value(key: str, value, annotation: str, source: str):
    types = _allowed_types(annotation)
    if isinstance(value, bool) and bool not in types:
        raise EmbedtuneError(f"key '{key}' must be {_type_name(types[0])}, got {value!r}", path=source)
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tuple(t for t in types if t is not type(None))):
        raise EmbedtuneError(f"key '{key}' must be {_type_name(types[0])}, got {value!r}", path=source)
    return value


def _build(cls, table: dict, source: str, prefix: str = ""):
    known = {f.name: f for f in fields(cls)}
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in known:
            raise EmbedtuneError(f"unknown key '{prefix}{key}' (known: {', '.join(sorted(known))})", path=source)
        f = known[name]
        if f.name in ("vocab", "train"):
            if not isinstance(value, dict):
                raise EmbedtuneError(f"'{key}' must be a table ([{key}])", path=source)
            sub = VocabConfig if f.name == "vocab" else TrainConfig
            values[name] = _build(sub, value, source, prefix=f"{key}.")
        else:
            values[name] = _check_value(prefix + key, value, f.type, source)
    return cls(**values)


def validate(config: Config, source: str | None = None, options: frozenset = frozenset()) -> Config:
    """Check values that have a type but not every value makes sense.

    source : the config file the values came from; options : names given on the command line,
    which an error names as options (``--window``) rather than as keys of the file.
    """
    t, v = config.train, config.vocab

    def bad(key, text):
        name = key.split(".")[-1]
        if name in options or source is None:
            raise EmbedtuneError(f"--{name.replace('_', '-')} {text}")
        raise EmbedtuneError(f"'{key}' {text}", path=source)

    if t.optimizer is not None and t.optimizer not in OPTIMIZERS:
        bad("train.optimizer", f"must be one of {', '.join(OPTIMIZERS)}, got {t.optimizer!r}")
    if t.objective not in OBJECTIVES:
        bad("train.objective", f"must be one of {', '.join(OBJECTIVES)}, got {t.objective!r}")
    if t.context_init not in CONTEXT_INITS:
        bad("train.context_init", f"must be one of {', '.join(CONTEXT_INITS)}, got {t.context_init!r}")
    if t.negatives not in NEGATIVES:
        bad("train.negatives", f"must be one of {', '.join(NEGATIVES)}, got {t.negatives!r}")
    if t.threads < 0:
        bad("train.threads", f"must be 0 (all cores) or positive, got {t.threads}")
    if v.init not in INITS:
        bad("vocab.init", f"must be one of {', '.join(INITS)}, got {v.init!r}")
    if v.lowercase not in LOWERCASE:
        bad("vocab.lowercase", f"must be one of {', '.join(LOWERCASE)}, got {v.lowercase!r}")
    if t.epochs < 1:
        bad("train.epochs", f"must be at least 1, got {t.epochs}")
    if t.window is not None and t.window < 1:
        bad("train.window", f"must be at least 1, got {t.window}")
    if t.negative < 1:
        bad("train.negative", f"must be at least 1, got {t.negative}")
    if t.batch_size < 1:
        bad("train.batch_size", f"must be at least 1, got {t.batch_size}")
    if t.lr is not None and not t.lr > 0:
        bad("train.lr", f"must be positive, got {t.lr}")
    if not 0 <= t.min_lr_fraction <= 1:
        bad("train.min_lr_fraction", f"must be between 0 and 1, got {t.min_lr_fraction}")
    if t.sample < 0:
        bad("train.sample", f"must be 0 or positive, got {t.sample}")
    if t.clip_norm < 0:
        bad("train.clip_norm", f"must be 0 (no cap) or positive, got {t.clip_norm}")
    if t.x_max <= 0:
        bad("train.x_max", f"must be positive, got {t.x_max}")
    if t.anchor is not None and t.anchor < 0:
        bad("train.anchor", f"must be 0 (off) or positive, got {t.anchor}")
    if t.checkpoint_every < 0:
        bad("train.checkpoint_every", f"must be 0 or positive, got {t.checkpoint_every}")
    if t.dim is not None and t.dim < 1:
        bad("train.dim", f"must be positive, got {t.dim}")
    if v.min_count < 1:
        bad("vocab.min_count", f"must be at least 1, got {v.min_count}")
    if v.freeze_top < 0:
        bad("vocab.freeze_top", f"must be 0 or positive, got {v.freeze_top}")
    if v.max_new < 0:
        bad("vocab.max_new", f"must be 0 or positive, got {v.max_new}")
    return config


def load_config(path: str | Path, check_values: bool = True) -> Config:
    """Read a TOML config file: keys and types always, values unless ``check_values`` is False
    (when command-line options will be merged over it first; see ``merge``)."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise EmbedtuneError("no such config file", path=source) from None
    except tomllib.TOMLDecodeError as err:
        raise EmbedtuneError(f"not valid TOML: {err}", path=source) from None
    except UnicodeDecodeError as err:
        raise EmbedtuneError(f"not valid UTF-8 TOML: {err.reason}", path=source) from None
    config = _build(Config, table, source)
    return validate(config, source) if check_values else config


def merge(config: Config, overrides: dict, source: str | None = None) -> Config:
    """Apply command-line values (None = not given) over a config, then check the values.

    overrides : flat dict of names from Config, VocabConfig or TrainConfig.
    source : the config file ``config`` was read from, for messages.
    """
    top, vocab, train = {}, {}, {}
    vocab_names = {f.name for f in fields(VocabConfig)}
    train_names = {f.name for f in fields(TrainConfig)}
    for name, value in overrides.items():
        if value is None:
            continue
        if name in vocab_names:
            vocab[name] = value
        elif name in train_names:
            train[name] = value
        else:
            top[name] = value
    return validate(
        dataclasses.replace(
            config,
            **top,
            vocab=dataclasses.replace(config.vocab, **vocab),
            train=dataclasses.replace(config.train, **train),
        ),
        source,
        frozenset(top) | frozenset(vocab) | frozenset(train),
    )


def resolve(config: Config) -> Config:
    """The config with every "decided later" value decided: the objective (auto: glove when
    ``config.format`` is GloVe's, since GloVe's objective made such vectors; sgns otherwise), then
    the window, optimizer and anchor that objective uses by default. Idempotent."""
    t = config.train
    objective = t.objective
    if objective == "auto":
        objective = "glove" if config.format == "glove" else "sgns"
    defaults = OBJECTIVE_DEFAULTS[objective]
    chosen = {key: getattr(t, key) if getattr(t, key) is not None else value for key, value in defaults.items()}
    return dataclasses.replace(config, train=dataclasses.replace(t, objective=objective, **chosen))


def learning_rate(train: TrainConfig) -> float:
    """The starting learning rate of a resolved config."""
    if train.lr is not None:
        return train.lr
    return OBJECTIVE_LR.get((train.objective, train.optimizer), DEFAULT_LR[train.optimizer])
