"""Said once when numba compiles one of embedtune's kernels (its cache lacks it: a fresh install, an upgrade,
another CPU): seconds a kernel, which a person at a terminal should not sit through in silence (issue 48.1).

The command sets what is said (``tell_when_compiling``, cli/); every module that defines kernels calls ``listen``
as it imports numba, which registers one listener for numba's compile events (its public event API, fired on a
cache miss only). This module imports nothing itself, so that a command that never compiles never imports numba.
"""

from __future__ import annotations

from collections.abc import Callable

_callback: list[Callable[[], None]] = []   # at most one: what to do at the first compile (taken when done)
_listening: list[bool] = []


def tell_when_compiling(callback: Callable[[], None] | None) -> None:
    """``callback()`` at the first compile of an embedtune kernel in this process, from the thread that compiles
    (numba compiles one kernel at a time); None: nothing (said already, or not to be said)."""
    _callback[:] = [] if callback is None else [callback]


def listen() -> None:
    """Watch numba's compiles (once a process; called by the modules that define kernels, after numba's import)."""
    if _listening:
        return
    _listening.append(True)
    from numba.core import event

    class FirstCompile(event.Listener):
        def on_start(self, ev) -> None:
            dispatcher = ev.data.get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
            if _callback and module.startswith("embedtune."):
                callback = _callback.pop()
                try:
                    callback()
                except OSError:   # standard error closed: the compile goes on, unsaid
                    pass

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", FirstCompile())
