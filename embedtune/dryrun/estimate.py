"""The dry run's account of a planned run (``RunPlan``): the objective's settings as resolved and an
estimate of the memory each part of the run will hold, as plain data (``describe``, the ``--json`` of
``embedtune train --dry-run``; the objective words it as text).
"""

from __future__ import annotations

import sys

from embedtune import kernels
from embedtune.config import find_key, learning_rate
from embedtune.objectives import objective_class
from embedtune.dryrun.runplan import RunPlan
from embedtune.training.step import runs_on
from embedtune.vectors import Vectors, VectorsOutline

# The settings every looped objective reads; each objective's own are its class's ``settings``.
SHARED_SETTINGS = ("epochs", "optimizer", "min_lr_fraction", "batch_size", "clip_norm", "anchor", "seed",
                   "deterministic")
OPTIMIZER_SLOTS = {"sgd": 0, "adagrad": 1, "adam": 2}   # training/optimizers.py: a table-sized variable per slot
# TensorFlow, XLA's compiled step and the Python process around them: calibrated against the
# quickstart's peak RSS less the parts below (benchmarks/README.md, memory).
RUNTIME_BYTES = 700 * 2**20
# A run that never imports TensorFlow (a plain compiled run: training.step.runs_on): Python, numpy, scipy,
# numba and its compiled steps. Calibrated against glove's peak RSS on the sample less the parts below
# (benchmarks/README.md, glove_job).
COMPILED_RUNTIME_BYTES = 185 * 2**20
# --workers N: each worker is a whole process (its own runtime, input and tables); with the gathered step
# through TensorFlow (--sync-every 0 with --anchor, or a plugin's objective) it also holds tf.distribute's (gRPC,
# collectives); the launcher holds Python and click.
# Calibrated against the quickstart's peak per process, one process against 2 workers (benchmarks/README.md,
# memory). An averaging worker's sockets hold no more than its syncs' payloads (averaging_last_sync).
WORKER_RUNTIME_BYTES = 140 * 2**20
LAUNCHER_BYTES = 55 * 2**20
# TensorFlow's step (not a compiled one) holds, in the pool its allocator keeps (embedtune/_tf.py), a batch's
# gathered rows and their gradients, the merged rows, the optimizer's moments for them and XLA's buffers:
# about this many rows of dim float32 a pair of the batch. Calibrated against sgns with Adam at 300
# dimensions, a batch of 4,096 (benchmarks/log/memory_sizes.md, the estimates).
STEP_BATCH_ROWS = 130
# spelling.fit_form (the form-context start), per fitting word: GloVe 6B 50d's first 100k words make 2.3M
# pieces (23 a word; while CG runs, the CSR matrix holds 8 bytes a piece: its transpose's products read the
# same arrays) and use 482,592 buckets (4.8 a word), each with a float32 preconditioner and four work rows of at
# most spelling.block_width columns (their targets read a block at a time); what it keeps is the new words'
# and the probes' form vectors, each block of columns made as it is solved (no table of their buckets). Freed
# before training; counted in the sum all the same, so the estimate errs high for it.
FORM_PIECES_PER_WORD, FORM_BUCKETS_PER_WORD = 23, 4.8
FORM_PIECE_BYTES = 8



def form_fit_bytes(run: RunPlan, vectors: Vectors) -> int:
    """What fitting the spelling model holds at its peak, when new words start by form-context."""
    from embedtune.newwords.spelling import DEFAULT_FIT_WORDS, block_width
    from embedtune.newwords.fitted import DEFAULT_PROBES, DEFAULT_SLOTS

    if run.init != "form-context" or not run.new_words:
        return 0
    if vectors.model is not None and vectors.model.maxn > 0:
        return 0   # a fastText model's own subwords are the spelling start: nothing is fitted
    fit = min(DEFAULT_FIT_WORDS, run.plan.n_pretrained)
    buckets = fit * FORM_BUCKETS_PER_WORD
    block = min(vectors.dim, block_width(int(buckets)))
    # the new words and the probe words (embedtune.newwords.fitted), whose context sums are held too
    asked = len(run.new_words) + DEFAULT_PROBES
    probe_sums = DEFAULT_PROBES * len(DEFAULT_SLOTS) * 2 * (vectors.dim + 2) * 8
    return int(fit * FORM_PIECES_PER_WORD * FORM_PIECE_BYTES + buckets * 4 * (4 * block + 1)
               + fit * 2 * 4 * block              # a block of the targets and M times the direction
               + asked * vectors.dim * 4          # the result: the asked words' form vectors
               + probe_sums)


