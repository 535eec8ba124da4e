"""The step: one call boundary between the loop and the arithmetic, chosen once when a run's tables are
built (``choose_step``), never switched later.

``TensorFlowStep``: gather the rows a batch reads, the loss and its gradient (an IndexedSlices), drop
frozen rows, merge repeated ids, cap each row, apply the lazy optimizer (training/optimizers.py).
``CompiledStep``: an objective's numba step (``Objective.compiled_step``, embedtune/kernels/) over numpy
copies of the tables, with the same arithmetic; the variables catch up whenever they are read.
The gathered step through TensorFlow (several workers' with --anchor, or a plugin's objective) builds its own
TensorFlowStep, with the gradients gathered from every worker (embedtune/distribute/strategy.py). TensorFlow is
imported by TensorFlowStep (or when a compiled step's tables are read as variables), not by this module:
``runs_on`` says ahead which runs will.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from embedtune._tf import lazy as tf

from embedtune import kernels
from embedtune.cores import local_cores
from embedtune.training import batches as batching
from embedtune.training.optimizers import Update, cap_rows, merge_rows

JIT = os.environ.get("EMBEDTUNE_JIT", "1") == "1"   # EMBEDTUNE_JIT=0: no XLA, for debugging the step


class Step:
    """What the loop calls: ``prepare`` a batch (on the batch thread), ``run`` a group of them."""

    compiled = False   # numpy tables of its own (the trainer's variables catch up when read)
    kernel = None      # the objective's compiled step it calls (Objective.compiled_step), if any

    def __init__(self, trainer):
        self.trainer = trainer

    def prepare(self, batch: dict) -> dict:
        """An objective's numpy batch as ``run`` takes it."""
        return batch

    def run(self, batches: list[dict], lrs: list[float]) -> list:
        """Steps over prepared ``batches`` at learning rates ``lrs``, in order; their summed losses."""
        raise NotImplementedError

    def sync(self) -> None:
        """Bring the trainer's variables up to every step taken (read: checkpoints, TensorBoard, the result)."""

    def restored(self, arrays: dict[str, np.ndarray] | None = None) -> None:
        """The trainer's variables were restored from a checkpoint: step from their values (a compiled step:
        from ``arrays``, by ``arrays``' names, where it was restored from its own archive)."""

    def trained_matrix(self) -> np.ndarray:
        """[T, dim] the trainable rows now."""
        return self.trainer.trainable.numpy()[: self.trainer.n_trainable]

    def trainable_rows(self, ids: np.ndarray) -> np.ndarray:
        """[len(ids), dim] the trainable rows ``ids`` (local ids) now, without reading the whole table."""
        return tf.gather(self.trainer.trainable, ids).numpy()

    def side_matrix(self) -> np.ndarray:
        """The objective's own table now, its sink last."""
        return self.trainer.side.numpy()


def choose_step(trainer, words: np.ndarray, side: np.ndarray, note: Callable[[str], None] | None = None) -> Step:
    """One process's step: the objective's compiled one where it has one for this config, else
    TensorFlow's; ``note`` is told once why a config cannot take the compiled one."""
    objective, t = trainer.objective, trainer.config.train
    if kernels.KERNEL and objective.compiles(t):
        return CompiledStep.build(trainer, words, side)
    why = objective.why_not_compiled(t) if kernels.KERNEL else None
    if why and note is not None:
        note(f"{why}: {objective.name} steps through TensorFlow's step, not its compiled one")
    return TensorFlowStep(trainer)


def runs_on(objective, train, one_process: bool = True) -> tuple[bool, bool]:
    """(compiled, tensorflow): whether a run of this objective and resolved [train] config will step
    through the objective's compiled (numba) step, and whether it will use TensorFlow, said before
    its tables are built, for what run.count_while_importing imports ahead while the corpus is
    counted. A compiled run uses none of it, whatever its optimizer (the compiled step's state starts in
    numpy: optimizers.Update) and whatever its objective reports (from the step's numpy tables:
    ``Step.side_matrix``), checkpoints (the step's own arrays: training/checkpoints/state.py) and TensorBoard's
    scalars (training/eventfile.py) included. ``one_process``: False for a worker that steps through
    TensorFlow's strategy (parameter servers; the gathered step of an objective whose batches do not join); an
    averaging worker, or one of joined batches, steps as one process (distribute.steps_as_one_process). Only a
    hint: what a run uses is imported when first used either way."""
    compiled = one_process and kernels.KERNEL and objective.compiles(train)
    return compiled, not compiled


