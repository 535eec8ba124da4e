"""``FrozenRowsCallback``: the frozen rows proved after each epoch of ``model.fit``."""

from __future__ import annotations

import keras

from embedtune.keras.layer import layers_in
from embedtune.keras.rows import is_lazy_rows


class FrozenRowsCallback(keras.callbacks.Callback):
    """After each epoch, every embedtune.keras.Embedding of the model reads its frozen rows through its
    own lookup and compares them, bit for bit, with the vectors it was made from
    (``Embedding.check_frozen``); a difference stops training with an EmbedtuneError. ``checked``
    holds, per epoch, the frozen rows compared. At the start it warns once when the model's optimizer
    is not embedtune.keras.LazyRows (frozen rows stay, but untouched trainable rows move)."""

    def __init__(self):
        super().__init__()
        self.checked: list[int] = []

    def _layers(self):
        return layers_in(self.model)

    def on_train_begin(self, logs=None):
        if not is_lazy_rows(getattr(self.model, "optimizer", None)):
            for layer in self._layers():
                layer.warn_plain_optimizer()

    def on_epoch_end(self, epoch, logs=None):
        self.checked.append(sum(layer.check_frozen() for layer in self._layers()))