def fasttext_bytes(vectors: Vectors | VectorsOutline) -> tuple[int, int]:
    """A fastText model's two matrices as (bytes held in memory, bytes of file pages mapped): a plain file's
    are mapped (their pages count in the resident size as the rows are read, and the system takes them back
    as it needs: reclaimable, so counted apart), a compressed or piped model's are read whole; (0, 0) for
    other vectors files."""
    from embedtune.formats.fasttext import is_mapped

    model = vectors.model
    if model is None:
        return 0, 0
    size = int(model.input.nbytes + model.output.nbytes)
    return (0, size) if is_mapped(model.input) else (size, 0)


def ahead_bytes(run: RunPlan, n: int, dim: int) -> int:
    """The output's lines rendered ahead (embedtune/run.py): a text output's, when they fit."""
    from embedtune import formats

    c = run.config
    if c.output is None:
        return 0
    return formats.rendered_ahead_bytes(n, dim, formats.output_format(c.output, c.to, c.format))


def estimate_memory(run: RunPlan, vectors: Vectors, workers: int = 1) -> dict[str, int]:
    """Bytes each part of a run's process (of each worker's, with ``workers`` > 1) will hold at its
    peak (the end, when the output is written while the tables still live): an estimate from the
    table sizes, not a measurement.

    Checked against peak RSS (benchmarks/README.md, memory and glove_job). The spelling model's fit is
    freed before the tables and pairs are made, so it counts only for what it holds beyond them.
    """
    t = run.config.train
    dim, n_pre, n_new = vectors.dim, run.plan.n_pretrained, run.plan.n_new
    n_local = run.trainable_in_corpus + run.frozen_in_corpus
    rows = (run.trainable_in_corpus + 1) * dim * 4   # + the sink row
    objective = objective_class(t.objective)
    side, batches = objective.memory(t, dim, n_local, run.corpus_words, run.corpus_lines, run.set_up_units)
    compiled = kernels.KERNEL and objective.compiles(t)
    # Averaging workers and the gathered step's of joined batches (--sync-every 0: sgns, glove, classify) step as one
    # process does and exchange bytes over plain sockets (distribute/mesh.py); any other gathered step's go
    # through TensorFlow's strategy.
    from embedtune.distribute.gathered import joins_batches

    gathered = workers > 1 and not t.sync_every and not joins_batches(t)
    steps_compiled, tensorflow = runs_on(objective, t, one_process=not gathered)
    words = (sys.getsizeof(vectors.words) + sum(map(sys.getsizeof, vectors.words)) + sys.getsizeof(vectors.index)
             + 3 * sys.getsizeof(run.counts)   # the counts, the local index and the row counts
             + sum(sys.getsizeof(w) for w in run.counts if w not in vectors.index))
    parts = {
        "input_matrix": n_pre * dim * 4,
        # A worker of several keeps the whole file's ids too (distribute/compiled_share.py) and cuts its share.
        "corpus_ids": run.reader_bytes,
        "words_and_counts": words,
        "new_word_starts": n_new * dim * 4,
        # The variable, and the float32 start the objective's row reader keeps.
        "trainable_rows": 2 * rows,
        "anchor_starts": rows if t.anchor else 0,
        "optimizer_slots": OPTIMIZER_SLOTS[t.optimizer] * (rows + side),
        # The objective's compiled step (Objective.compiles) steps numpy copies: of the side table, and
        # of the optimizer's state (the trainable rows' copy is the start counted above).
        "compiled_step_copies": ((1 + OPTIMIZER_SLOTS[t.optimizer]) * side + OPTIMIZER_SLOTS[t.optimizer] * rows
                                 if compiled else 0),
        "side_table": side,
        "pairs_and_batches": batches,
        "step_working_set": 0 if steps_compiled else STEP_BATCH_ROWS * t.batch_size * dim * 4,
        # The output is the input matrix with the trained rows put in place, written a block at a
        # time (vectors.PatchedVectors): only the trained rows are copied out of the variable.
        "output_rows": (run.trainable_in_corpus + n_new) * dim * 4,
        # A text output's lines, rendered from the start while the run trains (formats.render_ahead).
        "output_text_ahead": ahead_bytes(run, n_pre, dim),
        "spelling_model_fit": 0,   # below: what it adds over the training's tables and pairs
        # A fastText model's input (words and subwords) and output matrices when read whole (a compressed or
        # piped model); a plain file's are mapped, counted apart (memory_mapped_bytes).
        "fasttext_model_matrices": fasttext_bytes(vectors)[0],
        "tensorflow_and_python": RUNTIME_BYTES if tensorflow else 0,
        "python_and_numba": 0 if tensorflow else COMPILED_RUNTIME_BYTES,
        "distribution_runtime": WORKER_RUNTIME_BYTES if gathered else 0,
        # Averaging (--sync-every K > 0, distribute/averaging.py): each worker keeps every table it trains
        # (the rows, the side table, their optimizer state) as it was at the last sync, and per table row
        # an int64 id and an int32 count for the sync. A sync's payloads come and go between syncs.
        "averaging_last_sync": (averaging_copy(rows, side, dim, t.optimizer)
                                if workers > 1 and t.sync_every else 0),
    }
    # Held while the spelling model fits: the runtime, the input, the corpus's ids and the words; the rest
    # is made after it is freed.
    held = ("input_matrix", "corpus_ids", "words_and_counts", "fasttext_model_matrices", "tensorflow_and_python",
            "python_and_numba", "distribution_runtime", "output_text_ahead")
    later = sum(value for key, value in parts.items() if key not in held)
    parts["spelling_model_fit"] = max(0, form_fit_bytes(run, vectors) - later)
    return parts


