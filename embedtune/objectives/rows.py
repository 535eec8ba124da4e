"""What an objective may know about the rows of a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class LocalRows:
    """The corpus words of a run by local id: trainable ids [0, n_trainable), then frozen ones.

    counts : [n_local] corpus counts
    is_pretrained : [n_local] True for words of the vectors file (False: new words)
    vectors : local ids [n] -> their starting rows [n, dim] (float32; a gather, not a view)
    local_index : word -> local id
    outside : word -> its row of the vectors file, for a pretrained word that is not a local one (a row the
        run leaves as it is, written out unchanged), else None; None: no such lookup (classify's --valid
        reads it, as fastText's -pretrainedVectors puts every pretrained word in its dictionary)
    """

    counts: np.ndarray
    n_trainable: int
    is_pretrained: np.ndarray
    vectors: Callable[[np.ndarray], np.ndarray]
    local_index: dict
    dim: int
    outside: Callable[[str], np.ndarray | None] | None = None

    @property
    def n_local(self) -> int:
        return len(self.counts)
