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

import contextlib
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

from embedtune import checkpoint
from embedtune.checkpoint import Position
from embedtune.config import Config, TrainConfig, learning_rate, resolve
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.init import DEFAULT_WINDOW as INIT_WINDOW
from embedtune.init import initial_vectors, random_vectors
from embedtune.objectives import retrofit
from embedtune.objectives.glove import GloVe
from embedtune.objectives.rows import LocalRows
from embedtune.objectives.sgns import SkipGram
from embedtune.plan import Plan
from embedtune.runplan import plan_rows
from embedtune.sparse import cap_rows, make_optimizer, merge_rows
from embedtune.tblog import ScalarLog
from embedtune.vectors import PatchedVectors, Vectors

OBJECTIVES = {"sgns": SkipGram, "glove": GloVe}
# Objectives solved in closed form, without a corpus or the loop: fit(vectors, config, on_plan, resume)
# -> (vectors, plan, stats).
CLOSED_FORM = {"retrofit": retrofit.fit}
JIT = os.environ.get("EMBEDTUNE_JIT", "1") == "1"   # EMBEDTUNE_JIT=0: no XLA, for debugging the step
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


class Trainer:
    """Holds the split tables and the step for one training run.

    ``corpus`` is read by objectives that count before training (glove).

    Where an sgns step's CPU goes (``python benchmarks/step_profile.py``; one thread, per (center,
    context) pair, per-pair negatives; the step is memory-bound: each pair reads and writes 1 + 6 rows
    at random places of the tables): the rows' gathers by TensorFlow's kernels outside XLA (the
    XLA-compiled gather cost twice as much), the dense part and, for plain sgd, the two scatter_subs
    in one XLA cluster (``dense_sgd``; TensorFlow's scatter kernel cost 1.7x XLA's), GROUP batches
    per call (``run``) to spread the call's fixed cost. Measured (µs of CPU a pair, per-pair / shared
    negatives, load 11): gathers 0.38 / 0.24, dense part 0.30 / 0.34, scatters 0.47 / 0.16, the call
    0.07 / 0.07; the step 0.88 / 0.47 with 10 batches a call (2.25 / 0.95 before this layout). The
    host side (pairs, negatives, frozen rows, tensors: 0.45 / 0.33) runs ahead on the batch thread
    (``prefetch``). More: benchmarks/README.md, train_speed.
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
        self.trainable = tf.Variable(start, name="trainable_words")
        # Frozen rows stay in the caller's matrix, read-only, and are gathered on the host for each
        # batch (prepare): no copy of the table is made, in numpy or in TensorFlow.
        self.matrix = matrix
        self.frozen_rows = frozen_rows if len(frozen_rows) else np.zeros(1, np.int64)
        self.n_frozen = len(frozen_rows)
        # Local id -> the matrix row prepare reads for it (trainable ids read any frozen row; the step
        # takes theirs from the variable): one indexing, 0.07 us a pair against 0.085 for clipping and
        # indexing twice. Not np.take: on a Fortran-ordered matrix (the benchmark's GloVe .npy) it
        # cost 6.5 us a pair against fancy indexing's 0.8.
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
        self.objective = OBJECTIVES[t.objective](rows, t, corpus)
        # The objective's own table: context vectors (sgns) or biases (glove), one row per local
        # word plus a sink. Rows from side_fixed_from on are read but never updated.
        side = self.objective.side_start()
        self.side = tf.Variable(side, name="side")
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
        # No autograph: the step has no tensor-dependent Python control flow, and tracing it
        # took 1.06 s with autograph against 0.33 s without.
        self.dense = tf.function(self._dense, jit_compile=JIT, autograph=False)
        self.gradients = tf.function(self._gradients, autograph=False)
        self.dense_sgd = tf.function(self._dense_sgd, jit_compile=JIT, autograph=False)
        self.step = tf.function(self._step, autograph=False)
        self.group_step = tf.function(self._group_step, autograph=False)

    def prepare(self, batch: dict) -> dict:
        """Tensors for the step, with the frozen rows the batch reads gathered from the matrix."""
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
        XLA's scatter on the CPU took 1.1 us a pair against 1.9 for TensorFlow's kernel (with its
        IndexedSlices and the lr product), and it walks the slices in order, as deterministic as
        TensorFlow's. Frozen rows' and padding's slices land on the sink rows, which nothing reads."""
        loss, word_grads, side_ids, side_grads = self._dense(batch, words, side, side_ids)
        self.trainable.scatter_sub(tf.IndexedSlices(lr * word_grads, word_ids))
        self.side.scatter_sub(tf.IndexedSlices(lr * side_grads, side_ids))
        return loss

    def _step(self, batch, lr):
        if not self.merge:
            words, word_ids, side, side_ids = self._gather(batch)
            return self.dense_sgd(batch, words, tf.concat(word_ids, 0), side, side_ids, lr)
        loss, word_ids, word_grads, side_ids, side_grads = self._gradients(batch)
        word_grad = tf.IndexedSlices(word_grads, word_ids, self.trainable_shape)
        side_grad = tf.IndexedSlices(side_grads, side_ids, self.side_shape)
        rows, grads, *slices = merge_rows(word_grad, sink=self.n_trainable, counts=bool(self.anchor))
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
        rows, grads = merge_rows(side_grad, sink=self.side_rows)
        self.side_opt.apply(rows, cap_rows(grads, self.clip_norm), lr)
        return loss

    def run(self, tensors: list[dict], lrs: list[float]) -> list[tf.Tensor]:
        """Steps over batches ``tensors`` at learning rates ``lrs``, in order; their losses.

        A full group (GROUP batches) is one call; a shorter one (where the loop must act between
        batches) goes a step at a time, so that only one group length is ever traced.
        """
        if len(tensors) == GROUP:
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
        return self.trainable.numpy()[: self.n_trainable]


