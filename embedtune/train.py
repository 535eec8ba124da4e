"""The training loop: plan the rows, build split tables, run the sparse step, copy back.

Tables. Only words that occur in the corpus take part, so every table follows the
corpus vocabulary, never the size of the vectors file. Their ids ("local ids") put the
trainable words first:

    local id in [0, T)      a trainable word: a row of ``trainable`` (a tf.Variable)
    local id in [T, T + F)  a frozen word: a row of the caller's matrix, read-only; the rows a
                            batch reads are gathered on the host and fed to the step

Frozen rows cannot move by construction (they are never in a variable), and optimizer
state exists only for trainable rows. ``trainable`` has one extra row, the sink, where
the slices of frozen words and padding go before they are dropped.

A run reads top to bottom in ``train``: ``setup`` (count, plan, start new words, build the
tables, resume) -> ``run_epochs`` (batches through the step) -> ``result`` (rows and summary).
Checkpoint save, prune and resume live in ``Checkpoints``; the loss read-back, divergence checks
and progress reports in ``LossLog``. What is particular to an objective lives in its class
(embedtune/objectives/).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from embedtune._tf import tf

from embedtune import checkpoint, distribute
from embedtune.checkpoint import Position
from embedtune.config import Config, TrainConfig, learning_rate, resolve
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError, TrainingInterrupted
from embedtune.init import initial_vectors, random_vectors
from embedtune.objectives import Objective, objective_class
from embedtune.objectives.base import COMPILED
from embedtune.objectives.rows import LocalRows
from embedtune.plan import Plan
from embedtune.runplan import plan_rows
from embedtune.sparse import Update, cap_rows, make_optimizer, merge_rows
from embedtune.tblog import ScalarLog
from embedtune.vectors import PatchedVectors, Vectors

JIT = os.environ.get("EMBEDTUNE_JIT", "1") == "1"   # EMBEDTUNE_JIT=0: no XLA, for debugging the step
KERNEL = COMPILED   # objectives.base: the objectives' compiled steps, unless EMBEDTUNE_KERNEL=0
LOSS_EVERY = 20  # steps between reading the loss back (a host sync)
# Batches per tf.function call (Trainer.run): the call's fixed cost (Python dispatch, the executor)
# is spread over them. A divisor of LOSS_EVERY, so that a call ends where the loss is read.
GROUP = 10


@dataclass
class Progress:
    """What the loop reports to a progress callback."""

    epoch: int
    words_done: int       # raw corpus tokens processed so far, all epochs
    words_total: int
    loss: float           # mean loss per pair since the last report
    pairs: int


@dataclass
class TrainResult:
    vectors: PatchedVectors   # the input's matrix with the trained rows in place (Vectors' interface)
    plan: Plan
    stats: dict = field(default_factory=dict)
    model: object | None = None   # the objective's own trained part that is not vectors (classify: its classifier)


class Trainer:
    """Holds the split tables and the step for one training run.

    ``corpus`` is read by objectives that count before training (glove).

    The sgns step through TensorFlow is memory-bound (each pair reads and writes 1 + 6 rows at random
    places of the tables), so it is laid out to spend the least there: the rows' gathers by
    TensorFlow's kernels outside XLA (cheaper than XLA's gather), the dense part and, for plain sgd,
    the two scatter_subs in one XLA cluster (``dense_sgd``; cheaper than TensorFlow's scatter kernel),
    GROUP batches per call (``run``) to spread the call's fixed cost. The host side (pairs, negatives,
    frozen rows, tensors) runs ahead on the batch thread (``prefetch``). Where the CPU goes:
    ``python benchmarks/step_profile.py`` (benchmarks/README.md, train_speed).

    Plain-sgd sgns (``fused``) does not take that TensorFlow step: a compiled kernel
    (embedtune/kernels.py, ``kernel``) steps numpy copies of the two tables on every core, with the
    same arithmetic, or, per-pair without --deterministic, word2vec's lock-free one, a group of
    batches a call; either costs less CPU a pair than TensorFlow's step (benchmarks/README.md,
    train_speed). The variables catch up whenever they are read.

    classify without an anchor takes a compiled kernel too, with any of the lazy optimizers and the
    cap (kernels.classify_step, TensorFlow's step's arithmetic): its batches' rows are few and read
    once, so TensorFlow's per-op cost was most of its step (benchmarks/README.md, classify).
    """

    def __init__(self, matrix: np.ndarray, plan: Plan, counts: dict, config: Config,
                 new_start: np.ndarray | None = None, corpus: Corpus | None = None):
        config = resolve(config)
        t = config.train
        self.config = config
        self.plan = plan
        self.rng = np.random.default_rng(t.seed)
        self.tf_rng = tf.random.Generator.from_seed(t.seed)

        n_pre = plan.n_pretrained
        row_counts = np.array([counts.get(w, 0) for w in plan.words], dtype=np.int64)
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
        self._trainable = tf.Variable(start, name="trainable_words")
        self.kernel = None    # the objective's compiled step, if it has one (set below)
        self._stale = False   # the kernel's tables hold steps the variables do not
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

        rows = LocalRows(row_counts[self.rows], self.n_trainable, self.rows < n_pre, local_vectors,
                         self.local_index, dim)
        self.objective = objective_class(t.objective)(rows, t, corpus)
        # The objective's own table: context vectors (sgns) or biases (glove), one row per local
        # word plus a sink. Rows from side_fixed_from on are read but never updated.
        side = self.objective.side_start()
        self._side = tf.Variable(side, name="side")
        self.side_rows = len(side) - 1   # the side table's sink row
        fixed = self.objective.side_fixed_from
        self.side_sink_from = self.side_rows if fixed is None else fixed
        # Static shapes: reading a variable's shape in the step would copy the table.
        self.trainable_shape = tf.constant([self.n_trainable + 1, dim], tf.int64)
        self.side_shape = tf.constant(side.shape, tf.int64)

        self.anchor = float(t.anchor)
        # The anchor pulls each trainable row toward where it started; only then is the start kept,
        # with the word slices a row gets per epoch, over which its pull is spread.
        self.start = tf.constant(start) if self.anchor else None
        self.slices_per_epoch = tf.constant(np.concatenate([np.maximum(self.objective.slices, 1.0), [1.0]]),
                                            tf.float32) if self.anchor else None
        self.word_opt = make_optimizer(t.optimizer, self.trainable)
        self.side_opt = make_optimizer(t.optimizer, self.side)
        self.clip_norm = float(t.clip_norm)
        # Merging repeated rows matters only to a cap, an anchor or optimizer state; plain sgd
        # adds each slice as it comes (scatter_sub sums repeated ids itself, on the CPU in index
        # order, so as deterministically as the merge), which saved ~20% of the step (notes).
        self.merge = bool(self.clip_norm or self.anchor or t.optimizer != "sgd")
        # Plain sgd's gradients and scatters in one XLA cluster (dense_sgd), and GROUP batches a
        # call (run). A multi-worker run turns both off (distribute.Worker.attach): its gradients
        # are gathered from every worker between the dense part and the update.
        self.fused = not self.merge
        self.grouped = True
        # An objective whose batches hold each row once is not merged (sparse.merge_rows); gradients
        # gathered from several workers can repeat a row, so a multi-worker run merges them.
        self.distinct = self.objective.distinct_ids
        # No autograph: the step has no tensor-dependent Python control flow, and autograph only
        # slows its tracing (benchmarks/README.md, train_speed).
        self.dense = tf.function(self._dense, jit_compile=JIT, autograph=False)
        self.gradients = tf.function(self._gradients, autograph=False)
        self.dense_sgd = tf.function(self._dense_sgd, jit_compile=JIT, autograph=False)
        self.step = tf.function(self._step, autograph=False)
        self.group_step = tf.function(self._group_step, autograph=False)
        # The objective's compiled step, if it has one for this update (sgns: plain sgd; classify:
        # without an anchor; embedtune/kernels.py), steps numpy tables (``start`` and ``side``, which
        # the variables copied) and its copy of the optimizer state, the authoritative ones while it
        # is in use; the variables catch up when read (``trainable``, ``side``: checkpoints,
        # TensorBoard, the result). A multi-worker run turns ``fused`` off before its first step,
        # and with it the kernel.
        if KERNEL and self.objective.compiles(t):
            update = Update(t.optimizer, self.clip_norm, {"word": self.word_opt, "side": self.side_opt})
            self.kernel = self.objective.compiled_step(start, side, matrix, self.frozen_rows, self.n_trainable,
                                                       t.threads or cpu_cores(), deterministic=t.deterministic,
                                                       update=update)

    @property
    def uses_kernel(self) -> bool:
        return self.kernel is not None and self.kernel.in_use

    @property
    def fused(self) -> bool:
        return self._fused

    @fused.setter
    def fused(self, value: bool) -> None:
        # Turned off by a multi-worker run (distribute.Worker.attach), and with it the kernel, which
        # the objective is told of (sgns makes its pairs in order only for the lock-free kernel).
        self._fused = value
        if self.kernel is not None:
            self.kernel.in_use = value

    @property
    def distinct(self) -> bool:
        """Each row is in a batch at most once (Objective.distinct_ids), so not merged."""
        return self._distinct

    @distinct.setter
    def distinct(self, value: bool) -> None:
        # Turned off where batches can repeat a row (gathered from several workers; the emulation's
        # concatenated shares): a kernel that updates each of a batch's rows once (classify's) steps no more.
        self._distinct = value
        if not value and self.kernel is not None and self.kernel.distinct_rows:
            self.kernel.in_use = False

    @property
    def trainable(self) -> tf.Variable:
        """[T + 1, dim] the trainable rows and the sink."""
        self._sync()
        return self._trainable

    @property
    def side(self) -> tf.Variable:
        """The objective's own table (sgns: context vectors), its sink last."""
        self._sync()
        return self._side

    def _kernel_state(self):
        """(variable, the kernel's numpy copy) of each table and each of its optimizer's variables."""
        yield self._trainable, self.kernel.words
        yield self._side, self.kernel.side
        for opt, state in ((self.word_opt, self.kernel.word_state), (self.side_opt, self.kernel.side_state)):
            for name, var in opt.variables().items():
                if name in state:
                    yield var, state[name]

    def _sync(self) -> None:
        if self._stale:
            self._stale = False
            for var, value in self._kernel_state():
                var.assign(value)

    def restored(self) -> None:
        """The variables were restored from a checkpoint: the kernel's tables and optimizer state take their values."""
        if self.kernel is not None:
            for var, value in self._kernel_state():
                value[...] = var.numpy()
            self._stale = False

    def prepare(self, batch: dict) -> dict:
        """Tensors for the step, with the frozen rows the batch reads gathered from the matrix (the
        kernel reads the numpy batch, frozen rows included, as it is)."""
        if self.uses_kernel:
            return batch
        tensors = {k: tf.constant(v) for k, v in batch.items() if k != "pairs"}
        for key in self.objective.word_keys:
            tensors["frozen_" + key] = tf.constant(self.matrix[self.source_rows[batch[key]]])
        return tensors

    def _gather_words(self, ids, frozen_words):
        """Rows for local ids: trainable ones from the variable, frozen ones as gathered by prepare."""
        is_trainable = ids < self.n_trainable
        from_var = tf.gather(self.trainable, tf.where(is_trainable, ids, self.n_trainable))
        return tf.where(is_trainable[:, None], from_var, frozen_words)

    def _gather(self, batch):
        """The rows a batch reads, gathered by TensorFlow's own kernels, outside XLA: its gather
        costs less than half of XLA's on the CPU (benchmarks/README.md, train_speed).

        Returns word rows and their ids (one of each per word key; frozen words and padding carry
        the word table's sink id), side rows and their ids (fixed side rows and padding carry the
        side table's sink id).
        """
        obj = self.objective
        real = batch["weight"] > 0
        words, word_ids = [], []
        for key in obj.word_keys:
            ids = tf.where(real, batch[key], self.n_trainable + self.n_frozen)
            words.append(self._gather_words(ids, batch["frozen_" + key]))
            word_ids.append(tf.minimum(ids, self.n_trainable))   # frozen -> the sink row
        side_ids = obj.side_ids(batch, self.tf_rng, real, self.side_rows)
        side = tf.gather(self.side, side_ids)
        side_ids = tf.where(side_ids >= self.side_sink_from, self.side_rows, side_ids)
        return words, word_ids, side, side_ids

    def _gradients(self, batch):
        """Loss and per-slice gradients of a batch, without updating anything.

        Returns loss, word slices (ids [n], grads [n, dim]), side slices (ids [m], grads [m, width]).
        Frozen words, fixed side rows and padding get the sink id of their table.
        """
        words, word_ids, side, side_ids = self._gather(batch)
        loss, word_grads, side_ids, side_grads = self.dense(batch, words, side, side_ids)
        return loss, tf.concat(word_ids, 0), word_grads, side_ids, side_grads

    def _dense(self, batch, words, side, side_ids):
        """The dense part of the step (XLA-compiled): loss and gradients from gathered rows.

        Returns loss, word grads [n, dim] (the word keys' rows, concatenated), side ids [m] and
        side grads [m, width].
        """
        # Differentiate with respect to the gathered rows, not the variables: the gradient of a
        # gather from a variable carries dense_shape = tf.shape(variable), a read that copies the
        # whole table once it has had a sparse update.
        with tf.GradientTape() as tape:
            tape.watch(words + [side])
            loss = self.objective.loss(words, side, batch)
        *word_grads, side_grads = tape.gradient(loss, words + [side])
        return (loss, tf.concat(word_grads, 0), tf.reshape(side_ids, [-1]),
                tf.reshape(side_grads, [-1, self.side.shape[1]]))

    def _dense_sgd(self, batch, words, word_ids, side, side_ids, lr):
        """Plain sgd's whole update, in one XLA cluster: the dense part and both scatter_subs.
        XLA's scatter on the CPU costs less than TensorFlow's kernel (with its IndexedSlices and the lr
        product; benchmarks/README.md, train_speed), and it walks the slices in order, as deterministic
        as TensorFlow's. Frozen rows' and padding's slices land on the sink rows, which nothing reads."""
        loss, word_grads, side_ids, side_grads = self._dense(batch, words, side, side_ids)
        self.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
        self.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
        return loss

    def _step(self, batch, lr):
        if self.fused:
            words, word_ids, side, side_ids = self._gather(batch)
            return self.dense_sgd(batch, words, tf.concat(word_ids, 0), side, side_ids, lr)
        loss, word_ids, word_grads, side_ids, side_grads = self.gradients(batch)
        if not self.merge:
            # Frozen rows' and padding's slices land on the sink rows, which nothing reads.
            self.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
            self.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
            return loss
        word_grad = tf.IndexedSlices(word_grads, word_ids, self.trainable_shape)
        side_grad = tf.IndexedSlices(side_grads, side_ids, self.side_shape)
        distinct = self.distinct
        rows, grads, *slices = merge_rows(word_grad, sink=self.n_trainable, counts=bool(self.anchor), distinct=distinct)
        step = self.word_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)   # frozen rows were dropped
        if self.anchor:
            # The anchor term anchor/2 * |w - start|^2 of each row, once per epoch, spread over
            # the steps that read the row in proportion to its slices in each; taken as a proximal
            # step (its exact minimiser next to the update just made) with the step size the
            # optimizer just used (proximal adagrad, for adagrad), so that it weighs against the
            # loss as written, and is stable for any weight: a huge anchor keeps rows at their
            # start. Against a word's evidence, which grows with its count, its weight shrinks.
            pull = step * (self.anchor * slices[0] / tf.gather(self.slices_per_epoch, rows))[:, None]
            moved = tf.gather(self.trainable, rows)
            self.trainable.scatter_update(tf.IndexedSlices(
                (moved + pull * tf.gather(self.start, rows)) / (1 + pull), rows))
        rows, grads = merge_rows(side_grad, sink=self.side_rows, distinct=distinct)
        self.side_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        return loss

    def run(self, tensors: list[dict], lrs: list[float]) -> list[tf.Tensor]:
        """Steps over batches ``tensors`` at learning rates ``lrs``, in order; their losses.

        A full group (GROUP batches) is one call; a shorter one (where the loop must act between
        batches) goes a step at a time, so that only one group length is ever traced.
        """
        if self.uses_kernel:
            self._stale = True
            return self.kernel.run(tensors, lrs)
        if len(tensors) == GROUP and self.grouped:
            return tf.unstack(self.group_step(tensors, tf.constant(lrs, tf.float32)))
        return [self.step(batch, tf.constant(lr, tf.float32)) for batch, lr in zip(tensors, lrs)]

    def _group_step(self, batches: list[dict], lrs: tf.Tensor) -> tf.Tensor:
        """Several steps in one call: batches[i] at lrs[i], in order; returns their losses [S].

        Each is the same graph as ``step`` (the same XLA-compiled gradients, the same scatters, the
        negatives drawn in the same order), so a run's bits do not depend on how batches are grouped.
        """
        return tf.stack([self._step(batch, lrs[i]) for i, batch in enumerate(batches)])

    def tf_checkpoint(self) -> tf.train.Checkpoint:
        """Everything that changes during training, for checkpoints."""
        state = {"trainable": self.trainable, "side": self.side, "rng": self.tf_rng}
        for side, opt in (("word", self.word_opt), ("side", self.side_opt)):
            for name, var in opt.variables().items():
                state[f"{side}_{name}"] = var
        return tf.train.Checkpoint(**state)

    def trained_matrix(self) -> np.ndarray:
        """[T, dim] the trainable rows now."""
        if self.uses_kernel:
            return self.kernel.words[: self.n_trainable]
        return self.trainable.numpy()[: self.n_trainable]

    def local_matrix(self) -> np.ndarray:
        """[n_local, dim] every local row now: the trainable ones, then the frozen ones."""
        return np.concatenate([self.trained_matrix(), self.matrix[self.rows[self.n_trainable:]]])


