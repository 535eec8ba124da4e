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
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from embedtune._tf import tf

from embedtune import checkpoint
from embedtune.checkpoint import Position
from embedtune.config import Config, learning_rate
from embedtune.corpus import Corpus, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.init import fitting_words, initial_vectors, pick_new_words, random_vectors
from embedtune.objectives.sgns import SkipGram
from embedtune.plan import Plan, make_plan
from embedtune.sparse import cap_rows, make_optimizer, merge_rows
from embedtune.vectors import Vectors

OBJECTIVES = {"sgns": SkipGram}
JIT = os.environ.get("EMBEDTUNE_JIT", "1") == "1"   # EMBEDTUNE_JIT=0: no XLA, for debugging the step
LOSS_EVERY = 20  # steps between reading the loss back (a host sync)


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
    vectors: Vectors
    plan: Plan
    stats: dict = field(default_factory=dict)


class Trainer:
    """Holds the split tables and the step for one training run."""

    def __init__(self, matrix: np.ndarray, plan: Plan, counts: dict, config: Config,
                 new_start: np.ndarray | None = None):
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
        local_counts = row_counts[self.rows]

        dim = matrix.shape[1]
        start = np.empty((self.n_trainable + 1, dim), np.float32)   # + sink row
        pre = trainable_rows < n_pre
        start[:self.n_trainable][pre] = matrix[trainable_rows[pre]]
        if new_start is None:
            new_start = random_vectors(plan.n_new, dim, self.rng)   # word2vec's start
        start[:self.n_trainable][~pre] = new_start[trainable_rows[~pre] - n_pre]
        start[-1] = 0
        self.trainable = tf.Variable(start, name="trainable_words")
        self.anchor = float(t.anchor)
        # The anchor pulls each trainable row toward where it started; only then is the start kept.
        self.start = tf.constant(start) if self.anchor else None
        # Frozen rows stay in the caller's matrix, read-only, and are gathered on the host for each
        # batch (prepare): no copy of the table is made, in numpy or in TensorFlow.
        self.matrix = matrix
        self.frozen_rows = frozen_rows if len(frozen_rows) else np.zeros(1, np.int64)
        self.n_frozen = len(frozen_rows)

        n_local = len(self.rows)
        if t.context_init == "word":
            context = np.concatenate([start[:-1], matrix[frozen_rows], np.zeros((1, dim), np.float32)])
        else:
            context = np.zeros((n_local + 1, dim), np.float32)
        self.context = tf.Variable(context, name="context")
        self.dim = dim
        self.context_rows = n_local   # the context table's sink row
        # Static shapes: reading a variable's shape in the step would copy the table.
        self.trainable_shape = tf.constant([self.n_trainable + 1, dim], tf.int64)
        self.context_shape = tf.constant([n_local + 1, dim], tf.int64)

        self.objective = OBJECTIVES[t.objective](local_counts, t)
        self.word_opt = make_optimizer(t.optimizer, self.trainable)
        self.context_opt = make_optimizer(t.optimizer, self.context)
        self.clip_norm = float(t.clip_norm)
        # No autograph: the step has no tensor-dependent Python control flow, and tracing it
        # took 1.06 s with autograph against 0.33 s without.
        self.gradients = tf.function(self._gradients, jit_compile=JIT, autograph=False)
        self.step = tf.function(self._step, autograph=False)

    def prepare(self, batch: dict) -> dict:
        """Tensors for the step, with the frozen rows the batch reads gathered from the matrix."""
        ids = batch[self.objective.word_key]
        frozen = np.clip(ids - self.n_trainable, 0, len(self.frozen_rows) - 1)
        tensors = {k: tf.constant(v) for k, v in batch.items() if k != "pairs"}
        tensors["frozen_words"] = tf.constant(self.matrix[self.frozen_rows[frozen]])
        return tensors

    def _gather_words(self, ids, frozen_words):
        """Rows for local ids: trainable ones from the variable, frozen ones as gathered by prepare."""
        is_trainable = ids < self.n_trainable
        from_var = tf.gather(self.trainable, tf.where(is_trainable, ids, self.n_trainable))
        return tf.where(is_trainable[:, None], from_var, frozen_words)

    def _gradients(self, batch):
        """Loss and per-slice gradients: the dense part of the step (XLA-compiled).

        Returns loss, word slices (ids [B], grads [B, dim]), context slices (ids [m], grads [m, dim]).
        Frozen words and padding get the sink id of their table.
        """
        obj = self.objective
        real = batch["weight"] > 0
        word_ids = tf.where(real, obj.word_ids(batch), self.n_trainable + self.n_frozen)
        context_ids = obj.context_ids(batch, self.tf_rng)
        context_ids = tf.where(real[:, None], context_ids, self.context_rows)
        # Gather outside the tape and differentiate with respect to the gathered rows: the
        # gradient of a gather from a variable carries dense_shape = tf.shape(variable), a
        # read that copies the whole table once it has had a sparse update.
        words = self._gather_words(word_ids, batch["frozen_words"])
        contexts = tf.gather(self.context, context_ids)
        with tf.GradientTape() as tape:
            tape.watch([words, contexts])
            loss = obj.loss(words, contexts, batch)
        word_grads, context_grads = tape.gradient(loss, [words, contexts])
        word_ids = tf.minimum(word_ids, self.n_trainable)   # frozen -> the sink row
        return (loss, word_ids, word_grads,
                tf.reshape(context_ids, [-1]), tf.reshape(context_grads, [-1, self.dim]))

    def _step(self, batch, lr):
        loss, word_ids, word_grads, context_ids, context_grads = self.gradients(batch)
        word_grad = tf.IndexedSlices(word_grads, word_ids, self.trainable_shape)
        context_grad = tf.IndexedSlices(context_grads, context_ids, self.context_shape)
        rows, grads = merge_rows(word_grad, sink=self.n_trainable)   # drops frozen rows and padding
        self.word_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        if self.anchor:
            # The anchor term anchor/2 * |w - start|^2 of each row in the batch, taken as a
            # proximal step (its exact minimiser next to the update just made), which is stable
            # for any weight: a huge anchor keeps rows at their start. Once per row, not per
            # occurrence, so against a word's growing evidence its weight shrinks.
            pull = lr * self.anchor
            moved = tf.gather(self.trainable, rows)
            self.trainable.scatter_update(tf.IndexedSlices(
                (moved + pull * tf.gather(self.start, rows)) / (1 + pull), rows))
        rows, grads = merge_rows(context_grad, sink=self.context_rows)
        self.context_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        return loss

    def tf_checkpoint(self) -> tf.train.Checkpoint:
        """Everything that changes during training, for checkpoints."""
        state = {"trainable": self.trainable, "context": self.context, "rng": self.tf_rng}
        for side, opt in (("word", self.word_opt), ("context", self.context_opt)):
            for name, var in opt.variables().items():
                state[f"{side}_{name}"] = var
        return tf.train.Checkpoint(**state)

    def trained_matrix(self) -> np.ndarray:
        """[T, dim] the trainable rows now."""
        return self.trainable.numpy()[: self.n_trainable]


