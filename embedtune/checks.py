"""Cheap checks of the files a command names, made before any work: each costs a stat, a compile or
the creation of an empty file, so commands run them before TensorFlow is imported and before a
vectors file is read, which take seconds. Each raises EmbedtuneError naming the file."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
from dataclasses import dataclass

from embedtune.errors import BadOption, EmbedtuneError


@dataclass(frozen=True)
class Named:
    """A file (or folder) a command reads or writes, as the command line or a config named it.

    label : how an error names it: "-o", "VECTORS", "'vocab.freeze_list' in run.toml"
    inside : for a folder, the names (shell patterns, first level) the command reads or writes in it
    """

    label: str
    path: str
    inside: tuple[str, ...] = ()


# What a run writes into its folders (embedtune/training/checkpoints/, training/eventfile.py and report/projector.py):
# an input there would be deleted or overwritten. Literal here, so a check imports none of them.
FOLDER_FILES = {
    "checkpoint_dir": ("ckpt-*", ".lock", ".ckpt-*.partial", ".lock.*.tmp"),
    "logdir": ("events.out.tfevents.*", "projector_config.pbtxt", "embedtune-rows.tsv",
               "embedtune-rows-metadata.tsv"),
}


def check_names(reads: list[Named], writes: list[Named]) -> None:
    """The one check of a command's file names, before anything is read: no name is empty (an empty
    shell variable must not drop a file: BadOption, a usage error), at most one input is standard
    input, and no output is an input or another output, by resolved path (symlinks, ``./`` and
    ``../`` spellings, hard links), an input among the files an output folder gets included."""
    for named in (*reads, *writes):
        if named.path == "":
            raise BadOption(f"{named.label}: empty file name")
    piped = [named.label for named in reads if named.path == "-"]
    if len(piped) > 1:
        raise BadOption(f"{' and '.join(piped)} cannot both be standard input")
    for at, target in enumerate(writes):
        if target.path is None or target.path == "-":
            continue
        for source in reads:
            if source.path not in (None, "-") and _clash(target, source):
                if target.inside:   # a folder of the run's: name the input it would write over
                    raise EmbedtuneError(f"{target.label} ({target.path}) would write over this input "
                                         f"({source.label}); choose another folder", source.path)
                raise EmbedtuneError(f"output would overwrite an input; choose another {target.label}", target.path)
        for earlier in writes[:at]:   # neither need exist yet
            if earlier.path not in (None, "-") and _clash(target, earlier):
                raise EmbedtuneError(f"{target.label} would overwrite the file of {earlier.label}; choose another "
                                     f"{target.label}", target.path)


def _clash(one: Named, other: Named) -> bool:
    if one.inside and other.inside:   # two folders: their own files are told apart by name
        return False
    if one.inside:
        return _within(other.path, one)
    if other.inside:
        return _within(one.path, other)
    return same_file(one.path, other.path)


def _within(path: str, folder: Named) -> bool:
    """``path`` is one of the names ``folder`` gets (or a file inside one)."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(folder.path))
    if relative == os.curdir or relative.startswith(os.pardir):
        return False
    first = relative.split(os.sep)[0]
    return any(fnmatch.fnmatchcase(first, pattern) for pattern in folder.inside)


def config_files(config, source: str | None = None, given=lambda name: False) -> tuple[list[Named], list[Named]]:
    """(reads, writes): the files a config names, from the keys' declarations (Key.path), so that a new
    key is checked with no more code. ``source``: the config file, named in the labels (None: the
    values are the command's options); ``given(name)``: the command line overrides that key."""
    from embedtune.config import all_keys

    reads, writes = [], []
    for key in all_keys():
        value = config.value(key)
        if not key.role or value is None or given(key.name):
            continue
        where = f"{key.table}.{key.name}".lstrip(".")
        label = f"'{where}' in {source}" if source else (
            key.flag if key.option else "-o" if key.name == "output" else key.name.upper())
        if key.role == "read":
            reads.append(Named(label, value))
        else:
            writes.append(Named(label, value, FOLDER_FILES.get(key.name, ()) if key.role == "folder" else ()))
    return reads, writes


