"""A fresh install's first run compiles each kernel it reaches (issue 48.1: numba's cache is empty): each must
compile once, not once per flag of its arguments (numba makes a specialisation for each array type, read-only or
not included)."""

from __future__ import annotations

import os

import numpy as np

from embedtune.formats.text import render as floatwrite


def test_the_text_writer_compiles_its_line_kernel_once_whatever_the_values():
    floatwrite.render_lines([b"a", b"b"], np.array([[0.5, 1.0], [2.0, -3.0]], np.float32))   # every value fast
    floatwrite.render_lines([b"a"], np.array([[1e-9, 1e20]], np.float32))                    # written by shortest_g
    floatwrite.render_lines([], np.zeros((0, 2), np.float32))                                 # no rows
    assert len(floatwrite._lines.signatures) == 1, floatwrite._lines.signatures


def test_a_compile_is_said_once_on_standard_error_by_any_command_and_not_with_q(tmp_path):
    """Any command that reaches a kernel numba's cache lacks (here convert's text writer) says so in one line before
    the seconds of compiling, once however many kernels it compiles; a run that finds them cached says nothing of
    it, nor does -q."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    vectors = tmp_path / "v.txt"
    sample = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"
    vectors.write_bytes(b"".join(sample.read_bytes().splitlines(True)[:200]))

    def stderr_lines(cache: str, *options: str) -> list[str]:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / cache)}
        ran = subprocess.run([sys.executable, "-m", "embedtune.cli.main", *options, "convert", str(vectors),
                              str(tmp_path / "out.vec"), "--to", "word2vec"], env=env, capture_output=True, text=True,
                             timeout=600)
        assert ran.returncode == 0, ran.stderr
        return ran.stderr.splitlines()

    said = "Compiling kernels (first run only) ..."
    assert stderr_lines("cold").count(said) == 1
    assert said not in stderr_lines("cold")          # cached now
    assert stderr_lines("quiet", "-q") == []        # cold, but -q


KERNEL = '''
import os

import numpy as np
from numba import float64, njit


@njit(cache=True)
def plus_one(values):
    return values + 1.0


AHEAD_TYPES = {"plus_one": (float64[::1],)}
'''


def test_a_kernel_sent_ahead_is_compiled_by_a_child_into_numbas_cache_and_loaded_from_there(tmp_path, monkeypatch):
    """kernels/ahead.py: a cold run's child compiles the loop's kernel for its caller's types and writes numba's
    cache; after ``wait`` the run loads it from there, compiling nothing. A kernel cached already sends no child."""
    from embedtune._adapters.numba_private import cache_index
    from embedtune.kernels import ahead

    (tmp_path / "ahead_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))   # the child's path to the module (its cache: beside it)
    import ahead_kernel

    assert not os.path.exists(cache_index(ahead_kernel.plus_one))
    ahead.start(["ahead_kernel:plus_one"])
    assert ahead._child
    ahead.wait()
    assert not ahead._child
    assert os.path.exists(cache_index(ahead_kernel.plus_one))
    np.testing.assert_array_equal(ahead_kernel.plus_one(np.zeros(2)), [1.0, 1.0])
    assert ahead_kernel.plus_one.stats.cache_hits and not ahead_kernel.plus_one.stats.cache_misses
    ahead.start(["ahead_kernel:plus_one"])   # cached now
    assert not ahead._child


def test_a_child_stopped_while_it_compiles_leaves_a_cache_the_run_can_use(tmp_path, monkeypatch):
    from embedtune.kernels import ahead

    (tmp_path / "stopped_kernel.py").write_text(KERNEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    import stopped_kernel

    ahead.start(["stopped_kernel:plus_one"])
    child = ahead._child[0]
    ahead.stop()
    assert child.returncode is not None and not ahead._child
    np.testing.assert_array_equal(stopped_kernel.plus_one(np.zeros(2)), [1.0, 1.0])   # compiled, or loaded


def test_the_lockfree_glove_kernel_is_called_with_the_types_it_is_compiled_ahead_for():
    """glove_hogwild's AHEAD_TYPES are what GloveKernel passes: else a cold run's child compiles a
    specialisation the run never calls, and the run compiles its own as before."""
    from embedtune.kernels import glove
    from embedtune.training.optimizers import Update

    words, side = np.zeros((5, 4), np.float32), np.zeros((7, 1), np.float32)
    matrix = np.ones((3, 4), np.float32)
    kernel = glove.GloveKernel(words, side, matrix, np.array([0, 2]), 4, 0.5,
                               Update("adagrad", 1.0, {"word": words.shape, "side": side.shape}), 0.0,
                               np.ones(4), 2, 1, lockfree=True)
    batch = {"row": np.array([0, 4], np.int32), "col": np.array([1, 5], np.int32),
             "target": np.ones(2, np.float32), "f": np.ones(2, np.float32), "weight": np.ones(2, np.float32)}
    kernel.run([batch, batch], [0.1, 0.1])
    assert glove.glove_hogwild.signatures == [glove.AHEAD_TYPES["glove_hogwild"]]
