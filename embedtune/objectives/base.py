"""What an objective is: the base class every objective of ``embedtune train`` derives from.

An objective says which rows a batch gathers and how the loss follows from them, and owns its
defaults, its checks and its summary figures. The trainer (embedtune/training/) owns everything
else: the split tables, freezing, merging, capping, the optimizers, checkpoints and progress.

Adding an objective ``name``:

1. One file, ``embedtune/objectives/<name>.py``, with ``class <Name>(Objective)``. It sets
   ``name``, ``help`` (its line in ``--objective``'s help), ``keys`` (its own config keys and their
   options: frozen dataclasses of ``embedtune.config.keys.OwnKeys`` whose fields are ``key(...)``s, one for
   [train] and, if it has any, one for the file's top level), ``defaults`` (a value for each config key left to the
   objective: at least window, optimizer, anchor and epochs), ``settings`` (the keys it reads beyond
   the shared ones, which the dry run reports) and ``word_keys``, and implements ``__init__``, ``side_start``,
   ``chunks``, ``units``, ``batches``, ``side_ids`` and ``loss`` (shapes below), and ``padding_batch``
   to run on several workers; where it needs them, ``learning_rates``, ``init_window``, ``no_pairs_hint``, ``check``, ``summary``, ``report``,
   ``open_corpus``, ``memory`` (the dry run's estimate) and ``compiled_step`` (a faster step than
   TensorFlow's); what runs it supports (``modes``), what a run reads, refuses and writes
   (``input_files``, ``output_files``, ``check_run``, ``write_outputs``, ...), and what the dry run and
   the finished run say (``describe``: a class of embedtune/objectives/describe.py, ``Describe`` by default):
   embedtune/run.py and the command ask these, and name no objective.
   It imports TensorFlow as ``from embedtune._tf import lazy as tf``: the config and the dry run
   read the class without importing TensorFlow (tests/test_dry_run.py checks it).
2. One registry line in ``embedtune/objectives/__init__.py``: ``"<name>": <Name>,`` (or, from
   another package, an entry point ``<name> = "module:<Name>"`` in the group ``embedtune.objectives``).
   The config's ``train.objective`` values and keys and the CLI's ``--objective`` choices and options
   come from that table. The module takes the config's classes from ``embedtune.config.schema`` and never
   imports embedtune.config (which reads the registry: tests/test_layout.py checks for the circle).
3. Its tests: a file ``tests/test_<name>.py`` that trains through ``embedtune.training.train`` (or
   the CLI) on ``data/sample/`` and checks frozen rows bit-identical and the loss falling
   (tests/test_objectives.py shows the smallest such objective; tests/test_plugin_objective.py the
   same with an option of its own, registered by an entry point).

An objective solved in closed form, without a corpus or the loop (retrofit), sets ``closed_form`` to a
``ClosedForm`` (its fit and its dry run) instead of implementing the batch methods.

The step and the workers ask an objective only through declared methods with defaults: a compiled
step (``compiles``, ``why_not_compiled``, ``compiled_step``); how its batches split over workers
(``reads_lines``, ``share_index``, ``batch_unit``, ``padding_batch``); what runs it supports (``modes``).
The tests' one-process emulation of several workers splits and joins batches itself (tests/debug_worker.py).

Local ids. The trainer gives the corpus words of a run local ids, trainable words first:
``[0, rows.n_trainable)`` trainable, then frozen ones (``LocalRows``). Word-table ids in a batch
are local ids; the step reads trainable rows from the variable and frozen rows from the input
matrix, and drops the gradient of frozen rows and padding.

The objective's own table (the side table: context vectors for sgns, biases for glove) has one
row per local word plus a sink row; rows from ``side_fixed_from`` on are read but never updated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from embedtune.config.keys import OwnKeys
from embedtune.errors import EmbedtuneError
from embedtune.newwords.defaults import DEFAULT_METHOD
from embedtune.newwords.defaults import DEFAULT_WINDOW as INIT_WINDOW
from embedtune.objectives.describe import Describe


@dataclass(frozen=True)
class Modes:
    """The runs an objective supports, declared: the run, the API and the workers read these, never its
    name. Several local workers: an objective that implements ``padding_batch``; a compiled step:
    ``compiles`` (it depends on the config)."""

    corpus: bool = True               # a run reads CORPUS (False: only its own input files, retrofit's lexicons)
    parameter_servers: bool = False   # TF_CONFIG with ps tasks: its tables sharded over servers (distribute/ps.py)


@dataclass(frozen=True)
class ClosedForm:
    """An objective solved in closed form, without a corpus, batches or the loop (retrofit): the two calls
    its run and its dry run make, instead of the loop's."""

    fit: Callable      # (vectors, resolved config, on_plan, resume) -> (vectors, plan, stats)
    dry_run: Callable  # (the vectors' outline: words, no matrix; resolved config, lowercase, resume, workers) -> the dry run's description