def check_inputs_and_outputs(vectors: str, corpus: str | None, output: str, json_out: str | None,
                             other_inputs: tuple = (), other_outputs: tuple = ()) -> None:
    """Refuse, before any work, what would fail or destroy something at the end: JSON and vectors both
    on standard output, an output that is an input or another output (check_names; ``other_inputs``
    are inputs too, ``other_outputs`` (option, path) pairs after -o and --json), a folder, in a folder
    that does not exist or cannot be written; an input that does not exist."""
    if json_out == "-" and output == "-":
        raise EmbedtuneError("standard output already carries the vectors (-o -); give --json FILE")
    reads = [Named("VECTORS", vectors), Named("CORPUS", corpus),
             *(Named("input", path) for path in other_inputs if path is not None)]
    writes = [Named("-o", output), Named("--json", json_out),
              *(Named(option, path) for option, path in other_outputs)]
    check_names([named for named in reads if named.path is not None],
                [named for named in writes if named.path is not None])
    for named in writes:
        check_writable_file(named.path, named.label)
    check_input_file(vectors, "vectors file", missing="no such file")   # the words of formats.io
    check_input_file(corpus, "corpus file")


def same_file(path: str | None, other: str | None) -> bool:
    """The two names are one file (not '-'): by spelling once symlinks are resolved, else by samefile.
    Devices and pipes are not files an output overwrites (``-o /dev/null`` beside ``--freeze-list /dev/null``)."""
    if not path or not other or "-" in (path, other):
        return False
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        return False
    return os.path.realpath(path) == os.path.realpath(other) or (
        os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other))


def check_input_file(path: str | None, what: str, missing: str | None = None) -> None:
    """A file to read (not '-'): it exists, is not a folder, and may be read.

    what : "corpus file", ...; missing : the message when it does not exist (default: "no such WHAT")
    """
    if not path or path == "-":
        return
    if not os.path.exists(path):
        raise EmbedtuneError(missing or f"no such {what}", path)
    if os.path.isdir(path):
        raise EmbedtuneError(f"is a folder, expected a {what}", path)
    if not os.access(path, os.R_OK):
        raise EmbedtuneError("cannot open for reading: permission denied", path)


def check_pattern(pattern: str | None, option: str) -> None:
    if pattern is None:
        return
    from embedtune.plan.patterns import compile_pattern

    compile_pattern(pattern, option.lstrip("-").replace("-", "_"))


def check_writable_file(target: str | None, option: str | None) -> None:
    """The file ``target`` can be written where the writer will write it: its folder exists and a file
    can be created in it (tried, as the writer's temporary file is, and removed at once). A target
    that exists and is not a regular file (/dev/null, a pipe) is opened as it is, so it is left alone.
    option : the option that named it, for the message (None: an argument, named by its path only)."""
    if not target or target == "-":
        return
    prefix = f"{option}: " if option else ""
    if os.path.isdir(target):
        raise EmbedtuneError(f"{prefix}is a folder, expected a file name", target)
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise EmbedtuneError(f"{prefix}{'the ' if option else ''}folder {folder} does not exist", target)
    if os.path.exists(target) and not os.path.isfile(target):
        _try_device(target, prefix)
        return
    _try_create_in(folder, target, prefix)


def _try_device(target: str, prefix: str) -> None:
    # A device is written where it is (open_target): /dev/full refuses every write, even one of no
    # bytes, so such a write tells before the run, and writes nothing to /dev/null or a terminal.
    # A FIFO is left alone: opening it would wait for its reader.
    if not stat.S_ISCHR(os.stat(target).st_mode):
        return
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        raise EmbedtuneError(f"{prefix}cannot open for writing: {err.strerror or err}", target) from None
    try:
        os.write(fd, b"")
    except OSError as err:
        raise EmbedtuneError(f"{prefix}cannot write: {err.strerror or err}", target) from None
    finally:
        os.close(fd)


def check_writable_folder(folder: str | None, option: str) -> None:
    """A folder the run will create or write into: not a file, and its nearest existing folder
    (itself, or the one it will be made in) lets a file be created."""
    if not folder:
        return
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise EmbedtuneError(f"{option}: not a folder", folder)
    existing = os.path.abspath(folder)
    while not os.path.isdir(existing):
        parent = os.path.dirname(existing)
        if os.path.exists(existing) or parent == existing:
            raise EmbedtuneError(f"{option}: cannot be made: {existing} is not a folder", folder)
        existing = parent
    _try_create_in(existing, folder, f"{option}: ")


