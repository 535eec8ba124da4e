"""A training loop's kernel compiled ahead, in a child process, while a cold run (numba's cache lacks its
kernels: kernels.cache_is_cold) loads its vectors, counts its corpus and sets up (issue 48.1).

numba compiles a kernel at its first call, holding one lock for the whole process, so a thread cannot
compile one kernel while another compiles the next; a second process can, on another core. The child
compiles the loop's kernel for the argument types its caller passes (the kernel module's table of them)
and writes numba's cache; the run waits for it (``wait``) just before it builds its step, and numba then
loads the kernel from the cache instead of compiling it. The loop's kernel is the one to send ahead: it
is the largest (GloVe's lock-free step: a third of a cold quickstart's compiling) and the last a run
reaches, while the reader's, the count's and the set-up's are compiled by the run as it reaches them.

Nothing here is needed for a run to be right: a child that fails, or is killed, leaves numba's cache as
numba leaves it (each file written whole, then renamed into place; an index naming a missing file is a
cache miss), and the run compiles what it finds missing itself.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from embedtune._adapters.numba_private import cache_index

_child: list[subprocess.Popen] = []   # the child compiling now, if any (one a process)


def start(kernels: list[str]) -> None:
    """Compile ``kernels`` ("module:name", a key of the module's ``AHEAD_TYPES``) in a child process, now,
    those numba's cache lacks; nothing when none does or a child runs already. The child says nothing and
    inherits the environment (NUMBA_CACHE_DIR), so it fills the cache this process reads."""
    kernels = [spec for spec in kernels if not _cached(spec)]
    if _child or not kernels:
        return
    env = dict(os.environ)
    # The package this process imported, whatever the child's working folder puts first on its path.
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    try:
        _child.append(subprocess.Popen([sys.executable, "-m", "embedtune.kernels.ahead", *kernels], env=env,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL))
    except OSError:   # no process to be had: the run compiles them itself
        pass


def _cached(spec: str) -> bool:
    """Whether numba's cache has an index for the kernel (for some types: a run of another objective or
    config may have left it); unknown (numba laid out otherwise): True, nothing sent ahead."""
    module_name, name = spec.split(":")
    index = cache_index(getattr(importlib.import_module(module_name), name))
    return index is None or os.path.exists(index)


def wait() -> None:
    """Until the child (if any) is done: the run is about to call the kernels it compiles."""
    if _child:
        _child[0].wait()
        _child.clear()


def stop() -> None:
    """The child ended, if it still runs (the run is over, or failed before it needed the kernels)."""
    if _child:
        child = _child.pop()
        if child.poll() is None:
            child.kill()
        child.wait()


def compile_kernels(kernels: list[str]) -> None:
    """Each of ``kernels`` compiled (and cached) for its caller's argument types."""
    for spec in kernels:
        module_name, name = spec.split(":")
        module = importlib.import_module(module_name)
        getattr(module, name).compile(module.AHEAD_TYPES[name])


if __name__ == "__main__":
    compile_kernels(sys.argv[1:])