class CompiledStep(Step):
    """The objective's compiled step (embedtune/kernels/) over numpy tables: ``words`` and ``side`` (the
    starts the variables copied) and its copy of the optimizer state, the authoritative ones while
    it steps; the variables take their values when read (``sync``)."""

    compiled = True

    def __init__(self, trainer, kernel):
        super().__init__(trainer)
        self.kernel = kernel
        self.stale = False   # the kernel's tables hold steps the variables do not

    @classmethod
    def build(cls, trainer, words: np.ndarray, side: np.ndarray, deterministic: bool | None = None) -> CompiledStep:
        """``deterministic``: the strict batch-synchronous kernel whatever the config says (None: as it says)."""
        t = trainer.config.train
        update = Update(t.optimizer, trainer.clip_norm, {"word": words.shape, "side": side.shape})
        strict = t.deterministic if deterministic is None else deterministic
        kernel = trainer.objective.compiled_step(words, side, trainer.matrix, trainer.frozen_rows,
                                                 trainer.n_trainable, t.threads or local_cores(),
                                                 deterministic=strict, update=update)
        return cls(trainer, kernel)

    def run(self, batches, lrs):
        self.stale = True
        return self.kernel.run(batches, lrs)

    def _state(self):
        """(variable, the kernel's numpy copy) of each table and each of its optimizer's variables."""
        variables = self.trainer.checkpoint_variables(synced=False)
        return [(variables[name], value) for name, value in self.arrays().items()]

    def arrays(self) -> dict[str, np.ndarray]:
        """The kernel's tables and optimizer state themselves, by their checkpoint names (the variables' names:
        Trainer.checkpoint_variables), for a checkpoint without TensorFlow (Trainer.checkpoint_arrays)."""
        kernel = self.kernel
        found = {"trainable": kernel.words, "side": kernel.side}
        for table, state in (("word", kernel.word_state), ("side", kernel.side_state)):
            found.update((f"{table}_{name}", value) for name, value in state.items())
        return found

    def sync(self):
        if self.stale:
            self.stale = False
            for var, value in self._state():
                var.assign(value)

    def restored(self, arrays=None):
        if arrays is not None:   # its own archive: any variable made before is behind
            for name, value in self.arrays().items():
                value[...] = arrays[name]
            self.stale = True
            return
        for var, value in self._state():
            value[...] = var.numpy()
        self.stale = False

    def trained_matrix(self):
        return self.kernel.words[: self.trainer.n_trainable]

    def trainable_rows(self, ids):
        return self.kernel.words[ids]

    def side_matrix(self):
        return self.kernel.side


