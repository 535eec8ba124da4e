"""The collectives of averaging workers (--sync-every K > 0, the default) and of the gathered step of joined
batches (--sync-every 0; sgns, glove, classify: gathered.py) over plain TCP: no TensorFlow.

Averaging workers step as one process does and only exchange bytes: each share's counts, the new words'
context sums, the classifier's figures, and at each sync the rows each worker changed (averaging.py); the
gathered step's exchange each step's batches. TensorFlow's MultiWorkerMirroredStrategy carried those through
gRPC, after an import and a runtime's start that cost each worker seconds of CPU and hundreds of MB
(benchmarks/log/distribute_speed.md); the gathered step of a run without a compiled step (--anchor, a plugin's
objective) still needs it (its all-gathers run inside TensorFlow's step: collectives.py).

The mesh. Each two workers hold one TCP connection. Once the handshake is over (peers.py), worker i listens
again at its TF_CONFIG address, dials each worker below it and is dialled by each above it; a connection
opens with one line from each side, ``embedtune-mesh 1 <cluster digest> <index>``, the dialler's first. A
dial that finds nobody listening yet, or the handshake's listener still open there (it answers with the
handshake's line), is tried again a poll later, within --peer-timeout.

A collective: each worker sends its bytes (their length first, 8 bytes) to each peer from a thread of their
own (two workers each sending more than the buffers hold before reading would both wait forever) while the
calling thread reads each peer's, in worker order. Every worker calls the same collectives in the same
order, so each connection carries them one after another. A sum is every worker's array gathered and added
in worker order on each: every worker has the same bits.

A peer that dies has its connections closed by its kernel: the read ends and PeerLost is raised at once. A
peer whose machine is gone is left to TCP keepalive (KEEPALIVE); one that is stopped or starved still
answers those from its kernel and is waited for, as TensorFlow's launched workers' long heartbeat timeout
allowed (collectives.LAUNCHED_HEARTBEAT). EMBEDTUNE_COLLECTIVE_TIMEOUT, when set, bounds each wait.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

import numpy as np

from embedtune.distribute.cluster import PeerLost, split_address
from embedtune.distribute.collectives import ENV_TIMEOUT
from embedtune.distribute.peers import LINE, POLL, REPLY_WITHIN, greeting, listen, named
from embedtune.errors import EmbedtuneError, TrainingInterrupted

PROTOCOL = "embedtune-mesh 1"
# Seconds idle before the first probe, between probes, and probes unanswered: set so that a peer's machine gone
# fails the wait after about 90 s (the system's arithmetic; not tried here, with one machine), while a live peer's
# kernel answers them however busy or stopped the process is.
KEEPALIVE = (30, 10, 6)


class Mesh:
    """Worker ``index`` of ``hosts``'s connections to every other worker, and the collectives over them (the
    interface of collectives.Collectives: ``all_gather_bytes``, ``all_gather_words``, ``sum_array``)."""

    def __init__(self, hosts: tuple[str, ...], index: int):
        self.hosts, self.index, self.size = hosts, index, len(hosts)
        self.peers: dict[int, socket.socket] = {}

    def start(self, seconds: float, stop: Callable[[], bool] | None = None) -> None:
        """Connect to every peer (``seconds`` at most; TrainingInterrupted when ``stop`` says so meanwhile)."""
        deadline = time.monotonic() + seconds
        listener = listen(self.hosts[self.index]) if self.index < self.size - 1 else None
        try:
            for k in range(self.index):
                self.peers[k] = self._dial(k, deadline, stop)
            while len(self.peers) < self.size - 1:
                self._accept(listener, deadline, stop)
        except BaseException:
            self.close()
            raise
        finally:
            if listener is not None:
                listener.close()
        timeout = float(os.environ.get(ENV_TIMEOUT) or 0) or None
        for sock in self.peers.values():
            _settle(sock, timeout)

    def close(self) -> None:
        for sock in self.peers.values():
            sock.close()
        self.peers = {}

    def _waited(self, k: int | None, deadline: float, stop) -> None:
        """An error once past the deadline (naming ``k``, else the peers not yet connected), or a stop."""
        if stop is not None and stop():
            raise TrainingInterrupted(None, None)
        if time.monotonic() > deadline:
            missing = [k] if k is not None else [j for j in range(self.size) if j != self.index and j not in self.peers]
            raise EmbedtuneError(f"TF_CONFIG: {named(self.hosts, missing)} answered the handshake but did not "
                                 "connect for the workers' exchanges in time (--peer-timeout sets the wait)")

    def _dial(self, k: int, deadline: float, stop) -> socket.socket:
        """The connection to peer ``k`` (below this worker), once it answers as itself. Its answer is waited
        for on the same connection (within the deadline): a peer still dialling the workers below it answers
        once it accepts, and a connection given up meanwhile would be the one it keeps."""
        host, port = split_address(self.hosts[k])
        hello, expected = greeting(self.hosts, self.index, PROTOCOL), greeting(self.hosts, k, PROTOCOL).rstrip(b"\n")
        while True:
            self._waited(k, deadline, stop)
            try:
                sock = socket.create_connection((host, port), timeout=REPLY_WITHIN)
            except OSError:   # not listening yet (or between its handshake and its mesh)
                time.sleep(POLL)
                continue
            try:
                sock.sendall(hello)
                said = _line(sock, lambda: self._waited(k, deadline, stop))
            except OSError:
                said = None
            except BaseException:
                sock.close()
                raise
            if said == expected:
                return sock
            sock.close()   # the handshake's listener still there, or a close: again a poll later
            time.sleep(POLL)

    def _accept(self, listener: socket.socket, deadline: float, stop) -> None:
        """One peer above this worker connected, if one dials within a poll."""
        self._waited(None, deadline, stop)
        listener.settimeout(POLL)
        try:
            sock, _ = listener.accept()
        except OSError:   # none within the poll (a timeout), or one given up meanwhile
            return
        began = time.monotonic()

        def waiting():   # a dialler sends its line at once: one silent this long is not a peer
            self._waited(None, deadline, stop)
            if time.monotonic() - began > REPLY_WITHIN:
                raise TimeoutError

        try:
            words = (_line(sock, waiting) or b"").decode("ascii", "replace").split(" ")
            mine = greeting(self.hosts, self.index, PROTOCOL).decode().split(" ")
            k = int(words[3]) if len(words) == 4 and words[:3] == mine[:3] and words[3].isdecimal() else -1
            if self.index < k < self.size and k not in self.peers:
                sock.sendall(greeting(self.hosts, self.index, PROTOCOL))
                self.peers[k] = sock
                return
        except OSError:
            pass
        except BaseException:
            sock.close()
            raise
        sock.close()   # not a peer's dial (another program, a repeat): nothing is said to it

    # --- the collectives -------------------------------------------------------------------------
    def all_gather_bytes(self, data: bytes) -> list[bytes]:
        """Every worker's ``data``, in worker order, on every worker (a collective: all must call it)."""
        return [bytes(part) for part in self._exchange(memoryview(data).cast("B"))]

    def all_gather_words(self, words: np.ndarray) -> list[np.ndarray]:
        """Every worker's int64 array ``words`` (1-D), in worker order, on every worker."""
        mine = np.ascontiguousarray(words, np.int64)
        return [mine if k == self.index else np.frombuffer(part, np.int64)
                for k, part in enumerate(self._exchange(memoryview(mine).cast("B")))]

    def sum_array(self, x: np.ndarray) -> np.ndarray:
        """The sum of every worker's ``x`` (float64, of one shape on all), added in worker order on each."""
        parts = self._exchange(memoryview(np.ascontiguousarray(x, np.float64)).cast("B"))
        total = np.frombuffer(parts[0], np.float64).copy()
        for part in parts[1:]:
            total += np.frombuffer(part, np.float64)
        return total.reshape(np.shape(x))

    def _exchange(self, data: memoryview) -> list:
        """Every worker's bytes, ``data`` in this worker's place (not copied)."""
        failed: dict[int, BaseException] = {}

        def send(k: int, sock: socket.socket) -> None:
            try:
                sock.sendall(len(data).to_bytes(8, "little"))
                sock.sendall(data)
            except BaseException as err:   # noqa: BLE001 (told to the calling thread)
                failed[k] = err

        senders = [threading.Thread(target=send, args=(k, sock), daemon=True, name=f"embedtune-mesh-{k}")
                   for k, sock in self.peers.items()]
        for sender in senders:
            sender.start()
        parts: list = []
        for k in range(self.size):
            parts.append(data if k == self.index else self._receive(k))
        for sender in senders:
            sender.join()
        if failed:
            k, err = min(failed.items())
            raise self._lost(k, err)
        return parts

    def _receive(self, k: int) -> bytearray:
        sock = self.peers[k]
        try:
            size = int.from_bytes(_exactly(sock, 8), "little")
            return _exactly(sock, size)
        except (OSError, EOFError) as err:
            raise self._lost(k, err) from None

    def _lost(self, k: int, err: BaseException) -> PeerLost:
        # A peer that exited closes its end; bytes sent to it after that reset the connection.
        closed = (EOFError, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
        why = ("its connection closed (the worker ended)" if isinstance(err, closed) else
               f"no answer within {ENV_TIMEOUT}'s {os.environ.get(ENV_TIMEOUT)} s" if isinstance(err, TimeoutError)
               else f"{type(err).__name__}: {err}")
        return PeerLost(f"worker {self.index}: a collective step failed (worker {k}: {why})")


def _line(sock: socket.socket, waiting: Callable[[], None]) -> bytes | None:
    """An opening line, read a byte at a time (what follows it is the first collective's), ``waiting`` called
    at each poll without a byte (it raises to give up); None for a close before its end."""
    sock.settimeout(POLL)
    data = b""
    while len(data) < LINE:
        try:
            byte = sock.recv(1)
        except TimeoutError:
            waiting()
            continue
        if not byte:
            return None
        if byte == b"\n":
            return data
        data += byte
    return None


def _exactly(sock: socket.socket, size: int) -> bytearray:
    out = bytearray(size)
    view, got = memoryview(out), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError
        got += n
    return out


def _settle(sock: socket.socket, timeout: float | None) -> None:
    """A connected peer's socket for the collectives: blocking (``timeout``), no delay for the small lengths,
    keepalive."""
    sock.settimeout(timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle, interval, probes = KEEPALIVE
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", probes)):
        if hasattr(socket, name):   # Linux's; elsewhere the system's own
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
