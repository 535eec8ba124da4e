"""The checkpoint folder of a run: where its checkpoints go, one run at a time.

Each checkpoint (what it holds and how it is read: ``state.py``) is written under a temporary name
and renamed when complete, so a run killed while writing leaves the previous checkpoint intact.

A checkpoint folder belongs to one run at a time (`Folder`): a lock file held for the
run's life keeps a second run out; a new run refuses a folder that holds another run's
checkpoints (unless told to delete them); the newest ``keep`` checkpoints this run wrote
are kept, by when they were written, not by step number; a damaged checkpoint is skipped
for the one before it, and said so.

The folder is the user's: the tool creates, truncates or deletes only what it wrote there, told by a
mark it checks, never by a name alone. Its lock file says it is embedtune's (``LOCK_MARK``) and is never
opened through a link or with another name (a hard link to a word list would have been truncated);
a checkpoint is a folder, not a link, holding only a checkpoint's files, each a plain file with one name
(``own_checkpoint``). A name of the tool's (``.lock``, ``ckpt-N``) that holds something else is refused
before anything is written: the user's file is never taken for the tool's. A checkpoint is written (and
deleted) under a hidden name of its own with a random part, ``.ckpt-N.<8 hex digits>.partial``, made with
mkdir, which fails on any existing name: no user's folder can be taken for one being written, and a run
killed midway leaves that name, which the next run removes, never a ``ckpt-N`` holding part of its files.

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

import contextlib
import errno
import fcntl
import fnmatch
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable

from embedtune.errors import EmbedtuneError
from embedtune.plainfile import plain_file
from embedtune.training.checkpoints import state
from embedtune.training.checkpoints.state import ARRAYS, STATE_FILE, TABLES, DamagedCheckpoint, Position

PREFIX = "ckpt-"
PARTIAL = ".partial"
PARTIAL_NAME = re.compile(rf"\.{PREFIX}[0-9]+\.[0-9a-f]{{8}}{re.escape(PARTIAL)}")
LOCK_FILE = ".lock"
KEEP = 3
# The first key of the lock file's one JSON line: what makes a .lock embedtune's. Runs before it wrote
# the process id alone, which is taken as embedtune's too (a folder they left resumes).
LOCK_MARK = "embedtune checkpoint lock"
# What a checkpoint folder holds (state.write): the state and a compiled step's archive, or tf.train.Checkpoint's
# index and data files; a partial one may hold TensorFlow's temporary files and folder of a write cut short too.
CHECKPOINT_FILES = (STATE_FILE, ARRAYS, f"{TABLES}.index", f"{TABLES}.data-*")
PARTIAL_FILES = (STATE_FILE, f"{TABLES}*")
PARTIAL_FOLDERS = (f"{TABLES}_temp*",)
REFUSED = (f"the names {LOCK_FILE} and {PREFIX}N are embedtune's in a checkpoint folder: "
           "move it, or give another --checkpoint-dir")


class FolderBusy(EmbedtuneError):
    """Another run holds the folder's lock."""


def _step_of(name: str) -> int | None:
    digits = name[len(PREFIX):]
    return int(digits) if name.startswith(PREFIX) and digits.isascii() and digits.isdigit() else None


def _is_partial(name: str) -> bool:
    return PARTIAL_NAME.fullmatch(name) is not None


def _partial_name(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}.{os.urandom(4).hex()}{PARTIAL}")


def own_checkpoint(path: str, partial: bool = False) -> bool:
    """``path`` is a checkpoint embedtune wrote: a folder (not a link) holding only a checkpoint's files,
    each a plain file with one name, its state file among them; ``partial``: one being written, which
    may hold less (a run killed as it wrote leaves any part of one, an empty folder included)."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        names = os.listdir(path)
    except OSError:
        return False
    for name in names:
        inner = os.path.join(path, name)
        if partial and any(fnmatch.fnmatchcase(name, p) for p in PARTIAL_FOLDERS) and os.path.isdir(inner) \
                and not os.path.islink(inner):
            if not all(plain_file(os.path.join(inner, n)) for n in os.listdir(inner)):
                return False
        elif not (any(fnmatch.fnmatchcase(name, p) for p in (PARTIAL_FILES if partial else CHECKPOINT_FILES))
                  and plain_file(inner)):
            return False
    return partial or STATE_FILE in names


def _tensorflow_error(err: BaseException) -> bool:
    """``err`` is TensorFlow's OpError (only a run that imported it can raise one)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(err, tf.errors.OpError)