class TrainingInterrupted(Exception):
    """The run was asked to stop; a checkpoint was written at ``checkpoint`` (None without a folder)."""

    def __init__(self, checkpoint: str | None, position: Position):
        self.checkpoint = checkpoint
        self.position = position
        super().__init__(f"stopped at step {position.steps}")


CHECKPOINT_SECONDS = 300  # without --checkpoint-every, a checkpoint every this many seconds


def settings_for_resume(config: Config) -> dict:
    """The settings a resumed run must share with the checkpoint (not where or how often to save)."""
    settings = dataclasses.asdict(config.train)
    for key in ("checkpoint_dir", "checkpoint_every"):
        settings.pop(key, None)
    settings["vocab"] = dataclasses.asdict(config.vocab)
    return settings


def train(vectors: Vectors, corpus: Corpus, config: Config,
          progress: Callable[[Progress], None] | None = None,
          on_plan: Callable[[Plan], None] | None = None,
          resume: bool = False,
          stop: Callable[[], bool] | None = None) -> TrainResult:
    """Continue training ``vectors`` on ``corpus``; rows frozen by the config stay bit-identical.

    resume : continue from the newest checkpoint in ``config.train.checkpoint_dir``
    stop : polled after every step; when it returns True a checkpoint is written (if a
        folder is set) and TrainingInterrupted is raised
    Returns the vectors with new words appended after the pretrained ones.
    """
    t = config.train
    if t.dim is not None and t.dim != vectors.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, but --dim says {t.dim}",
                             config.vectors)
    if resume and not t.checkpoint_dir:
        raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
    if t.deterministic:
        tf.config.experimental.enable_op_determinism()
    began = time.perf_counter()
    counts, total_words, n_lines = corpus.count()
    if total_words == 0:
        raise EmbedtuneError("the corpus has no words", corpus.path)
    new_words = pick_new_words(counts, vectors, config.vocab.min_count, config.vocab.max_new)
    if not new_words and not any(w in vectors.index for w in counts):
        raise EmbedtuneError(
            f"none of its {len(counts):,} distinct words is in the vectors, and none of the others is seen "
            f"--min-count ({config.vocab.min_count}) times", corpus.path)
    plan = make_plan(vectors, new_words, config.vocab)
    if on_plan is not None:
        on_plan(plan)
    if not any(counts.get(w) for w, frozen in zip(plan.words, plan.frozen) if not frozen):
        v = config.vocab
        rules = [f"{k} {getattr(v, k)}" for k in ("freeze_list", "train_list", "freeze_top", "freeze_pattern",
                                                   "train_pattern", "freeze_pretrained") if getattr(v, k)]
        raise EmbedtuneError(
            f"nothing to train: the rules ({', '.join(rules) or 'none'}) freeze every corpus word in the vectors, "
            f"and no new word is seen --min-count ({v.min_count}) times", v.freeze_list or v.train_list)
    # New words start from their contexts (one streaming pass), unless --init random. A corpus
    # too small to fit the a la carte map (fewer frequent pretrained words than dimensions)
    # falls back to the plain context mean, and the summary says so.
    method = config.vocab.init
    if method == "alacarte" and len(fitting_words(vectors, counts)) < vectors.dim:
        method = "context-mean"
    init = initial_vectors(vectors, corpus, new_words, method=method, window=t.window,
                           counts=counts, seed=t.seed) if new_words else None
    trainer = Trainer(vectors.matrix, plan, counts, config, new_start=None if init is None else init.matrix)
    fp = checkpoint.fingerprint(plan.words, plan.frozen.tobytes(), total_words, n_lines, settings_for_resume(config))
    pos = checkpoint.Position()
    if resume:
        found = checkpoint.latest(t.checkpoint_dir)
        if found is None:
            raise EmbedtuneError("--resume: no checkpoint in this folder", t.checkpoint_dir)
        pos = checkpoint.load(found, trainer.tf_checkpoint(), fp)

    lr0 = learning_rate(t)
    words_total = total_words * t.epochs
    pending_loss, pending_pairs = [], 0
    last_saved = time.monotonic()
    train_began = time.perf_counter()
    words_at_start = pos.words_done

    def save_checkpoint():
        nonlocal last_saved
        last_saved = time.monotonic()
        return checkpoint.save(t.checkpoint_dir, trainer.tf_checkpoint(), pos, fp)

    def flush():
        nonlocal pending_loss, pending_pairs
        if pending_loss:
            mean = float(tf.add_n(pending_loss)) / max(pending_pairs, 1)
            if not math.isfinite(mean):
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps} (loss {mean}); lower --lr (it was {lr0:g}) "
                    "or cap rows with --clip-norm")
            pos.loss_history.append(mean)
            if progress is not None:
                progress(Progress(pos.epoch, pos.words_done, words_total, mean, pending_pairs))
        pending_loss, pending_pairs = [], 0

    while pos.epoch <= t.epochs:
        epoch_start_words = (pos.epoch - 1) * total_words
        chunk_start_words = epoch_start_words
        for chunk_number, chunk in enumerate(id_chunks(corpus, trainer.local_index)):
            if chunk_number < pos.chunk:   # resuming: already trained
                chunk_start_words += chunk.raw_tokens
                continue
            # The pairs of a chunk depend only on the random state at its start, which a
            # checkpoint keeps, so a resumed run makes the same batches.
            if pos.chunk_rng is not None and pos.batch:
                trainer.rng.bit_generator.state = pos.chunk_rng
            else:
                pos.chunk_rng = trainer.rng.bit_generator.state
            centers, contexts = trainer.objective.pairs(chunk, trainer.rng)
            chunk_pairs = max(len(centers), 1)
            pairs_done = 0
            for batch_number, batch in enumerate(trainer.objective.batches(centers, contexts)):
                pairs_done += batch["pairs"]
                if batch_number < pos.batch:
                    continue
                # Linear decay by corpus position, as word2vec does.
                lr = lr0 * max(1.0 - pos.words_done / words_total, t.min_lr_fraction)
                pending_loss.append(trainer.step(trainer.prepare(batch), tf.constant(lr, tf.float32)))
                pending_pairs += batch["pairs"]
                pos.pairs += batch["pairs"]
                pos.steps += 1
                pos.batch = batch_number + 1
                pos.words_done = chunk_start_words + chunk.raw_tokens * pairs_done // chunk_pairs
                if pos.steps % LOSS_EVERY == 0:
                    flush()
                if t.checkpoint_dir and (
                        (t.checkpoint_every and pos.steps % t.checkpoint_every == 0)
                        or (not t.checkpoint_every and time.monotonic() - last_saved > CHECKPOINT_SECONDS)):
                    flush()
                    save_checkpoint()
                if stop is not None and stop():
                    flush()
                    raise TrainingInterrupted(save_checkpoint() if t.checkpoint_dir else None, pos)
            chunk_start_words += chunk.raw_tokens
            pos.words_done = chunk_start_words
            pos.chunk, pos.batch, pos.chunk_rng = chunk_number + 1, 0, None
        flush()
        pos.epoch, pos.chunk, pos.batch = pos.epoch + 1, 0, 0
    train_seconds = time.perf_counter() - train_began

    matrix = np.empty((len(plan.words), vectors.dim), np.float32)
    matrix[: plan.n_pretrained] = vectors.matrix
    trained_rows = trainer.rows[: trainer.n_trainable]
    matrix[trained_rows] = trainer.trained_matrix()
    if not np.isfinite(matrix[trained_rows]).all():
        raise EmbedtuneError(f"training diverged (rows with NaN or infinity); lower --lr (it was {lr0:g}) "
                             "or cap rows with --clip-norm")
    out = Vectors(plan.words, matrix)

    history = pos.loss_history
    stats = {
        **plan.summary(),
        "epochs": t.epochs,
        "corpus_words": total_words,
        "corpus_lines": n_lines,
        "trained_rows": int(trainer.n_trainable),
        "steps": pos.steps,
        "pairs": pos.pairs,
        "words_per_second": round((pos.words_done - words_at_start) / train_seconds) if train_seconds > 0 else None,
        "train_seconds": round(train_seconds, 3),
        "total_seconds": round(time.perf_counter() - began, 3),
        "loss_first": history[0] if history else None,
        "loss_last": history[-1] if history else None,
        "loss_history": history,
        "resumed": resume,
        "init": method,
        "new_from_context": init.n_from_context if init else 0,
        "new_too_few_contexts": init.n_too_few if init else 0,
        "max_frozen_change": max_frozen_change(vectors.matrix, matrix, plan.frozen),
    }
    return TrainResult(out, plan, stats)


def max_frozen_change(before: np.ndarray, after: np.ndarray, frozen: np.ndarray,
                      block: int = 65536) -> float:
    """Largest absolute change on a frozen row (must be 0.0); compared bit for bit, block by block
    (no copy of the table)."""
    n = len(before)
    frozen = frozen[:n]   # new rows (after the pretrained ones) are never frozen
    worst = 0.0
    for start in range(0, n, block):
        stop = min(start + block, n)
        rows = frozen[start:stop]
        if not rows.any():
            continue
        old, new = before[start:stop][rows], after[start:stop][rows]
        if np.array_equal(old.view(np.uint32), new.view(np.uint32)):
            continue
        diff = np.abs(old.astype(np.float64) - new.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if np.isfinite(diff).any() else math.inf)
    return worst