def averaging_copy(rows: int, side: int, dim: int, optimizer: str) -> int:
    """Bytes of averaging's copy of the tables at the last sync (float32 ``rows`` and ``side`` bytes and
    the optimizer's slots of both), with its 12 bytes a table row (ids, counts; rows of ``dim`` floats)."""
    tables = (1 + OPTIMIZER_SLOTS[optimizer]) * (rows + side)
    return tables + 12 * tables // (4 * dim)


def describe(run: RunPlan, vectors: Vectors, workers: int = 1) -> dict:
    """The plan as plain data (JSON): counts, the objective's settings as resolved, the memory estimate
    (of ``workers`` local worker processes and their launcher, when more than one)."""
    c, t = run.config, run.config.train
    settings = {key: t.value(find_key("train", key)) for key in SHARED_SETTINGS + objective_class(t.objective).settings}
    settings["lr"] = learning_rate(t)
    parts = estimate_memory(run, vectors, workers)
    per_worker = sum(parts.values())
    launcher = LAUNCHER_BYTES if workers > 1 else 0
    # Every row of a mapped model's input matrix is read for the word vectors (and both matrices for a .bin
    # output): file pages in the resident size, reclaimable, so not in the estimate but beside it.
    mapped = fasttext_bytes(vectors)[1]
    return {
        "vectors": c.vectors,
        "format": c.format,
        "rows": len(vectors),
        "dim": vectors.dim,
        "corpus": c.corpus,
        "corpus_words": run.corpus_words,
        "corpus_lines": run.corpus_lines,
        "distinct_words": len(run.counts),
        "output": c.output,
        **run.plan.summary(),
        "trainable_in_corpus": run.trainable_in_corpus,
        "frozen_in_corpus": run.frozen_in_corpus,
        "init": run.init,
        "objective": t.objective,
        "settings": settings,
        "max_steps": t.max_steps or None,
        "max_words": t.max_words or None,
        "checkpoint_dir": t.checkpoint_dir,
        "logdir": t.logdir,
        "workers": workers,
        "memory_estimate_bytes": workers * per_worker + launcher,
        "memory_per_worker_bytes": per_worker,
        "memory_launcher_bytes": launcher,
        "memory_parts_bytes": parts,
        "memory_mapped_bytes": mapped,
    }
