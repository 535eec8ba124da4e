"""Import TensorFlow quietly.

TF 2.21 prints CUDA-probe lines on a machine without a GPU, some before its logging is
set up, so TF_CPP_MIN_LOG_LEVEL cannot silence them; they would land in the user's
terminal or log on every run. They are written straight to file descriptor 2, so that
descriptor points at a temporary file while TensorFlow loads and finds its devices; if
the import fails, what it wrote is shown after all.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading

from embedtune._adapters import tensorflow_private

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# TensorFlow's pooling (BFC) allocator for CPU tensors, read once when its runtime starts. With
# glibc's malloc, each step's transient tensors ([4096 x 6 x 300] side rows and their gradients in a
# 1M x 300 Adam run) were left in whichever thread's arena freed them, and resident memory swung from
# second to second; the pool reuses the same blocks on every thread, so the loop holds one level at
# the same speed (benchmarks/README.md, memory). A user's own setting of the variable is kept.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


# Settings asked for before TensorFlow was imported (training/host.py's thread pools), applied to it
# right after its import: a run whose step is compiled may import it late, or never.
_on_import: dict = {}
_hooks = threading.Lock()


def when_imported(key: str, apply) -> None:
    """``apply(tf)`` now if TensorFlow is imported (through here), else right after its import (the
    last ``apply`` asked for under ``key``: a later setting replaces an earlier one)."""
    with _hooks:
        if "tf" not in globals():
            _on_import[key] = apply
            return
    apply(tf)


def forget(key: str) -> None:
    """Drop what ``when_imported`` was asked to apply under ``key``, if TensorFlow's import has not yet."""
    with _hooks:
        _on_import.pop(key, None)


def op_determinism() -> bool:
    """Whether TensorFlow runs its ops deterministically now (False while it is not imported)."""
    if "tf" not in globals():
        return False
    return tensorflow_private.op_determinism_enabled()


def restore_op_determinism(was: bool) -> None:
    """Put the process's op determinism back as a run found it (``was``: ``op_determinism()`` then): a
    ``--deterministic`` run turns it on for the whole process, and a library caller's later unseeded
    random ops would then raise. TensorFlow's public API only turns it on; its framework config turns it off."""
    forget("determinism")
    if not was and op_determinism():
        tensorflow_private.disable_op_determinism()


def _probed(tensorflow) -> bool:
    """Whether TensorFlow has listed its devices already (its CUDA probe done, nothing left to print)."""
    return tensorflow_private.devices_listed()


def _quietly(load):
    """``load()`` with file descriptor 2 pointing at a temporary file; what it wrote is shown only if it fails."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        return load()
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            return load()
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _load():
    import tensorflow

    tensorflow.config.list_physical_devices()  # the CUDA probe happens here
    return tensorflow


def _import():
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is None:
        return _quietly(_load)
    # Imported by the caller first (``import keras`` before ``embedtune.keras``, as docs/keras.md does):
    # importing it did not probe the devices, so the probe, and its "failed call to cuInit" line on a
    # machine with a CUDA driver and no GPU, would come with our first op. It is done here, quietly.
    if not _probed(tensorflow):
        _quietly(tensorflow.config.list_physical_devices)
    return tensorflow


def __getattr__(name):
    # ``from embedtune._tf import tf`` imports TensorFlow there and then, as it always did; only
    # ``lazy`` waits (PEP 562: this runs for names the module does not define yet).
    if name == "tf":
        global tf
        module = _import()
        with _hooks:
            tf = module
            waiting = list(_on_import.values())
            _on_import.clear()
        for apply in waiting:
            apply(module)
        return tf
    raise AttributeError(name)


class _Lazy:
    """TensorFlow, imported on first use. Objective modules use it so that their classes (and the
    defaults on them, which the config and the dry run read) import without TensorFlow."""

    def __getattr__(self, name):
        from embedtune._tf import tf

        return getattr(tf, name)


lazy = _Lazy()
