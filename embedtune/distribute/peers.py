"""Every worker of a TF_CONFIG cluster up before TensorFlow's strategy is built.

tf.distribute.MultiWorkerMirroredStrategy waits in C++ for peers that never come, without a word,
holding the interpreter: no Python signal handler runs there, so Ctrl-C did nothing and only SIGKILL
ended it. So each worker first meets the others on their own TF_CONFIG ports in Python: it listens at
its address (a plain socket, closed before TensorFlow's server takes the port) and connects to each
peer's until every one answers (the peer listening the same way, or its TensorFlow server already
up). The wait says which peers it is for, stops when the run is asked to stop, and is bounded.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from embedtune.errors import EmbedtuneError, TrainingInterrupted

POLL = 0.1     # seconds between two rounds of connection attempts
PEER_TIMEOUT = 120.0   # --peer-timeout's default (embedtune/schema.py), for a strategy started without a config
SAY_AFTER = 1.0   # seconds of waiting before the line naming the peers still missing


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise EmbedtuneError(f"TF_CONFIG: {address!r} is not host:port") from None


def _answers(address: str) -> bool:
    try:
        with socket.create_connection(_split(address), timeout=POLL):
            return True
    except OSError:
        return False


def _listen(address: str) -> socket.socket:
    host, port = _split(address)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("", port))
    except OSError as err:
        listener.close()
        raise EmbedtuneError(f"TF_CONFIG: this worker cannot listen at {address} ({err.strerror or err})") from None
    listener.listen(64)   # never accepted: the kernel completes a peer's connection, which is all it asks
    return listener


def wait_for_peers(hosts: tuple[str, ...], index: int, seconds: float,
                   note: Callable[[str], None] | None = None, stop: Callable[[], bool] | None = None) -> None:
    """Return once every worker of ``hosts`` but ``index`` (this one) answers at its address. An
    error naming the first still missing after ``seconds``; TrainingInterrupted (no position) when
    ``stop`` says so meanwhile. ``note`` is told once which peers it waits for, after SAY_AFTER."""
    listener = _listen(hosts[index])
    try:
        began = time.monotonic()
        missing = [k for k in range(len(hosts)) if k != index]
        said = False
        while True:
            missing = [k for k in missing if not _answers(hosts[k])]
            if not missing:
                return
            if stop is not None and stop():
                raise TrainingInterrupted(None, None)
            waited = time.monotonic() - began
            if waited > seconds:
                raise EmbedtuneError(f"TF_CONFIG: {_named(hosts, missing)} did not start within {seconds:g} s "
                                     "(start every worker of TF_CONFIG; --peer-timeout sets the wait)")
            if not said and waited >= SAY_AFTER and note is not None:
                note(f"waiting for {_named(hosts, missing)} (TF_CONFIG), up to {seconds:g} s")
                said = True
            time.sleep(POLL)
    finally:
        listener.close()


def _named(hosts, missing: list[int]) -> str:
    shown = ", ".join(f"worker {k} at {hosts[k]}" for k in missing[:3])
    return shown + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
