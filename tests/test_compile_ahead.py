"""A fresh install's kernels compiled ahead by child processes while the run reads and counts (kernels/ahead.py,
issue 48.1): the list names exactly the kernels and argument types the run calls (given them, the run compiles
nothing), a warm run starts no child, the output's bytes are a run's without it, and a child that dies or is
killed changes nothing but time; the children end with the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAID = "Compiling kernels (first run only) ..."
# The quickstart, deterministic: one thread steps the pairs in order (the lock-free kernel's bits otherwise
# follow the thread timing).
QUICKSTART = ["train", "--config", "configs/quickstart.toml", "--threads", "1"]


def cli(args, cache: Path, ahead: str | None = None, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("EMBEDTUNE_COMPILE_AHEAD", None)
    if ahead is not None:
        env["EMBEDTUNE_COMPILE_AHEAD"] = ahead
    return subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def finished(process: subprocess.Popen) -> tuple[int, str]:
    try:
        _, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("hung")
    return process.returncode, stderr.decode()


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:
            pass
    return found


def in_group(pgid: int) -> list[int]:
    left = []
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[2] == str(pgid) and stat[0] != "Z":
            left.append(int(p))
    return left


def children_until_it_ends(process) -> list[int]:
    """The child processes seen under ``process`` (looked for every 10 ms) until it ends."""
    seen = []
    while process.poll() is None:
        seen += children(process.pid)
        time.sleep(0.01)
    return seen


LISTED = """
import sys
from embedtune.config import load_config
from embedtune.kernels import ahead
from embedtune.run import ahead_kernels
kernels = ahead_kernels(load_config("configs/quickstart.toml"))
assert kernels, "the quickstart lists no kernel"
ahead.compile_now(kernels)
assert ahead.start(kernels, children=1) is None, "a child started though the cache holds every kernel"
print(len(kernels))
"""


def test_the_quickstart_given_its_listed_kernels_compiles_nothing_and_starts_no_child(tmp_path):
    """The list is what the run calls, argument types and all (numba's cache keys by them): once the list is
    compiled, the run says no compile (said at its first) and starts no child."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    listed = subprocess.run([sys.executable, "-c", LISTED], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert listed.returncode == 0, listed.stderr
    run = cli([*QUICKSTART, "-o", tmp_path / "out.txt"], tmp_path / "cache", ahead="1")
    seen = children_until_it_ends(run)
    code, stderr = finished(run)
    assert code == 0, stderr
    assert SAID not in stderr
    assert not seen, f"processes {seen} started by a warm run"


CLASSIFY_LISTED = """
import dataclasses, sys
import numba.core.event as ev
from embedtune.cli.main import cli
from embedtune.config import from_options
from embedtune.kernels import ahead
from embedtune.run import ahead_kernels

deterministic = sys.argv[1] == "strict"
config = from_options(dict(objective="classify", valid="data/sample/wordnet-glosses.valid.txt", freeze_top=5000,
                           deterministic=deterministic))
config = dataclasses.replace(config, vectors="data/sample/glove.6B.50d.20k.txt", output=sys.argv[2],
                             corpus="data/sample/wordnet-glosses.train.txt")
kernels = ahead_kernels(config)
names = [k.name for k in kernels]
suffix = "_strict" if deterministic else ""
assert names == ["_started", "fit_loss_grad_serial" + suffix, "CLASSIFY_STEP_SERIAL" + suffix.upper()], names
ahead.compile_now(kernels)
# Warm now: listed again without counting the corpus's lines.
counting = ahead._lines_at_most
ahead._lines_at_most = lambda path: sys.exit("the lines of a corpus counted though the cache holds the list")
assert [k.name for k in ahead_kernels(config)] == names
ahead._lines_at_most = counting
listed = {id(k.dispatcher()) for k in kernels}
compiled = []

class Seen(ev.Listener):
    def on_start(self, event):
        compiled.append(event.data["dispatcher"])
    def on_end(self, event):
        pass

ev.register("numba:compile", Seen())
args = ["train", config.vectors, config.corpus, "--objective", "classify", "--valid",
        "data/sample/wordnet-glosses.valid.txt", "--freeze-top", "5000", "-o", sys.argv[2], "-q"] + (
    ["--deterministic"] if deterministic else [])
try:
    cli(args, prog_name="embedtune", standalone_mode=False)
except SystemExit as done:
    assert not done.code, done.code
assert compiled, "no compile at all: the reader's kernels are not listed, so this cache was warm"
assert not [d for d in compiled if id(d) in listed], [d.py_func.__name__ for d in compiled if id(d) in listed]
print(len(compiled))
"""


@pytest.mark.parametrize("bits", ["fastmath", "strict"])
def test_the_readmes_classify_run_compiles_none_of_its_listed_kernels(tmp_path, bits):
    """classify's list (its serial fit and step: a small corpus, counted by its lines) holds the argument types the
    run calls them with: once the list is compiled, the run compiles none of it (only what is not listed), and
    listing it again reads no line of the corpus."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "EMBEDTUNE_COMPILE_AHEAD": "0"}
    done = subprocess.run([sys.executable, "-c", CLASSIFY_LISTED, bits, str(tmp_path / "out.txt")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_cold_run_with_a_child_writes_the_bytes_of_a_run_without(tmp_path):
    """Kernels a child compiled into the cache are the run's own: the same output bytes as a cold run that
    compiles every kernel itself; the child is reaped (none left in the run's process group)."""
    with_child = cli([*QUICKSTART, "-o", tmp_path / "with.txt"], tmp_path / "one", ahead="1")
    seen = children_until_it_ends(with_child)
    code, stderr = finished(with_child)
    assert code == 0, stderr
    assert stderr.count(SAID) == 1
    assert seen, "no child compiled ahead on a cold cache"
    assert not in_group(with_child.pid)
    without = cli([*QUICKSTART, "-o", tmp_path / "without.txt"], tmp_path / "two", ahead="0")
    code, stderr = finished(without)
    assert code == 0, stderr
    assert (tmp_path / "with.txt").read_bytes() == (tmp_path / "without.txt").read_bytes()


KILLED = """
import os, sys, time
import numpy as np
from embedtune.kernels import ahead
from embedtune.kernels.tokens import rehash, units_with_pieces, expand
kernels = [k for k in ahead._reader(True) if k.name in ("rehash", "units_with_pieces", "_expand")]
started = ahead.start(kernels, children=1)
assert started is not None
while not os.listdir(started.folder):   # the child has claimed the list's last
    time.sleep(0.01)
started.children[0].{how}
# each kernel called: the child's claim is waited for, its end seen, and the kernel compiled here
thash = np.zeros(8, np.uint64)
rehash(thash, 0, np.zeros(8, np.int32))
units_with_pieces(np.zeros(2, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32))
expand(np.zeros(0, np.int32), np.zeros(2, np.int32), np.zeros(3, np.int64), np.zeros(0, np.int32))
pid = started.children[0].pid
started.close()
assert not os.path.exists(started.folder)
print(pid)
"""


@pytest.mark.parametrize("how", ["kill()", "send_signal(15)"])
def test_a_child_killed_while_it_compiles_leaves_the_run_to_compile_as_before(tmp_path, how):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    ran = subprocess.run([sys.executable, "-c", KILLED.replace("{how}", how)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert not os.path.exists(f"/proc/{ran.stdout.strip()}")


def test_ctrl_c_while_a_child_compiles_stops_the_run_and_the_child(tmp_path):
    """Ctrl-C at a terminal reaches the whole job: the child ignores it (its output would be a traceback), the run
    exits 130 and kills and reaps it."""
    run = cli([*QUICKSTART, "-o", tmp_path / "out.txt"], tmp_path / "cache", ahead="1")
    deadline = time.monotonic() + 120
    while not children(run.pid) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert run.poll() is None, "the run ended before a child started"
    time.sleep(0.5)
    os.killpg(run.pid, signal.SIGINT)
    code, stderr = finished(run)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 5
    while in_group(run.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not in_group(run.pid)


def test_a_run_killed_at_once_leaves_no_child_behind(tmp_path):
    """kill -9 gives the run no time to end its children: each ends when the run's end of its input closes."""
    run = cli([*QUICKSTART, "-o", tmp_path / "out.txt"], tmp_path / "cache", ahead="1")
    deadline = time.monotonic() + 120
    while not (found := children(run.pid)) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert found, "no child started"
    os.kill(run.pid, signal.SIGKILL)
    run.communicate()
    deadline = time.monotonic() + 10
    while any(os.path.exists(f"/proc/{p}") and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1][:3]
              for p in found) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in found if os.path.exists(f"/proc/{p}")
                and "Z" not in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1][:3]]