class Objective:
    """An objective over the local rows of a run.

    Class attributes (read without building one, by the config, the dry run and the CLI):

    name : the ``--objective`` value
    help : what it trains, a few words for ``--objective``'s help
    keys : its own config keys, as ``OwnKeys`` dataclasses (``SkipGramKeys``, ...): flat in the file and on
        the command line (``[train] negative = 3``, ``--negative 3``), checked and offered as options of
        ``embedtune train`` in a section of their own; read typed, ``train.keys_of(SkipGramKeys).negative``
        (``config.keys_of(cls)`` for a class of the top level, ``table = ""``)
    for_formats : vector formats for which ``--objective auto`` means this objective (the one that made
        such vectors); auto_default : the objective auto means otherwise (exactly one of the registry)
    defaults : {config key: value} for [train] keys left unset (None), its own among them, such as
        {"window": 5, "optimizer": "sgd", "anchor": 0.0, "epochs": 5}; ``config.resolve`` fills
        them in
    learning_rates : {optimizer: lr} where this objective starts better than the optimizer's own
        default (``config.DEFAULT_LR``); say next to it what measured it
    new_word_start : the new words' start (``vocab.init``, embedtune.newwords) when the config leaves it unset;
        the new words' own default unless the objective measured a cheaper one that trains as well
    settings : the ``TrainConfig`` keys it reads beyond the shared ones (for the dry run's report)
    closed_form : for an objective fitted without batches (no corpus, no loop), its ``ClosedForm``; else None
    modes : the runs it supports (``Modes``: reads a corpus, parameter servers)
    describe : what a dry run and a finished run say about it, a line each (embedtune.objectives.describe)
    word_keys : the batch entries holding word-table (local) ids, each [B] int
    distinct_ids : a batch's word ids (over all word keys) are distinct, and so are its side ids,
        apart from padding, frozen and fixed rows: the trainer takes each slice as a row's whole
        gradient and skips merging (classify, whose batches list each distinct word once)
    joins_batches : several workers' batches make one global batch (``join``) that the compiled step
        takes (sgns, glove, classify): the gathered step's workers then exchange batches, not gradients,
        and import no TensorFlow (embedtune/distribute/gathered.py)

    Instance attributes, set by ``__init__``:

    slices : float array of shape = [n_trainable], the word slices a trainable row gets in one
        epoch (expected); the anchor's per-epoch pull is spread over them
    side_fixed_from : side rows from this id on are never updated (None: all train)
    """

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    keys: ClassVar[tuple[type[OwnKeys], ...]] = ()
    for_formats: ClassVar[tuple[str, ...]] = ()
    auto_default: ClassVar[bool] = False
    defaults: ClassVar[dict] = {}
    learning_rates: ClassVar[dict] = {}
    new_word_start: ClassVar[str] = DEFAULT_METHOD
    settings: ClassVar[tuple] = ()
    closed_form: ClassVar[ClosedForm | None] = None
    modes: ClassVar[Modes] = Modes()
    describe: ClassVar[type[Describe]] = Describe
    word_keys: ClassVar[tuple] = ()
    # chunks() reads the corpus's lines as it goes: a worker of a multi-worker run reads its share of
    # the lines (embedtune/distribute/); else the chunks come from what the objective holds, the same on every
    # worker, and a worker takes its share of each chunk's units
    reads_lines: ClassVar[bool] = False
    distinct_ids: ClassVar[bool] = False
    joins_batches: ClassVar[bool] = False

    side_fixed_from: int | None = None
    slices: np.ndarray
    # Built from shares of the lines and holding one (classify on a worker): its chunks are that share's
    # own, as those of an objective that reads lines are; None: the whole corpus's (see ``reads_lines``)
    share_index: int | None = None

    def __init__(self, rows, train, corpus=None):
        """rows : LocalRows of the run; train : the resolved TrainConfig; corpus : the Corpus (read by
        objectives that count before training)."""
        raise NotImplementedError

    # --- what the run decides from the class, before any training --------------------------------
    @classmethod
    def init_window(cls, train) -> int:
        """The context window that new words' starting vectors are taken from (embedtune.newwords).

        init's own window (5, the best on the recovery benchmark's validation words:
        benchmarks/README.md, recovery), unless the objective trains on such windows itself (sgns:
        its training window)."""
        return INIT_WINDOW

    @classmethod
    def no_pairs_hint(cls, train) -> str:
        """Text added to the "no training pairs" error after the window clause: what setting of this
        objective may have removed the pairs, and what to try ("" when none)."""
        return ""

    @classmethod
    def open_corpus(cls, source, config, **options):
        """The corpus as this objective reads it, from ``source`` (a path, "-" or sentences);
        ``options`` are embedtune.corpus.Corpus's (lowercase, tokenize, vocabulary). Plain text here;
        classify reads labelled lines."""
        from embedtune.corpus import Corpus

        return Corpus(source, **options)

    @classmethod
    def check_corpus_start(cls, config) -> None:
        """Corpus.check_start for the config's corpus as this objective reads it (as open_corpus opens
        it), and for any file of its own read the same way (classify's --valid)."""
        from embedtune.corpus import Corpus

        Corpus.check_start(config.corpus)

    @classmethod
    def memory(cls, train, dim: int, n_local: int, corpus_words: int, corpus_lines: int,
               units: int | None = None) -> tuple[int, int]:
        """The dry run's estimate (embedtune/dryrun/estimate.py), in bytes, of what this objective holds at
        its peak: (its side table, its pairs and batches on the host). ``units``: what ``set_up_units``
        counted (None: not counted). Here: a table one float wide (a bias a word) and nothing kept on
        the host."""
        return (n_local + 1) * 4, 0

    @classmethod
    def set_up_units(cls, train, corpus, run) -> int | None:
        """For the dry run: the units this objective's set-up holds at its peak (glove: its distinct
        pairs), counted as training counts them from the counted ``corpus`` and the ``run``
        (dryrun.runplan.RunPlan), for ``memory``; None (here): ``memory`` bounds them without a count."""
        return None

    # --- what a run reads, refuses and reports (embedtune/run.py and the command around it) ---------
    # Read from the class, before the vectors load: the command names no objective, it asks these.
    @classmethod
    def argument_problem(cls, config) -> str | None:
        """What the run's arguments lack or have too much of for this objective, as a usage error
        (exit 2), or None; CORPUS missing is the run's own check, from ``modes.corpus``."""
        return None

    @classmethod
    def input_files(cls, config) -> list[tuple[str | None, str]]:
        """(path, what) of the files this objective reads besides VECTORS and CORPUS, as the config
        names them (None: not given): checked before any work, and never an output's target."""
        return []

    @classmethod
    def output_files(cls, config) -> list[tuple[str | None, str]]:
        """(path, option) of the files this objective writes besides the output vectors (None: not
        given), checked to be writable before any work; ``write_outputs`` writes them."""
        return []

    @classmethod
    def check_run(cls, config, resume: bool, workers: int) -> None:
        """Raise EmbedtuneError for a run this objective refuses before any work: a --resume, a
        checkpoint folder or ``workers`` > 1 local processes it cannot take."""

    @classmethod
    def dry_run_reads(cls, corpus) -> None:
        """Read what training would read beyond the counted corpus, for its errors (classify: --valid)."""

    @classmethod
    def write_outputs(cls, result, config) -> None:
        """Write this objective's own outputs (``output_files``) from a finished run's ``result``
        (embedtune.run.RunResult), after the output vectors."""

    # --- checks and figures ----------------------------------------------------------------------
    def check(self, corpus) -> None:
        """Raise EmbedtuneError (naming ``corpus.path``) when this corpus and these vectors cannot
        train the objective. Called once it is built, before the first step."""

    def summary(self) -> dict:
        """Objective-specific figures added to the run's stats (the summary and ``--json``)."""
        return {}

    def report(self, words, side) -> tuple[dict, object | None]:
        """Figures read off the trained tables, for the run's stats, and the objective's own trained
        model that is not vectors (``TrainResult.model``; classify: its classifier), or None.

        words : a callable giving [n_local, dim], every local row as trained (frozen ones included)
        side : a callable giving the side table as trained
        Called once after the loop; the callables cost nothing to an objective that does not call them."""
        return {}, None

    @classmethod
    def compiles(cls, train) -> bool:
        """Whether ``compiled_step`` gives a step for this resolved [train] config (the trainer asks
        only then; the dry run counts the step's copies of the tables)."""
        return False

    @classmethod
    def why_not_compiled(cls, train) -> str | None:
        """For an objective with a compiled step, the option of this [train] config that rules it out
        (such as "--anchor"; the run says so once, training/step.py); None where it compiles or has none."""
        return None

    def compiled_step(self, words: np.ndarray, side: np.ndarray, matrix: np.ndarray, frozen_rows: np.ndarray,
                      n_trainable: int, threads: int, deterministic: bool = True, update=None):
        """A compiled step over numpy tables (asked where ``compiles``; the default: TensorFlow's step).

        ``update`` (training.optimizers.Update): the optimizer and the cap, and the optimizer's state
        (``update.state``). The step updates ``words`` ([T + 1, dim], trainable rows and the sink),
        ``side`` and its copies of the state in place, reading frozen local id T + i from
        ``matrix[frozen_rows[i]]``, with the TensorFlow step's arithmetic (``deterministic``) or its
        own lock-free one (otherwise, if it has one); it has ``words``, ``side``, ``word_state`` and
        ``side_state`` (the state's copies, by variable name; empty for plain sgd), ``run(batches,
        lrs) -> losses`` (numpy batches as ``batches`` makes them, in order). Asked once, when the run's
        step is chosen; a run that steps through TensorFlow never builds it."""
        return None

    # --- several workers (embedtune/distribute/): how the batches split -----------------------------
    @classmethod
    def batch_unit(cls, train) -> tuple[int, str]:
        """(the number each worker's part of the global batch must be a multiple of, the option that
        asks for it, for the error): the workers' parts together make one process's batches
        (distribute.batch_part). (1, ""): any part."""
        return 1, ""

    def padding_batch(self) -> dict:
        """A batch of this objective's shape with nothing in it (weight 0, no pairs): what a worker trains
        while others finish the epoch, asked only of a run on several workers. An objective with batches
        implements it, usually as ``self.emptied(self.batches(...))`` over one unit of zeros (local id 0)
        for each array ``units`` gives."""
        raise EmbedtuneError(f"--workers: the {self.name} objective runs in one process (it does not say "
                             "what a worker trains while others finish an epoch: Objective.padding_batch)")

    def worker_part(self, k: int, size: int) -> Objective:
        """The objective worker k of ``size`` makes its part of each global batch with (``joins_batches``; also
        the one-process emulation's parts, tests/debug_worker.py): a copy at 1 / size of the batch, its chunks
        and their cache shared with this one."""
        part = copy.copy(self)
        part.batch_size = self.batch_size // size
        return part

    def join(self, parts: list[dict]) -> dict:
        """The workers' parts of a global batch (``worker_part``'s batches, in worker order) as one batch that the
        compiled step takes: each entry concatenated, the pairs summed."""
        batch = {key: np.concatenate([part[key] for part in parts]) for key in parts[0] if key != "pairs"}
        batch["pairs"] = sum(int(part["pairs"]) for part in parts)
        return batch

    @staticmethod
    def emptied(batches: Iterable[dict]) -> dict:
        """The first of ``batches`` with nothing in it: every weight 0, no pairs (``padding_batch``)."""
        batch = next(iter(batches))
        return dict(batch, weight=np.zeros_like(batch["weight"]), pairs=0)

    # --- host side: corpus -> fixed-size batches (numpy) ------------------------------------------
    def side_start(self) -> np.ndarray:
        """float32 array of shape = [n_local + 1, width]: the side table's start; the last row is
        the sink (any value; nothing reads it)."""
        raise NotImplementedError

    def chunks(self, corpus, local_index: dict) -> Iterable:
        """One epoch's chunks; each has ``raw_tokens`` (corpus tokens it covers, for progress and the
        learning-rate decay). The n-th chunk must be the same in every epoch and on resume."""
        raise NotImplementedError

    def units(self, chunk, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """A chunk's training units (pairs, entries), shuffled with ``rng``; the first array's length
        is the number of units (progress within the chunk)."""
        raise NotImplementedError

    def batches(self, *units: np.ndarray) -> Iterator[dict]:
        """Fixed-size batches of the units: a dict of [B, ...] arrays holding every ``word_keys``
        entry, ``weight`` ([B] float32, 0 for padding) and ``pairs`` (an int: the real units)."""
        raise NotImplementedError

    # --- device side (inside the compiled step) ---------------------------------------------------
    def side_ids(self, batch: dict, rng, real, sink: int):
        """int tensor of side-table rows the batch reads, shape = [B, k]; padding (``real`` False)
        reads ``sink``. ``rng`` is the step's tf.random.Generator (negatives are drawn from it)."""
        raise NotImplementedError

    def loss(self, words: list, side, batch: dict):
        """The batch's summed loss (a scalar tensor).

        words : one [B, dim] tensor per entry of ``word_keys``, the rows of those ids
        side : [B, k, width] the side rows of ``side_ids``
        """
        raise NotImplementedError