@dataclass
class Batch:
    """A batch ready for the step, and the position of the run once it is trained."""

    tensors: dict
    pairs: int
    chunk: int            # the chunk it comes from
    batch: int            # its number in the chunk, plus one
    chunk_rng: dict       # the random state at the chunk's start
    words_done: int
    shares: list | None = None   # a multi-worker run's: every worker's position after it (Position.shares)


def epoch_batches(trainer: Trainer, corpus: Corpus, start: Position, total_words: int) -> Iterator[Batch]:
    """The batches of epoch ``start.epoch`` from ``start``'s chunk and batch on.

    The pairs of a chunk depend only on the random state at its start, which a checkpoint keeps,
    so a resumed run makes the same batches.
    """
    chunk_start_words = (start.epoch - 1) * total_words
    for chunk_number, chunk in enumerate(trainer.objective.chunks(corpus, trainer.local_index)):
        if chunk_number < start.chunk:   # resuming: already trained
            chunk_start_words += chunk.raw_tokens
            continue
        resuming = chunk_number == start.chunk and start.batch
        if resuming and start.chunk_rng is not None:
            trainer.rng.bit_generator.state = start.chunk_rng
        chunk_rng = trainer.rng.bit_generator.state
        units = trainer.objective.units(chunk, trainer.rng)
        chunk_pairs = max(len(units[0]), 1)
        pairs_done = 0
        for number, batch in enumerate(trainer.objective.batches(*units)):
            pairs_done += batch["pairs"]
            if resuming and number < start.batch:
                continue
            yield Batch(trainer.prepare(batch), batch["pairs"], chunk_number, number + 1, chunk_rng,
                        chunk_start_words + chunk.raw_tokens * pairs_done // chunk_pairs)
        chunk_start_words += chunk.raw_tokens


def step_groups(batches: Iterator[Batch], steps: int, train: TrainConfig) -> Iterator[list[Batch]]:
    """``batches`` in runs of up to GROUP for Trainer.run, each ending at every step after which the
    loop acts: a multiple of GROUP, LOSS_EVERY or checkpoint_every, max_steps, max_words, and the
    end. ``steps``: the steps done before the first batch. Runs are aligned to step numbers, so a
    resumed run groups its batches as the uninterrupted one did from the next multiple on."""
    group = []
    for batch in batches:
        group.append(batch)
        steps += 1
        if (steps % GROUP == 0 or steps % LOSS_EVERY == 0
                or (train.checkpoint_every and steps % train.checkpoint_every == 0)
                or (train.max_steps and steps >= train.max_steps)
                or (train.max_words and batch.words_done >= train.max_words)):
            yield group
            group = []
    if group:
        yield group


PREFETCH = GROUP + 2   # batches made ahead of the step: a whole group is ready when its call starts


def prefetch(items: Iterator, depth: int = PREFETCH) -> Iterator:
    """``items``, made on a thread of their own up to ``depth`` ahead, so the host side (pairs,
    batches, frozen rows, tensors) runs while the step does (TensorFlow releases the GIL)."""
    ready: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def make():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if stop.is_set():
                    return
            ready.put(end)
        except BaseException as err:   # handed to the consumer, raised there
            ready.put(_Failed(err))

    thread = threading.Thread(target=make, name="embedtune-batches", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                ready.get(timeout=0.1)
            except queue.Empty:
                pass
        thread.join()


@dataclass
class _Failed:
    error: BaseException


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def use_threads(threads: int) -> None:
    """TensorFlow's intra- and inter-op thread pools. Steps run one at a time: two lock-free steps at
    once (gensim's workers) cut wall time under load but moved new words far from their true vectors
    (benchmarks/README.md, train_speed), so they were taken out. The pools can be set only before TensorFlow
    starts its runtime; in a process where it has started (a test, a notebook) they stay as
    they are."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass


# glibc's mallopt parameter, and the block size from which it is used: above a batch's small arrays
# (a 4096-pair sgns batch: 16-80 KB), below its frozen rows (4096 x 300 floats: 4.9 MB) and a
# chunk's pairs (tens of MB).
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20


def map_large_blocks() -> bool:
    """Blocks of MMAP_THRESHOLD bytes or more come straight from the system and go back to it when
    freed (glibc's mallopt; nothing elsewhere). True if it was set.

    By default glibc raises that threshold to each large block freed (up to 32 MB), after which the
    host's per-batch and per-chunk arrays stay in the heap of whichever thread freed them. On
    TensorFlow's step (with its tensors already pooled: embedtune/_tf.py) handing them back lowers the
    training loop's resident level and peak at the same speed (benchmarks/README.md, memory). Not set
    for the compiled sgns kernel: its steps are short enough that the page faults of fresh blocks
    would show in its speed, and its batches carry no frozen rows. The setting holds for the rest of
    the process.
    """
    try:
        return ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    except (OSError, AttributeError, TypeError):   # not glibc
        return False


CHECKPOINT_SECONDS = 300  # without --checkpoint-every, a checkpoint every this many seconds
# A mean loss (over LOSS_EVERY steps) above this many times the first step's is divergence. The
# first step's loss is taken before any update, so it is the start whatever the lr. 10x lies well
# above the ratios of normal runs and below what diverging runs pass in their first report
# (benchmarks/README.md, train_speed).
DIVERGED = 10


def no_pairs_message(config: Config, total_words: int, n_lines: int) -> str:
    """Why an epoch made no training pair, and what to change."""
    t = config.train
    why = f"no line has two words of the training vocabulary within --window ({t.window}) of each other"
    if total_words == n_lines:
        why = "every line holds a single word, and context windows never cross a line"
    else:
        why += objective_class(t.objective).no_pairs_hint(t)
    return f"no training pairs: {why}"


def settings_for_resume(config: Config) -> dict:
    """The settings a resumed run must share with the checkpoint (not where or how often to save,
    nor on how many threads)."""
    settings = dataclasses.asdict(config.train)
    for key in ("checkpoint_dir", "checkpoint_every", "max_steps", "max_words", "logdir", "threads"):
        settings.pop(key, None)
    settings["vocab"] = dataclasses.asdict(config.vocab)
    return settings


def train(vectors: Vectors, corpus: Corpus | None, config: Config,
          progress: Callable[[Progress], None] | None = None,
          on_plan: Callable[[Plan], None] | None = None,
          resume: bool = False,
          stop: Callable[[], bool] | None = None,
          overwrite_checkpoints: bool = False,
          note: Callable[[str], None] | None = None) -> TrainResult:
    """Continue training ``vectors`` on ``corpus``; rows frozen by the config stay bit-identical.

    corpus : None for an objective that reads none (retrofit reads ``config.lexicon``)

    resume : continue from the newest usable checkpoint in ``config.train.checkpoint_dir``
    stop : polled after every call of the step (up to GROUP batches); when it returns True a checkpoint is written (if a
        folder is set) and TrainingInterrupted is raised
    overwrite_checkpoints : a new run into a folder holding checkpoints deletes them (else it
        refuses); the folder is locked for the run's life either way
    note : told what the caller should say, such as a damaged checkpoint skipped on resume
    Returns the vectors with new words appended after the pretrained ones. The checkpoints stay
    (``checkpoint.remove`` deletes them once the caller has written the result).
    """
    config = resolve(config)
    t = config.train
    if t.dim is not None and t.dim != vectors.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, but --dim says {t.dim}",
                             config.vectors)
    objective = objective_class(t.objective)
    if objective.closed_form:
        return fit_closed_form(objective, vectors, config, on_plan, resume)
    worker = distribute.Worker.from_env()   # None unless TF_CONFIG names several workers
    with contextlib.ExitStack() as cleanup:   # the checkpoint folder's lock, released however the run ends
        checkpoints = Checkpoints.open(t, resume, overwrite_checkpoints, cleanup,
                                       writes=worker is None or worker.chief)
        run = setup(vectors, corpus, config, checkpoints, on_plan, note, worker)
        run_epochs(run, progress, stop)
        return result(run)


def fit_closed_form(objective: type[Objective], vectors: Vectors, config: Config, on_plan, resume) -> TrainResult:
    """An objective without the loop (retrofit): its fit, and every frozen row checked after it."""
    out, plan, stats = objective.fit(vectors, config, on_plan, resume)
    check = FrozenRowsCheck(vectors.matrix, plan.frozen)   # every row: the update wrote a copy
    check(0, len(vectors), out.matrix)
    stats["max_frozen_change"] = check.worst
    return TrainResult(out, plan, stats)


@dataclass
class Run:
    """A run set up: what the loop needs, what it changes (``pos``, ``stopped_at``, the timings)
    and what the result reports."""

    config: Config
    vectors: Vectors
    corpus: Corpus
    plan: Plan
    trainer: Trainer
    init: object | None           # embedtune.init's result for the new words, None without new words
    total_words: int              # corpus tokens in one epoch
    n_lines: int
    checkpoints: Checkpoints
    pos: Position                 # where the loop is (a resumed run starts where the checkpoint was)
    resumed: bool
    began: float                  # time.perf_counter() at set-up
    worker: distribute.Worker | None = None   # this process's part of a multi-worker run (TF_CONFIG)
    stopped_at: str | None = None   # the limit (max_steps, max_words) that ended the run early
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    words_at_start: int = 0


def setup(vectors: Vectors, corpus: Corpus, config: Config, checkpoints: Checkpoints,
          on_plan: Callable[[Plan], None] | None = None, note: Callable[[str], None] | None = None,
          worker: distribute.Worker | None = None) -> Run:
    """Count the corpus, plan the rows, start the new words, build the tables; restore a checkpoint
    when ``checkpoints`` was opened to resume. ``config`` resolved. With a ``worker``, the step is
    this worker's share of each global batch with the gradients of all gathered (distribute.py)."""
    t = config.train
    use_threads(t.threads or (worker and worker.threads) or cpu_cores())
    if worker is not None:   # the strategy sets up TensorFlow's runtime, before any variable
        worker.start()
    if t.deterministic:
        tf.config.experimental.enable_op_determinism()
    began = time.perf_counter()
    # A worker counts its share of the lines and gathers the others' counts (after start: collectives).
    counts, total_words, n_lines = corpus.count() if worker is None else worker.count(corpus)
    new_words, plan = plan_rows(vectors, counts, total_words, config, corpus.path)
    if on_plan is not None:
        on_plan(plan)
    # New words start from their contexts (one streaming pass), unless --init random. A corpus
    # too small to fit the a la carte map falls back to the plain context mean (init.choose_method,
    # the rule `embedtune init` follows too), and the summary says so. The window is the
    # objective's (Objective.init_window).
    # A worker reads its share of the lines for the contexts; the sums are added up over the workers.
    init = initial_vectors(vectors, corpus if worker is None else worker.init_corpus(corpus), new_words,
                           method=config.vocab.init,
                           window=objective_class(t.objective).init_window(t),
                           counts=counts, seed=t.seed) if new_words else None
    trainer = Trainer(vectors.matrix, plan, counts, config if worker is None else worker.split(config),
                      new_start=None if init is None else init.matrix,
                      corpus=corpus if worker is None else worker.objective_corpus(corpus))
    trainer.objective.check(corpus)
    settings = settings_for_resume(config)
    if worker is not None:   # gathered step, sliced batches; the split is part of the fingerprint
        worker.attach(trainer)
        settings = worker.settings(settings)
    if not trainer.uses_kernel:
        map_large_blocks()
    checkpoints.bind(trainer, vectors, corpus, total_words, n_lines, settings)
    pos = checkpoints.restore(note) if checkpoints.resuming else Position()
    return Run(config, vectors, corpus, plan, trainer, init, total_words, n_lines, checkpoints, pos,
               checkpoints.resuming, began, worker, words_at_start=pos.words_done)


def run_epochs(run: Run, progress: Callable[[Progress], None] | None = None,
               stop: Callable[[], bool] | None = None) -> None:
    """The loop: epochs of batches through the step from ``run.pos`` on, with the loss read back,
    checkpoints saved and ``stop`` polled after each step, until the epochs or a limit are done."""
    t, pos, trainer = run.config.train, run.pos, run.trainer
    lr0 = learning_rate(t)
    words_total = run.total_words * t.epochs
    writes = run.worker is None or run.worker.chief   # only a multi-worker run's chief writes logs
    tblog = ScalarLog(t.logdir, trainer, pos.words_done, t.seed) if t.logdir and writes else None
    losses = LossLog(pos, lr0, words_total, progress, tblog)
    began, cpu_began = time.perf_counter(), time.process_time()
    while pos.epoch <= t.epochs:
        if run.worker is None:
            epoch = epoch_batches(trainer, run.corpus, dataclasses.replace(pos), run.total_words)
        else:   # this worker's share of the lines, its part of each global batch (distribute.py)
            epoch = run.worker.epoch(trainer, run.corpus, dataclasses.replace(pos), run.total_words)
        with contextlib.closing(prefetch(epoch)) as batches:
            groups = step_groups(batches, pos.steps, t) if run.worker is None else run.worker.groups(batches, pos, t)
            for group in groups:   # several batches per call (speed)
                # Linear decay by corpus position, as word2vec does: each batch's from the words before it.
                lrs = [lr0 * max(1.0 - done / words_total, t.min_lr_fraction)
                       for done in [pos.words_done] + [batch.words_done for batch in group[:-1]]]
                for batch, loss, lr in zip(group, trainer.run([batch.tensors for batch in group], lrs), lrs):
                    losses.add(loss, batch.pairs, lr)
                    pos.pairs += batch.pairs
                    pos.steps += 1
                    pos.chunk, pos.batch, pos.chunk_rng = batch.chunk, batch.batch, batch.chunk_rng
                    pos.words_done, pos.shares = batch.words_done, batch.shares
                    if pos.steps % LOSS_EVERY == 0:
                        losses.flush()
                # A group ends wherever the loop acts (step_groups), so it acts here, after the group.
                if run.checkpoints.due(pos):
                    losses.flush()
                    run.checkpoints.save(pos)
                if stop is not None and stop():
                    losses.flush()
                    raise TrainingInterrupted(run.checkpoints.save(pos), pos)
                run.stopped_at = limit_reached(t, pos)
                if run.stopped_at:
                    break
        losses.flush()
        if not pos.pairs:
            raise EmbedtuneError(no_pairs_message(run.config, run.total_words, run.n_lines), run.corpus.path)
        if run.stopped_at:
            break
        pos.words_done = pos.epoch * run.total_words
        pos.epoch, pos.chunk, pos.batch, pos.chunk_rng, pos.shares = pos.epoch + 1, 0, 0, None, None
    run.train_seconds = time.perf_counter() - began
    if run.worker is not None:
        run.worker.finish(trainer)
    run.train_cpu_seconds = time.process_time() - cpu_began
    if tblog is not None:
        tblog.close()


def result(run: Run) -> TrainResult:
    """The output (the input matrix with the trained rows in place) and the run's summary figures."""
    t, pos, trainer, plan, init = run.config.train, run.pos, run.trainer, run.plan, run.init
    lr0 = learning_rate(t)
    # The output is the input matrix with the trained rows put in their place, read a block at a
    # time by the writers: no second copy of the table (1.2 GB for 1M x 300, 3.6 GB for 3M x 300).
    trained_rows = trainer.rows[: trainer.n_trainable]
    trained = trainer.trained_matrix()
    if not np.isfinite(trained).all():
        raise EmbedtuneError(f"training diverged (rows with NaN or infinity); lower --lr (it was {lr0:g}) "
                             "or cap rows with --clip-norm")
    out = PatchedVectors(plan.words, run.vectors.matrix, trained_rows, trained)

    history = pos.loss_history
    seconds = run.train_seconds
    stats = {
        **plan.summary(),
        "objective": t.objective,
        "optimizer": t.optimizer,
        "lr": lr0,
        "window": t.window,
        "anchor": t.anchor,
        "epochs": t.epochs,
        "corpus_words": run.total_words,
        "corpus_lines": run.n_lines,
        "trained_rows": int(trainer.n_trainable),
        "steps": pos.steps,
        "pairs": pos.pairs,
        "words_per_second": round((pos.words_done - run.words_at_start) / seconds) if seconds > 0 else None,
        "train_seconds": round(seconds, 3),
        "train_cpu_seconds": round(run.train_cpu_seconds, 3),   # every thread of the process
        "total_seconds": round(time.perf_counter() - run.began, 3),
        "loss_first": history[0] if history else None,
        "loss_last": history[-1] if history else None,
        "loss_history": history,
        "resumed": run.resumed,
        "workers": 1 if run.worker is None else run.worker.size,
        "stopped_at_limit": run.stopped_at,
        "words_done": pos.words_done,
        "init": init.stats["method"] if init else run.config.vocab.init,
        "init_note": init.stats.get("method_note") if init else None,
        "loss_start": pos.loss_start,
        "new_from_context": init.n_from_context if init else 0,
        "new_too_few_contexts": init.n_too_few if init else 0,   # and, for form-context, no known spelling
        "new_from_spelling_only": init.stats.get("from_form_only", 0) if init else 0,
        "max_frozen_change": max_frozen_change(run.vectors.matrix, trained_rows, trained, plan.frozen),
        **trainer.objective.summary(),
    }
    figures, model = trainer.objective.report(trainer.local_matrix, lambda: trainer.side.numpy())
    stats.update(figures)
    return TrainResult(out, plan, stats, model)


class Checkpoints:
    """Checkpoint save, prune and resume for one run: the locked folder (``checkpoint.Folder``,
    which prunes), the run's fingerprint and when it last saved. Without a folder it saves nothing."""

    def __init__(self, folder: checkpoint.Folder | None, every: int, resuming: bool = False, writes: bool = True):
        self.folder = folder
        self.writes = writes   # False: a multi-worker run's other workers, which only read the chief's
        self.resuming = resuming   # restore the folder's newest usable checkpoint before training
        self.every = every   # steps between checkpoints; 0: every CHECKPOINT_SECONDS
        self.fingerprint: dict | None = None
        self.trainer: Trainer | None = None
        self.last_saved = time.monotonic()

    @classmethod
    def open(cls, train: TrainConfig, resume: bool, overwrite: bool, cleanup: contextlib.ExitStack,
             writes: bool = True) -> Checkpoints:
        """The folder locked and checked before any work (one folder, one run), held until ``cleanup``;
        ``writes`` False: not locked, only read (the other workers of a multi-worker run)."""
        if resume and not train.checkpoint_dir:
            raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
        folder = None
        if train.checkpoint_dir:
            folder = cleanup.enter_context(checkpoint.Folder(train.checkpoint_dir))
            if writes:
                folder.open(resume, overwrite=overwrite)
        return cls(folder, train.checkpoint_every, resume, writes)

    def bind(self, trainer: Trainer, vectors: Vectors, corpus: Corpus, total_words: int, n_lines: int,
             settings: dict) -> None:
        """What is saved (the trainer's state) and what a resume must match (vectors, plan, corpus, settings)."""
        self.trainer = trainer
        if self.folder is not None:
            plan = trainer.plan
            self.fingerprint = checkpoint.fingerprint(
                plan.words, plan.frozen.tobytes(), total_words, n_lines, settings,
                matrix=vectors.matrix, corpus_digest=corpus.digest)
        self.last_saved = time.monotonic()

    def restore(self, note: Callable[[str], None] | None) -> Position:
        """The trainer's state from the newest usable checkpoint; the position to continue from."""
        found, pos = self.folder.resume(self.trainer.tf_checkpoint(), self.fingerprint, note)
        self.trainer.restored()
        if note is not None:
            note(f"resuming from {found} (step {pos.steps:,}, epoch {pos.epoch})")
        self.last_saved = time.monotonic()
        return pos

    def due(self, pos: Position) -> bool:
        if self.folder is None:
            return False
        if self.every:
            return pos.steps % self.every == 0
        return time.monotonic() - self.last_saved > CHECKPOINT_SECONDS

    def save(self, pos: Position) -> str | None:
        """Write a checkpoint at ``pos`` (the folder keeps this run's newest few); its path, or None
        without a folder."""
        self.last_saved = time.monotonic()
        if self.folder is None or not self.writes:
            return None
        return self.folder.save(self.trainer.tf_checkpoint(), pos, self.fingerprint)


class LossLog:
    """The loss bookkeeping: the step's loss tensors are summed on the host every LOSS_EVERY steps (a
    read is a host sync), checked for divergence, kept in ``pos.loss_history`` and reported to the
    progress callback and TensorBoard."""

    def __init__(self, pos: Position, lr0: float, words_total: int,
                 progress: Callable[[Progress], None] | None, tblog: ScalarLog | None):
        self.pos = pos
        self.lr0 = lr0
        self.words_total = words_total
        self.progress = progress
        self.tblog = tblog
        self.pending: list = []
        self.pairs = 0
        self.lr = lr0   # that of the last step added

    def add(self, loss, pairs: int, lr: float) -> None:
        """One step's summed loss (a tensor, not read yet) over ``pairs`` pairs at ``lr``."""
        self.pending.append(loss)
        self.pairs += pairs
        self.lr = lr
        if self.pos.loss_start is None:   # the yardstick of divergence: the loss before any update
            self.pos.loss_start = float(loss) / max(pairs, 1)

    def flush(self) -> None:
        """Read the pending losses back: their mean per pair, checked and reported."""
        pos = self.pos
        if self.pending:
            mean = float(tf.add_n(self.pending)) / max(self.pairs, 1)
            if not math.isfinite(mean):
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps} (loss {mean}); lower --lr (it was {self.lr0:g}) "
                    "or cap rows with --clip-norm")
            if pos.loss_start and mean > DIVERGED * pos.loss_start:
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps}: loss {mean:.4g} per pair, over {DIVERGED}x the "
                    f"first step's {pos.loss_start:.4g}; lower --lr (it was {self.lr0:g}) or cap each row's step "
                    f"with --clip-norm (e.g. 1)")
            pos.loss_history.append(mean)
            if self.progress is not None:
                self.progress(Progress(pos.epoch, pos.words_done, self.words_total, mean, self.pairs))
            if self.tblog is not None:
                self.tblog.write(pos.steps, pos.words_done, mean, self.lr)
        self.pending, self.pairs = [], 0


