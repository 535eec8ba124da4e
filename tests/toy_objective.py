"""``Adjacent``, the smallest objective that trains, shared by tests/test_objectives.py (registered in
process) and tests/test_plugin_objective.py (registered by an entry point, with a key of its own).

Each pair of neighbouring words on a line should score ``target``: loss = 1/2 sum (w_a . w_b + b_a + b_b -
target)^2, with a bias per word as its own table. Imported while the registry loads (the plugin's entry
point): no embedtune.config keys read and no trainer at module level.
"""

from __future__ import annotations

import numpy as np

from embedtune._tf import lazy as tf
from embedtune.corpus import id_chunks
from embedtune.objectives.base import Objective


class Adjacent(Objective):
    name = "adjacent"
    defaults = {"window": 1, "optimizer": "adagrad", "anchor": 0.0, "epochs": 2}
    learning_rates = {"adagrad": 0.2}
    settings = ("window",)
    word_keys = ("left", "right")
    target = 2.0

    def __init__(self, rows, train, corpus=None):
        self.rows = rows
        self.batch_size = train.batch_size
        self.side_fixed_from = rows.n_trainable   # frozen words keep their bias
        self.slices = (2.0 * rows.counts)[: rows.n_trainable]   # a word is in about two pairs per occurrence
        self.pairs_made = 0

    def side_start(self):
        return np.zeros((self.rows.n_local + 1, 1), np.float32)

    def chunks(self, corpus, local_index):
        return id_chunks(corpus, local_index)

    def units(self, chunk, rng):
        same_line = chunk.line[1:] == chunk.line[:-1]
        left, right = chunk.ids[:-1][same_line], chunk.ids[1:][same_line]
        order = rng.permutation(len(left))
        return left[order], right[order]

    def batches(self, left, right):
        size = self.batch_size
        for start in range(0, len(left), size):
            n = len(left[start:start + size])
            batch = {"left": np.zeros(size, np.int32), "right": np.zeros(size, np.int32),
                     "weight": np.zeros(size, np.float32), "pairs": n}
            batch["left"][:n], batch["right"][:n] = left[start:start + n], right[start:start + n]
            batch["weight"][:n] = 1
            self.pairs_made += n
            yield batch

    def padding_batch(self):   # to run on several workers: a pair weighing nothing
        return self.emptied(self.batches(np.zeros(1, np.int32), np.zeros(1, np.int32)))

    def side_ids(self, batch, rng, real, sink):
        return tf.where(real[:, None], tf.stack([batch["left"], batch["right"]], axis=1), sink)

    def loss(self, words, side, batch):
        score = tf.reduce_sum(words[0] * words[1], axis=1) + side[:, 0, 0] + side[:, 1, 0]
        return 0.5 * tf.reduce_sum(batch["weight"] * tf.square(score - self.target))
