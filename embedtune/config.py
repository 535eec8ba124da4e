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
    init: str = "form-context"          # start of new words: form-context | alacarte | context-mean | random (docs/new-words.md)
    lowercase: str = "auto"             # auto (follow the vectors: GloVe is lower-case) | yes | no
    tokenize: str = "auto"              # auto (split punctuation off where the vectors lack the token) | none
    strict_lists: bool = False          # a list word missing from the vocabulary is an error, not a note


@dataclass(frozen=True)
class TrainConfig:
    """None: decided by the objective (its class's ``defaults``; see ``resolve``)."""

    objective: str = "auto"             # auto (glove for GloVe-format vectors, else sgns) | sgns | glove | retrofit
                                        # | classify (labelled lines, fastText's supervised format)
    epochs: int | None = None           # None: 5 (sgns, glove); 20 rounds for retrofit
    window: int | None = None           # maximum distance; None: 5 for sgns (each center draws 1..5), 10 for glove
    negative: int = 5                   # negative samples per (center, context) pair
    negatives: str = "per-pair"         # sgns: per-pair (word2vec's) | shared by 16 pairs: no cheaper than per-pair's
                                        # lock-free kernel and lower recovery R@10 (benchmarks/README.md, train_speed)
    sample: float = 1e-3                # frequent-word subsampling threshold (0 = off)
    lr: float | None = None             # None: 0.025 for sgd, 0.05 for adagrad (glove: 0.1), 0.001 for adam
    min_lr_fraction: float = 1e-4       # linear decay ends at lr * this
    batch_size: int | None = None       # pairs per step (classify: lines); None: the objective's, else DEFAULT_BATCH_SIZE
    optimizer: str | None = None        # sgd | adagrad | adam, all lazy (only the batch's rows)
    clip_norm: float = 0.0              # cap on each merged row gradient's L2 norm (0 = no cap; docs/training.md)
    anchor: float | None = None         # L2 pull of each trainable row toward its start, per epoch (0 = off)
    repel: float | None = None          # retrofit: weight of the antonym term (None: 0.3; see objectives/retrofit.py)
    x_max: float = 2.0                  # glove: a co-occurrence count weighs min(1, (count / x_max)^0.75)
                                        # (GloVe's own default is 100; 2 was best on held-out words)
    label_prefix: str = "__label__"     # classify: tokens starting with this are labels (fastText's -label)
    word_ngrams: int = 1                # classify: also word n-grams up to this length as trainable rows (fastText's
                                        # -wordNgrams); 1 = words only
    ngram_min_count: int = 1            # classify: an n-gram becomes a row at this many training-line occurrences
    context_init: str = "zeros"         # zeros (word2vec) | word; zeros: lower loss (benchmarks/README.md, recovery)
    seed: int = 1
    dim: int | None = None              # None: the dimension of the vectors file
    deterministic: bool = False         # op determinism: two runs give byte-identical output (slower)
    threads: int = 0                    # CPU threads of TensorFlow's pools and the sgns kernel (0 = all cores)
    checkpoint_dir: str | None = None   # write checkpoints here (and --resume from here)
    checkpoint_every: int = 0           # steps between checkpoints (0 = every 5 minutes)
    max_steps: int = 0                  # stop after this many steps, output written as usual (0 = no limit)
    max_words: int = 0                  # stop after this many raw corpus words, all epochs (0 = no limit)
    logdir: str | None = None           # write TensorBoard scalars (loss, words/s, lr, row changes) here


@dataclass(frozen=True)
class Config:
    vectors: str | None = None          # pretrained vectors file
    corpus: str | None = None           # text corpus, one sentence or paragraph per line; "-" = stdin
    lexicon: str | None = None          # retrofit: synonyms, 'word neighbour ...' per line (Faruqui's format)
    antonyms: str | None = None         # retrofit: antonyms, same format
    valid: str | None = None            # classify: labelled lines to report accuracy on, before and after
    save_classifier: str | None = None  # classify: write the trained classifier here (docs/classify.md: its format)
    output: str | None = None           # output vectors file; "-" = stdout
    format: str | None = None           # input vectors format (None: detect)
    to: str | None = None               # output format (None: same as the input)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