@dataclass
class Batch:
    """A batch ready for the step, and the position of the run once it is trained."""

    tensors: dict
    pairs: int
    chunk: int            # the chunk it comes from
    batch: int            # its number in the chunk, plus one
    chunk_rng: dict       # the random state at the chunk's start
    words_done: int


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
    once (gensim's workers) cut wall time by a quarter under load but moved new words far from their
    true vectors (recovery benchmark, per-pair negatives: median rank 611 against 38, R@10 0.17
    against 0.34), so they were taken out. The pools can be set only before TensorFlow
    starts its runtime; in a process where it has started (a test, a notebook) they stay as
    they are."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass


class TrainingInterrupted(Exception):
    """The run was asked to stop; a checkpoint was written at ``checkpoint`` (None without a folder)."""

    def __init__(self, checkpoint: str | None, position: Position):
        self.checkpoint = checkpoint
        self.position = position
        super().__init__(f"stopped at step {position.steps}")


CHECKPOINT_SECONDS = 300  # without --checkpoint-every, a checkpoint every this many seconds
# A mean loss (over LOSS_EVERY steps) above this many times the first step's is divergence. The
# first step's loss is taken before any update, so it is the start whatever the lr. Measured
# largest ratio of a normal run: 1.23 (quickstart, sgns: new words' starts lift the first
# reports), 1.06 (quickstart, glove); runs that blow up pass 10x in their first report: 300-word
# sgns (the sample corpus, no new words) 4e6x at the default lr, 62x at --lr 0.014.
DIVERGED = 10


def no_pairs_message(config: Config, total_words: int, n_lines: int) -> str:
    """Why an epoch made no training pair, and what to change."""
    t = config.train
    why = f"no line has two words of the training vocabulary within --window ({t.window}) of each other"
    if total_words == n_lines:
        why = "every line holds a single word, and context windows never cross a line"
    elif t.objective == "sgns" and t.sample:
        why += f" once frequent words are subsampled; try --sample 0 (it was {t.sample:g})"
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
    stop : polled after every step; when it returns True a checkpoint is written (if a
        folder is set) and TrainingInterrupted is raised
    overwrite_checkpoints : a new run into a folder holding checkpoints deletes them (else it
        refuses); the folder is locked for the run's life either way
    note : told what the caller should say, such as a damaged checkpoint skipped on resume
    Returns the vectors with new words appended after the pretrained ones. The checkpoints stay
    (``checkpoint.remove`` deletes them once the caller has written the result).
    """
    with contextlib.ExitStack() as cleanup:   # the checkpoint folder's lock, released however the run ends
        return _train(vectors, corpus, config, progress, on_plan, resume, stop, overwrite_checkpoints, note,
                      cleanup)


def _train(vectors, corpus, config, progress, on_plan, resume, stop, overwrite_checkpoints, note,
           cleanup: contextlib.ExitStack) -> TrainResult:
    config = resolve(config)
    t = config.train
    if t.dim is not None and t.dim != vectors.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, but --dim says {t.dim}",
                             config.vectors)
    if t.objective in CLOSED_FORM:
        out, plan, stats = CLOSED_FORM[t.objective](vectors, config, on_plan, resume)
        check = FrozenRowsCheck(vectors.matrix, plan.frozen)   # every row: the update wrote a copy
        check(0, len(vectors), out.matrix)
        stats["max_frozen_change"] = check.worst
        return TrainResult(out, plan, stats)
    if resume and not t.checkpoint_dir:
        raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
    if t.checkpoint_dir:   # locked and checked before any work: one folder, one run
        folder = cleanup.enter_context(checkpoint.Folder(t.checkpoint_dir))
        folder.open(resume, overwrite=overwrite_checkpoints)
    use_threads(t.threads or cpu_cores())
    if t.deterministic:
        tf.config.experimental.enable_op_determinism()
    began = time.perf_counter()
    counts, total_words, n_lines = corpus.count()
    new_words, plan = plan_rows(vectors, counts, total_words, config, corpus.path)
    if on_plan is not None:
        on_plan(plan)
    # New words start from their contexts (one streaming pass), unless --init random. A corpus
    # too small to fit the a la carte map falls back to the plain context mean (init.choose_method,
    # the rule `embedtune init` follows too), and the summary says so. The contexts are sgns's
    # training window; glove's window (10, weighted 1/distance) is a counting window, and the
    # start takes init's own (5, the best on the recovery benchmark's validation words: R@10
    # 0.43 and median rank 18 against 0.43 and 25.5 at 10).
    init_window = t.window if t.objective == "sgns" else INIT_WINDOW
    init = initial_vectors(vectors, corpus, new_words, method=config.vocab.init, window=init_window,
                           counts=counts, seed=t.seed) if new_words else None
    method = init.stats["method"] if init else config.vocab.init
    trainer = Trainer(vectors.matrix, plan, counts, config, new_start=None if init is None else init.matrix,
                      corpus=corpus)
    fp = checkpoint.fingerprint(plan.words, plan.frozen.tobytes(), total_words, n_lines, settings_for_resume(config),
                                matrix=vectors.matrix, corpus_digest=corpus.digest) if t.checkpoint_dir else None
    pos = checkpoint.Position()
    if resume:
        found, pos = folder.resume(trainer.tf_checkpoint(), fp, note)
        if note is not None:
            note(f"resuming from {found} (step {pos.steps:,}, epoch {pos.epoch})")

    lr0 = learning_rate(t)
    log = ScalarLog(t.logdir, trainer, pos.words_done, t.seed) if t.logdir else None
    stopped_at = None   # the limit (max_steps, max_words) that ended the run early
    words_total = total_words * t.epochs
    pending_loss, pending_pairs = [], 0
    last_saved = time.monotonic()
    train_began, train_cpu_began = time.perf_counter(), time.process_time()
    words_at_start = pos.words_done

    def save_checkpoint():
        nonlocal last_saved
        last_saved = time.monotonic()
        return folder.save(trainer.tf_checkpoint(), pos, fp)

    def flush():
        nonlocal pending_loss, pending_pairs
        if pending_loss:
            mean = float(tf.add_n(pending_loss)) / max(pending_pairs, 1)
            if not math.isfinite(mean):
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps} (loss {mean}); lower --lr (it was {lr0:g}) "
                    "or cap rows with --clip-norm")
            if pos.loss_start and mean > DIVERGED * pos.loss_start:
                raise EmbedtuneError(
                    f"training diverged at step {pos.steps}: loss {mean:.4g} per pair, over {DIVERGED}x the "
                    f"first step's {pos.loss_start:.4g}; lower --lr (it was {lr0:g}) or cap each row's step "
                    f"with --clip-norm (e.g. 1)")
            pos.loss_history.append(mean)
            if progress is not None:
                progress(Progress(pos.epoch, pos.words_done, words_total, mean, pending_pairs))
            if log is not None:
                log.write(pos.steps, pos.words_done, mean, lr)   # lr: that of the loop's last step
        pending_loss, pending_pairs = [], 0

    while pos.epoch <= t.epochs:
        with contextlib.closing(prefetch(epoch_batches(trainer, corpus, dataclasses.replace(pos), total_words))) \
                as batches:
            for group in step_groups(batches, pos.steps, t):   # several batches per call (speed)
                # Linear decay by corpus position, as word2vec does: each batch's from the words before it.
                lrs = [lr0 * max(1.0 - done / words_total, t.min_lr_fraction)
                       for done in [pos.words_done] + [batch.words_done for batch in group[:-1]]]
                for batch, loss, lr in zip(group, trainer.run([batch.tensors for batch in group], lrs), lrs):
                    pending_loss.append(loss)
                    pending_pairs += batch.pairs
                    if pos.loss_start is None:   # the yardstick of divergence: the loss before any update
                        pos.loss_start = float(pending_loss[-1]) / max(batch.pairs, 1)
                    pos.pairs += batch.pairs
                    pos.steps += 1
                    pos.chunk, pos.batch, pos.chunk_rng = batch.chunk, batch.batch, batch.chunk_rng
                    pos.words_done = batch.words_done
                    if pos.steps % LOSS_EVERY == 0:
                        flush()
                # A group ends wherever the loop acts (step_groups), so it acts here, after the group.
                if t.checkpoint_dir and (
                        (t.checkpoint_every and pos.steps % t.checkpoint_every == 0)
                        or (not t.checkpoint_every and time.monotonic() - last_saved > CHECKPOINT_SECONDS)):
                    flush()
                    save_checkpoint()
                if stop is not None and stop():
                    flush()
                    raise TrainingInterrupted(save_checkpoint() if t.checkpoint_dir else None, pos)
                if stopped_at := limit_reached(t, pos):
                    break
        flush()
        if not pos.pairs:
            raise EmbedtuneError(no_pairs_message(config, total_words, n_lines), corpus.path)
        if stopped_at:
            break
        pos.words_done = pos.epoch * total_words
        pos.epoch, pos.chunk, pos.batch, pos.chunk_rng = pos.epoch + 1, 0, 0, None
    train_seconds = time.perf_counter() - train_began
    train_cpu_seconds = time.process_time() - train_cpu_began
    if log is not None:
        log.close()

    # The output is the input matrix with the trained rows put in their place, read a block at a
    # time by the writers: no second copy of the table (1.2 GB for 1M x 300, 3.6 GB for 3M x 300).
    trained_rows = trainer.rows[: trainer.n_trainable]
    trained = trainer.trained_matrix()
    if not np.isfinite(trained).all():
        raise EmbedtuneError(f"training diverged (rows with NaN or infinity); lower --lr (it was {lr0:g}) "
                             "or cap rows with --clip-norm")
    out = PatchedVectors(plan.words, vectors.matrix, trained_rows, trained)

    history = pos.loss_history
    stats = {
        **plan.summary(),
        "objective": t.objective,
        "optimizer": t.optimizer,
        "lr": lr0,
        "window": t.window,
        "anchor": t.anchor,
        "epochs": t.epochs,
        "corpus_words": total_words,
        "corpus_lines": n_lines,
        "trained_rows": int(trainer.n_trainable),
        "steps": pos.steps,
        "pairs": pos.pairs,
        "words_per_second": round((pos.words_done - words_at_start) / train_seconds) if train_seconds > 0 else None,
        "train_seconds": round(train_seconds, 3),
        "train_cpu_seconds": round(train_cpu_seconds, 3),   # every thread of the process
        "total_seconds": round(time.perf_counter() - began, 3),
        "loss_first": history[0] if history else None,
        "loss_last": history[-1] if history else None,
        "loss_history": history,
        "resumed": resume,
        "stopped_at_limit": stopped_at,
        "words_done": pos.words_done,
        "init": method,
        "init_note": init.stats.get("method_note") if init else None,
        "loss_start": pos.loss_start,
        "new_from_context": init.n_from_context if init else 0,
        "new_too_few_contexts": init.n_too_few if init else 0,   # and, for form-context, no known spelling
        "new_from_spelling_only": init.stats.get("from_form_only", 0) if init else 0,
        "max_frozen_change": max_frozen_change(vectors.matrix, trained_rows, trained, plan.frozen),
    }
    return TrainResult(out, plan, stats)


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
