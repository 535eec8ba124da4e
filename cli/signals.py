"""Where a Ctrl-C or SIGTERM must not be raised yet, and how it is taken again a moment later.

Python runs a signal's handler at the next bytecode the main thread runs, wherever that is. Raised in
some places the exception does not unwind the command but breaks what it lands in: importlib's module-lock
bookkeeping (the lock left held: a hang), a C extension's init (an ImportError instead of the signal),
llvmlite (its lock left held, or a native object freed twice) or numba's boxing callback (a NULL in the
tuple a kernel returns: a segfault). ``not_now`` tells those places from a handler's frame, and
``send_again`` sends the signal once more, 10 ms later, from another thread, so that it is handled again
once the main thread is out. Each such stretch is short, so the signal is only late, never lost.

Every handler that raises uses both: the command's own (cli/main.py ``interrupts_unwind``) and the training
loop's second Ctrl-C (cli/train_cmd.py ``StopRequests``). Each check below came from a failure that
tests/test_signals.py and tests/test_fault_injection.py reproduce.
"""

from __future__ import annotations

import _thread
import os
import sys
import time
from importlib.machinery import ExtensionFileLoader

from embedtune._adapters.python_private import import_lock_held

RESEND_SECONDS = 0.01


def _kill_later(sig) -> None:
    time.sleep(RESEND_SECONDS)
    os.kill(os.getpid(), sig)


def send_again(sig) -> None:
    """``sig`` sent to this process again in a moment, from another thread: a signal sent from here
    would be handled at once, where it could not be raised either. A bare thread, not a Timer: Timer's
    start() waits for its thread, and the signal could come in that wait, inside the handler or the
    unraisable hook, where a raise is lost (once, under load: tests/test_signals.py)."""
    _thread.start_new_thread(_kill_later, (sig,))


def _on_stack(frame, match) -> bool:
    """Whether ``match`` holds for ``frame`` or any frame below it."""
    while frame is not None:
        if match(frame):
            return True
        frame = frame.f_back
    return False


def in_extension_init(frame) -> bool:
    """Whether a C extension module's init is under way on this stack (a Python import made from C,
    the frames between). Such an init turns any exception into its own: numba's _dispatcher printed the
    KeyboardInterrupt raised in its import of numba._devicearray as a traceback, then failed with
    `ImportError: numba._devicearray failed to import` (exit 1), when Ctrl-C came as numba first loaded."""
    return _on_stack(frame, lambda f: f.f_code.co_name in ("create_module", "exec_module")
                     and isinstance(f.f_locals.get("self"), ExtensionFileLoader))


def in_llvm(frame) -> bool:
    """Whether llvmlite's code or numba's compiler lock is on this stack: numba loading or compiling a
    kernel. There llvmlite takes its lock (and numba's) and hands native objects between owners; raised
    there, the signal left the lock held (the new words' fit thread, loading its kernel, waited on it
    while the command waited for that thread: a hang) or an object owned twice (a double free at exit,
    an abort or a segfault instead of 130: tests/test_fault_injection.py). Each such stretch is short."""
    llvmlite = sys.modules.get("llvmlite")
    if llvmlite is None:
        return False
    package = os.path.dirname(llvmlite.__file__) + os.sep
    lock = os.path.join("numba", "core", "compiler_lock.py")
    return _on_stack(frame, lambda f: f.f_code.co_filename.startswith(package) or f.f_code.co_filename.endswith(lock))


def in_numba_callback(frame) -> bool:
    """Whether numba's ``_numba_unpickle`` (numba/core/serialize.py) is on this stack: the Python function a
    compiled kernel's wrapper calls, as it boxes each array the kernel returns, for the array's type. A
    signal that came while a nogil kernel ran is handled there, at the first Python code the main thread
    runs after it; raised there, the wrapper did not see the failure and put a NULL in the tuple it
    returned: `target, level, probe = occurrence_marks(...)` (newwords/contexts.py) segfaulted unpacking
    it, or raised a SystemError (exit -11 or 1 instead of 130: tests/test_fault_injection.py)."""
    serialize = sys.modules.get("numba.core.serialize")
    name = getattr(serialize, "__file__", None)
    return name is not None and _on_stack(frame, lambda f: f.f_code.co_filename == name)


def not_now(frame) -> bool:
    """Whether a signal whose handler runs at ``frame`` is to be taken again a moment later (``send_again``)
    instead of raised: inside importlib's lock (raised between its acquire and its try, it left that lock
    held for good, and the thread importing TensorFlow beside the count waited on it forever while the
    command waited for that import: a hang), a C extension's init (``in_extension_init``), llvmlite
    (``in_llvm``) or a Python function that compiled code calls (``in_numba_callback``)."""
    return import_lock_held() or in_extension_init(frame) or in_llvm(frame) or in_numba_callback(frame)
