"""The local launcher: `embedtune train ... --workers N` runs the same command as N worker processes on
loopback ports (TF_CONFIG each), passes the launcher's signals to the chief and reports the first failure."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from embedtune.distribute.cluster import ENV_LAUNCHED, ENV_REASON, ENV_THREADS

PEER_LOST = 3   # exit code of a worker whose peer went away (the launcher reports the peer, not it)
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
SETTLE = 1.0   # seconds the launcher waits, after a worker fails, for the others to fail on their own


def free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("localhost", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()



def worker_threads(workers: int, cores: int) -> int:
    """TensorFlow threads per local worker: the cores shared out, at least one, so N workers on fewer
    cores take turns instead of each waiting on a pool the others have filled."""
    return max(1, cores // workers)


@dataclass
class Launch:
    code: int               # the exit code the launcher should end with
    failure: str | None     # the one line to report, when a worker other than the chief failed first


def launch(command: list[str], workers: int, threads: int) -> Launch:
    """Run ``command`` (an `embedtune train` command line) as ``workers`` local workers and wait.

    Worker 0 (the chief) keeps this process's standard output and error; the others' output is
    dropped and their error kept for the report. The first worker to fail stops the others (SIGKILL);
    a SIGINT or SIGTERM to the launcher is passed to the chief, which stops after its
    step with a checkpoint, as a single process does; the launcher then ends the others and exits
    130 for SIGINT, 143 for SIGTERM.
    """
    ports = free_ports(workers)
    hosts = [f"localhost:{port}" for port in ports]
    procs: list[subprocess.Popen] = []
    logs = []
    reasons = tempfile.TemporaryDirectory(prefix="embedtune-workers-")   # worker k's reason: reasons/k
    forwarded = {}
    stopped_by = []   # the signals passed on to the chief
    starting = [True]   # while the workers are started, a signal is only recorded (early)
    early = []

    def forward(signum, frame):
        if starting[0]:
            # Raised here, it could land inside Popen after the fork and leave that worker running
            # unlisted, waiting for its peers (even with the signals blocked in this thread: another
            # thread may take a signal sent to the process, and Python runs the handler here).
            early.append(signum)
            return
        if procs and procs[0].poll() is None:
            stopped_by.append(signum)
            procs[0].send_signal(signum)
        elif callable(forwarded.get(signum)):   # no chief to stop (not started, or gone): as if not launching
            forwarded[signum](signum, frame)

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                forwarded[sig] = signal.signal(sig, forward)
            except ValueError:   # not the main thread
                pass
        for k in range(workers):
            if early:
                break
            procs.append(_start_worker(command, hosts, k, threads, logs, reasons.name))
        starting[0] = False
        if early:   # before any worker could do anything: all are ended, the launcher exits as asked
            _stop(procs)
            return Launch(128 + early[0], None)
        return _wait(procs, logs, stopped_by, reasons.name)
    finally:
        _stop(procs)
        for sig, handler in forwarded.items():
            signal.signal(sig, handler)
        for log in logs:
            if log is not None:
                log.close()
        reasons.cleanup()


def _start_worker(command: list[str], hosts: list[str], k: int, threads: int, logs: list,
                  reasons: str) -> subprocess.Popen:
    """Worker ``k`` of ``hosts``, its TF_CONFIG set; its standard error kept in a file (added to
    ``logs``) unless it is the chief, whose output is the launcher's; why it lost its peers, if it
    does, in the folder ``reasons`` (file ``k``)."""
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": hosts},
                                                  "task": {"type": "worker", "index": k}}))
    env[ENV_LAUNCHED] = "1"
    env[ENV_REASON] = os.path.join(reasons, str(k))
    env[ENV_THREADS] = str(threads)
    # A dead peer makes TensorFlow log gRPC errors on every survivor; the launcher's one line says it.
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    log = None if k == 0 else tempfile.TemporaryFile()
    logs.append(log)
    # Own sessions: a Ctrl-C at the terminal reaches the launcher only, which passes it on.
    # Started with Ctrl-C and SIGTERM blocked, which the worker inherits and unblocks once its
    # handlers are set (cli/main.py): one passed on while Python starts there is taken then,
    # with its exit code, not as a KeyboardInterrupt traceback.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                stdout=None if k == 0 else subprocess.DEVNULL,
                                stderr=None if k == 0 else log, start_new_session=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _wait(procs: list[subprocess.Popen], logs: list, stopped_by: list, reasons: str) -> Launch:
    """Until every worker has ended well, or one has failed (then the others are ended): the Launch."""
    while True:
        codes = [p.poll() for p in procs]
        if all(c == 0 for c in codes):
            # A signal passed on as the chief finished (after its last look at the stop request,
            # or as it exited, when the signal was not sent) still ends the launcher with its code:
            # the output is whole, but a pipeline must not read an interrupted command as success.
            return Launch(128 + stopped_by[0] if stopped_by else 0, None)
        if any(c not in (None, 0) for c in codes):
            break
        time.sleep(0.05)
    # The others often fail on their own a moment later (the same bad input, or a lost peer):
    # then the chief's own error line, already printed, is the one line to show.
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    codes = [p.poll() for p in procs]
    if stopped_by and codes[0] in (128 + stopped_by[0], -stopped_by[0]):
        # The chief stopped as asked (or, not yet running Python, was ended by the signal); the
        # others were left waiting for it. 130 for SIGINT, 143 for SIGTERM, as a shell reports them.
        _stop(procs)
        return Launch(128 + stopped_by[0], None)
    failed = [k for k, c in enumerate(codes) if c not in (None, 0)]
    causes = [k for k in failed if codes[k] != PEER_LOST] or failed
    culprit = causes[0]
    _stop(procs)
    code = codes[culprit]
    if culprit == 0 and code > 0 and code != PEER_LOST:
        return Launch(code, None)   # the chief said why itself (its error, or an interruption)
    why = _why(code, logs[culprit], os.path.join(reasons, str(culprit)))
    return Launch(code if code > 0 else 1, f"worker {culprit} exited ({why})")


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGKILL, not SIGTERM: a worker asked to stop would wait in its step's collective for the
    worker that is gone, and print; a run stopped this way resumes from the chief's last checkpoint."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _why(code: int, log, reason: str) -> str:
    """How a worker ended: the signal that killed it, or its exit code and last line of standard error
    (``log``; the chief's is the user's); for a lost peer, what the worker said of it (the file ``reason``)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    last = ""
    if log is not None:
        log.seek(0)
        lines = [line.strip() for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        if last.startswith("Error: "):
            last = last[len("Error: "):]
    if code == PEER_LOST:
        try:
            with open(reason, encoding="utf-8", errors="replace") as f:
                last = f.read().strip() or last
        except OSError:   # none written: a worker that did not get as far
            pass
        return f"lost its peers: {last}" if last else "lost its peers"
    return f"exit code {code}: {last}" if last else f"exit code {code}"


def worker_command(argv: list[str]) -> list[str]:
    """The command line of a worker: this same `embedtune` command, run by this Python."""
    return [sys.executable, "-m", "embedtune.cli.main", *argv]
