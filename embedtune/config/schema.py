"""The config's classes, written out: ``Config`` (the file's top level), ``VocabConfig`` ([vocab]) and
``TrainConfig`` ([train]), frozen dataclasses a type checker and an IDE see.

Each shared key is declared once, as a field (``embedtune.config.keys.key``: type, default, range, help, option).
Each objective's own keys are its own frozen dataclass (``embedtune.config.keys.OwnKeys``, declared in its module
and named by its class's ``keys``); a config holds the values that differ from their defaults in ``own``
and an objective reads its typed instance: ``config.train.keys_of(SkipGramKeys).negative``. A leaf
module: it imports only embedtune.config.keys and embedtune.newwords.defaults (which imports nothing: --init's
choices are the new words' own), so the objectives import it and embedtune.config (loading, merging,
checking, resolving; it knows the registry) imports both, with no circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from embedtune.config.keys import (FLOAT32_MAX, INT64_MAX, IO, NEW_WORDS, ROWS, RUNS, TRAINING, Key, OwnKeys, Range,
                            check_values, key)
from embedtune.newwords.defaults import METHODS

__all__ = ["Config", "VocabConfig", "TrainConfig", "AUTO", "OPTIMIZERS", "LOWERCASE", "TOKENIZE", "INITS"]

AUTO = "auto"   # train.objective: the vectors' format's objective, else the default (objectives.auto_objective)
OPTIMIZERS = ("sgd", "adagrad", "adam")
LOWERCASE = ("auto", "yes", "no")
TOKENIZE = ("auto", "none")   # embedtune.corpus.TOKENIZE
INITS = METHODS   # --init's choices: the new words' own list (embedtune/newwords/defaults.py)

K = TypeVar("K", bound=OwnKeys)


class _HoldsOwn:
    """What TrainConfig and Config share: ``own``, the objectives' keys of their table (a dataclass field
    of each), and ``keys_of``, which reads one objective's typed instance from it."""

    table: ClassVar[str]
    own: tuple[OwnKeys, ...]

    def __post_init__(self) -> None:
        """``own`` as a config holds it: one instance per OwnKeys class of its table, those equal to their
        class's defaults left out (so a config equals another with the same values, however built), in
        a fixed order; a tuple, so that the config stays hashable. Every value is checked against its
        declaration (``check_values``)."""
        check_values(self)
        kept: dict[type, OwnKeys] = {}
        for keys in self.own:
            if not isinstance(keys, OwnKeys) or keys.table != self.table:
                raise TypeError(f"own: expected OwnKeys of table {self.table!r}, got {keys!r}")
            if type(keys) in kept:
                raise TypeError(f"own: {type(keys).__qualname__} given twice")
            if keys != type(keys)():
                kept[type(keys)] = keys
        order = sorted(kept.values(), key=lambda k: (type(k).__module__, type(k).__qualname__))
        object.__setattr__(self, "own", tuple(order))

    def keys_of(self, cls: type[K]) -> K:
        """The values of an objective's own keys of this table (``cls``: its OwnKeys class; its defaults
        where none was set)."""
        return next((keys for keys in self.own if type(keys) is cls), None) or cls()

    def _holder(self, key: Key):
        """Where ``key``'s value is an attribute: this config, or the instance of the objective's class."""
        is_own = key.holder is not None and issubclass(key.holder, OwnKeys)
        return self.keys_of(key.holder) if is_own else self   # type: ignore[arg-type,type-var]