class TensorFlowStep(Step):
    """TensorFlow's step over the trainer's variables.

    The sgns step through TensorFlow is memory-bound (each pair reads and writes 1 + 6 rows at random
    places of the tables), so it is laid out to spend the least there: the rows' gathers by
    TensorFlow's kernels outside XLA (cheaper than XLA's gather), the dense part and, for plain sgd,
    the two scatter_subs in one XLA cluster (``dense_sgd``; cheaper than TensorFlow's scatter kernel),
    GROUP batches per call (``run``) to spread the call's fixed cost. The host side (pairs, negatives,
    frozen rows, tensors) runs ahead on the batch thread (``prefetch``). Where the CPU goes:
    ``python benchmarks/step_profile.py`` (benchmarks/README.md, train_speed).

    fused : plain sgd's gradients and scatters in one XLA cluster (default: when nothing is merged)
    grouped : GROUP batches a call
    distinct : a batch holds each row once (default: ``Objective.distinct_ids``), so it is not merged;
        False where batches can repeat a row (gradients gathered from several workers)
    """

    # The anchor's fixed tables as variables, not constants (Trainer.make_tensorflow_state): for a step
    # whose tables are placed elsewhere (distribute/ps.py).
    fixed_as_variables = False

    def __init__(self, trainer, fused: bool | None = None, grouped: bool = True, distinct: bool | None = None):
        super().__init__(trainer)
        trainer.make_tensorflow_state(self.fixed_as_variables)
        self.fused = not trainer.merge if fused is None else fused
        self.grouped = grouped
        self.distinct = trainer.objective.distinct_ids if distinct is None else distinct
        # No autograph: the step has no tensor-dependent Python control flow, and autograph only
        # slows its tracing (benchmarks/README.md, train_speed).
        self.dense = tf.function(self._dense, jit_compile=JIT, autograph=False)
        self.own_gradients = tf.function(self._gradients, autograph=False)
        self.dense_sgd = tf.function(self._dense_sgd, jit_compile=JIT, autograph=False)
        self.step = tf.function(self._step, autograph=False)
        self.group_step = tf.function(self._group_step, autograph=False)

    def prepare(self, batch: dict) -> dict:
        """Tensors for the step, with the frozen rows the batch reads gathered from the matrix."""
        trainer = self.trainer
        tensors = {k: tf.constant(v) for k, v in batch.items() if k != "pairs"}
        for key in trainer.objective.word_keys:
            tensors["frozen_" + key] = tf.constant(trainer.matrix[trainer.source_rows[batch[key]]])
        return tensors

    def run(self, batches, lrs):
        """A full group (GROUP batches) is one call; a shorter one (where the loop must act between
        batches) goes a step at a time, so that only one group length is ever traced."""
        if len(batches) == batching.GROUP and self.grouped:
            return tf.unstack(self.group_step(batches, tf.constant(lrs, tf.float32)))
        return [self.step(batch, tf.constant(lr, tf.float32)) for batch, lr in zip(batches, lrs)]

    def gradients(self, batch):
        """Loss and slices the update applies (a multi-worker step gathers every worker's here)."""
        return self.own_gradients(batch)

    def _gather_words(self, ids, frozen_words):
        """Rows for local ids: trainable ones from the variable, frozen ones as gathered by prepare."""
        trainer = self.trainer
        is_trainable = ids < trainer.n_trainable
        from_var = tf.gather(trainer.trainable, tf.where(is_trainable, ids, trainer.n_trainable))
        return tf.where(is_trainable[:, None], from_var, frozen_words)

    def _gather(self, batch):
        """The rows a batch reads, gathered by TensorFlow's own kernels, outside XLA: its gather
        costs less than half of XLA's on the CPU (benchmarks/README.md, train_speed).

        Returns word rows and their ids (one of each per word key; frozen words and padding carry
        the word table's sink id), side rows and their ids (fixed side rows and padding carry the
        side table's sink id).
        """
        trainer = self.trainer
        obj = trainer.objective
        real = batch["weight"] > 0
        words, word_ids = [], []
        for key in obj.word_keys:
            ids = tf.where(real, batch[key], trainer.n_trainable + trainer.n_frozen)
            words.append(self._gather_words(ids, batch["frozen_" + key]))
            word_ids.append(tf.minimum(ids, trainer.n_trainable))   # frozen -> the sink row
        side_ids = obj.side_ids(batch, trainer.tf_rng, real, trainer.side_rows)
        side = tf.gather(trainer.side, side_ids)
        side_ids = tf.where(side_ids >= trainer.side_sink_from, trainer.side_rows, side_ids)
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
            loss = self.trainer.objective.loss(words, side, batch)
        *word_grads, side_grads = tape.gradient(loss, words + [side])
        return (loss, tf.concat(word_grads, 0), tf.reshape(side_ids, [-1]),
                tf.reshape(side_grads, [-1, self.trainer.side.shape[1]]))

    def _dense_sgd(self, batch, words, word_ids, side, side_ids, lr):
        """Plain sgd's whole update, in one XLA cluster: the dense part and both scatter_subs.
        XLA's scatter on the CPU costs less than TensorFlow's kernel (with its IndexedSlices and the lr
        product; benchmarks/README.md, train_speed), and it walks the slices in order, as deterministic
        as TensorFlow's. Frozen rows' and padding's slices land on the sink rows, which nothing reads."""
        loss, word_grads, side_ids, side_grads = self._dense(batch, words, side, side_ids)
        self.trainer.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
        self.trainer.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
        return loss

    def _step(self, batch, lr):
        trainer = self.trainer
        if self.fused:
            words, word_ids, side, side_ids = self._gather(batch)
            return self.dense_sgd(batch, words, tf.concat(word_ids, 0), side, side_ids, lr)
        loss, word_ids, word_grads, side_ids, side_grads = self.gradients(batch)
        if not trainer.merge:
            # Frozen rows' and padding's slices land on the sink rows, which nothing reads.
            trainer.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
            trainer.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
            return loss
        word_grad = tf.IndexedSlices(word_grads, word_ids, trainer.trainable_shape)
        side_grad = tf.IndexedSlices(side_grads, side_ids, trainer.side_shape)
        anchor = trainer.anchor
        rows, grads, *slices = merge_rows(word_grad, sink=trainer.n_trainable, counts=bool(anchor),
                                          distinct=self.distinct)
        step = trainer.word_opt.apply(rows, cap_rows(grads, trainer.clip_norm), lr)   # frozen rows were dropped
        if anchor:
            # The anchor term anchor/2 * |w - start|^2 of each row, once per epoch, spread over
            # the steps that read the row in proportion to its slices in each; taken as a proximal
            # step (its exact minimiser next to the update just made) with the step size the
            # optimizer just used (proximal adagrad, for adagrad), so that it weighs against the
            # loss as written, and is stable for any weight: a huge anchor keeps rows at their
            # start. Against a word's evidence, which grows with its count, its weight shrinks.
            pull = step * (anchor * slices[0] / tf.gather(trainer.slices_per_epoch, rows))[:, None]
            moved = tf.gather(trainer.trainable, rows)
            trainer.trainable.scatter_update(tf.IndexedSlices(
                (moved + pull * tf.gather(trainer.start, rows)) / (1 + pull), rows))
        rows, grads = merge_rows(side_grad, sink=trainer.side_rows, distinct=self.distinct)
        trainer.side_opt.apply(rows, cap_rows(grads, trainer.clip_norm), lr)
        return loss

    def _group_step(self, batches: list[dict], lrs: tf.Tensor) -> tf.Tensor:
        """Several steps in one call: batches[i] at lrs[i], in order; returns their losses [S].

        Each is the same graph as ``step`` (the same XLA-compiled gradients, the same scatters, the
        negatives drawn in the same order), so a run's bits do not depend on how batches are grouped.
        """
        return tf.stack([self._step(batch, lrs[i]) for i, batch in enumerate(batches)])