def _not_ours(path: str) -> str:
    """Why ``path``, named as the tool names its own, is not the tool's (for the refusal)."""
    if os.path.islink(path):
        return "a link"
    if not os.path.isdir(path):
        return "not a checkpoint: a file, not a folder"
    return "not a checkpoint embedtune wrote: it holds other files or links"


def checkpoint_names(directory: str) -> list[str]:
    """Names of the checkpoint folders embedtune wrote in ``directory`` (partial ones aside), by step;
    a folder or file of the user's under such a name is not one (``own_checkpoint``)."""
    if not os.path.isdir(directory):
        return []
    found = [(_step_of(n), n) for n in os.listdir(directory)]
    return [n for step, n in sorted(x for x in found if x[0] is not None)
            if own_checkpoint(os.path.join(directory, n))]


def latest(directory: str) -> str | None:
    """The newest checkpoint folder with a state file in ``directory``, or None."""
    names = checkpoint_names(directory)
    return os.path.join(directory, names[-1]) if names else None


def check_folder(directory: str) -> None:
    """Refuse a folder where one of the tool's names holds what the tool did not write: a user's file,
    folder or link called ``ckpt-7`` would be deleted or written through, a ``.lock`` truncated.
    Nothing is changed (``lock`` checks the lock file again once it holds it)."""
    if not os.path.isdir(directory):
        return
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name == LOCK_FILE:
            _check_lock_file(path)
        # A run that holds the folder renames a checkpoint away as it prunes: one gone meanwhile was its.
        elif _step_of(name) is not None and not own_checkpoint(path) and os.path.lexists(path):
            raise EmbedtuneError(f"--checkpoint-dir: {_not_ours(path)}; {REFUSED}", path)


