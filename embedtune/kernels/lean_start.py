"""numpy's f2py and testing packages, loaded in a command's process (and a compile-ahead child's) only if something
uses them.

Every command that runs a compiled kernel loads numba's array functions, which check for BLAS by importing
scipy.linalg; scipy (1.17) then makes its array-API copy of numpy's namespace by reading every name numpy
lists (scipy/_lib/array_api_compat's ``clone_module``), and numpy loads a submodule the first time its name is
read. So each such process imported numpy.f2py (its Fortran parser compiles about a hundred regular expressions
and brings charset_normalizer) and numpy.testing, which no command uses: close to a third of a kernel command's
first kernel call, in every `train`, `init` and `eval` (measured: benchmarks/log/train_speed.md).

Here the two are put in place as modules that load on their first attribute read (the standard library's
importlib.util.LazyLoader): the names exist, their code runs only if something reads from them (a plugin that
uses numpy.testing still gets it whole). Called by cli/main.py, after cli/blas_threads.py's settings since this
imports numpy, and by the compile-ahead child (kernels/ahead.py, whose compiles load scipy.linalg too): processes
of embedtune's own. Nothing is changed for a package already loaded (a test runner's process), nor for a library
user: ``import embedtune`` leaves the user's numpy as it is.
"""

from __future__ import annotations

import importlib.util
import sys

DEFERRED = ("numpy.f2py", "numpy.testing")


def defer_unused_numpy_packages() -> None:
    """Each package of DEFERRED not yet loaded becomes a module that loads when first read from."""
    import numpy

    for name in DEFERRED:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)   # LazyLoader's: the module's code waits for its first attribute read
        # numpy's own __getattr__ would import the name again, finding this module: set it as the import would.
        setattr(numpy, name.rpartition(".")[2], module)
