"""Compiled (numba) steps, on every core, with TensorFlow's step's arithmetic: sgns's for plain sgd
(``sgns.py``) and classify's with any lazy optimizer (``classify.py``). An objective builds its own in
``Objective.compiled_step``; nothing here imports TensorFlow. ``tokens.py``: the corpus's bytes split
into tokens and ids (embedtune/corpus/fast.py)."""

import os

# EMBEDTUNE_KERNEL=0: TensorFlow's step even where an objective has a compiled one, the same arithmetic
# (the A/B benchmarks and the tests compare the two). Read here only; the step's choice
# (training/step.py) and the dry run (plan/dry_run.py) ask it at the time.
KERNEL = os.environ.get("EMBEDTUNE_KERNEL", "1") == "1"
