"""Signals and closed pipes through the real command: every stop is prompt, reported by its exit code
(130 for Ctrl-C, 143 for SIGTERM, 141 for a closed output pipe, as a shell reports them), leaves no
process, no traceback and no half-written file. Processes, signals and pipes are real."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

SAMPLE_LINES = SAMPLE_VECTORS.read_bytes().splitlines()
WAIT = 60   # seconds a stopped command may take before the test calls it hung
SEED = 24   # the random moments below are drawn from this, so a failure reproduces
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def start(args, **kwargs) -> subprocess.Popen:
    """The command in a process group of its own, so that a signal can reach the group as Ctrl-C
    does, and what is left of the group can be found afterwards."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", *map(str, args)],
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def _stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()   # state, ppid, pgrp, ...


# The kernel's own list of a thread's children (Linux 3.5 on): polled every few milliseconds, reading
# every process's stat file instead kept a core busy in the tests that wait for a child.
KERNEL_LISTS_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children(pid: int) -> list[int]:
    if not KERNEL_LISTS_CHILDREN:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p)) and s[1] == str(pid)]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")   # each thread lists the children it started
    except OSError:   # the process has ended
        return []
    found = []
    for task in tasks:
        try:
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:   # the thread has ended
            pass
    return found


def group(pgid: int) -> list[int]:
    """Live processes of a process group (zombies wait only for their parent to read them)."""
    return [int(p) for p in os.listdir("/proc")
            if p.isdigit() and (s := _stat(p)) and s[2] == str(pgid) and s[0] != "Z"]


def stop(process: subprocess.Popen, sig, to_group: bool) -> None:
    if to_group:
        os.killpg(process.pid, sig)   # Ctrl-C at a terminal reaches every process of the job
    else:
        process.send_signal(sig)      # timeout(1), systemd and Kubernetes signal the one process


def finish(process: subprocess.Popen, what: str) -> tuple[int, str]:
    """(exit code, standard error); a process that does not end within WAIT fails the test (and is killed)."""
    try:
        _, stderr = process.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"hung: no exit {WAIT} s after {what}")
    return process.returncode, stderr.decode()


def alive(pid: int) -> bool:
    s = _stat(str(pid))
    return s is not None and s[0] != "Z"


def assert_gone(process: subprocess.Popen, what: str, others=()) -> None:
    """Nothing left of the command's process group, nor of ``others`` (processes in sessions of
    their own, as `--workers` starts them)."""
    deadline = time.monotonic() + 5   # an orphan is read by init a moment later
    while (left := group(process.pid) + [p for p in others if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{what}: processes {left} outlived the command"


# ---------------------------------------------------------------------------------------------
# a signal while a big text file is read by two processes (formats/text/read.py's _read_parallel)


@pytest.fixture(scope="module")
def big_text(tmp_path_factory) -> Path:
    """The GloVe sample four times over, renamed: 34 MB, past the 32 MiB at which two processes read."""
    path = tmp_path_factory.mktemp("big-text") / "big.txt"
    with open(path, "wb") as f:
        for copy in range(4):
            f.writelines(line.replace(b" ", f"_{copy} ".encode(), 1) + b"\n" for line in SAMPLE_LINES)
    assert path.stat().st_size >= 32 << 20
    return path


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: the file is read in one process")
def test_a_signal_while_two_processes_read_a_big_file_stops_both(big_text, tmp_path):
    """Once, SIGTERM here left the parent waiting for a child that blocked on a pipe nobody read
    (2 runs in 13 hung for good), and Ctrl-C printed the child's traceback (3 in 10)."""
    draw = random.Random(SEED)
    for run in range(14):
        sig = signal.SIGTERM if run % 2 == 0 else signal.SIGINT
        to_group = sig == signal.SIGINT or run % 4 == 0
        out = tmp_path / f"out{run}" / "big.vec"
        out.parent.mkdir()
        process = start(["convert", big_text, out, "--to", "word2vec"])
        deadline = time.monotonic() + WAIT
        while not children(process.pid):   # the child that reads the second half
            assert process.poll() is None, f"run {run}: ended before its reading child started"
            assert time.monotonic() < deadline, f"run {run}: no reading child after {WAIT} s"
            time.sleep(0.002)
        delay = draw.uniform(0, 0.3)
        time.sleep(delay)
        what = f"run {run}: {sig.name} to the {'group' if to_group else 'process'} {delay:.3f} s into the read"
        stop(process, sig, to_group)
        code, stderr = finish(process, what)
        assert code in (CODES[sig], 0), f"{what}: exit {code}\n{stderr}"
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, f"{what}\n{stderr}"
        assert_gone(process, what)
        # An output only if complete: a signal just after the rename still exits 130/143 (main's exit).
        assert [n for n in os.listdir(out.parent) if n != out.name] == [], what
        if code == 0 or out.exists():
            assert out.read_bytes().count(b"\n") == 1 + 4 * len(SAMPLE_LINES), what


# ---------------------------------------------------------------------------------------------
# a signal to `train --workers 2`'s launcher in the loop

TRAIN = ["--epochs", "1", "--batch-size", "512", "--deterministic", "--seed", "3"]
EVERY = 5   # steps between checkpoints


@pytest.fixture(scope="module")
def vectors_2k(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("vectors-2k") / "glove.2k.txt"
    path.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:2000]))
    return path


