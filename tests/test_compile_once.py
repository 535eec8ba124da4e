"""A fresh install's first run compiles each kernel it reaches (issue 48.1: numba's cache is empty): each must
compile once, not once per flag of its arguments (numba makes a specialisation for each array type, read-only or
not included)."""

from __future__ import annotations

import numpy as np

from embedtune.formats import floatwrite


def test_the_text_writer_compiles_its_line_kernel_once_whatever_the_values():
    floatwrite.render_lines([b"a", b"b"], np.array([[0.5, 1.0], [2.0, -3.0]], np.float32))   # every value fast
    floatwrite.render_lines([b"a"], np.array([[1e-9, 1e20]], np.float32))                    # written by shortest_g
    floatwrite.render_lines([], np.zeros((0, 2), np.float32))                                 # no rows
    assert len(floatwrite._lines.signatures) == 1, floatwrite._lines.signatures