OPTIMIZERS = ("sgd", "adagrad", "adam")
DEFAULT_LR = {"sgd": 0.025, "adagrad": 0.05, "adam": 0.001}
DEFAULT_BATCH_SIZE = 4096   # pairs a step, unless the objective's defaults say otherwise (classify: lines)
# Each objective's defaults (window, optimizer, anchor, epochs, ...) and the learning rates it
# starts better at live on its class (embedtune/objectives/); ``resolve`` and ``learning_rate``
# read them there, and train.objective's values are that registry's names.
LOWERCASE = ("auto", "yes", "no")
TOKENIZE = ("auto", "none")   # embedtune.corpus.TOKENIZE
INITS = ("alacarte", "context-mean", "form-context", "random")   # embedtune.init.METHODS
CONTEXT_INITS = ("zeros", "word")
NEGATIVES = ("shared", "per-pair")   # embedtune.objectives.sgns.NEGATIVES


FLOAT32_MAX = 3.4028234663852886e38
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Range:
    """The values a number may take: low..high; ``low_open``: low itself is not allowed;
    ``zero``: what 0 means, where it is allowed and means something special."""

    low: float
    high: float
    low_open: bool = False
    zero: str = ""

    def text(self) -> str:
        """The range as docs/training.md and --help say it."""
        low = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        return low if self.high in (INT64_MAX, FLOAT32_MAX) else f"{self.low:g} .. {self.high:,}"


# Every number of the config, and of `embedtune init`'s options, with the values it may take.
# Upper bounds guard against what would fail late or take all memory (arithmetic, not measured):
# a batch of 2^20 pairs with 5 negatives at 300 dimensions gathers 2^20 x 6 x 300 float32 context
# values, 7.5 GB; a window of 100 gives a 1M-token chunk about 10^8 sgns pairs (0.8 GB of ids). Seeds are numpy's and TensorFlow's
# common range. Counts that only compare with corpus counts go up to int64.
RANGES = {
    "train.epochs": Range(1, 1_000_000),
    "train.window": Range(1, 100),
    "train.negative": Range(1, 100),
    "train.sample": Range(0, 1, zero="off"),
    "train.lr": Range(0, FLOAT32_MAX, low_open=True),
    "train.min_lr_fraction": Range(0, 1),
    "train.batch_size": Range(1, 1 << 20),
    "train.clip_norm": Range(0, FLOAT32_MAX, zero="no cap"),
    "train.anchor": Range(0, FLOAT32_MAX, zero="off"),
    "train.x_max": Range(0, FLOAT32_MAX, low_open=True),
    "train.seed": Range(0, 2**32 - 1),
    "train.dim": Range(1, 1 << 16),
    "train.checkpoint_every": Range(0, INT64_MAX, zero="every 5 minutes"),
    "train.max_steps": Range(0, INT64_MAX, zero="no limit"),
    "train.max_words": Range(0, INT64_MAX, zero="no limit"),
    "train.repel": Range(0, FLOAT32_MAX, zero="off"),
    "train.word_ngrams": Range(1, 5),   # each length adds about a row a corpus token (classify's n-gram rows)
    "train.ngram_min_count": Range(1, INT64_MAX),
    "train.threads": Range(0, 1024, zero="all cores"),   # TensorFlow's pools; more is a typo
    "vocab.freeze_top": Range(0, INT64_MAX, zero="off"),
    "vocab.min_count": Range(1, INT64_MAX),
    "vocab.max_new": Range(0, INT64_MAX, zero="all"),
    # embedtune init's own options
    "init.min_contexts": Range(1, INT64_MAX),
    "init.fit_min_count": Range(1, INT64_MAX),
    "init.sif": Range(0, FLOAT32_MAX, zero="all weigh 1"),
}


def range_problem(key: str, value) -> str | None:
    """What is wrong with ``value`` for ``key`` of RANGES ("must be ..., got ..."), or None."""
    r = RANGES[key]
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return f"must be a finite number, got {value}"
    if isinstance(value, float) and abs(value) > FLOAT32_MAX:
        return f"is beyond float32's range (largest {FLOAT32_MAX:.4g}), got {value:g}"
    zero = f" ({r.zero})" if r.zero else ""
    if r.low_open and value <= r.low:
        return f"must be positive, got {value}"
    if r.low == 0 and r.high == 1 and not 0 <= value <= 1:
        return f"must be between 0{zero} and 1, got {value}"
    if value < r.low:
        return f"must be 0{zero} or positive, got {value}" if r.low == 0 else f"must be at least {r.low:g}, got {value}"
    if value > r.high:
        return f"must be at most {r.high:,}, got {value}"
    return None