def limit_reached(train: TrainConfig, pos: Position) -> str | None:
    """The limit the run has reached ("max_steps" or "max_words"), or None."""
    if train.max_steps and pos.steps >= train.max_steps:
        return "max_steps"
    if train.max_words and pos.words_done >= train.max_words:
        return "max_words"
    return None


def max_frozen_change(before: np.ndarray, rows: np.ndarray, values: np.ndarray, frozen: np.ndarray) -> float:
    """Largest absolute change the trainer's rows make to a frozen row (0.0 when none of them is
    frozen, as the plan requires). Every other output row is the input's own row, so this is all
    that can differ in memory; what reaches the file is checked by FrozenRowsCheck as it is written."""
    hit = frozen[rows]
    if not hit.any():
        return 0.0
    old, new = before[rows[hit]], values[hit]
    if np.array_equal(old.view(np.uint32), new.view(np.uint32)):
        return 0.0
    diff = np.abs(old.astype(np.float64) - new.astype(np.float64))
    return float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf


class FrozenRowsCheck:
    """Frozen rows as written against the rows as read: pass it as save_vectors(on_written=...).

    Each block the writer hands over holds the rows read back from the bytes it wrote; the frozen
    ones are compared bit for bit with the input matrix (the values the input file was read as).
    checked : frozen rows compared; changed : rows whose bits differ; worst : largest absolute change
    (inf for a NaN or infinity where a finite value was, 0.0 for a change of sign of zero).
    """

    def __init__(self, before: np.ndarray, frozen: np.ndarray):
        self.before = before
        self.frozen = frozen
        self.checked = 0
        self.changed = 0
        self.worst = 0.0

    def __call__(self, start: int, stop: int, written: np.ndarray) -> None:
        stop_pre = min(stop, len(self.before))   # new rows (after the pretrained ones) are never frozen
        if stop_pre <= start:
            return
        rows = self.frozen[start:stop_pre]
        old, new = self.before[start:stop_pre][rows], written[: stop_pre - start][rows]
        self.checked += len(old)
        differs = (old.view(np.uint32) != new.view(np.uint32)).any(axis=1)
        if differs.any():
            self.changed += int(differs.sum())
            diff = np.abs(old[differs].astype(np.float64) - new[differs].astype(np.float64))
            self.worst = max(self.worst, float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf)