def _check_lock_file(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:   # a run that held the folder ended meanwhile
        return
    if stat.S_ISLNK(st.st_mode):
        why = "a link"
    elif not stat.S_ISREG(st.st_mode):
        why = "a folder" if stat.S_ISDIR(st.st_mode) else "not a file"
    elif st.st_nlink != 1:
        why = "a file with another name too"
    else:
        try:
            with open(path, "rb") as f:
                text = f.read(4096)
        except OSError as err:
            raise EmbedtuneError(f"--checkpoint-dir: cannot read: {err.strerror or err}", path) from None
        if _read_lock(text) is not None:
            return
        why = "a file embedtune did not write"
    raise EmbedtuneError(f"--checkpoint-dir: {why}, not embedtune's lock file; {REFUSED}", path)


def _lock_text(made_folder: bool) -> bytes:
    return (json.dumps({"embedtune": LOCK_MARK, "process": os.getpid(), "made_folder": made_folder}) + "\n").encode()


def _read_lock(text: bytes) -> dict | None:
    """What an embedtune lock file says (its process and whether the tool made the folder), or None:
    not embedtune's."""
    if text.strip().isascii() and text.strip().isdigit():   # written by runs before the mark
        return {"process": int(text), "made_folder": False}
    try:
        said = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return said if isinstance(said, dict) and said.get("embedtune") == LOCK_MARK else None


def _create_lock(directory: str, path: str, made_folder: bool) -> int | None:
    """A new lock file, locked and holding its mark before its name appears (so no other run ever sees it
    empty); None when ``path`` exists (as anything: a link is not followed)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fresh = os.path.join(directory, f"{LOCK_FILE}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(fresh, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, _lock_text(made_folder))
        os.link(fresh, path)   # fails on any existing name, a dangling link too
    except FileExistsError:
        os.close(fd)
        return None
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        return _create_lock_in_place(path, made_folder)   # a file system without hard links
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(fresh)
    return fd


def _create_lock_in_place(path: str, made_folder: bool) -> int | None:
    """``_create_lock`` where a file cannot get a second name: made with O_EXCL (never through a link),
    then locked and marked; another run that opens it in between finds it locked, or without the
    mark, and stops either way, with nothing of the user's written."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, _lock_text(made_folder))
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock(directory: str, made_folder: bool = False) -> tuple[int, dict]:
    """Lock ``directory`` for this process: (the lock file's descriptor, what it said). The lock file is
    made (its mark written) or, left by a run that was killed, taken over; one of the user's under that
    name (a link, a hard link, a file without the mark) is refused with nothing written."""
    path = os.path.join(directory, LOCK_FILE)
    try:
        fd = _create_lock(directory, path, made_folder)
        if fd is not None:
            return fd, {"made_folder": made_folder}
        # O_NONBLOCK: a FIFO of the user's under the name must not hang the run.
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise EmbedtuneError(f"--checkpoint-dir: a link, not embedtune's lock file; {REFUSED}", path) from None
        if err.errno == errno.EISDIR:
            raise EmbedtuneError(f"--checkpoint-dir: a folder, not embedtune's lock file; {REFUSED}", path) from None
        raise EmbedtuneError(f"--checkpoint-dir: cannot use the folder: {err.strerror or err}", directory) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise EmbedtuneError(f"--checkpoint-dir: not a file, not embedtune's lock file; {REFUSED}", path)
        try:
            # flock, not a file created with O_EXCL: the kernel drops it when the process dies,
            # kill -9 included, so a crashed run never leaves the folder locked.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise EmbedtuneError(f"cannot lock the checkpoint folder: {err.strerror or err}", directory) from None
            said = _read_lock(os.pread(fd, 4096, 0)) or {}
            who = f" (process {said['process']})" if isinstance(said.get("process"), int) else ""
            raise FolderBusy(f"another run{who} is writing checkpoints to this folder; wait for it to end "
                             "or give another --checkpoint-dir", directory) from None
        said = _read_lock(os.pread(fd, 4096, 0)) if st.st_nlink == 1 else None
        if said is None:
            why = "a file with another name too" if st.st_nlink != 1 else "a file embedtune did not write"
            raise EmbedtuneError(f"--checkpoint-dir: {why}, not embedtune's lock file; {REFUSED}", path)
        said = {"made_folder": bool(said.get("made_folder"))}
        os.ftruncate(fd, 0)
        os.pwrite(fd, _lock_text(said["made_folder"]), 0)
        return fd, said
    except BaseException:
        os.close(fd)
        raise


class Folder:
    """The checkpoint folder of one run, locked from `open` to `close`.

    resume : continue from the folder's newest usable checkpoint; else the folder must hold
        no checkpoint (``overwrite`` deletes any it holds).
    """

    def __init__(self, directory: str, keep: int = KEEP):
        self.directory = directory
        self.keep = keep
        self._lock: int | None = None   # the lock file's descriptor, held from open to close
        self._made_folder = False   # by this run or the run it resumes (the lock file says)
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
        check_folder(directory)   # before the lock: a refused folder gets nothing, not even a lock file
        made = not os.path.isdir(directory)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as err:
            raise EmbedtuneError(f"--checkpoint-dir: cannot use the folder: {err.strerror or err}", directory) from None
        try:
            self._lock, said = lock(directory, made_folder=made)
        except BaseException:
            if made:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            raise
        self._made_folder = said["made_folder"]
        try:
            check_folder(directory)   # again, locked: what another run might have left meanwhile
            # The folder is ours now: a .partial left by a run killed while writing is garbage.
            for name in os.listdir(directory):
                if _is_partial(name) and own_checkpoint(os.path.join(directory, name), partial=True):
                    shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
            names = checkpoint_names(directory)
            if names and not resume:
                if not overwrite:
                    shown = ", ".join(names[-3:])
                    raise EmbedtuneError(
                        f"holds the checkpoints of an earlier run ({shown}); continue it with --resume, give "
                        "another --checkpoint-dir, or add --overwrite-checkpoints to delete them", directory)
                for name in names:
                    _delete(os.path.join(directory, name))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._lock is None:
            return
        if not checkpoint_names(self.directory):
            # A run that wrote nothing (an error before its first checkpoint) leaves no trace: its lock
            # file goes while still held, and the folder if the tool made it.
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.directory, LOCK_FILE))
                if self._made_folder:
                    os.rmdir(self.directory)
        os.close(self._lock)   # releases the flock
        self._lock = None

    def resume(self, trainer, fp: dict, note: Callable[[str], None] | None = None) -> tuple[str, Position]:
        """Restore the newest usable checkpoint into ``trainer``: (its folder, its position). A damaged one is
        skipped for the one before it, and ``note`` is told; a fingerprint that differs is an error."""
        names = checkpoint_names(self.directory)
        if not names:
            raise EmbedtuneError("--resume: no checkpoint in this folder", self.directory)
        damaged: list[DamagedCheckpoint] = []
        for name in reversed(names):
            path = os.path.join(self.directory, name)
            try:
                position = state.load(path, trainer, fp)
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

    def save(self, trainer, position: Position, fp: dict) -> str:
        """Write a checkpoint of ``trainer`` atomically; remove all but the ``keep`` this run wrote last."""
        name = f"{PREFIX}{position.steps}"
        final = os.path.join(self.directory, name)
        partial = _partial_name(self.directory, name)
        if os.path.lexists(final) and not own_checkpoint(final):   # made by someone meanwhile
            raise EmbedtuneError(f"--checkpoint-dir: {_not_ours(final)}; {REFUSED}", final)
        made = False
        try:
            if os.path.lexists(final):   # a checkpoint of this step out of this run's line (resumed before it)
                _delete(final)
            os.mkdir(partial)
            made = True
            state.write(partial, trainer, position, fp)
            os.rename(partial, final)
        except OSError as err:
            raise EmbedtuneError(f"cannot write a checkpoint: {err.strerror or err}", self.directory) from None
        except Exception as err:   # TensorFlow's writer: a full disk is a ResourceExhaustedError
            if not _tensorflow_error(err):
                raise
            raise EmbedtuneError(f"cannot write a checkpoint: {os_reason(err)}", self.directory) from None
        finally:
            # However the save ends (an error, a second Ctrl-C), no half-written checkpoint stays.
            if made and os.path.isdir(partial):
                shutil.rmtree(partial, ignore_errors=True)
        if name in self._written:
            self._written.remove(name)
        self._written.append(name)
        while len(self._written) > self.keep:
            _delete(os.path.join(self.directory, self._written.pop(0)))
        return final


