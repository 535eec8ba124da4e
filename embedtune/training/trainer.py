"""The tables of one run: local ids, the trainable rows (a variable), the frozen rows (the caller's
matrix, read-only), the objective's own table and the optimizers; the step that updates them is
chosen once, when they are built (training/step.py).

Only words that occur in the corpus take part, so every table follows the corpus vocabulary, never
the size of the vectors file. Their ids ("local ids") put the trainable words first:

    local id in [0, T)      a trainable word: a row of ``trainable`` (a tf.Variable)
    local id in [T, T + F)  a frozen word: a row of the caller's matrix, read-only; the rows a
                            batch reads are gathered on the host and fed to the step

Frozen rows cannot move by construction (they are never in a variable), and optimizer
state exists only for trainable rows. ``trainable`` has one extra row, the sink, where
the slices of frozen words and padding go before they are dropped.

The TensorFlow side (the variables, the optimizers, the random generator) is made when first asked
for: TensorFlow's step asks at once, a compiled step only when its tables are read as variables (a
multi-worker strategy's), so a one-process compiled run never imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import numpy as np

from embedtune._tf import lazy as tf

from embedtune.config import Config
from embedtune.corpus import Corpus
from embedtune.newwords.common import random_vectors
from embedtune.objectives import objective_class
from embedtune.objectives.rows import LocalRows
from embedtune.plan.rules import Plan
from embedtune.training.optimizers import make_optimizer
from embedtune.training.step import Step, choose_step

# Builds a run's step from its trainer and the numpy starts of its two tables (which a compiled step
# takes as its own), telling ``note`` why a step was not the objective's compiled one.
StepFactory = Callable[["Trainer", np.ndarray, np.ndarray, "Callable[[str], None] | None"], Step]


class Trainer:
    """Holds the split tables, the optimizers and the step for one training run.

    ``corpus`` is read by objectives that count before training (glove). ``make_step`` builds the
    step (default: ``step.choose_step``, one process); a multi-worker strategy passes its own.
    ``config`` is resolved (``config.resolve``: the run resolves once).
    """

    def __init__(self, matrix: np.ndarray, plan: Plan, counts: dict, config: Config,
                 new_start: np.ndarray | None = None, corpus: Corpus | None = None,
                 make_step: StepFactory | None = None, note: Callable[[str], None] | None = None):
        t = config.train
        self.config = config
        self.plan = plan
        self.rng = np.random.default_rng(t.seed)

        n_pre = plan.n_pretrained
        row_counts = plan.row_counts(counts)
        in_corpus = row_counts > 0
        # Local ids: trainable words of the corpus first, then frozen ones.
        trainable_rows = np.flatnonzero(in_corpus & ~plan.frozen)
        frozen_rows = np.flatnonzero(in_corpus & plan.frozen)
        self.rows = np.concatenate([trainable_rows, frozen_rows])   # local id -> plan row
        self.n_trainable = len(trainable_rows)
        self.local_index = {plan.words[r]: i for i, r in enumerate(self.rows)}

        dim = matrix.shape[1]
        start = np.empty((self.n_trainable + 1, dim), np.float32)   # + sink row
        pre = trainable_rows < n_pre
        start[:self.n_trainable][pre] = matrix[trainable_rows[pre]]
        if new_start is None:
            new_start = random_vectors(plan.n_new, dim, self.rng)   # word2vec's start
        start[:self.n_trainable][~pre] = new_start[trainable_rows[~pre] - n_pre]
        start[-1] = 0
        self._start = start
        # Frozen rows stay in the caller's matrix, read-only, and are gathered on the host for each
        # batch (prepare): no copy of the table is made, in numpy or in TensorFlow.
        self.matrix = matrix
        self.frozen_rows = frozen_rows if len(frozen_rows) else np.zeros(1, np.int64)
        self.n_frozen = len(frozen_rows)
        # Local id -> the matrix row prepare reads for it (trainable ids read any frozen row; the step
        # takes theirs from the variable): one indexing, cheaper than clipping and indexing twice. Not
        # np.take: it is slow on a Fortran-ordered matrix such as the benchmark's GloVe .npy
        # (benchmarks/README.md, train_speed, "A cheaper prepare").
        self.source_rows = np.concatenate([np.full(self.n_trainable, self.frozen_rows[0]), self.frozen_rows])
        self.dim = dim

        def local_vectors(ids: np.ndarray) -> np.ndarray:
            """Starting rows of local ids."""
            ids = np.asarray(ids)
            out = np.empty((len(ids), dim), np.float32)
            frozen = ids >= self.n_trainable
            out[~frozen] = start[ids[~frozen]]
            out[frozen] = matrix[self.frozen_rows[ids[frozen] - self.n_trainable]]
            return out

        def outside(word: str) -> np.ndarray | None:
            """A pretrained word's row when it is not a local word (the vectors file's, left as it is)."""
            row = plan.index.get(word)
            return None if row is None or row >= n_pre or word in self.local_index else matrix[row]

        rows = LocalRows(row_counts[self.rows], self.n_trainable, self.rows < n_pre, local_vectors,
                         self.local_index, dim, outside if plan.index is not None else None)
        self.objective = objective_class(t.objective)(rows, t, corpus)
        # The objective's own table: context vectors (sgns) or biases (glove), one row per local
        # word plus a sink. Rows from side_fixed_from on are read but never updated.
        side = self.objective.side_start()
        self._side_start = side   # until the variable is made (TensorFlow's step) or for good (a compiled step's table)
        self._side_size = side.shape
        self.side_rows = len(side) - 1   # the side table's sink row
        fixed = self.objective.side_fixed_from
        self.side_sink_from = self.side_rows if fixed is None else fixed

        self.anchor = float(t.anchor)
        self._fixed_as_variables = False   # the anchor's tables as constants (make_tensorflow_state)
        self.clip_norm = float(t.clip_norm)
        # Merging repeated rows matters only to a cap, an anchor or optimizer state; plain sgd
        # adds each slice as it comes (scatter_sub sums repeated ids itself, on the CPU in index
        # order, so as deterministically as the merge), which costs less than merging (benchmarks/README.md,
        # train_speed, "Figures moved from code comments").
        self.merge = bool(self.clip_norm or self.anchor or t.optimizer != "sgd")
        # Chosen once, here: ``start`` and ``side`` are the numpy tables a compiled step takes as its own.
        self.step: Step = (make_step or choose_step)(self, start, side, note)

    # --- the TensorFlow side, made when first asked for (eagerly: TensorFlowStep asks in its constructor) ---
    @cached_property
    def tf_rng(self) -> tf.random.Generator:
        return tf.random.Generator.from_seed(self.config.train.seed)

    @cached_property
    def trainable_variable(self) -> tf.Variable:
        """[T + 1, dim] the trainable rows' variable as it is: what the step (or a strategy standing in
        for it) reads and writes. A compiled step's steps reach it only when synced: other readers
        take ``trainable``."""
        # A compiled step's numpy table, as it is now (the step has it, in place of ``_start``).
        return tf.Variable(self._start, name="trainable_words")

    @cached_property
    def side_variable(self) -> tf.Variable:
        """The objective's own table's variable as it is (see ``trainable_variable``; others take ``side``)."""
        side, self._side_start = self._side_start, None   # the variable holds it now (or the compiled step)
        return tf.Variable(side, name="side")

    @cached_property
    def trainable_shape(self) -> tf.Tensor:
        """Static shapes: reading a variable's shape in the step would copy the table."""
        return tf.constant([self.n_trainable + 1, self.dim], tf.int64)

    @cached_property
    def side_shape(self) -> tf.Tensor:
        return tf.constant(self._side_size, tf.int64)

    @cached_property
    def start(self) -> tf.Tensor | tf.Variable | None:
        """The anchor pulls each trainable row toward where it started; only then is the start kept
        (TensorFlow's step: ``_start`` is not stepped in place)."""
        return self._fixed(tf.constant(self._start), "start") if self.anchor else None

    @cached_property
    def slices_per_epoch(self) -> tf.Tensor | tf.Variable | None:
        """With an anchor, the word slices a row gets per epoch, over which its pull is spread."""
        if not self.anchor:
            return None
        slices = tf.constant(np.concatenate([np.maximum(self.objective.slices, 1.0), [1.0]]), tf.float32)
        return self._fixed(slices, "slices_per_epoch")

    def _fixed(self, table: tf.Tensor, name: str) -> tf.Tensor | tf.Variable:
        """A table the step reads and never updates: a constant, or a variable no optimizer sees where
        the step asked for one (``make_tensorflow_state``)."""
        return tf.Variable(table, trainable=False, name=name) if self._fixed_as_variables else table

    @cached_property
    def word_opt(self):
        return make_optimizer(self.config.train.optimizer, self.trainable_variable)

    @cached_property
    def side_opt(self):
        return make_optimizer(self.config.train.optimizer, self.side_variable)

    def make_tensorflow_state(self, fixed_as_variables: bool = False) -> None:
        """Every TensorFlow object of the run made now, outside any traced function (a variable made
        while tracing is refused, and a constant made there would be a graph tensor).

        fixed_as_variables : the anchor's fixed tables (``start``, ``slices_per_epoch``) as variables,
            made first, not constants: a step whose tables live on other machines (parameter servers:
            distribute/ps.py) places them as it places the tables, where a constant would travel with
            every call.
        """
        self._fixed_as_variables = fixed_as_variables
        fixed = ("start", "slices_per_epoch")
        names = ("tf_rng", "trainable_variable", "side_variable", "trainable_shape", "side_shape", *fixed,
                 "word_opt", "side_opt")
        if fixed_as_variables:   # made before the tables, so placed before them on the servers
            names = fixed + tuple(name for name in names if name not in fixed)
        for name in names:
            getattr(self, name)
        self._start = None   # the variable (and the anchor's constant) hold it now; a compiled step its own

    @property
    def uses_kernel(self) -> bool:
        """The run steps through the objective's compiled step (numpy tables), not TensorFlow's."""
        return self.step.compiled

    @property
    def kernel(self):
        """The objective's compiled step in use, or None."""
        return self.step.kernel

    @property
    def trainable(self) -> tf.Variable:
        """[T + 1, dim] the trainable rows and the sink, with every step taken."""
        self.step.sync()
        return self.trainable_variable

    @property
    def side(self) -> tf.Variable:
        """The objective's own table (sgns: context vectors), its sink last, with every step taken."""
        self.step.sync()
        return self.side_variable

    def prepare(self, batch: dict) -> dict:
        """An objective's numpy batch as the step takes it."""
        return self.step.prepare(batch)

    def run(self, tensors: list[dict], lrs: list[float]) -> list:
        """Steps over prepared batches ``tensors`` at learning rates ``lrs``, in order; their losses."""
        return self.step.run(tensors, lrs)

    def restored(self, arrays: dict[str, np.ndarray] | None = None) -> None:
        """The run's state was restored from a checkpoint: into the variables (TensorFlow's form), or read as
        ``arrays`` by name (a compiled step's archive: ``checkpoint_arrays``' names); the step takes it."""
        if arrays is not None and not self.step.compiled:   # TensorFlow's step from a compiled step's archive
            for name, var in self.checkpoint_variables().items():
                var.assign(arrays[name])
            arrays = None
        self.step.restored(arrays)

    def checkpoint_variables(self, synced: bool = True) -> dict:
        """The variables of everything that changes during training by their checkpoint names (the
        random generator aside): the tables, then each one's optimizer state; with every step taken (``synced``
        False: as they are, for CompiledStep, which pairs them with its own arrays by these names)."""
        if synced:
            self.step.sync()
        state = {"trainable": self.trainable_variable, "side": self.side_variable}
        for side, opt in (("word", self.word_opt), ("side", self.side_opt)):
            for name, var in opt.variables().items():
                state[f"{side}_{name}"] = var
        return state

    def tf_checkpoint(self) -> tf.train.Checkpoint:
        """Everything that changes during training, for TensorFlow's checkpoints."""
        return tf.train.Checkpoint(**self.checkpoint_variables(), rng=self.tf_rng)

    def checkpoint_arrays(self) -> dict[str, np.ndarray] | None:
        """A compiled step's tables and optimizer state by their checkpoint names (``tf_checkpoint``'s), its own
        arrays, for a checkpoint without TensorFlow; None where TensorFlow's variables hold them. The step's
        random draws are not the generator's: it stays at its seed, as a compiled run's checkpoint held it."""
        return self.step.arrays() if self.step.compiled else None

    def checkpoint_shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """(shape, dtype) of each of ``checkpoint_arrays``' names, what a checkpoint's archive must hold."""
        arrays = self.checkpoint_arrays()
        if arrays is None:
            return {name: (tuple(var.shape), np.dtype(var.dtype.as_numpy_dtype))
                    for name, var in self.checkpoint_variables().items()}
        return {name: (value.shape, value.dtype) for name, value in arrays.items()}

    def trained_matrix(self) -> np.ndarray:
        """[T, dim] the trainable rows now."""
        return self.step.trained_matrix()

    def trainable_rows(self, ids: np.ndarray) -> np.ndarray:
        """[len(ids), dim] the trainable rows ``ids`` (local ids) now (TensorBoard's sample of them)."""
        return self.step.trainable_rows(ids)

    def side_matrix(self) -> np.ndarray:
        """The objective's own table now, its sink last (a compiled step's own: no variable made for it)."""
        return self.step.side_matrix()

    def local_matrix(self) -> np.ndarray:
        """[n_local, dim] every local row now: the trainable ones, then the frozen ones."""
        return np.concatenate([self.trained_matrix(), self.matrix[self.rows[self.n_trainable:]]])
