"""A checkpoint that cannot be written (a full disk) is one `Error:` line naming the checkpoint folder
and the OS's reason, exit 1, no traceback, and no `ckpt-N.partial` left behind."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS, one_error_line, run

TRAIN = ["--epochs", "1", "--batch-size", "512", "--checkpoint-every", "5", "-q"]


@pytest.fixture
def vectors(tmp_path) -> Path:
    path = tmp_path / "glove.500.txt"
    path.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:500]))
    return path


@pytest.mark.parametrize("writer", ["tensorflow", "arrays"])
def test_a_full_disk_while_a_checkpoint_is_written_is_one_error_line(writer, vectors, tmp_path, monkeypatch):
    """It was TensorFlow's ResourceExhaustedError, a 70-line traceback, and ckpt-5.partial stayed. TensorFlow's
    step writes its tables with TensorFlow (EMBEDTUNE_KERNEL=0 takes it), a compiled step its own arrays."""
    if writer == "tensorflow":
        from embedtune import kernels
        from embedtune._tf import tf

        monkeypatch.setattr(kernels, "KERNEL", False)

        def full(self, prefix, *args, **kwargs):
            with open(f"{prefix}.data-00000-of-00001", "wb") as f:   # a part written before the disk filled
                f.write(b"\0" * 100)
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{{{{function_node __wrapped__SaveV2}}}} {prefix}_temp/part-00000-of-00001"
                            ".data-00000-of-00001.tempstate1; No space left on device [Op:SaveV2]")

        monkeypatch.setattr(tf.train.Checkpoint, "write", full)
    else:
        from embedtune.training.checkpoints import state

        def full(file, **arrays):
            file.write(b"PK\3\4" + b"\0" * 100)   # a part written before the disk filled
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(state.np, "savez", full)
    out, checkpoints = tmp_path / "out" / "tuned.txt", tmp_path / "ckpt"
    out.parent.mkdir()
    result = run(["train", vectors, SAMPLE_CORPUS, "-o", out, "--checkpoint-dir", checkpoints, *TRAIN])
    assert result.exit_code == 1
    line = one_error_line(result)
    assert line == f"Error: {checkpoints}: cannot write a checkpoint: No space left on device"
    assert not checkpoints.exists() or not [n for n in os.listdir(checkpoints) if n.endswith(".partial")]
    assert os.listdir(out.parent) == []


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="mounting a tmpfs needs root on Linux")
def test_a_really_full_disk_while_a_checkpoint_is_written(vectors, tmp_path):
    """The same on a 200 kB tmpfs, in a process of its own: the tables of 500 rows do not fit."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        checkpoints = disk / "ckpt"
        out = tmp_path / "tuned.txt"
        done = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "train", vectors, SAMPLE_CORPUS,
                               "-o", out, "--checkpoint-dir", checkpoints, *TRAIN],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines() == [f"Error: {checkpoints}: cannot write a checkpoint: "
                                            "No space left on device"], done.stderr
        assert not checkpoints.exists() or not [n for n in os.listdir(checkpoints) if n.endswith(".partial")]
        assert not out.exists()
    finally:
        subprocess.run(["umount", str(disk)], check=False)