def _delete(path: str) -> None:
    """Delete a checkpoint of the tool's so that a kill midway leaves a ``.partial`` (which the next run
    removes), never a ``ckpt-N`` holding part of its files, which would not be told from a user's. An
    interrupt's exception raised in the middle (a Ctrl-C or a SIGTERM: the command raises them where it is, as a
    finished run deletes its checkpoints after its output is written) leaves the rest of the delete to the
    ``finally``: only a kill leaves a ``.partial``."""
    doomed = path
    try:
        if not _is_partial(os.path.basename(path)):
            doomed = _partial_name(os.path.dirname(path), os.path.basename(path))
            try:
                os.rename(path, doomed)
            except OSError:
                doomed = path
        shutil.rmtree(doomed, ignore_errors=True)
    finally:
        if doomed != path and os.path.lexists(doomed):
            shutil.rmtree(doomed, ignore_errors=True)


def os_reason(err) -> str:
    """The OS's words in a TensorFlow I/O error ("...tempstate123; No space left on device [Op:SaveV2]"
    -> "No space left on device"), not its op names and temporary paths."""
    lines = (err.message or "").strip().splitlines()
    text = lines[0].split(" [Op:")[0] if lines else ""
    return text.rsplit("; ", 1)[-1] if "; " in text else text or type(err).__name__


def remove(directory: str) -> str | None:
    """Delete a finished run's checkpoints and its lock file, and the folder if the tool made it and
    nothing else is left; only what the tool wrote goes. None when done, else why nothing was
    deleted (another run holds the folder now, or a name of the tool's holds something else)."""
    if not os.path.isdir(directory):
        return None
    try:
        fd, said = lock(directory)
    except FolderBusy:
        return f"another run is using {directory}; its checkpoints were left"
    except EmbedtuneError as err:
        return f"{err}; the checkpoints were left"
    try:
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if (_step_of(name) is not None and own_checkpoint(path)) or \
                    (_is_partial(name) and own_checkpoint(path, partial=True)):
                _delete(path)
        os.unlink(os.path.join(directory, LOCK_FILE))   # ours: lock() checked its mark
    finally:
        os.close(fd)
    if said["made_folder"]:
        with contextlib.suppress(OSError):   # other files of the user's: the folder stays
            os.rmdir(directory)
    return None

