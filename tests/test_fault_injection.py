"""Fault injection (issue 24): SIGINT or SIGTERM at a seeded random moment in each phase of `train`
(loading, counting while TensorFlow imports, set-up, the loop, a checkpoint being written, the output
being written), of `convert` (reading, writing) and of `train --workers 2` (set-up, the loop).

Every run must exit 130 (SIGINT) or 143 (SIGTERM), or 0 if it had finished; leave no output file
unless it is complete (the bytes of an uninterrupted run: a signal after the rename may still exit
130/143), and no temporary or `.partial` file; print no traceback; leave no process;
and where it left a checkpoint, `--resume` must give the bytes of an uninterrupted run (one process;
the workers' resume is test_distribute's killed-worker test). A phase is
found by what the run shows (a line on standard error, a checkpoint folder, a temporary output file),
then the signal waits a drawn delay. Runs go three at a time: they mostly wait. Set
EMBEDTUNE_FAULT_SEED to replay other moments; every message names the seed and the moment.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_signals import CODES, WAIT, alive, big_text, children, group, start  # noqa: F401 (a fixture)
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS, run

SEED = int(os.environ.get("EMBEDTUNE_FAULT_SEED", "24"))
# 20,000 rows, so that writing the output takes long enough to be caught (0.1-0.2 s), on the first 80
# lines of the corpus; 5 epochs, so that a signal drawn into the loop lands there: one process's loop is
# about 1.3 s, two workers' 0.5 s (their checkpoints, the compiled step's own arrays, take milliseconds).
TRAIN = ["--epochs", "5", "--batch-size", "256", "--deterministic", "--seed", "3", "--checkpoint-every", "10"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fault-corpus") / "lee.80.txt"
    path.write_text("".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:80]),
                    encoding="utf-8")
    return path


@dataclass
class Moment:
    command: str          # "train", "train --workers 2", "convert"
    phase: str
    sig: signal.Signals
    delay: float          # seconds after the phase was seen

    def __str__(self):
        return f"seed {SEED}: {self.command}, {self.sig.name} {self.delay:.3f} s into {self.phase}"


def moments() -> list[Moment]:
    draw = random.Random(SEED)
    plan = [("train", "load", 0, 0.05), ("train", "count", 0.2, 1.5), ("train", "setup", 0, 0.4),
            ("train", "loop", 0, 0.3), ("train", "checkpoint", 0, 0), ("train", "write", 0, 0.05),
            ("convert", "read", 0, 0.2), ("convert", "write", 0, 0.2),
            ("train --workers 2", "setup", 0, 1.0), ("train --workers 2", "loop", 0, 0.3)]
    return [Moment(command, phase, draw.choice([signal.SIGINT, signal.SIGTERM]), draw.uniform(low, high))
            for command, phase, low, high in plan]


class Run:
    """A command in a process group of its own, its standard error read as it comes."""

    def __init__(self, args):
        self.process = start(args, stdout=subprocess.DEVNULL)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.others: set[int] = set()   # the launcher's workers, in sessions of their own

    def _read(self):
        for line in self.process.stderr:
            self.lines.append(line.decode("utf-8", "replace"))

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def finish(self, what) -> tuple[int, str]:
        try:
            self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{what}: hung, no exit {WAIT} s after the signal") from None
        self.reader.join(timeout=WAIT)
        return self.process.returncode, "".join(self.lines)

    def kill(self):
        for pid in group(self.process.pid) + [p for p in self.others if alive(p)]:
            os.kill(pid, signal.SIGKILL)
        self.process.wait()

    def left(self) -> list[int]:
        deadline = time.monotonic() + 5   # an orphan is read by init a moment later
        while (left := group(self.process.pid) + [p for p in self.others if alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        return left


@dataclass
class Resume:
    """A stopped run that left a checkpoint: `--resume` must give the uninterrupted run's bytes."""
    moment: Moment
    code: int             # the stopped run's exit code
    stderr: str
    args: list
    out: Path

    def run(self, wanted: bytes) -> str:
        """Resume in this process; the problem, or ''."""
        resumed = run([*self.args, "--resume"])
        if resumed.exit_code != 0 or self.out.read_bytes() != wanted:
            return (f"{self.moment}: --resume after exit {self.code}: exit {resumed.exit_code}, output "
                    f"{'equal to' if self.out.exists() and self.out.read_bytes() == wanted else 'not'} the "
                    f"uninterrupted run's\n{self.stderr}\n--- resumed:\n{resumed.output}")
        return ""


def complete_checkpoints(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith("ckpt-") and "." not in n] if folder.is_dir() else []


def leftovers(*folders: Path) -> list[str]:
    """Temporary outputs and half-written checkpoints."""
    return [n for folder in folders if folder.is_dir() for n in os.listdir(folder)
            if n.endswith((".tmp", ".partial"))]


def start_args() -> list[str]:
    return [sys.executable, "-m", "embedtune.cli.main"]


def train_args(vectors, corpus, out, checkpoints, workers: bool) -> list:
    return ["train", vectors, corpus, "-o", out, *TRAIN, "--checkpoint-dir", checkpoints,
            *(["--workers", "2"] if workers else [])]