def wait_for(process, ready, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"ended (exit {process.returncode}) before {what}:\n{process.communicate()[1].decode()}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"no {what} after {WAIT} s")
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_stops_every_worker_at_once_with_a_checkpoint(vectors_2k, tmp_path, sig):
    """SIGTERM once went to TensorFlow's own handler in the chief (its coordination service takes it
    for a preemption notice), so the workers trained on; the launcher exits as the chief does."""
    out, checkpoints = tmp_path / "out" / "tuned.txt", tmp_path / "ckpt"
    out.parent.mkdir()
    # 40 epochs, not TRAIN's 1: the signal must come while the workers train, and an epoch of theirs is a
    # fraction of a second once its first checkpoint is written (the compiled step's own arrays, no TensorFlow).
    process = start(["train", vectors_2k, SAMPLE_CORPUS, "-o", out, *TRAIN, "--epochs", "40", "--workers", "2",
                     "--checkpoint-dir", checkpoints, "--checkpoint-every", EVERY])
    wait_for(process, lambda: checkpoints.is_dir() and any(n.startswith("ckpt-") and "." not in n
                                                            for n in os.listdir(checkpoints)), "checkpoint")
    workers = children(process.pid)
    assert len(workers) == 2, workers
    began = time.monotonic()
    stop(process, sig, to_group=False)   # the workers run in sessions of their own: only the launcher hears it
    code, stderr = finish(process, sig.name)
    assert code == CODES[sig], stderr
    assert time.monotonic() - began < 15, f"took {time.monotonic() - began:.1f} s to stop"
    assert "Traceback" not in stderr and "Error:" not in stderr, stderr
    tail = " ".join(stderr.strip().splitlines()[-2:])
    assert "checkpoint written to" in tail and "--resume" in tail, stderr
    assert_gone(process, sig.name, workers)
    assert os.listdir(out.parent) == []


# ---------------------------------------------------------------------------------------------
# a reader that goes away: `embedtune ... -o - | head -c 100`, `embedtune convert ... - | false`


def read_then_close(process: subprocess.Popen, n: int) -> tuple[int, str]:
    if n:
        process.stdout.read(n)
    process.stdout.close()
    _, stderr = process.communicate(timeout=WAIT)
    return process.returncode, stderr.decode()


@pytest.mark.parametrize("n", [0, 100])
def test_convert_to_a_closed_pipe_exits_141(big_text, n):
    """It exited 0, so `set -o pipefail` saw a cut-short file as a success."""
    code, stderr = read_then_close(start(["convert", big_text, "-", "--to", "word2vec"]), n)
    assert code == 141, stderr   # 128 + SIGPIPE, as `cat` gives
    # nor "Exception ignored ... BrokenPipeError" at exit; the one line a cold numba cache says (the text
    # writer's kernels, compiled for a table this size: the test alone in a fresh checkout) is not the pipe's
    assert stderr.replace("Compiling kernels (first run only) ...\n", "", 1) == "", stderr


def test_train_to_a_closed_pipe_exits_141(vectors_2k):
    process = start(["train", vectors_2k, SAMPLE_CORPUS, "-o", "-", "-q", *TRAIN, "--max-steps", "5"])
    code, stderr = read_then_close(process, 100)
    assert code == 141, stderr
    assert stderr == "", stderr


# ---------------------------------------------------------------------------------------------
# a signal after the command's work, on the way out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_command_is_done_exits_with_its_code_and_no_traceback(tmp_path, sig):
    """Once the command had returned, its handlers were gone: Ctrl-C printed Python's traceback (and
    SIGTERM ended the process by its default action). The signal here arrives just as `cli` returns."""
    small = tmp_path / "v.txt"
    small.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:50]))
    out = tmp_path / "out.txt"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from embedtune.cli import main

        command = main.cli

        def cli(*args, **kwargs):
            try:
                command(*args, **kwargs)
            finally:
                os.kill(os.getpid(), signal.{sig.name})

        main.cli = cli
        sys.argv = ["embedtune", "convert", {str(small)!r}, {str(out)!r}]
        main.main()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == CODES[sig], done.stderr
    assert "Traceback" not in done.stderr and "Aborted!" not in done.stderr, done.stderr
    assert out.read_bytes() == small.read_bytes()   # the command had finished: its output is whole


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("resend", [None, 0])
def test_a_signal_inside_a_callback_whose_errors_python_ignores_still_stops_the_command(sig, resend):
    """A SIGTERM landing in an import's module-lock weakref callback printed "Exception ignored in"
    with a traceback, and the command went on to exit 0 (the big-file test above, once in a few runs).
    Here the signal is sent from inside such a callback, so the handler raises there every time. With
    no delay before the signal is sent again, it comes while the hook still starts the timer (as it
    did under load, once): it must not be raised, and lost, there."""
    script = textwrap.dedent(f"""
        import os, signal, sys, time, weakref
        import click
        from embedtune.cli import signals
        from embedtune.cli.main import interrupts_unwind
        if {resend!r} != None:
            signals.RESEND_SECONDS = {resend!r}

        class Thing:
            pass

        def callback(ref):   # its exceptions are only printed by Python, never raised
            os.kill(os.getpid(), signal.{sig.name})
            for _ in range(100000):
                pass

        try:
            with interrupts_unwind():
                thing = Thing()
                ref = weakref.ref(thing, callback)
                del thing
                for _ in range(400):
                    time.sleep(0.005)
                print("not stopped")
        except click.exceptions.Exit as stop:
            sys.exit(stop.exit_code)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == CODES[sig], done.stdout + done.stderr
    assert "not stopped" not in done.stdout
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_import_lock_is_held_is_raised_after_it_is_released(sig):
    """Raised inside importlib's module-lock bookkeeping (the lock taken, its try not yet entered), it
    left the import lock held for good: the thread importing TensorFlow beside the count waited on it
    and the command waited for that thread (`train`, Ctrl-C 0.48 s into the count: hung)."""
    script = textwrap.dedent(f"""
        import _imp, os, signal, sys, time
        import click
        from embedtune.cli.main import interrupts_unwind

        try:
            with interrupts_unwind():
                _imp.acquire_lock()   # as importlib's _get_module_lock does, before its try
                os.kill(os.getpid(), signal.{sig.name})
                for _ in range(100000):
                    pass
                _imp.release_lock()
                for _ in range(400):
                    time.sleep(0.005)
                print("not stopped")
        except click.exceptions.Exit as stop:
            print("lock held" if _imp.lock_held() else "lock free")
            sys.exit(stop.exit_code)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == CODES[sig], done.stdout + done.stderr
    assert done.stdout.strip() == "lock free", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


# A signal sent from the import of numba._devicearray, which numba's _dispatcher makes from its C init:
# the moment a Ctrl-C 0.5 s into counting hit as numba loaded for the first time (seed 24 of
# tests/test_fault_injection.py). Its loader is wrapped so that the signal comes there every time.
NUMBA_INIT_SIGNAL = """
import importlib.machinery, os, signal, sys

class Loader(importlib.machinery.ExtensionFileLoader):
    def create_module(self, spec):
        os.kill(os.getpid(), signal.{sig})
        return super().create_module(spec)

class Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "numba._devicearray":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Loader(spec.loader.name, spec.loader.path)
        return spec

assert "numba" not in sys.modules
sys.meta_path.insert(0, Finder())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_c_extensions_import_is_raised_after_it(sig):
    """Raised there, numba's init printed the KeyboardInterrupt's traceback and replaced it with
    `ImportError: numba._devicearray failed to import` (exit 1)."""
    script = NUMBA_INIT_SIGNAL.format(sig=sig.name) + textwrap.dedent("""
        import click
        from embedtune.cli.main import interrupts_unwind

        try:
            with interrupts_unwind():
                import numba
                import time
                for _ in range(400):
                    time.sleep(0.005)
                print("not stopped")
        except click.exceptions.Exit as stop:
            print("numba loaded" if "numba._dispatcher" in sys.modules else "numba not loaded")
            sys.exit(stop.exit_code)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == CODES[sig], done.stdout + done.stderr
    assert done.stdout.strip() == "numba loaded", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr



def test_ctrl_c_is_taken_again_later_where_llvmlite_holds_its_lock():
    """Inside llvmlite (numba loading or compiling a kernel) a Ctrl-C is sent again a moment later instead of
    raised (cli/signals.py ``in_llvm``): raised there it left llvmlite's lock held, so the new words' fit thread,
    loading its own kernel, waited on it for good while the command waited for that thread, or an object owned
    twice was freed twice at exit (tests/test_fault_injection.py saw both). Outside llvmlite it is raised."""
    from llvmlite import binding as llvm
    from llvmlite.binding import ffi

    from embedtune.cli import signals

    held = []

    def acquired():   # llvmlite calls it with its lock taken, from its own frames
        held.append(sys._getframe())

    def released():
        pass

    ffi.register_lock_callback(acquired, released)
    try:
        llvm.get_default_triple()
    finally:
        ffi.unregister_lock_callback(acquired, released)
    assert held and signals.not_now(held[0])
    assert not signals.in_llvm(sys._getframe())


# A signal sent from numba's _numba_unpickle, which a compiled kernel's wrapper calls (from C) as it boxes
# each array the kernel returns: a profile hook sends it on that function's call, so the handler runs there.
# Under the command's handlers (interrupts_unwind), or the training loop's after a first Ctrl-C (StopRequests:
# the second stops at once).
NUMBA_BOXING_SIGNAL = """
import os, signal, sys, time
import click
import numpy as np
from numba import njit
from embedtune.cli.main import interrupts_unwind
from embedtune.cli.train_cmd import StopRequests

@njit(nogil=True)
def two_arrays(n):
    return np.zeros(n), np.ones(n)

two_arrays(3)   # compiled before the hook is set
sent = []

def hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "_numba_unpickle" and not sent:
        sent.append(frame.f_code.co_filename)
        os.kill(os.getpid(), signal.{sig})

try:
    with {handlers} as handlers:
        {before}
        sys.setprofile(hook)
        zeros, ones = two_arrays(3)
        sys.setprofile(None)
        for _ in range(400):
            time.sleep(0.005)
        print("not stopped")
except (click.exceptions.Exit, SystemExit) as stop:
    print("sent" if sent else "not sent", flush=True)
    sys.exit(getattr(stop, "exit_code", None) or stop.code)
"""


@pytest.mark.parametrize("sig, handlers, before", [
    (signal.SIGINT, "interrupts_unwind()", "pass"),
    (signal.SIGTERM, "interrupts_unwind()", "pass"),
    (signal.SIGINT, "StopRequests()", "handlers.requested = True   # the first Ctrl-C came"),
])
def test_a_signal_while_a_kernel_boxes_its_arrays_is_raised_after_it(sig, handlers, before):
    """A signal that comes while a nogil kernel runs is handled at the first Python code the main thread runs
    after it: numba's _numba_unpickle, which the kernel's wrapper calls for each array it returns. Raised
    there, the wrapper put a NULL in the tuple it returned: unpacking it segfaulted (`train`, Ctrl-C in the
    new words' set-up: exit -11, 2 runs in 122) or raised SystemError ("returned a result with an exception
    set"). It is taken again once the kernel has returned (cli/signals.py ``in_numba_callback``), by the
    training loop's own handler too (its second Ctrl-C, cli/train_cmd.py StopRequests)."""
    script = NUMBA_BOXING_SIGNAL.format(sig=sig.name, handlers=handlers, before=before)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == CODES[sig], done.stdout + done.stderr
    assert done.stdout.strip() == "sent", done.stdout + done.stderr   # the hook found numba's callback
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
