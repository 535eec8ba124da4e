"""The training loop. A run reads top to bottom in ``train``: ``setup`` (count, plan, start new words,
build the tables and the step, resume) -> ``run_epochs`` (batches through the step) -> ``result`` (rows
and summary). What is particular to an objective lives in its class (embedtune/objectives/); how the
run is spread over processes, in the strategy it is given (training/strategy.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from embedtune import _tf
from embedtune.config import Config, TrainConfig, all_keys, learning_rate
from embedtune.corpus import Corpus
from embedtune.cores import local_cores
from embedtune.errors import EmbedtuneError, TrainingInterrupted
from embedtune.objectives import Objective, objective_class
from embedtune.phases import Phase, phase, reporting
from embedtune.plan.rows import decide_rows
from embedtune.plan.rules import Plan
from embedtune.training.batches import LOSS_EVERY, prefetch
from embedtune.training.checkpoints import Checkpoints
from embedtune.training.checkpoints.state import Position
from embedtune.frozen import FrozenRowsCheck, max_frozen_change
from embedtune.training.host import map_large_blocks, use_threads
from embedtune.training.progress import LossLog, Progress, check_rows, longest_row
from embedtune.training.strategy import OneProcess
from embedtune.training.tblog import ScalarLog
from embedtune.training.trainer import Trainer
from embedtune.vectors import PatchedVectors, Vectors


@dataclass
class TrainResult:
    vectors: PatchedVectors   # the input's matrix with the trained rows in place (Vectors' interface)
    plan: Plan
    stats: dict = field(default_factory=dict)
    model: object | None = None   # the objective's own trained part that is not vectors (classify: its classifier)
    init: object | None = None    # the new words' InitResult (embedtune.newwords.common; the report shows their contexts)


def train(vectors: Vectors, corpus: Corpus | None, config: Config,
          progress: Callable[[Progress], None] | None = None,
          on_plan: Callable[[Plan], None] | None = None,
          resume: bool = False,
          stop: Callable[[], bool] | None = None,
          overwrite_checkpoints: bool = False,
          note: Callable[[str], None] | None = None,
          strategy: OneProcess | None = None,
          on_phase: Callable[[Phase], None] | None = None) -> TrainResult:
    """Continue training ``vectors`` on ``corpus``; rows frozen by the config stay bit-identical.

    corpus : None for an objective that reads none (retrofit reads ``config.lexicon``)
    config : resolved (``config.resolve``: ``embedtune.run`` resolves once, and checks ``--dim`` then)

    resume : continue from the newest usable checkpoint in ``config.train.checkpoint_dir``
    stop : polled after every call of the step (up to GROUP batches); when it returns True a checkpoint is written (if a
        folder is set) and TrainingInterrupted is raised. A ``stop`` that is also a context manager (the command's,
        which takes over Ctrl-C and SIGTERM) is entered for the loop alone: during the set-up before it, a signal
        unwinds at once, as in every other phase, rather than after the first step
    overwrite_checkpoints : a new run into a folder holding checkpoints deletes them (else it
        refuses); the folder is locked for the run's life either way
    note : told what the caller should say, such as a damaged checkpoint skipped on resume, or why
        the run steps through TensorFlow's step and not the objective's compiled one
    strategy : how the run is spread over processes (None: one process; several workers:
        embedtune.distribute.strategy_from_env())
    on_phase : given a ``Phase`` as each lasting set-up phase (the new words' contexts, glove's count) goes
    Returns the vectors with new words appended after the pretrained ones. The checkpoints stay
    (``training.checkpoints.folder.remove`` deletes them once the caller has written the result).
    """
    t = config.train
    objective = objective_class(t.objective)
    if objective.closed_form is not None:
        return fit_closed_form(objective, vectors, config, on_plan, resume)
    strategy = OneProcess() if strategy is None else strategy
    with contextlib.ExitStack() as cleanup:   # the checkpoint folder's lock, released however the run ends
        cleanup.callback(strategy.close)   # and what the strategy took at its start
        if t.deterministic:   # turned on in setup, for this run only
            cleanup.callback(_tf.restore_op_determinism, _tf.op_determinism())
        checkpoints = Checkpoints.open(t, resume, overwrite_checkpoints, cleanup,
                                       writes=strategy.chief)
        with reporting(on_phase):   # the set-up's phases, however deep (objectives count in their constructor)
            run = setup(vectors, corpus, config, checkpoints, on_plan, note, strategy, stop)
        with stop if isinstance(stop, contextlib.AbstractContextManager) else contextlib.nullcontext():
            run_epochs(run, progress, stop)
        # A phase of its own, with nothing to count: the rows' checks read every row (14 s at 3M x 300 on a
        # loaded machine), and the command closes the loop's bar as it starts, so its rate is the loop's.
        with reporting(on_phase), phase("checking the trained rows", 0, ""):
            return result(run)


def fit_closed_form(objective: type[Objective], vectors: Vectors, config: Config, on_plan, resume) -> TrainResult:
    """An objective without the loop (retrofit): its fit, and every frozen row checked after it."""
    out, plan, stats = objective.closed_form.fit(vectors, config, on_plan, resume)
    # The same bound on the rows as the loop's (progress.check_rows): a fit may diverge as a loop does.
    moving = np.flatnonzero(~plan.frozen)
    check_rows(out.matrix[moving], longest_row(vectors.matrix),
               f"the fit of --objective {config.train.objective} does not converge with these settings")
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
    init: object | None           # the new words' InitResult (embedtune.newwords), None without new words
    total_words: int              # corpus tokens in one epoch
    n_lines: int
    checkpoints: Checkpoints
    pos: Position                 # where the loop is (a resumed run starts where the checkpoint was)
    resumed: bool
    began: float                  # time.perf_counter() at set-up
    strategy: OneProcess                # one process, or this process's part of several workers
    stopped_at: str | None = None   # the limit (max_steps, max_words) that ended the run early
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    words_at_start: int = 0


def setup(vectors: Vectors, corpus: Corpus, config: Config, checkpoints: Checkpoints,
          on_plan: Callable[[Plan], None] | None = None, note: Callable[[str], None] | None = None,
          strategy: OneProcess | None = None, stop: Callable[[], bool] | None = None) -> Run:
    """Count the corpus, plan the rows, start the new words, build the tables; restore a checkpoint
    when ``checkpoints`` was opened to resume. ``config`` resolved. The ``strategy`` (default one
    process) says what this process counts, reads and steps."""
    t = config.train
    strategy = OneProcess() if strategy is None else strategy
    use_threads(t.threads or strategy.threads or local_cores())
    # Before the new words' starts, whatever the step: their fit's work arrays and the chunks' pairs go back to
    # the system once freed, not into the heap under the next phase's peak (host.map_large_blocks).
    map_large_blocks()
    strategy.start(t, note, stop)   # a multi-worker strategy sets up TensorFlow's runtime, before any variable
    if t.deterministic:   # when TensorFlow is imported: a compiled step's run may never import it
        _tf.when_imported("determinism", lambda tf: tf.config.experimental.enable_op_determinism())
    began = time.perf_counter()
    # A worker counts its share of the lines and gathers the others' counts (after start: collectives).
    counts, total_words, n_lines = strategy.count(corpus)
    # New words start from their contexts (one streaming pass), unless --init random: `embedtune init`'s
    # call, for the words the plan chose. A corpus too small to fit the a la carte map falls back to the
    # plain context mean (newwords.common.choose_method), and the summary says so. The window is the
    # objective's (Objective.init_window).
    # A worker reads its share of the lines for the contexts; the sums are added up over the workers.
    plan, init = decide_rows(vectors, counts, total_words, config, corpus, objective_class(t.objective).init_window(t),
                             contexts=strategy.init_corpus(corpus), on_plan=on_plan,
                             progress=lambda _: phase("new words: contexts", total_words))
    trainer = Trainer(vectors.matrix, plan, counts, strategy.split(config),
                      new_start=None if init is None else init.matrix,
                      corpus=strategy.objective_corpus(corpus), make_step=strategy.make_step, note=note)
    trainer.objective.check(corpus)
    settings = strategy.settings(settings_for_resume(config))
    checkpoints.bind(trainer, vectors, corpus, total_words, n_lines, settings)
    pos = checkpoints.restore(note) if checkpoints.resuming else Position()
    return Run(config, vectors, corpus, plan, trainer, init, total_words, n_lines, checkpoints, pos,
               checkpoints.resuming, began, strategy, words_at_start=pos.words_done)


def run_epochs(run: Run, progress: Callable[[Progress], None] | None = None,
               stop: Callable[[], bool] | None = None) -> None:
    """The loop: epochs of batches through the step from ``run.pos`` on, with the loss read back,
    checkpoints saved and ``stop`` polled after each step, until the epochs or a limit are done."""
    t, pos, trainer = run.config.train, run.pos, run.trainer
    lr0 = learning_rate(t)
    words_total = run.total_words * t.epochs
    writes = run.strategy.chief   # only a multi-worker run's chief writes logs
    tblog = None
    if t.logdir and writes:
        tblog = ScalarLog(t.logdir, trainer, pos.words_done, t.seed)
    losses = LossLog(pos, lr0, words_total, progress, tblog)
    began, cpu_began = time.perf_counter(), time.process_time()
    while pos.epoch <= t.epochs:
        epoch = run.strategy.epoch(trainer, run.corpus, dataclasses.replace(pos), run.total_words)
        with contextlib.closing(prefetch(epoch)) as batches:
            for group in run.strategy.groups(batches, pos, t):   # several batches per call (speed)
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
    run.strategy.finish(trainer)
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
    # The rows' lengths against the longest the run started from (every objective: progress.check_rows).
    check_rows(trained, longest_row(run.vectors.matrix, init.matrix if init is not None else np.zeros((0, 1))),
               f"lower --lr (it was {lr0:g}) or cap each row's step with --clip-norm (e.g. 1)")
    # A listed new word the corpus never shows (--new-words) has no table row: its start goes out as it is.
    n_pre = plan.n_pretrained
    untouched = np.setdiff1d(np.arange(n_pre, len(plan.words)), trained_rows)
    if len(untouched):
        trained_rows = np.concatenate([trained_rows, untouched])
        trained = np.vstack([trained, init.matrix[untouched - n_pre]])
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
        "workers": run.strategy.size,
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
        **run.strategy.summary(),
    }
    figures, model = trainer.objective.report(trainer.local_matrix, trainer.side_matrix)
    stats.update(figures)
    return TrainResult(out, plan, stats, model, init)


def limit_reached(train: TrainConfig, pos: Position) -> str | None:
    """The limit the run has reached ("max_steps" or "max_words"), or None."""
    if train.max_steps and pos.steps >= train.max_steps:
        return "max_steps"
    if train.max_words and pos.words_done >= train.max_words:
        return "max_words"
    return None


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
    settings = {key.name: config.value(key) for key in all_keys() if key.table == "train"}
    for key in ("checkpoint_dir", "checkpoint_every", "max_steps", "max_words", "logdir", "threads", "peer_timeout"):
        settings.pop(key, None)
    settings["vocab"] = {key.name: config.value(key) for key in all_keys() if key.table == "vocab"}
    return settings
