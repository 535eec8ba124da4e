"""Checkpoints: everything a run needs to continue exactly where it stopped.

A checkpoint is a folder ``ckpt-<step>`` holding a ``tf.train.Checkpoint`` of the
trainable table, the context table, the optimizer state and the step's random
generator, plus ``state.json``: the position in the corpus, the numpy random state
of the current chunk, the loss so far and a fingerprint of the vectors, corpus and
settings. It is written under a temporary name and renamed when complete, so a run
killed while writing leaves the previous checkpoint intact.

A checkpoint folder belongs to one run at a time (`Folder`): a lock file held for the
run's life keeps a second run out; a new run refuses a folder that holds another run's
checkpoints (unless told to delete them); the newest ``keep`` checkpoints this run wrote
are kept, by when they were written, not by step number; a damaged checkpoint is skipped
for the one before it, and said so.

Why not ``tf.train.CheckpointManager``: it keeps the newest ``max_to_keep`` by save order,
as `Folder` does, but (1) it commits only the TensorFlow part, and a checkpoint here is two
parts (the tables and ``state.json``'s numpy random state and corpus position) that must be
renamed into place together to survive a kill -9 between them; (2) its documentation says
"only one should be active in a particular directory at a time" and it does nothing to
ensure it (no lock); (3) it adopts whatever its ``checkpoint`` index file lists, so it
cannot tell another run's checkpoints from this run's; (4) its restore stops at a damaged
file instead of falling back. Pruning is the one thing it would do, and that is ten lines.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from embedtune.errors import EmbedtuneError

STATE_FILE = "state.json"
TABLES = "tables"          # prefix of the tf.train.Checkpoint files in a checkpoint folder
PREFIX = "ckpt-"
PARTIAL = ".partial"
LOCK_FILE = ".lock"
KEEP = 3


@dataclass
class Position:
    """Where the loop is: the next batch to run is (epoch, chunk, batch)."""

    epoch: int = 1
    chunk: int = 0
    batch: int = 0
    words_done: int = 0
    steps: int = 0
    pairs: int = 0
    chunk_rng: dict | None = None   # numpy bit-generator state at the start of the chunk
    loss_history: list = field(default_factory=list)
    loss_start: float | None = None  # loss per pair of the run's first step, before any update
    # A multi-worker run's position in each worker's share of the lines, [chunk, batch, words, more]
    # a worker (embedtune/distribute/); None in one process
    shares: list | None = None


class DamagedCheckpoint(EmbedtuneError):
    """A checkpoint whose state or tables cannot be read; ``path`` names the damaged file."""


def fingerprint(words: list[str], frozen_bytes: bytes, corpus_words: int, corpus_lines: int, settings: dict,
                matrix: np.ndarray | None = None, corpus_digest: str | None = None) -> dict:
    """What must match for a resume: the rows (words, values and freeze plan), the corpus
    (counts and a hash of its content) and the settings."""
    h = hashlib.sha256()
    for w in words:
        h.update(w.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    h.update(frozen_bytes)
    if matrix is not None:
        # The values too: a vectors file edited in place, same words, must not resume. Hashing the
        # matrix is cheap next to loading it as text (benchmarks/README.md, io).
        h.update(np.ascontiguousarray(matrix, np.float32).data)
    corpus = {"words": corpus_words, "lines": corpus_lines}
    if corpus_digest is not None:
        corpus["sha256"] = corpus_digest
    return {
        "rows": hashlib.sha256(h.digest()).hexdigest()[:16],
        "corpus": corpus,
        "settings": settings,
    }


def _step_of(name: str) -> int | None:
    digits = name[len(PREFIX):]
    return int(digits) if name.startswith(PREFIX) and digits.isdigit() else None


def checkpoint_names(directory: str) -> list[str]:
    """Names of the checkpoint folders in ``directory`` (complete or not, partial ones aside), by step."""
    if not os.path.isdir(directory):
        return []
    found = [(_step_of(n), n) for n in os.listdir(directory)]
    return [n for step, n in sorted(x for x in found if x[0] is not None)]


def latest(directory: str) -> str | None:
    """The newest checkpoint folder with a state file in ``directory``, or None."""
    complete = [n for n in checkpoint_names(directory) if os.path.exists(os.path.join(directory, n, STATE_FILE))]
    return os.path.join(directory, complete[-1]) if complete else None


class Folder:
    """The checkpoint folder of one run, locked from `open` to `close`.

    resume : continue from the folder's newest usable checkpoint; else the folder must hold
        no checkpoint (``overwrite`` deletes any it holds).
    """

    def __init__(self, directory: str, keep: int = KEEP):
        self.directory = directory
        self.keep = keep
        self._lock = None
        self._created = False
        self._written: list[str] = []   # this run's line of checkpoints, oldest first: pruned from the front

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self, resume: bool, overwrite: bool = False) -> None:
        directory = self.directory
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise EmbedtuneError("--checkpoint-dir: is a file, expected a folder", directory)
        if resume and not os.path.isdir(directory):
            raise EmbedtuneError("--resume: no checkpoint: the folder does not exist", directory)
        self._created = not os.path.isdir(directory)
        try:
            os.makedirs(directory, exist_ok=True)
            lock = open(os.path.join(directory, LOCK_FILE), "a+")
        except OSError as err:
            raise EmbedtuneError(f"--checkpoint-dir: cannot use the folder: {err.strerror or err}", directory) from None
        try:
            # flock, not a file created with O_EXCL: the kernel drops it when the process dies,
            # kill -9 included, so a crashed run never leaves the folder locked.
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            lock.seek(0)
            holder = lock.read().strip()
            lock.close()
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise EmbedtuneError(f"cannot lock the checkpoint folder: {err.strerror or err}", directory) from None
            who = f" (process {holder})" if holder.isdigit() else ""
            raise EmbedtuneError(f"another run{who} is writing checkpoints to this folder; wait for it to end "
                                 "or give another --checkpoint-dir", directory) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        self._lock = lock
        try:
            # The folder is ours now: a .partial left by a run killed while writing is garbage.
            for name in os.listdir(directory):
                if name.startswith(PREFIX) and name.endswith(PARTIAL):
                    shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
            names = checkpoint_names(directory)
            if names and not resume:
                if not overwrite:
                    shown = ", ".join(names[-3:])
                    raise EmbedtuneError(
                        f"holds the checkpoints of an earlier run ({shown}); continue it with --resume, give "
                        "another --checkpoint-dir, or add --overwrite-checkpoints to delete them", directory)
                for name in names:
                    shutil.rmtree(os.path.join(directory, name))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._lock is None:
            return
        if not checkpoint_names(self.directory):
            # A run that wrote nothing (an error before its first checkpoint) leaves no trace: the
            # lock file goes while still held, and the folder if this run made it.
            try:
                os.unlink(os.path.join(self.directory, LOCK_FILE))
                if self._created:
                    os.rmdir(self.directory)
            except OSError:
                pass
        self._lock.close()   # releases the flock
        self._lock = None

    def resume(self, tf_checkpoint, fp: dict, note: Callable[[str], None] | None = None) -> tuple[str, Position]:
        """Restore the newest usable checkpoint: (its folder, its position). A damaged one is
        skipped for the one before it, and ``note`` is told; a fingerprint that differs is an error."""
        names = checkpoint_names(self.directory)
        if not names:
            raise EmbedtuneError("--resume: no checkpoint in this folder", self.directory)
        damaged: list[DamagedCheckpoint] = []
        for name in reversed(names):
            path = os.path.join(self.directory, name)
            try:
                position = load(path, tf_checkpoint, fp)
            except DamagedCheckpoint as err:
                damaged.append(err)
                continue
            if damaged and note is not None:
                skipped = "; ".join(f"{err.path}: {err.message}" for err in damaged)
                note(f"skipped {len(damaged)} damaged checkpoint{'s' if len(damaged) > 1 else ''} ({skipped}); "
                     f"resuming from the one before, {name}")
            # Checkpoints newer than the one resumed from left this run's line: they go first.
            newer = names[names.index(name) + 1:]
            self._written = newer + names[: names.index(name) + 1]
            return path, position
        first = damaged[0]
        raise EmbedtuneError(f"{first.message}; no earlier checkpoint in the folder can be read either",
                             first.path)

    def save(self, tf_checkpoint, position: Position, fp: dict) -> str:
        """Write a checkpoint atomically; remove all but the ``keep`` this run wrote last."""
        name = f"{PREFIX}{position.steps}"
        final = os.path.join(self.directory, name)
        partial = final + PARTIAL
        from embedtune._tf import tf

        try:
            shutil.rmtree(partial, ignore_errors=True)
            os.makedirs(partial)
            tf_checkpoint.write(os.path.join(partial, TABLES))
            with open(os.path.join(partial, STATE_FILE), "w") as f:
                json.dump({"position": asdict(position), "fingerprint": fp}, f)
                f.flush()
                os.fsync(f.fileno())
            shutil.rmtree(final, ignore_errors=True)
            os.rename(partial, final)
        except OSError as err:
            raise EmbedtuneError(f"cannot write a checkpoint: {err.strerror or err}", self.directory) from None
        except tf.errors.OpError as err:   # TensorFlow's writer: a full disk is a ResourceExhaustedError
            raise EmbedtuneError(f"cannot write a checkpoint: {_os_reason(err)}", self.directory) from None
        finally:
            # However the save ends (an error, a second Ctrl-C), no half-written checkpoint stays.
            if os.path.isdir(partial):
                shutil.rmtree(partial, ignore_errors=True)
        if name in self._written:
            self._written.remove(name)
        self._written.append(name)
        while len(self._written) > self.keep:
            shutil.rmtree(os.path.join(self.directory, self._written.pop(0)), ignore_errors=True)
        return final


def _os_reason(err) -> str:
    """The OS's words in a TensorFlow I/O error ("...tempstate123; No space left on device [Op:SaveV2]"
    -> "No space left on device"), not its op names and temporary paths."""
    lines = (err.message or "").strip().splitlines()
    text = lines[0].split(" [Op:")[0] if lines else ""
    return text.rsplit("; ", 1)[-1] if "; " in text else text or type(err).__name__


def remove(directory: str) -> bool:
    """Delete a finished run's checkpoints, its lock file and the folder if then empty; False
    (and nothing deleted) when another run holds the folder now."""
    if not os.path.isdir(directory):
        return True
    lock_path = os.path.join(directory, LOCK_FILE)
    try:
        lock = open(lock_path, "a+")
    except OSError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        for name in os.listdir(directory):
            if name.startswith(PREFIX):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        os.unlink(lock_path)
    try:
        os.rmdir(directory)
    except OSError:   # other files of the user's: the folder stays
        pass
    return True


def _flat(settings: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _shown(value) -> str:
    # None in the settings is a key left to its default (the objective's, for lr and the like)
    return "unset (default)" if value is None else repr(value)


def _settings_diff(then: dict, now: dict) -> str:
    """'lr: unset (default) then, 0.05 now; vocab.min_count: 5 then, 3 now'"""
    then, now = _flat(then), _flat(now)
    keys = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
    return "; ".join(f"{k}: {_shown(then.get(k))} then, {_shown(now.get(k))} now" for k in keys)


def load(path: str, tf_checkpoint, fp: dict) -> Position:
    """Restore tables and state from a checkpoint folder; the fingerprint must match.

    Raises DamagedCheckpoint when its state or tables cannot be read, EmbedtuneError when it
    belongs to other vectors, another corpus or other settings (then nothing was restored).
    """
    state_path = os.path.join(path, STATE_FILE)
    try:
        with open(state_path, "rb") as f:
            saved = json.loads(f.read().decode("utf-8"))
        theirs = saved["fingerprint"]
        position = Position(**saved["position"])
        for key in ("rows", "corpus", "settings"):
            theirs[key]
    except FileNotFoundError:
        raise DamagedCheckpoint("missing (the checkpoint is incomplete)", state_path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedCheckpoint(f"damaged, not JSON ({err})", state_path) from None
    except (KeyError, TypeError, AttributeError):
        raise DamagedCheckpoint("damaged, not a checkpoint's state", state_path) from None
    except OSError as err:
        raise DamagedCheckpoint(f"cannot be read: {err.strerror or err}", state_path) from None
    for key, what in (("rows", "vectors or freeze rules"), ("corpus", "corpus"), ("settings", "settings")):
        if theirs.get(key) != fp.get(key):
            detail = ""
            if key == "settings":
                detail = f" ({_settings_diff(theirs[key], fp[key])})"
            elif key == "corpus":
                then, now = theirs[key], fp[key]
                if (then.get("words"), then.get("lines")) == (now.get("words"), now.get("lines")):
                    detail = f" (the same {now['words']:,} words in {now['lines']:,} lines, other content)"
                else:
                    detail = (f" ({then.get('words')} words in {then.get('lines')} lines then, "
                              f"{now['words']} in {now['lines']} now)")
            verb = "differs" if key == "corpus" else "differ"
            raise EmbedtuneError(f"cannot resume: the {what} {verb} from the checkpoint's{detail}", path)
    from embedtune._tf import tf

    try:
        tf_checkpoint.read(os.path.join(path, TABLES)).assert_consumed()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError) as err:
        reason = (getattr(err, "message", None) or str(err) or type(err).__name__).strip().splitlines()[0]
        # TensorFlow's words for a damaged index (measured: flipped, cut and missing index and data
        # files); anything else is the data file (a checksum mismatch, "Read less bytes than requested").
        in_index = any(w in reason for w in (".index", "sstable", "matching files"))
        data = sorted(n for n in os.listdir(path) if n.startswith(TABLES + ".data")) if os.path.isdir(path) else []
        damaged = TABLES + ".index" if in_index else (data[0] if data else TABLES + ".data-00000-of-00001")
        raise DamagedCheckpoint(f"damaged ({reason[:160]})", os.path.join(path, damaged)) from None
    return position
