"""Compiled (numba) steps, on every core, with TensorFlow's step's arithmetic: sgns's for plain sgd
(``sgns.py``) and with adagrad, adam or the cap (``sgns_lazy.py``), and classify's with any lazy optimizer
(``classify.py``). An objective builds its own in
``Objective.compiled_step``; nothing here imports TensorFlow. ``tokens.py``: the corpus's bytes split
into tokens and ids (embedtune/corpus/fast.py)."""

import os

from embedtune._adapters.numba_private import cache_index

# EMBEDTUNE_KERNEL=0: TensorFlow's step even where an objective has a compiled one, the same arithmetic
# (the A/B benchmarks and the tests compare the two). Read here only; the step's choice
# (training/step.py) and the dry run (dryrun/estimate.py) ask it at the time.
KERNEL = os.environ.get("EMBEDTUNE_KERNEL", "1") == "1"


def cache_is_cold(reader: bool = True) -> bool:
    """Whether numba's cache lacks the kernels every compiled run calls first (the compiler's warm-up, and with
    ``reader`` the corpus reader's scan): a fresh install, a new numba or Python, another NUMBA_CACHE_DIR. Such a
    run compiles each kernel as it reaches it, for seconds; a later run loads them. Looks for the index files
    where numba keeps them; compiles nothing (numba's layout unknown: False, nothing said)."""
    from embedtune.kernels import common, tokens

    for kernel in (tokens.scan, common._started) if reader else (common._started,):
        index = cache_index(kernel)
        if index is not None and not os.path.exists(index):
            return True
    return False
