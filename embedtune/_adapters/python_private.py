"""CPython's own private names, used where the standard library has no public way: the exit handlers
and the import lock."""

from __future__ import annotations

import _imp
import atexit


def run_exit_handlers() -> None:
    """Run what ``atexit`` holds now, last registered first, as the interpreter's exit runs it, and
    clear it: the command ends with ``os._exit`` right after (cli/main.py ``exit_now``), skipping the
    interpreter's teardown but not the handlers (logging's flush, temporary folders, multiprocessing).
    ``atexit._run_exitfuncs``: CPython's own, the one the interpreter calls."""
    atexit._run_exitfuncs()


def import_lock_held() -> bool:
    """Whether the import system's global lock is held now: importlib takes it around its module-lock
    bookkeeping (``_get_module_lock``), where an exception raised by a signal handler leaves it held
    for good (cli/signals.py ``not_now``). ``_imp.lock_held``: CPython's own (``imp.lock_held``, its
    public name, is gone since Python 3.12). Called from signal handlers: it imports nothing then."""
    return _imp.lock_held()
