"""Checkpoints and resume through the real command: Ctrl-C, SIGTERM and kill -9, then --resume.

Every run here is one deterministic epoch over the sample corpus with the first 2,000 GloVe
rows in batches of 512 pairs (about 400 steps for sgns, 300 for glove), a checkpoint every 5
steps; the whole module runs once per objective. One run is
interrupted three times over (Ctrl-C, then SIGTERM, then kill -9, each in a fresh process that
resumes the last) and finished with a last --resume; its output must be the bytes of an
uninterrupted run. Processes are real (subprocess), signals are real; runs that are only refused, or run
to their end without a signal, run in this process (click's CliRunner: no TensorFlow start of their own),
except one of the two uninterrupted runs whose bytes must be equal.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from embedtune.cli.main import cli
from embedtune.objectives import objective_class
from test_cli_train import assert_one_error_line
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

N_WORDS = 2000
SETTINGS = ["--epochs", "1", "--batch-size", "512", "--deterministic", "--seed", "3"]
EVERY = 5
CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)")   # a complete checkpoint; ckpt-N.partial is one being written
WAIT_SECONDS = 300


class Inputs(os.PathLike):
    """The vectors file of a module's runs, and the objective they train with."""

    def __init__(self, path: Path, objective: str):
        self.path, self.objective = path, objective

    def __fspath__(self) -> str:
        return str(self.path)

    __str__ = __fspath__

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


@pytest.fixture(scope="module", params=["sgns", "glove"])
def vectors(request, tmp_path_factory) -> Inputs:
    path = tmp_path_factory.mktemp("resume-vectors") / "glove.2k.txt"
    path.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:N_WORDS]))
    return Inputs(path, request.param)


def start(vectors: Inputs, output, *options) -> subprocess.Popen:
    """`embedtune train` on the sample corpus with the shared settings, in a process of its own."""
    args = ["train", vectors, SAMPLE_CORPUS, "-o", output, "--objective", vectors.objective, *SETTINGS, *options]
    return subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_here(vectors: Inputs, output, *options, corpus=SAMPLE_CORPUS) -> tuple[int, str]:
    """start()'s command run to its end in this process, (exit code, standard error): for the runs whose
    checks are their exit code, message and files, which need no process of their own."""
    args = ["train", vectors, corpus, "-o", output, "--objective", vectors.objective, *SETTINGS, *options]
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stderr


def finish(process) -> tuple[int, str]:
    """(exit code, standard error) once the process ends."""
    _, stderr = process.communicate(timeout=WAIT_SECONDS)
    return process.returncode, stderr


def checkpoint_steps(folder: Path) -> list[int]:
    """Steps of the complete checkpoints in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for m in map(CHECKPOINT_NAME.fullmatch, os.listdir(folder)) if m)


def checkpoint_folders(folder: Path) -> list[str]:
    """What ``folder`` holds besides its lock file."""
    return sorted(name for name in os.listdir(folder) if name != ".lock")


def wait_for_checkpoint(process, folder: Path, after: int = -1) -> int:
    """Wait until ``process`` has written a checkpoint newer than step ``after``; returns its step."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        steps = checkpoint_steps(folder)
        if steps and steps[-1] > after:
            return steps[-1]
        if process.poll() is not None:
            raise AssertionError(f"the run ended (exit {process.returncode}) before a checkpoint after step "
                                 f"{after}:\n{process.communicate()[1]}")
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"no checkpoint after step {after} within {WAIT_SECONDS} s")