def phase_seen(moment: Moment, run: Run, out: Path, checkpoints: Path):
    """A function that is true once ``run`` is in the moment's phase."""
    hidden = lambda: any(n.startswith(".") and n.endswith(".tmp") for n in os.listdir(out.parent))  # noqa: E731
    return {
        "load": lambda: run.said("Loading"),
        "count": lambda: run.said("Loading"),   # then the delay: the count runs while TensorFlow imports
        "setup": lambda: run.said("Plan:"),
        "loop": lambda: bool(complete_checkpoints(checkpoints)),
        "checkpoint": lambda: checkpoints.is_dir() and any(n.endswith(".partial") for n in os.listdir(checkpoints)),
        "write": hidden,
        "read": lambda: bool(children(run.process.pid)),   # the second process of the two-process read
    }[moment.phase]


def interrupt(moment: Moment, args, out: Path, checkpoints: Path) -> tuple[int, str, str]:
    """Run ``args``, signal it at ``moment``; check what it left. -> (exit code, stderr, problem or '')."""
    run = Run(args)
    seen = phase_seen(moment, run, out, checkpoints)
    deadline = time.monotonic() + WAIT
    # A checkpoint's .partial file lives for milliseconds; the other phases last tenths of a second, and
    # need no finer poll (each poll lists folders and reads /proc).
    poll = 0.001 if moment.phase == "checkpoint" else 0.005
    while not seen() and run.process.poll() is None and time.monotonic() < deadline:
        run.others.update(children(run.process.pid) if "--workers" in moment.command else ())
        time.sleep(poll)
    done_before = True   # the output was in place before the signal (or no signal was sent)
    if run.process.poll() is None:
        if time.monotonic() >= deadline:
            run.kill()
            return -1, "", f"{moment}: the phase never came within {WAIT} s"
        time.sleep(moment.delay)
        if "--workers" in moment.command:
            run.others.update(children(run.process.pid))
        done_before = out.exists()
        if run.process.poll() is None:
            run.process.send_signal(moment.sig)
    code, stderr = run.finish(moment)
    problems = []
    if code not in (CODES[moment.sig], 0):
        problems.append(f"exit {code}, expected {CODES[moment.sig]} (or 0 if done)")
    elif code == 0 and not done_before and moment.phase != "write":
        # Only a run already writing its output may finish rather than stop (the rename may win).
        problems.append(f"exit 0: the run went on to the end after {moment.sig.name}")
    if "Traceback" in stderr or "Exception ignored" in stderr:
        problems.append("a traceback")
    if left := run.left():
        problems.append(f"processes {left} outlived it")
    if left := leftovers(out.parent, checkpoints):
        problems.append(f"left {left}")
    problem = f"{moment}: {'; '.join(problems)}\n{stderr}" if problems else ""
    return code, stderr, problem


def test_signals_at_random_moments_in_every_phase(tmp_path, corpus, big_text):  # noqa: F811
    draw = moments()
    vectors = SAMPLE_VECTORS

    def reference() -> bytes:
        """The uninterrupted run, in this process: no signal reaches it (no TensorFlow start of its own)."""
        folder = tmp_path / "uninterrupted"
        folder.mkdir()
        out = folder / "tuned.txt"
        done = run(train_args(vectors, corpus, out, folder / "ckpt", False))
        assert done.exit_code == 0, done.output
        return out.read_bytes()

    def scenario(k: int, moment: Moment) -> str | Resume:
        folder = tmp_path / f"run{k}"
        (folder / "out").mkdir(parents=True)
        checkpoints = folder / "ckpt"
        if moment.command == "convert":
            out = folder / "out" / "big.vec"
            code, stderr, problem = interrupt(moment, ["convert", big_text, out, "--to", "word2vec"], out, checkpoints)
            if not problem and out.exists() and out.read_bytes() != converted.result(timeout=WAIT):
                problem = f"{moment}: exit {code} and an output that is not the uninterrupted convert's\n{stderr}"
            return problem
        out = folder / "out" / "tuned.txt"
        workers = "--workers" in moment.command
        args = train_args(vectors, corpus, out, checkpoints, workers)
        code, stderr, problem = interrupt(moment, args, out, checkpoints)
        if problem or workers:   # the workers' resume: test_distribute's killed-worker test
            return problem
        if out.exists() and out.read_bytes() != uninterrupted.result(timeout=WAIT * 2):
            return f"{moment}: exit {code} and an output that is not the uninterrupted run's\n{stderr}"
        if code == 0 or not complete_checkpoints(checkpoints):
            return ""
        return Resume(moment, code, stderr, args, out)

    def convert_reference() -> bytes:
        out = tmp_path / "converted.vec"
        done = subprocess.run([*start_args(), "convert", str(big_text), str(out), "--to", "word2vec"],
                              capture_output=True, text=True, timeout=WAIT)
        assert done.returncode == 0, done.stderr
        return out.read_bytes()

    uninterrupted: Future = Future()
    problems = []
    with ThreadPoolExecutor(3) as pool:
        converted = pool.submit(convert_reference)
        runs = [pool.submit(scenario, k, moment) for k, moment in enumerate(draw)]   # all under way now
        try:   # the reference in this thread (a command's signal handlers need the main thread), meanwhile
            uninterrupted.set_result(reference())
        except BaseException as error:
            uninterrupted.set_exception(error)
            raise
        # A resume gets no signal: it runs in this thread too, as its stopped run ends, while the pool's
        # threads go on with the other moments; no TensorFlow start of its own.
        for done in as_completed(runs):
            outcome = done.result()
            problems.append(outcome.run(uninterrupted.result()) if isinstance(outcome, Resume) else outcome)
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems)
