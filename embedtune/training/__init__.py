"""Training: the loop (``loop.py``: setup -> run_epochs -> result), the tables (``trainer.py``: ``Trainer``),
the step (``step.py``: TensorFlow's or an objective's compiled one, chosen once), the lazy optimizers and
cap (``optimizers.py``), batches (``batches.py``), checkpoints (``checkpoints/``: ``Checkpoints``, the
locked folder, one checkpoint's state), the loss log and progress (``progress.py``), the strategy the loop
is given (``strategy.py``: one process by default) and the host's settings (``host.py``). The frozen rows'
checks are embedtune/frozen.py's.

The public names are imported when first asked for (PEP 562), so that importing a light module of
the package (the optimizers' constants, read by the compiled steps) does not import TensorFlow.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "train": "loop", "TrainResult": "loop", "no_pairs_message": "loop",
    "Progress": "progress", "OneProcess": "strategy",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"embedtune.training.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'embedtune.training' has no attribute {name!r}")