def interrupt(vectors, output, checkpoints, how, *options) -> dict:
    """Start a run, let it write a checkpoint of its own, stop it by ``how`` (a signal); what it left."""
    process = start(vectors, output, "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY, *options)
    before = checkpoint_steps(checkpoints)
    seen = wait_for_checkpoint(process, checkpoints, after=before[-1] if before else -1)
    process.send_signal(how)
    code, stderr = finish(process)
    return {"code": code, "stderr": stderr, "seen": seen, "steps": checkpoint_steps(checkpoints),
            "folder": checkpoint_folders(checkpoints), "output_folder": sorted(os.listdir(output.parent))}


@pytest.fixture(scope="module")
def uninterrupted(vectors, tmp_path_factory) -> dict:
    """Two uninterrupted runs at once: one writing checkpoints and a JSON summary (a process of its own,
    so that the two also differ in their process: string hashing, thread start), one writing neither
    (in this process)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    checkpoints = folder / "checkpoints"
    with_checkpoints = start(vectors, folder / "a.txt", "--checkpoint-dir", checkpoints,
                             "--checkpoint-every", EVERY, "--json", folder / "a.json", "--keep-checkpoints")
    code_b, stderr_b = run_here(vectors, folder / "b.txt")   # meanwhile, in this process
    code_a, stderr_a = finish(with_checkpoints)
    assert code_a == 0, stderr_a
    assert code_b == 0, stderr_b
    return {"a": (folder / "a.txt").read_bytes(), "b": (folder / "b.txt").read_bytes(),
            "summary": json.loads((folder / "a.json").read_text()), "checkpoints": checkpoints}


@pytest.fixture(scope="module")
def interrupted(vectors, tmp_path_factory) -> dict:
    """One run stopped by Ctrl-C, resumed and stopped by SIGTERM, resumed and killed, resumed to the end."""
    folder = tmp_path_factory.mktemp("interrupted")
    output, checkpoints = folder / "out" / "tuned.txt", folder / "checkpoints"
    output.parent.mkdir()
    stages = {"ctrl-c": interrupt(vectors, output, checkpoints, signal.SIGINT)}
    stages["sigterm"] = interrupt(vectors, output, checkpoints, signal.SIGTERM, "--resume")
    stages["kill-9"] = interrupt(vectors, output, checkpoints, signal.SIGKILL, "--resume")
    last = checkpoint_steps(checkpoints)[-1]
    with open(checkpoints / f"ckpt-{last}" / "state.json") as f:
        stages["kill-9"]["words_done"] = json.load(f)["position"]["words_done"]
    # The last resume gets no signal: it runs in this process.
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY,
                            "--resume", "--json", folder / "summary.json")
    assert code == 0, stderr
    stages["end"] = {"output": output.read_bytes(), "summary": json.loads((folder / "summary.json").read_text()),
                     "checkpoints_left": checkpoints.exists()}
    return stages


def assert_stopped_with_a_checkpoint(stage, signal_name):
    code = {"SIGINT": 130, "SIGTERM": 143}[signal_name]   # 128 + the signal, as a shell reports it
    assert stage["code"] == code, f"{signal_name}: exit {stage['code']}\n{stage['stderr']}"
    assert "Traceback" not in stage["stderr"]
    # The step under way is finished and saved: a checkpoint at or after the one the run was
    # stopped at, named in a message that says how to go on.
    saved = stage["steps"][-1]
    assert saved >= stage["seen"]
    tail = " ".join(stage["stderr"].strip().splitlines()[-2:])
    assert f"ckpt-{saved}" in tail and "--resume" in tail, stage["stderr"]
    assert stage["output_folder"] == [], "an interrupted run left files where its output goes"


def test_ctrl_c_finishes_the_step_writes_a_checkpoint_says_how_to_resume_and_exits_130(interrupted):
    assert_stopped_with_a_checkpoint(interrupted["ctrl-c"], "SIGINT")


def test_sigterm_does_the_same_in_a_resumed_run_and_exits_143(interrupted):
    stage = interrupted["sigterm"]
    assert_stopped_with_a_checkpoint(stage, "SIGTERM")
    assert stage["steps"][-1] > interrupted["ctrl-c"]["steps"][-1]


def test_only_the_last_three_checkpoints_are_kept(interrupted, uninterrupted):
    for stage in ("ctrl-c", "sigterm"):
        steps = interrupted[stage]["steps"]
        assert len(steps) <= 3 and interrupted[stage]["folder"] == sorted(f"ckpt-{s}" for s in steps)
    # A complete run with --keep-checkpoints: the three newest multiples of the interval, nothing else.
    last = uninterrupted["summary"]["steps"] // EVERY * EVERY
    assert checkpoint_folders(uninterrupted["checkpoints"]) == sorted(
        f"ckpt-{s}" for s in (last - 2 * EVERY, last - EVERY, last))


def test_a_resume_after_kill_9_continues_from_the_last_checkpoint(interrupted):
    killed, end = interrupted["kill-9"], interrupted["end"]
    assert killed["code"] == -signal.SIGKILL
    assert killed["steps"][-1] > interrupted["sigterm"]["steps"][-1]
    s = end["summary"]
    assert s["resumed"] is True
    # The last run trained only what came after the checkpoint: words/s times its seconds is
    # the corpus less the words the checkpoint had done.
    words_this_run = s["words_per_second"] * s["train_seconds"]
    remaining = s["corpus_words"] * s["epochs"] - killed["words_done"]
    assert killed["words_done"] > 0.02 * s["corpus_words"]   # so that the check below can tell
    # (A run that started over would be off by all the words done before the kill, thousands.)
    assert abs(words_this_run - remaining) <= 0.005 * s["corpus_words"] + 50, (words_this_run, remaining)


def test_interrupted_and_resumed_three_times_gives_the_bytes_of_an_uninterrupted_run(interrupted, uninterrupted):
    assert interrupted["end"]["output"] == uninterrupted["a"]
    for key in ("steps", "pairs", "corpus_words", "trained_rows", "new"):
        assert interrupted["end"]["summary"][key] == uninterrupted["summary"][key], key


def test_two_deterministic_runs_give_byte_identical_files(vectors, uninterrupted):
    # One wrote checkpoints and one did not: saving must not change the result either.
    assert uninterrupted["a"] == uninterrupted["b"]
    assert uninterrupted["a"] != vectors.read_bytes()   # the run trained something


def test_resume_with_other_settings_is_a_one_line_error_that_changes_nothing(vectors, uninterrupted, tmp_path):
    checkpoints = uninterrupted["checkpoints"]
    before = {name: sorted(os.listdir(checkpoints / name)) for name in checkpoint_folders(checkpoints)}
    output = tmp_path / "tuned.txt"
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY,
                            "--resume", "--window", "3")
    assert code == 1
    window = objective_class(vectors.objective).defaults["window"]
    assert_one_error_line(stderr, f"Error: {checkpoints}{os.sep}ckpt-", f"window: {window} then, 3 now")
    assert list(tmp_path.iterdir()) == []
    assert {name: sorted(os.listdir(checkpoints / name)) for name in checkpoint_folders(checkpoints)} == before


def test_a_run_that_ends_deletes_its_checkpoints_unless_told_to_keep_them(interrupted, uninterrupted):
    # The last --resume ran to the end without --keep-checkpoints: once its output was written, the
    # folder went (it held nothing else). The uninterrupted run kept its three (see above).
    assert interrupted["end"]["checkpoints_left"] is False
    assert uninterrupted["checkpoints"].is_dir()


def copy_of(checkpoints: Path, where: Path) -> Path:
    import shutil

    shutil.copytree(checkpoints, where, ignore=shutil.ignore_patterns(".lock"))
    return where


def test_a_new_run_refuses_a_folder_with_another_runs_checkpoints(vectors, uninterrupted, tmp_path):
    # Before, it trained on and pruned by step number: the old run's higher steps survived and its
    # own new checkpoints were deleted as they were written; a --resume then took the old state.
    checkpoints = copy_of(uninterrupted["checkpoints"], tmp_path / "checkpoints")
    before = {name: sorted(os.listdir(checkpoints / name)) for name in checkpoint_folders(checkpoints)}
    output = tmp_path / "out" / "tuned.txt"
    output.parent.mkdir()
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY)
    assert code == 1
    steps = checkpoint_steps(checkpoints)
    assert_one_error_line(stderr, f"Error: {checkpoints}: holds the checkpoints of an earlier run "
                                  f"(ckpt-{steps[0]}, ckpt-{steps[1]}, ckpt-{steps[2]}); continue it with --resume",
                          "--overwrite-checkpoints")
    assert {name: sorted(os.listdir(checkpoints / name)) for name in checkpoint_folders(checkpoints)} == before
    assert list(output.parent.iterdir()) == []
    # Told to overwrite: the old checkpoints go, and a run stopped after its fourth checkpoint leaves
    # this run's newest three (kept: --keep-checkpoints; stopped: --max-steps, in this process).
    assert 4 * EVERY < steps[0]
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY,
                            "--overwrite-checkpoints", "--keep-checkpoints", "--max-steps", 4 * EVERY)
    assert code == 0, stderr
    assert checkpoint_steps(checkpoints) == [2 * EVERY, 3 * EVERY, 4 * EVERY]
    assert checkpoint_folders(checkpoints) == [f"ckpt-{k * EVERY}" for k in (2, 3, 4)]


def test_two_runs_into_one_folder_the_second_is_refused_in_one_line(tmp_path):
    """Once, not per objective: the folder's lock is taken before the objective is built, so the first
    run's objective changes nothing of the second's refusal (an sgns run here made the same check)."""
    vectors = Inputs(tmp_path / "glove.2k.txt", "glove")
    vectors.path.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:N_WORDS]))
    checkpoints = tmp_path / "checkpoints"
    first = start(vectors, tmp_path / "a.txt", "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY,
                  "--epochs", "50")   # still running when the second starts
    try:
        wait_for_checkpoint(first, checkpoints)
        # The second run needs no process of its own: the first holds the folder's lock either way.
        code, stderr = run_here(vectors, tmp_path / "b.txt", "--checkpoint-dir", checkpoints, "--epochs", "50",
                                "--resume")
        assert code == 1
        assert_one_error_line(stderr, f"Error: {checkpoints}: another run (process {first.pid}) is writing "
                                      "checkpoints to this folder; wait for it to end or give another --checkpoint-dir")
    finally:
        first.send_signal(signal.SIGINT)
        finish(first)
    assert not (tmp_path / "b.txt").exists()


def test_a_damaged_checkpoint_is_skipped_for_the_one_before_and_said(vectors, uninterrupted, tmp_path):
    checkpoints = copy_of(uninterrupted["checkpoints"], tmp_path / "checkpoints")
    oldest, middle, newest = checkpoint_steps(checkpoints)
    (checkpoints / f"ckpt-{newest}" / "state.json").write_text('{"position": {"epoch": 1, "ste')
    data = checkpoints / f"ckpt-{middle}" / "tables.npz"   # the compiled step's arrays, cut short
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    output = tmp_path / "tuned.txt"
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--resume", "--keep-checkpoints")
    assert code == 0, stderr
    assert "Traceback" not in stderr
    notes = [line for line in stderr.splitlines() if line.startswith("Note: skipped 2 damaged checkpoints")]
    assert len(notes) == 1, stderr
    assert f"ckpt-{newest}{os.sep}state.json: damaged, not JSON" in notes[0]
    assert f"ckpt-{middle}{os.sep}tables.npz: damaged" in notes[0]
    assert notes[0].endswith(f"resuming from the one before, ckpt-{oldest}")
    assert output.read_bytes() == uninterrupted["a"]


def test_a_folder_of_damaged_checkpoints_is_a_one_line_error_naming_the_newest(vectors, uninterrupted, tmp_path):
    checkpoints = copy_of(uninterrupted["checkpoints"], tmp_path / "checkpoints")
    for step in checkpoint_steps(checkpoints):   # a byte of each array flipped: zip's CRC tells
        arrays = bytearray((checkpoints / f"ckpt-{step}" / "tables.npz").read_bytes())
        arrays[len(arrays) // 3] ^= 0x10
        (checkpoints / f"ckpt-{step}" / "tables.npz").write_bytes(bytes(arrays))
    output = tmp_path / "tuned.txt"
    code, stderr = run_here(vectors, output, "--checkpoint-dir", checkpoints, "--resume")
    assert code == 1
    newest = checkpoint_steps(checkpoints)[-1]
    assert_one_error_line(stderr, f"Error: {checkpoints / f'ckpt-{newest}' / 'tables.npz'}: damaged (",
                          "no earlier checkpoint in the folder can be read either")
    assert not output.exists()


def test_resume_refuses_an_edited_corpus_with_the_same_counts(vectors, uninterrupted, tmp_path):
    # Two words of one line swapped: the same words, counts and lines, other content.
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)
    words = lines[3].split()
    words[0], words[1] = words[1], words[0]
    lines[3] = " ".join(words) + "\n"
    corpus = tmp_path / "edited.cor"
    corpus.write_text("".join(lines), encoding="utf-8")
    output = tmp_path / "tuned.txt"
    code, stderr = run_here(vectors, output, "--checkpoint-dir", uninterrupted["checkpoints"], "--resume",
                            corpus=corpus)
    assert code == 1
    assert_one_error_line(stderr, "cannot resume: the corpus differs from the checkpoint's (the same ",
                          "other content)")
    assert not output.exists()


def test_resume_refuses_vectors_with_other_values_for_the_same_words(vectors, uninterrupted, tmp_path):
    lines = vectors.read_bytes().splitlines(keepends=True)
    word, *values = lines[100].split(b" ")
    values[0] = b"0.5" if values[0] != b"0.5" else b"0.25"
    lines[100] = b" ".join([word, *values])
    edited = Inputs(tmp_path / "glove.2k.txt", vectors.objective)
    edited.path.write_bytes(b"".join(lines))
    output = tmp_path / "tuned.txt"
    code, stderr = run_here(edited, output, "--checkpoint-dir", uninterrupted["checkpoints"], "--resume")
    assert code == 1
    assert_one_error_line(stderr, "cannot resume: the vectors or freeze rules differ from the checkpoint's")
    assert not output.exists()


def test_pruning_follows_the_order_this_run_wrote_in_not_step_numbers(tmp_path):
    # A resume that falls back past a damaged ckpt-20 to ckpt-10 writes 11, 12, 13: those are the
    # newest three, and the damaged ckpt-20, out of this run's line, goes first.
    import numpy as np

    from embedtune.training.checkpoints.folder import Folder
    from embedtune.training.checkpoints.state import Position
    from embedtune.errors import EmbedtuneError

    class Tables:
        """What a folder saves and restores of a trainer (a compiled step's form): one table."""
        table = np.zeros((4, 2), np.float32)

        def checkpoint_arrays(self):
            return {"table": self.table}

        def checkpoint_shapes(self):
            return {"table": (self.table.shape, self.table.dtype)}

        def restored(self, arrays):
            self.table[...] = arrays["table"]

    tables = Tables()
    fp = {"rows": "r", "corpus": {}, "settings": {}}
    with Folder(str(tmp_path)) as folder:
        folder.open(resume=False)
        with pytest.raises(EmbedtuneError, match="another run .* is writing checkpoints to this folder"):
            Folder(str(tmp_path)).open(resume=True)
        for step in (10, 20):
            tables.table[...] = step
            folder.save(tables, Position(steps=step), fp)
    (tmp_path / "ckpt-20" / "state.json").write_text("{")
    notes = []
    with Folder(str(tmp_path)) as folder:
        folder.open(resume=True)
        path, position = folder.resume(tables, fp, notes.append)
        assert (path, position.steps, float(tables.table[0, 0])) == (str(tmp_path / "ckpt-10"), 10, 10.0)
        assert len(notes) == 1 and notes[0].endswith("resuming from the one before, ckpt-10")
        for step in (11, 12, 13):
            folder.save(tables, Position(steps=step), fp)
    assert checkpoint_folders(tmp_path) == ["ckpt-11", "ckpt-12", "ckpt-13"]


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_folder_and_no_lock(tmp_path):
    from embedtune.corpus import Corpus
    from embedtune.errors import EmbedtuneError
    from embedtune.training import train
    from train_fixtures import glove, make_config

    made, given = tmp_path / "made", tmp_path / "given"
    given.mkdir()
    for folder in (made, given):
        config = make_config(epochs=1, checkpoint_dir=str(folder), checkpoint_every=1)
        with pytest.raises(EmbedtuneError, match="no training pairs"):
            train(glove(300), Corpus(["the", "of"] * 5), config)
    assert not made.exists() and list(given.iterdir()) == []
