"""The checkpoint folder of a run: where its checkpoints go, one run at a time.

Each checkpoint (what it holds and how it is read: ``state.py``) is written under a temporary name
and renamed when complete, so a run killed while writing leaves the previous checkpoint intact.

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
import os
import shutil
from collections.abc import Callable

from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints import state
from embedtune.training.checkpoints.state import STATE_FILE, DamagedCheckpoint, Position

PREFIX = "ckpt-"
PARTIAL = ".partial"
LOCK_FILE = ".lock"
KEEP = 3


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
                position = state.load(path, tf_checkpoint, fp)
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
            state.write(partial, tf_checkpoint, position, fp)
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