def _numbers(config: Config):
    """(key, value) for every number of the config that is set."""
    for table, values in (("train", config.train), ("vocab", config.vocab)):
        for f in fields(values):
            key = f"{table}.{f.name}"
            value = getattr(values, f.name)
            if key in RANGES and value is not None:
                yield key, value


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
    from embedtune.objectives import AUTO, OBJECTIVES   # the objective modules import this one

    if t.objective != AUTO and t.objective not in OBJECTIVES:
        bad("train.objective", f"must be one of {', '.join((AUTO, *OBJECTIVES))}, got {t.objective!r}")
    if t.context_init not in CONTEXT_INITS:
        bad("train.context_init", f"must be one of {', '.join(CONTEXT_INITS)}, got {t.context_init!r}")
    if t.negatives not in NEGATIVES:
        bad("train.negatives", f"must be one of {', '.join(NEGATIVES)}, got {t.negatives!r}")
    if v.init not in INITS:
        bad("vocab.init", f"must be one of {', '.join(INITS)}, got {v.init!r}")
    if v.lowercase not in LOWERCASE:
        bad("vocab.lowercase", f"must be one of {', '.join(LOWERCASE)}, got {v.lowercase!r}")
    if v.tokenize not in TOKENIZE:
        bad("vocab.tokenize", f"must be one of {', '.join(TOKENIZE)}, got {v.tokenize!r}")
    for key in ("lexicon", "antonyms"):
        if getattr(config, key) is not None and t.objective != "retrofit":
            bad(key, f"is read only by --objective retrofit (the objective here is {t.objective})")
    for key in ("valid", "save_classifier"):
        if getattr(config, key) is not None and t.objective != "classify":
            bad(key, f"is used only by --objective classify (the objective here is {t.objective})")
    for key in ("format", "to"):
        name = getattr(config, key)
        if name is not None:
            from embedtune.formats import FORMAT_NAMES   # numpy, so only when a name is given

            if name not in FORMAT_NAMES:
                bad(key, f"must be one of {', '.join(FORMAT_NAMES)}, got {name!r}")
    for key, value in _numbers(config):
        problem = range_problem(key, value)
        if problem:
            bad(key, problem)
    for key in _classify_only(t):   # after the ranges: a value out of range is the first thing to fix
        if t.objective != AUTO:     # auto is decided in resolve, which says the same
            bad(f"train.{key}", f"is used only by --objective classify (the objective here is {t.objective})")
    return config


def _classify_only(t: TrainConfig) -> list[str]:
    """classify's keys that ``t`` sets away from their defaults under another objective."""
    return [key for key in ("word_ngrams", "ngram_min_count")
            if getattr(t, key) != getattr(TrainConfig, key) and t.objective != "classify"]


def load_config(path: str | Path, check_values: bool = True) -> Config:
    """Read a TOML config file: keys and types always, values unless ``check_values`` is False
    (when command-line options will be merged over it first; see ``merge``)."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
        # A byte-order mark (Windows editors write one) is not part of the TOML.
        table = tomllib.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except FileNotFoundError:
        raise EmbedtuneError("no such config file", path=source) from None
    except IsADirectoryError:
        raise EmbedtuneError("is a folder, expected a config file", path=source) from None
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
    from embedtune.objectives import AUTO, objective_class

    t = config.train
    objective = t.objective
    if objective == AUTO:
        objective = "glove" if config.format == "glove" else "sgns"
        for key in _classify_only(t):
            raise EmbedtuneError(f"--{key.replace('_', '-')} (train.{key}) is used only by --objective classify "
                                 f"(the objective here is {objective}: give --objective classify)")
    defaults = objective_class(objective).defaults
    chosen = {key: getattr(t, key) if getattr(t, key) is not None else value for key, value in defaults.items()}
    if t.batch_size is None and "batch_size" not in chosen:
        chosen["batch_size"] = DEFAULT_BATCH_SIZE
    return dataclasses.replace(config, train=dataclasses.replace(t, objective=objective, **chosen))


def learning_rate(train: TrainConfig) -> float:
    """The starting learning rate of a resolved config."""
    if train.lr is not None:
        return train.lr
    from embedtune.objectives import OBJECTIVES

    objective = OBJECTIVES.get(train.objective)   # "auto" unresolved: the optimizer's own
    rates = objective.learning_rates if objective is not None else {}
    return rates.get(train.optimizer, DEFAULT_LR[train.optimizer])