@dataclass(frozen=True)
class VocabConfig:
    """Which rows may move. Freeze rules win over train rules; see embedtune.plan."""

    table: ClassVar[str] = "vocab"

    freeze_list: str | None = key(path="read", section=ROWS, help="File of words to freeze, one per line.")
    train_list: str | None = key(path="read", section=ROWS, help="File of words to train; the rest are frozen.")
    freeze_top: int = key(0, range=Range(0, INT64_MAX, zero="off"), section=ROWS, shown_default="0 = off",
                          help="Freeze the first N rows of VECTORS (the most frequent words).")
    freeze_pattern: str | None = key(pattern=True, section=ROWS, help="Freeze pretrained words matching this regex.")
    train_pattern: str | None = key(pattern=True, section=ROWS,
                                    help="Train words matching this regex; the rest are frozen.")
    freeze_pretrained: bool = key(False, section=ROWS, help="Freeze every pretrained row: only new words train.")
    min_count: int | None = key(range=Range(1, INT64_MAX), section=NEW_WORDS, shown_default="5; none with --new-words",
                                help="Add corpus words seen this often as new rows.")
    new_words: str | None = key(
        path="read", section=NEW_WORDS,
        help="File of words, one a line, to add as new rows whatever their count (spelling alone when the "
             "corpus lacks them); no other word is added unless --min-count is given.")
    max_new: int = key(0, range=Range(0, INT64_MAX, zero="all"), section=NEW_WORDS,
                       help="Add at most this many new words, most frequent first (0 = all).")
    # None: the objective's (its class's ``new_word_start``; see embedtune.config.resolve)
    init: str | None = key(choices=INITS, section=NEW_WORDS,
                           help="Start of new words: from their contexts (a la carte map or plain mean), from contexts "
                                "and spelling (form-context: better for rare words), or random (docs/new-words.md).")
    lowercase: str = key("auto", choices=LOWERCASE, section=IO,
                         help="Lower-case the corpus; auto: when the vectors' own words are lower-case.")
    tokenize: str = key("auto", choices=TOKENIZE, section=IO,
                        help="auto: a token VECTORS lacks loses its leading/trailing punctuation ('said.' -> 'said' "
                             "'.'); none: whitespace tokens as they are (pre-tokenized corpora).")
    strict_lists: bool = key(False, section=ROWS, help="A list word missing from the vocabulary is an error.")

    def __post_init__(self) -> None:
        check_values(self)

    def value(self, key: Key):
        """The value of a declared key of [vocab]."""
        return getattr(self, key.name)


