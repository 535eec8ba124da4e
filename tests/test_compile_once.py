"""A fresh install's first run compiles each kernel it reaches (issue 48.1: numba's cache is empty): each must
compile once, not once per flag of its arguments (numba makes a specialisation for each array type, read-only or
not included); the kernels of the README's jobs allocate no arrays themselves (each allocation's type compiles
numba's implementation of it in every cold process)."""

from __future__ import annotations

import numpy as np

from embedtune.formats.text import render as floatwrite


def test_the_text_writer_compiles_its_line_kernel_once_whatever_the_values():
    floatwrite.render_lines([b"a", b"b"], np.array([[0.5, 1.0], [2.0, -3.0]], np.float32))   # every value fast
    floatwrite.render_lines([b"a"], np.array([[1e-9, 1e20]], np.float32))                    # written by shortest_g
    floatwrite.render_lines([], np.zeros((0, 2), np.float32))                                 # no rows
    assert len(floatwrite._lines.signatures) == 1, floatwrite._lines.signatures


def test_the_text_reader_compiles_its_line_kernel_once_whatever_the_block(tmp_path, monkeypatch):
    from embedtune.formats import load_vectors
    from embedtune.formats.text import lines
    from embedtune.formats.text import parse as textparse

    textparse.load_parser()
    textparse.parse_columns(b"a 0.5 -1\r\nb 1e5 nan\r\n", 2, 2, compiled=True)   # crlf, values float() parses
    (tmp_path / "v.txt").write_bytes(b"a 0.5 1\nb 2 3\n")
    monkeypatch.setattr(textparse, "COMPILED_MIN_BYTES", 0)
    load_vectors(str(tmp_path / "v.txt"))                                         # the reader's own blocks
    assert len(lines._parse_lines.signatures) == 1, lines._parse_lines.signatures


def test_a_compile_is_said_once_on_standard_error_by_any_command_and_not_with_q(tmp_path):
    """Any command that reaches a kernel numba's cache lacks (here convert's text writer) says so in one line before
    the seconds of compiling, once however many kernels it compiles; a run that finds them cached says nothing of
    it, nor does -q."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from embedtune.formats.text.write import COMPILED_MIN_VALUES

    vectors = tmp_path / "v.txt"
    sample = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"
    # enough rows for the compiled writer (a smaller table is written in numpy, compiling nothing)
    values = [line.split(b" ", 1)[1] for line in sample.read_bytes().splitlines(True)[:1000]]
    vectors.write_bytes(b"".join(b"w%d %s" % (i, values[i % 1000]) for i in range(COMPILED_MIN_VALUES // 50 + 1)))

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
    # -q at a compile: that cache less the writer's line kernel (convert calls it; the kernels it calls stay
    # cached), so the run compiles one kernel, not all of them again; that it did shows as its files come back.
    import shutil

    shutil.copytree(tmp_path / "cold", tmp_path / "quiet")
    line_kernel = sorted((tmp_path / "quiet").rglob("render._lines-*"))
    assert [path.suffix for path in line_kernel] == [".nbc", ".nbi"], line_kernel
    for path in line_kernel:
        path.unlink()
    assert stderr_lines("quiet", "-q") == []        # compiling, but -q
    assert all(path.exists() for path in line_kernel)


def test_the_kernels_own_sort_and_search_give_numpys_answers():
    """The kernels sort and search with loops of their own, not numba's overloads (seconds of a cold run's
    compiling, benchmarks/log/first_run.md): the same order and the same indices as numpy's, on both sides of
    the insertion sort's cut, with repeats and at the ends."""
    from embedtune.kernels.common import _search_sorted, _sort

    rng = np.random.default_rng(7)
    for size in (0, 1, 2, 15, 16, 17, 40, 1000):
        for values in (rng.integers(-2**31, 2**31 - 1, size), rng.integers(0, 4, size), np.arange(size)[::-1]):
            values = values.astype(np.int32)
            ordered = values.copy()
            _sort(ordered)
            assert ordered.tolist() == np.sort(values).tolist(), (size, values)
            starts = np.sort(values).astype(np.int64)
            floats = starts.astype(np.float64)
            for x in (-2**31 - 1, -1, 0, 1, 2, 3, 4, 2**31, *values[:5].tolist()):
                assert _search_sorted(starts, x, False) == np.searchsorted(starts, x), (size, x)
                assert _search_sorted(floats, x + 0.5, True) == np.searchsorted(floats, x + 0.5, side="right")
                assert _search_sorted(floats, float(x), True) == np.searchsorted(floats, float(x), side="right")


def test_every_parallel_compile_keeps_loop_fusion_off(tmp_path, monkeypatch):
    """kernels/common.PARALLEL turns numba's loop fusion off (a gradient pass must end before its update pass
    starts): for each kernel and each signature compiled in a process, and for a twin made from a kernel's
    options, not only the first compile (numba empties a dict given as ``parallel=`` when it reads it)."""
    from numba import njit, prange

    from embedtune.kernels import common

    def two_passes(x, y):
        for i in prange(len(x)):
            x[i] += 1
        for i in prange(len(y)):
            y[i] += x[i]

    first, second = njit(parallel=common.PARALLEL)(two_passes), njit(parallel=common.PARALLEL)(two_passes)
    for kernel, dtype in ((first, np.float64), (second, np.float64), (second, np.float32)):
        kernel(np.zeros(4, dtype), np.zeros(4, dtype))
    # the twin is cached (cache=True): compiled into an empty folder, or a second run would load it from the
    # last run's cache, with no compile (and no diagnostics) to check
    import numba

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    twin = common.strict(second)
    twin(np.zeros(4), np.zeros(4))
    compiled = [(kernel, result) for kernel in (first, second, twin) for result in kernel.overloads.values()]
    assert len(compiled) == 4
    assert [result.metadata["parfor_diagnostics"].fusion_enabled for _, result in compiled] == [False] * 4


# The kernels a README job's first run compiles whose arrays their callers make: an np.empty, np.zeros or np.full
# inside one compiles numba's implementation of it for that type signature, again in every cold process
# (benchmarks/log/first_run.md).
TAKE_THEIR_ARRAYS = {"embedtune/kernels/cooccur.py": ("_row_sizes", "_row_sums", "_pair_dots", "fit_rounds",
                                                      "_new_word_biases"),
                     "embedtune/kernels/contexts.py": ("context_pass", "occurrence_marks"),
                     "embedtune/kernels/tokens.py": ("_expand",),
                     "embedtune/formats/text/render.py": ("_digits", "_lines")}


def test_the_first_runs_kernels_allocate_no_arrays_themselves():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for path, names in TAKE_THEIR_ARRAYS.items():
        kernels = {node.name: node for node in ast.walk(ast.parse((root / path).read_text(encoding="utf-8")))
                   if isinstance(node, ast.FunctionDef) and node.name in names}
        assert sorted(kernels) == sorted(names), (path, sorted(kernels))
        for name, node in kernels.items():
            assert any("njit" in ast.unparse(d) for d in node.decorator_list), (path, name, "not a kernel")
            found += [f"{path}: {name} line {call.lineno}: np.{call.func.attr}" for call in ast.walk(node)
                      if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                      and isinstance(call.func.value, ast.Name) and call.func.value.id == "np"
                      and call.func.attr in ("empty", "zeros", "full", "ones", "empty_like", "zeros_like", "full_like")]
    assert not found, found
