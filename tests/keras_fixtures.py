"""What the Keras tests share (helpers only, no tests)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def seeded():
    """Keras's initialisers are random ops: seeded, so that a test runs where an earlier deterministic run
    in the same process (`--deterministic` turns TensorFlow's op determinism on for the process, and
    nothing turns it off) would make unseeded ones an error. Imported by each Keras test module."""
    import keras

    keras.utils.set_random_seed(1234)