def _try_create_in(folder: str, target: str, prefix: str) -> None:
    # Permission bits do not tell (root ignores them; a read-only mount or /sys refuses anyway):
    # only creating a file does, exactly as the writer will at the end.
    # Removed in ``finally``: a signal (Ctrl-C, SIGTERM raised as an exception) may arrive at any point.
    probe = os.path.join(folder, f".embedtune-probe.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as err:
            raise EmbedtuneError(f"{prefix}cannot write in {folder}: {err.strerror or err}", target) from None
        os.close(fd)
    finally:
        with contextlib.suppress(OSError):   # not made (refused), or gone
            os.unlink(probe)


# --- `embedtune train`'s checks, before the vectors load --------------------------------------------

def objective_of(config):
    """The objective class of an unresolved config; "auto" reads plain text as sgns and glove do (which
    of the two it is follows the vectors' format, known once they are detected)."""
    from embedtune.objectives import AUTO, Objective, objective_class

    return Objective if config.train.objective == AUTO else objective_class(config.train.objective)


def missing_argument(config) -> str | None:
    """What a run's arguments lack or have too much of (a usage error), or None."""
    objective = objective_of(config)
    for key in ("vectors", "corpus", "output") if objective.modes.corpus else ("vectors", "output"):
        if getattr(config, key) is None:
            return f"missing {key.upper()} (give it as an argument{'' if key != 'output' else ' (-o)'} or in --config)"
    return objective.argument_problem(config)


def check_run(config, resume: bool = False, dry_run: bool = False, json_out: str | None = None,
              workers: int = 1, config_path: str | None = None) -> None:
    """Everything about a run's inputs and outputs that can be checked before hours of training, and
    before TensorFlow and the vectors load: each check costs a stat or a compile. A dry run writes no
    vectors, so its plan may go to standard output whatever -o says."""
    from embedtune.objectives import check_corpus_start

    objective = objective_of(config)
    objective.check_run(config, resume, workers)
    inputs = [(path, what) for path, what in objective.input_files(config) if path]
    if config.report == "-":   # standard output carries the vectors (-o -) or the summary (--json)
        raise EmbedtuneError("--report: give a file name; the page does not go to standard output")
    reads, writes = config_files(config)   # every file the run reads or writes, from the keys' declarations
    if json_out and not (dry_run and json_out == "-"):   # named after -o, before the others
        writes.insert(1 if writes and writes[0].label == "-o" else 0, Named("--json", json_out))
    check_names([*reads, *([Named("--config", config_path)] if config_path else [])], writes)
    check_inputs_and_outputs(config.vectors, config.corpus, config.output,
                             None if dry_run and json_out == "-" else json_out,
                             other_inputs=tuple(path for path, _ in inputs), other_outputs=(("--report", config.report),))
    for path, what in inputs:
        check_input_file(path, what)
    for path, option in objective.output_files(config):
        if path and not dry_run:
            check_writable_file(path, option)
    v, t = config.vocab, config.train
    check_input_file(v.freeze_list, "word-list file")   # a stat: a list may be a pipe, read once
    check_input_file(v.train_list, "word-list file")
    check_pattern(v.freeze_pattern, "--freeze-pattern")
    check_pattern(v.train_pattern, "--train-pattern")
    check_writable_folder(t.checkpoint_dir, "--checkpoint-dir")
    check_writable_folder(t.logdir, "--logdir")
    check_own_names(t.checkpoint_dir, t.logdir)
    if resume and not t.checkpoint_dir:
        raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
    if resume and not os.path.exists(t.checkpoint_dir):
        raise EmbedtuneError("--resume: no such folder (no checkpoint was written there)", t.checkpoint_dir)
    # Binary data or another encoding shows in the first bytes (pipes are not peeked).
    check_corpus_start(config)
    from embedtune.distribute import launched

    if workers > 1 and not launched():   # a launched worker was checked by its launcher
        check_workers(config, workers)


def check_own_names(checkpoint_dir: str | None, logdir: str | None) -> None:
    """The run's folders hold, under the names the run writes there (FOLDER_FILES), only what embedtune
    wrote: a user's file, folder or link there is refused before anything is written (each writer's own
    check, which it makes again when it writes)."""
    if checkpoint_dir:
        from embedtune.training.checkpoints.folder import check_folder

        check_folder(checkpoint_dir)
    if logdir:
        from embedtune.report.projector import check_logdir

        check_logdir(logdir)


def check_workers(config, workers: int) -> None:
    """What --workers N refuses beyond the objective's own refusals (Objective.check_run)."""
    from embedtune import distribute
    from embedtune.config import resolve

    if os.environ.get("TF_CONFIG"):
        raise EmbedtuneError("--workers starts its own workers; under TF_CONFIG run one process per worker")
    for key in ("vectors", "corpus"):
        path = getattr(config, key)
        if path is not None and (path == "-" or not os.path.isfile(path)):   # a pipe (<(...), a FIFO) is read once
            raise EmbedtuneError(f"--workers: every worker reads {key.upper()}, so it must be a file, "
                                 f"not {'standard input' if path == '-' else 'a pipe'}")
    # The batch size is the objective's unless given. Resolved here for this check alone, before the vectors'
    # format is known ("auto" follows it); the run resolves its own config once, after loading (embedtune.run).
    distribute.check_split(resolve(config).train, workers)