# Upper bounds guard against what would fail late or take all memory (arithmetic, not measured):
# a batch of 2^20 pairs with 5 negatives at 300 dimensions gathers 2^20 x 6 x 300 float32 context
# values, 7.5 GB; a window of 100 gives a 1M-token chunk about 10^8 (center, context) pairs (0.8 GB
# of ids). Seeds are numpy's and TensorFlow's common range. Counts that only compare with corpus
# counts go up to int64.
@dataclass(frozen=True)
class TrainConfig(_HoldsOwn):
    """The keys every objective shares, and in ``own`` each objective's own (``keys_of``). None: decided
    by the objective (its class's ``defaults``; see embedtune.config.resolve)."""

    table: ClassVar[str] = "train"

    objective: str = key(AUTO, section=TRAINING,
                         help="What to train (each objective's options are in a section of their own below).")
    epochs: int | None = key(range=Range(1, 1_000_000), section=TRAINING,
                             help="Passes over the corpus (or the objective's rounds).")
    window: int | None = key(range=Range(1, 100), section=TRAINING, help="Maximum context distance.")
    lr: float | None = key(range=Range(0, FLOAT32_MAX, low_open=True), section=TRAINING,
                           help="Starting learning rate, decayed linearly.")
    min_lr_fraction: float = key(1e-4, range=Range(0, 1), option=False, help="The linear decay ends at lr * this.")
    batch_size: int | None = key(range=Range(1, 1 << 20), section=TRAINING,
                                 help="Training units (pairs, lines) per step.")
    optimizer: str | None = key(choices=OPTIMIZERS, section=TRAINING, help="Lazy optimizer (only the batch's rows).")
    clip_norm: float = key(0.0, range=Range(0, FLOAT32_MAX, zero="no cap"), section=TRAINING,
                           help="Cap on each row's merged gradient L2 norm per step (0 = none; docs/training.md).")
    anchor: float | None = key(range=Range(0, FLOAT32_MAX, zero="off"), metavar="RHO", section=TRAINING,
                               help="Pull each trainable row toward its starting vector: RHO/2 |w - start|^2 per "
                                    "epoch, spread over the steps that read the row (0 = off).")
    seed: int = key(1, range=Range(0, 2**32 - 1), section=TRAINING, help="Random seed.")
    dim: int | None = key(range=Range(1, 1 << 16), section=TRAINING,
                          help="Expected dimension (default: that of VECTORS); a mismatch is an error.")
    deterministic: bool = key(False, section=TRAINING,
                              help="Op determinism, a seeded data order and batch-synchronous compiled steps: two "
                                   "runs give byte-identical files (slower). Without it, a compiled step may run "
                                   "lock-free on --threads threads, as word2vec's do (results vary from run to run).")
    # TensorFlow's pools; more is a typo
    threads: int = key(0, range=Range(0, 1024, zero="all cores"), section=TRAINING, shown_default="0 = all cores",
                       help="CPU threads of TensorFlow's thread pools and of the compiled steps (plain sgd, as "
                            "gensim's workers), at most: a small run's step may take fewer.")
    checkpoint_dir: str | None = key(path="folder", section=RUNS, help="Write checkpoints to this folder.")
    checkpoint_every: int = key(0, range=Range(0, INT64_MAX, zero="every 5 minutes"), section=RUNS,
                                help="Steps between checkpoints.", shown_default="every 5 minutes")
    max_steps: int = key(0, range=Range(0, INT64_MAX, zero="no limit"), metavar="N", section=RUNS,
                         help="Stop after N steps and write the output as a finished run does (0 = no limit); for CI.")
    max_words: int = key(0, range=Range(0, INT64_MAX, zero="no limit"), metavar="N", section=RUNS,
                         help="Stop after N corpus words (all epochs counted) and write the output (0 = no limit).")
    sync_every: int = key(100, range=Range(0, INT64_MAX, zero="every step one global batch of all workers'"),
                          metavar="STEPS", section=RUNS,
                          help="--workers: steps each worker trains on its own lines between two exchanges of the "
                               "rows it changed, summed on every worker (docs/workers.md); 0 = every step one "
                               "global batch of every worker's part, stepped alike by all (slower).")
    peer_timeout: float = key(120.0, range=Range(0, FLOAT32_MAX, low_open=True), metavar="SECONDS", section=RUNS,
                              help="--workers or TF_CONFIG: seconds each worker waits for the others to start (and a "
                                   "parameter-server task for its chief, the chief for its servers) before an error "
                                   "naming the missing ones (Ctrl-C stops the wait).")
    logdir: str | None = key(path="folder", section=RUNS,
                             help="Write TensorBoard scalars here (loss, words/s, lr, row changes), and the "
                                  "projector's new and most-moved rows at the end: tensorboard --logdir DIR.")
    # the objectives' own keys of [train] that differ from their defaults, an OwnKeys instance each
    own: tuple[OwnKeys, ...] = ()

    def value(self, key: Key):
        """The value of a declared key of [train], shared or an objective's."""
        return getattr(self._holder(key), key.name)


@dataclass(frozen=True)
class Config(_HoldsOwn):
    """The whole config: the file's top level, [vocab] and [train]. Paths are relative to the directory
    embedtune is run from."""

    table: ClassVar[str] = ""

    # the file's top level: inputs and outputs (arguments and hand-written options on the command line)
    vectors: str | None = key(option=False, path="read", help="Pretrained vectors file.")
    corpus: str | None = key(option=False, path="read",
                             help='Text corpus, one sentence or paragraph per line; "-" = stdin.')
    output: str | None = key(option=False, path="write", help='Output vectors file; "-" = stdout.')
    format: str | None = key(option=False, help="Input vectors format (None: detect).")
    to: str | None = key(option=False, help="Output format (None: the same as the input).")
    report: str | None = key(path="write", metavar="FILE", section=IO,
                             help="Write an HTML page of what the run did (embedtune report's, with the run's own "
                                  "figures).")
    vocab: VocabConfig = field(default_factory=VocabConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    # the objectives' own keys of the top level that differ from their defaults, an OwnKeys instance each
    own: tuple[OwnKeys, ...] = ()

    def value(self, key: Key):
        """The value of any declared key, of whichever table."""
        if key.table:
            return (self.vocab if key.table == "vocab" else self.train).value(key)
        return getattr(self._holder(key), key.name)
