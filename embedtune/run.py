"""One whole fine-tune: ``embedtune train`` and ``embedtune.fine_tune`` both call ``run``.

load the vectors -> decide lower-casing -> open the corpus as the objective reads it -> count it
(while the trainer imports: TensorFlow only for a run that uses it) -> train -> write the output, its
frozen rows read back as written -> remove the checkpoints -> the objective's own outputs -> the summary. ``dry_run`` stops after the
plan, without TensorFlow. The caller is told what happens through callbacks and gets a result;
nothing here prints. The checks that need no loading are embedtune/checks.py's (``check_run``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from embedtune.config import Config, resolve
from embedtune.formats.reading import (Reading, check_dimension, check_model_output, load_training_vectors,
                                       outline_training_vectors)
from embedtune.frozen import save_checked
from embedtune.plan.rules import Plan
from embedtune.vectors import Vectors, decide_lowercase


@dataclass
class RunResult:
    """A finished run.

    vectors : the input's rows with the trained ones in place, then the new words
    stats : the summary (``--json``), with ``seconds`` split into load_vectors, count_and_import,
        setup, loop and write
    written : the frozen rows' read-back (embedtune.frozen.FrozenRowsCheck), None when nothing was
        written (no output, or a worker of several that is not the chief)
    report : what to tell the person who ran it, a line each (Objective.describe)
    """

    vectors: Vectors
    plan: Plan
    stats: dict
    config: Config                 # resolved
    lowercase: bool
    model: object | None = None    # the objective's own trained part that is not vectors (classify's classifier)
    written: object | None = None
    report: list[str] = field(default_factory=list)


@dataclass
class DryRun:
    """A run decided, not made: its description (``--json``) and report, a line each."""

    description: dict
    lines: list[str]


@dataclass
class _Loaded:
    vectors: Vectors
    config: Config          # resolved: the objective follows the detected format
    out_format: str | None
    lowercase: bool
    seconds: dict


def _load(config: Config, vectors: Vectors | None, reading: Reading, on_load, note, on_phase=None,
          outline: bool = False, kernels: bool = False) -> _Loaded:
    """The vectors loaded (unless given) and the config resolved once, for everything downstream (which
    takes it resolved), its ``--dim`` checked against them; the read reported to ``on_phase`` as a phase,
    in bytes. ``outline``: their words and shape only (formats.outline_vectors, the dry run's). ``kernels``:
    the run loads numba anyway (load_training_vectors)."""
    from embedtune import formats

    if vectors is None:
        in_format = config.format or formats.detect_format(config.vectors)
        config = dataclasses.replace(config, format=in_format)   # --objective auto follows it
    out_format = formats.output_format(config.output, config.to, config.format) if config.output else None
    began = time.perf_counter()
    if vectors is None:
        if on_load is not None:
            on_load(config.vectors)
        from embedtune.phases import phase, reporting

        with reporting(on_phase), phase(f"reading {os.path.basename(config.vectors)}", _size(config.vectors),
                                        "B") as advance:
            if outline:
                vectors = outline_training_vectors(config.vectors, config.format, reading, progress=_advancing(advance))
            else:
                vectors = load_training_vectors(config.vectors, config.format, reading, note=note,
                                                progress=_advancing(advance), kernels=kernels)
    seconds = {"load_vectors": time.perf_counter() - began}   # where the run's time goes (--json)
    config = resolve(config)
    check_dimension(vectors, config.train.dim, config.vectors)
    if out_format is not None:
        check_model_output(vectors, out_format, config.output)
    return _Loaded(vectors, config, out_format, decide_lowercase(config.vocab.lowercase, vectors), seconds)


def _size(path: str) -> int:
    """A plain file's bytes (a read's total); 0, unknown, for standard input or a pipe."""
    try:
        return os.path.getsize(path) if path != "-" and os.path.isfile(path) else 0
    except OSError:
        return 0


def _advancing(advance: Callable[[int], None]) -> Callable:
    """A reader's ``progress(done, total)`` (bytes so far) as a phase's ``advance(n)`` (bytes since the last)."""
    done = 0

    def progress(now: int, total) -> None:
        nonlocal done
        if now > done:
            advance(now - done)
            done = now

    return progress


def dry_run(config: Config, *, reading: Reading = Reading(), resume: bool = False, workers: int = 1,
            on_load: Callable[[str], None] | None = None, note: Callable[[str], None] | None = None,
            on_phase: Callable | None = None) -> DryRun:
    """Count and plan as ``run`` would; train nothing, write nothing, import no TensorFlow. The vectors'
    words and shape are read, not their matrix (formats.outline_vectors: a file too large to load still
    gets its estimate), for an objective solved in closed form (retrofit) too: its plan and lexicons need
    the words alone. ``on_phase``: as ``run``'s (the vectors' read)."""
    from embedtune import formats
    from embedtune.objectives import objective_class

    config = dataclasses.replace(config, format=config.format or formats.detect_format(config.vectors))
    loaded = _load(config, None, reading, on_load, note, on_phase, outline=True)
    objective = objective_class(loaded.config.train.objective)
    config, vectors = loaded.config, loaded.vectors
    if objective.closed_form is not None:   # no corpus, no loop: the objective plans itself
        d = objective.closed_form.dry_run(vectors, config, loaded.lowercase, resume, workers)
    else:
        from embedtune.dryrun.estimate import describe
        from embedtune.dryrun.runplan import plan_run

        with objective.open_corpus(config.corpus, config, lowercase=loaded.lowercase,
                                   tokenize=config.vocab.tokenize, vocabulary=vectors.index) as corpus:
            planned = plan_run(vectors, corpus, config, resume=resume)
            planned.set_up_units = objective.set_up_units(config.train, corpus, planned)
            objective.dry_run_reads(corpus)   # what training reads beyond the corpus, for its errors
        d = describe(planned, vectors, workers)
    d.update(dry_run=True, to=loaded.out_format, lowercase=loaded.lowercase)
    return DryRun(d, objective.describe.dry_run_lines(d, loaded.config))


def run(config: Config, *, vectors: Vectors | None = None, sentences: Iterable | None = None,
        reading: Reading = Reading(), resume: bool = False, overwrite_checkpoints: bool = False,
        keep_checkpoints: bool = False, own_process: bool = False,
        on_load: Callable[[str], None] | None = None, on_plan: Callable[[Plan], None] | None = None,
        progress: Callable | None = None, note: Callable[[str], None] | None = None,
        stop: contextlib.AbstractContextManager | None = None,
        on_phase: Callable | None = None) -> RunResult:
    """Fine-tune ``config.vectors`` (or ``vectors``) on ``config.corpus`` (or ``sentences``), write
    ``config.output`` when it is set, and return the result.

    reading : how VECTORS is read
    resume, overwrite_checkpoints : as embedtune.training.train takes them; keep_checkpoints: leave them
        once the output is written (else removed then, and only then)
    own_process : the process ends with this run (the command's): what the count and TensorFlow's
        import made is frozen out of the cyclic collector for the rest of it (count_while_importing);
        a library caller's heap is left as it was
    on_load : told the path before the vectors load; on_plan : given the Plan once the rows are decided;
        progress : given an embedtune.training.Progress now and then; note : told the text of each note;
        on_phase : given an embedtune.phases.Phase as each lasting set-up phase goes
    stop : polled after each step; a context manager too (the command's, which takes over Ctrl-C and SIGTERM),
        entered for the training loop alone, once set up (embedtune.training.train)
    Raises EmbedtuneError, TrainingInterrupted (embedtune.errors; a stop asked) and distribute.PeerLost.
    """
    from embedtune.objectives import check_corpus_start, objective_class

    check_corpus_start(config)   # binary data shows in the first bytes: before the vectors load
    read = vectors is None
    with contextlib.ExitStack() as rendering:
        compiling = _compile_ahead(config, sentences) if read else None
        if compiling is not None:
            rendering.callback(compiling.close)   # its children ended with the run, however it ends
        loaded = _load(config, vectors, reading, on_load, note, on_phase, kernels=_counts_compiled(config, sentences))
        config, vectors = loaded.config, loaded.vectors
        objective = objective_class(config.train.objective)
        # A child compiling the writer's kernels: the lines wait for the count (the render thread would compile them
        # itself, niced, holding numba's compiler lock while the count waits for its own).
        ahead = _render_ahead(config, vectors, loaded.out_format, read,
                              held=compiling is not None and compiling.compiles("embedtune.formats.text."))
        if ahead is not None:
            rendering.callback(ahead.stop)   # at the write, or at an error before it
        return _run(config, loaded, objective, sentences, resume, overwrite_checkpoints, keep_checkpoints,
                    own_process, on_plan, progress, note, stop, on_phase, ahead)


def _compile_ahead(config: Config, sentences):
    """A fresh install's kernels compiled in processes beside the run while it reads and counts
    (kernels/ahead.py); None where there is nothing to compile (a warm cache: no process started) or it cannot
    be told beforehand (then each kernel compiles as the run first calls it)."""
    listed = ahead_kernels(config, sentences)
    if not listed:
        return None
    from embedtune.kernels import ahead

    return ahead.start(listed)


def ahead_kernels(config: Config, sentences=None) -> list:
    """The kernels (kernels/ahead.Kernel) a run of ``config`` will call, known from its config and its vectors
    file's first bytes, in the order it calls them; [] where that cannot be told (standard input, several
    workers, a config error: left to the run, to raise in its order)."""
    if not _counts_compiled(config, sentences) or not isinstance(config.vectors, str) or config.vectors == "-":
        return []
    from embedtune.distribute.cluster import distributed
    from embedtune.errors import EmbedtuneError

    if distributed():
        return []
    try:
        from embedtune import formats

        in_format = config.format or formats.detect_format(config.vectors)
        resolved = resolve(dataclasses.replace(config, format=in_format))
    except (EmbedtuneError, OSError):
        return []
    from embedtune.corpus import fast
    from embedtune.kernels import ahead

    return ahead.kernels_for(resolved, corpus_file=True, reader=not fast.small_file(config.corpus))


def _counts_compiled(config: Config, sentences) -> bool:
    """Whether the run's corpus is a file the compiled reader may count (corpus/fast.py: not a file under
    fast.SMALL_FILE, which ahead_kernels asks apart; numba loaded then, before the steps, whichever they are):
    known before the vectors are read, unlike the step's choice, which waits for the objective that the vectors'
    format resolves."""
    from embedtune.corpus import fast

    return sentences is None and config.corpus is not None and fast.ENABLED


def _render_ahead(config: Config, vectors: Vectors, out_format: str | None, read: bool, held: bool = False):
    """The output's lines rendered while the run sets up and trains, on a core its set-up leaves free
    (formats.render_ahead): a text output, written here (not a worker of several other than the chief).
    ``read``: the vectors were read from config.vectors, whose lines are copied where they are the same text;
    ``held``: the rendering waits for its ``go()`` (_run's, once the corpus is counted)."""
    from embedtune.distribute import is_chief

    if config.output is None or out_format is None or not is_chief():
        return None
    from embedtune import formats

    if read:
        return formats.render_ahead(vectors, out_format, config.vectors, config.format, held=held)
    return formats.render_ahead(vectors, out_format, held=held)


def _run(config: Config, loaded: _Loaded, objective, sentences, resume, overwrite_checkpoints, keep_checkpoints,
         own_process, on_plan, progress, note, stop, on_phase, ahead) -> RunResult:
    """``run`` once the vectors are loaded (``loaded``) and their lines rendering ahead (``ahead``, or None)."""
    vectors, seconds = loaded.vectors, loaded.seconds
    with contextlib.ExitStack() as held:
        corpus = None
        if objective.modes.corpus:
            source = config.corpus if sentences is None else sentences
            corpus = held.enter_context(objective.open_corpus(source, config, lowercase=loaded.lowercase,
                                                              tokenize=config.vocab.tokenize,
                                                              vocabulary=vectors.index))
            # Counted before the stop requests are taken over (for the loop alone): a Ctrl-C here interrupts at once.
            from embedtune.distribute import steps_as_one_process
            from embedtune.training.step import runs_on

            compiled, tensorflow = runs_on(objective, config.train,
                                           one_process=steps_as_one_process(config.train))
            from embedtune.kernels import cache_is_cold
            from embedtune.kernels.compiling import tell_when_compiling
            from embedtune.phases import announce, phase, reporting

            with reporting(on_phase):
                reader = corpus.reads_compiled
                if (compiled or reader) and cache_is_cold(reader):   # else seconds without a word
                    announce("compiling kernels (first run only)")
                    tell_when_compiling(None)   # said before TensorFlow's import can point fd 2 elsewhere
                with phase("counting the corpus", 0, "B") as advance:
                    seconds["count_and_import"] = count_while_importing(
                        corpus, freeze=own_process, tensorflow=tensorflow, compiled=compiled, advance=advance)
        if ahead is not None:
            ahead.go()   # held until the count (run's held=): a child has compiled the writer's kernels meanwhile
        from embedtune.distribute import strategy_from_env
        from embedtune.training import train   # imported by now, when counted (count_while_importing)

        # A closed-form fit (retrofit) takes seconds, polls nothing, never enters ``stop``: Ctrl-C stops it at once.
        result = train(vectors, corpus, config, progress=progress, on_plan=on_plan, resume=resume, stop=stop,
                       on_phase=on_phase,
                       overwrite_checkpoints=overwrite_checkpoints, note=note,
                       strategy=strategy_from_env())
    out = RunResult(result.vectors, result.plan, result.stats, config, loaded.lowercase, result.model)
    from embedtune.distribute import is_chief

    if config.output is None or not is_chief():   # one worker of several: the chief writes and reports
        return out
    began = time.perf_counter()
    from embedtune.phases import phase, reporting

    # A phase of its own: the command closes the training's bar as it starts (its rate the loop's alone).
    with reporting(on_phase), phase(f"writing {os.path.basename(config.output)}", len(result.vectors),
                                    "row") as advance:
        out.written = save_checked(result.vectors, vectors.matrix, result.plan.frozen, config.output,
                                   loaded.out_format, model=vectors.model, ahead=ahead, progress=_advancing(advance))
    seconds["write"] = time.perf_counter() - began
    if config.train.checkpoint_dir and not keep_checkpoints:
        from embedtune.training.checkpoints import folder as checkpoints

        # Only now: until the output is written, the checkpoints are all there is of the run.
        left = checkpoints.remove(config.train.checkpoint_dir)
        if left is not None and note is not None:
            note(left)
    objective.write_outputs(out, config)
    summarize(out, loaded.out_format, seconds, corpus is not None)
    if config.report or config.train.logdir:   # the page and TensorBoard's projector (embedtune/report/)
        from embedtune.report import after_run

        made = after_run(out, vectors, result.init)
        out.stats.setdefault("seconds", {}).update({key: round(value, 3) for key, value in made.items()})
    out.report = objective.describe.report_lines(out, config)
    return out


def summarize(out: RunResult, out_format: str, seconds: dict, looped: bool) -> None:
    """The run's stats completed as the summary: its files, the frozen rows' read-back and, for a run
    of the loop, where its time went."""
    s, config = out.stats, out.config
    s.update(vectors=config.vectors, **({"corpus": config.corpus} if looped else {}), output=config.output,
             format=out_format)
    if looped:
        s.update(lowercase=out.lowercase, tokenize=config.vocab.tokenize)
    s.update(max_frozen_change=out.written.worst, frozen_rows_checked=out.written.checked)
    if not looped:
        return
    # The count was made before train() (while TensorFlow imported): total_seconds counts it, as
    # train() alone does; "seconds" splits the run (the loop is train_seconds).
    s["total_seconds"] = round(s["total_seconds"] + seconds["count_and_import"], 3)
    seconds.update(setup=s["total_seconds"] - seconds["count_and_import"] - s["train_seconds"],
                   loop=s["train_seconds"])
    s["seconds"] = {key: round(value, 3) for key, value in seconds.items()}


def count_while_importing(corpus, freeze: bool = True, tensorflow: bool = True, compiled: bool = False,
                          advance=None) -> float:
    """Count the corpus (Corpus.count keeps its figures for train) while the trainer and the new words'
    starts import on a thread, with TensorFlow (``tensorflow``: the run will use it) and numba's compiler
    started from its cache (``compiled``: the run steps through a compiled step; training.step.runs_on says
    both): the import needs nothing from the corpus, and train() counts first. Both are
    mostly Python and share the GIL, still together they take less time than in series
    (benchmarks/README.md, classify); a plain compiled run imports no TensorFlow at all. Nothing is printed
    until the import is done (TensorFlow's import points fd 2 at a sink: embedtune._tf), and an
    error, a Ctrl-C or a SIGTERM (raised by cli/main.py) in the count or the wait is raised after the
    import; a failed import is raised again by the caller's own. Returns the seconds until both were done.
    One worker of several (TF_CONFIG) only imports the loop here: it counts its share of the lines in train
    (distribute.Worker.count; a plain-text file by one compiled pass over the whole file, whose ids it
    keeps: distribute/compiled_share.py); a worker of the gathered step through TensorFlow imports it once its
    peers are met (Worker.start: a worker whose peers never come does not pay for it), any other worker only
    where its step is TensorFlow's. ``freeze`` False: the
    collector is only off while both run (a library caller's process lives on). ``advance``: Corpus.count's
    (the bytes read, for progress)."""
    import importlib
    import threading

    # Python's cyclic collector is off while both run, and what they made is frozen after (gc.freeze:
    # kept for the run, never scanned again). Its full collections re-scanned the growing heap
    # (TensorFlow's modules, the corpus's lines) with the GIL held and found nothing to free
    # (benchmarks/README.md, classify). Off from here: the import below is the first of the run's (a fresh
    # process collected once in it).
    collecting = gc.isenabled()
    gc.disable()
    try:
        from embedtune.distribute import cluster_from_env

        worker = cluster_from_env() is not None
    except BaseException:   # a TF_CONFIG that does not parse: the caller's error, the collector as it was
        if collecting:
            gc.enable()
        raise
    done = threading.Event()

    def load():
        try:
            importlib.import_module("embedtune.training.loop")
            if compiled:
                importlib.import_module("embedtune.kernels.common").warm_up()
            # The new words' starts (their spelling fit brings scipy.sparse), imported here beside the count
            # rather than on the main thread between the count and their corpus pass.
            importlib.import_module("embedtune.newwords.add")
            if tensorflow and not worker:
                importlib.import_module("embedtune._tf").tf
        except BaseException:   # imported again, and raised there, by the caller
            pass
        finally:
            done.set()   # after the import restored fd 2

    began = time.perf_counter()
    thread = threading.Thread(target=load, name="embedtune-import", daemon=True)
    thread.start()
    pending = None
    try:
        if not worker:
            corpus.count(advance)
    except BaseException as err:
        pending = err
    # Waited for on an Event: a Thread.join interrupted by Ctrl-C marks the thread stopped while it
    # runs on (CPython 3.11's _wait_for_tstate_lock), so is_alive() could not be trusted after it.
    while not done.is_set():   # seconds at most: the import's
        try:
            done.wait()
        except BaseException as err:   # Ctrl-C or SIGTERM while waiting
            pending = pending or err
    if freeze:
        gc.freeze()
    if collecting:
        gc.enable()
    if pending is not None:
        raise pending
    return time.perf_counter() - began
