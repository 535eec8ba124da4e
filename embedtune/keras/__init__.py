"""embedtune's frozen rows inside your own Keras model (Keras 3, TensorFlow backend).

``Embedding.from_vectors(path, freeze_top=5000, ...)`` replaces keras.layers.Embedding: frozen rows are
not a trainable variable at all, so no optimizer, weight decay, EMA, regulariser or loss scale moves
them. ``LazyRows(optimizer)`` steps the layer's trainable rows lazily (only the batch's, repeats merged) by
``optimizer``'s own rule and options, and every other variable with ``optimizer``.
``FrozenRowsCallback`` proves the frozen rows after each epoch. docs/keras.md has the recipe.

Importing this package imports Keras and TensorFlow; ``import embedtune`` does not.
"""

from __future__ import annotations

import os
import sys

from embedtune.errors import EmbedtuneError


def check_backend(backend: str | None = None) -> None:
    """The layer's lookup, its gradient's slices and LazyRows' sparse updates are TensorFlow's: another
    Keras backend is an error naming the one needed. ``backend``: Keras's (default: the one Keras runs on;
    before Keras is imported, the one KERAS_BACKEND asks for, so that a backend that is not installed
    gets this error and not Keras's own)."""
    if backend is None:
        if "keras" in sys.modules:
            backend = sys.modules["keras"].backend.backend()
        else:
            backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend != "tensorflow":
        raise EmbedtuneError(f"embedtune.keras needs Keras's TensorFlow backend, and Keras runs on {backend!r} here: "
                             "set KERAS_BACKEND=tensorflow before Keras is imported")


check_backend()

from embedtune import _tf  # noqa: E402

_tf.tf   # TensorFlow's quiet import (its CUDA probe's lines kept off the terminal), before Keras loads it
import keras  # noqa: E402

check_backend(keras.backend.backend())   # also what ~/.keras/keras.json chose

from embedtune.keras.layer import Embedding  # noqa: E402
from embedtune.keras.callback import FrozenRowsCallback  # noqa: E402
from embedtune.keras.rows import LazyRows, is_lazy_rows  # noqa: E402

__all__ = ["Embedding", "EmbedtuneError", "FrozenRowsCallback", "LazyRows", "check_backend", "is_lazy_rows"]
