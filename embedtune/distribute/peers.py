"""Every worker of a TF_CONFIG cluster up before TensorFlow's strategy is built.

tf.distribute.MultiWorkerMirroredStrategy waits in C++ for peers that never come, without a word,
holding the interpreter: no Python signal handler runs there, so Ctrl-C did nothing and only SIGKILL
ended it. So each worker first meets the others on their own TF_CONFIG ports in Python, and hands
TensorFlow only a cluster whose every worker it has spoken to.

Meeting is a handshake, not an open port: another program listening at a peer's port (or a peer's
address that is this worker's own) let the old check pass, and the run then hung in TensorFlow's wait.
Each worker listens at its address (a plain socket, closed before TensorFlow's server takes the port)
and connects to each peer's; on every connection both sides send one line, ``embedtune-peer 1
<cluster digest> <index>``, and read the other's. A peer counts as met when its line names this
cluster and the index TF_CONFIG gives it. A worker keeps its listener open until every peer has also
greeted it (its line read here), so none goes on to TensorFlow while another still needs its answer.
What answers otherwise (another line, silence, a close without a word, again and again) is an error
naming the peer at once, not a wait. The wait says which peers it is for, stops when the run is asked
to stop, and is bounded; a signal interrupts it within one poll.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import selectors
import signal
import socket
import time
from collections.abc import Callable

from embedtune.distribute.cluster import split_address
from embedtune.errors import EmbedtuneError, TrainingInterrupted

POLL = 0.1     # seconds between two rounds of connection attempts (and the longest a signal waits)
PEER_TIMEOUT = 120.0   # --peer-timeout's default (embedtune/config/schema.py), for a strategy started without a config
SAY_AFTER = 1.0   # seconds of waiting before the line naming the peers still missing
# Seconds a connection that opened may stay silent before what listens there counts as another program.
# A worker answers within a poll of its accept; this leaves room for a loaded machine.
REPLY_WITHIN = 5.0
CLOSED_TIMES = 3   # connections in a row accepted and closed without a word: another program, not a peer
LINE = 200   # bytes of a greeting, at most
PROTOCOL = "embedtune-peer 1"


def digest(hosts: tuple[str, ...]) -> str:
    """The cluster's name in a greeting: every worker of one TF_CONFIG computes the same."""
    return hashlib.sha256(json.dumps(list(hosts)).encode()).hexdigest()[:16]


def greeting(hosts: tuple[str, ...], index: int, protocol: str = PROTOCOL) -> bytes:
    """Worker ``index``'s opening line: the handshake's, or another protocol's over the same cluster (mesh.py)."""
    return f"{protocol} {digest(hosts)} {index}\n".encode()


def listen(address: str) -> socket.socket:
    """A non-blocking socket listening at ``address``'s port (every interface), or an error naming it."""
    host, port = split_address(address)
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("", port))
    except OSError as err:
        listener.close()
        raise EmbedtuneError(f"TF_CONFIG: this worker cannot listen at {address} ({err.strerror or err})") from None
    listener.listen(64)
    listener.setblocking(False)
    return listener


class _Line:
    """One connection's greeting as it arrives: the bytes up to the first newline."""

    def __init__(self, sock: socket.socket, began: float):
        self.sock, self.began, self.data = sock, began, b""

    def read(self) -> bytes | None:
        """The line once whole (b"" for a close before any byte); None while more may come."""
        try:
            chunk = self.sock.recv(LINE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            chunk = b""
        if not chunk:
            return self.data.split(b"\n")[0] if self.data else b""
        self.data += chunk
        if b"\n" in self.data or len(self.data) >= LINE:
            return self.data.split(b"\n")[0]
        return None


class _Meeting:
    """The handshakes of one worker: its listener's (peers greeting it) and its own with each peer."""

    def __init__(self, hosts: tuple[str, ...], index: int):
        self.hosts, self.index = hosts, index
        self.hello = greeting(hosts, index)
        self.selector = selectors.DefaultSelector()
        self.listener = listen(hosts[index])
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.met: set[int] = set()       # peers whose listener answered as themselves
        self.greeted: set[int] = set()   # peers that greeted this worker's listener
        self.dialing: dict[int, _Line] = {}   # peer -> this worker's connection to it, under way
        self.closed = {k: 0 for k in range(len(hosts))}   # silent closes in a row, a peer's
        self.retry_at = {k: 0.0 for k in range(len(hosts))}   # a refused peer is dialled again a poll later
        self.tries = {k: 0 for k in range(len(hosts))}   # refusals, a peer's: each try takes its name's next address

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()

    def done(self) -> bool:
        others = len(self.hosts) - 1
        return len(self.met) == others and len(self.greeted) == others

    def missing(self) -> list[int]:
        return [k for k in range(len(self.hosts)) if k != self.index and k not in self.met]

    def dial(self, now: float) -> None:
        """A connection to each peer not met and not being dialled."""
        for k in self.missing():
            if k in self.dialing or now < self.retry_at[k]:
                continue
            self.retry_at[k] = now + POLL
            host, port = split_address(self.hosts[k])
            try:
                found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError):   # a name not (yet) resolved: tried again next round
                continue
            # A name with several addresses (localhost: ::1 and 127.0.0.1) is tried at each in turn, as
            # socket.create_connection does, since the peer listens at one family only.
            family, kind, proto, _, where = found[self.tries[k] % len(found)]
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            code = sock.connect_ex(where)
            if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                sock.close()
                self.tries[k] += 1
                continue
            self.dialing[k] = _Line(sock, now)
            self.selector.register(sock, selectors.EVENT_WRITE, ("dial", k))

    def round(self, seconds: float) -> None:
        """What arrives within ``seconds``: connections accepted, greetings read and judged."""
        now = time.monotonic()
        for key, events in self.selector.select(seconds):
            role, k = key.data
            if role == "accept":
                self._accept(now)
            elif role == "dial":
                self._dialled(k, events, now)
            else:
                self._greeted_by(key.fileobj, k)
        for k, line in list(self.dialing.items()):
            if now - line.began > REPLY_WITHIN:
                self._drop(k)
                raise self._stranger(k, f"it accepted a connection and said nothing for {REPLY_WITHIN:g} s")
        for key in list(self.selector.get_map().values()):   # greetings to this worker that never come
            if key.data[0] == "greets" and now - key.data[1].began > REPLY_WITHIN:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()

    def _accept(self, now: float) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:   # the peer gave up on it meanwhile
                return
            sock.setblocking(False)
            try:
                sock.send(self.hello)   # a few bytes into an empty buffer: sent whole
            except OSError:
                sock.close()
                continue
            line = _Line(sock, now)
            self.selector.register(sock, selectors.EVENT_READ, ("greets", line))

    def _greeted_by(self, sock: socket.socket, line: _Line) -> None:
        said = line.read()
        if said is None:
            return
        self.selector.unregister(sock)
        sock.close()
        words = said.decode("ascii", "replace").split(" ")
        mine = self.hello.decode().rstrip("\n").split(" ")
        # Anything else (another program probing the port, a worker of another cluster) is not a peer;
        # the side that dialled reports it.
        if len(words) == 4 and words[:3] == mine[:3] and words[3].isdecimal():
            k = int(words[3])
            if k != self.index and k < len(self.hosts):
                self.greeted.add(k)

    def _dialled(self, k: int, events: int, now: float) -> None:
        line = self.dialing[k]
        if events & selectors.EVENT_WRITE and self.selector.get_key(line.sock).events == selectors.EVENT_WRITE:
            if line.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):   # refused: not listening yet
                self._drop(k)
                self.tries[k] += 1
                return
            try:
                line.sock.send(self.hello)
            except OSError:
                self._drop(k)
                return
            line.began = now   # its answer is timed from the connection, not from the dialling
            self.selector.modify(line.sock, selectors.EVENT_READ, ("dial", k))
            return
        said = line.read()
        if said is None:
            return
        self._drop(k)
        if said == b"":
            # A worker never closes before greeting; one that is exiting just now looks so once.
            self.closed[k] += 1
            if self.closed[k] >= CLOSED_TIMES:
                raise self._stranger(k, f"it closed {CLOSED_TIMES} connections in a row without a word")
            return
        self.closed[k] = 0
        self._judge(k, said)

    def _judge(self, k: int, said: bytes) -> None:
        words = said.decode("ascii", "replace").split(" ")
        mine = self.hello.decode().rstrip("\n").split(" ")
        if len(words) != 4 or words[:2] != mine[:2] or not words[3].isdecimal():
            shown = said[:40].decode("ascii", "replace").strip()
            raise self._stranger(k, f"it answered {shown!r}")
        if words[2] != mine[2]:
            raise EmbedtuneError(f"TF_CONFIG: {named(self.hosts, [k])} is a worker of another cluster (its "
                                 "TF_CONFIG lists other workers than this one's)")
        other = int(words[3])
        if other != k:
            who = "this worker itself" if other == self.index else f"worker {other}"
            raise EmbedtuneError(f"TF_CONFIG: {named(self.hosts, [k])} answers as {who} (two workers at one "
                                 "address, or two given one task index)")
        self.met.add(k)

    def _drop(self, k: int) -> None:
        line = self.dialing.pop(k)
        self.selector.unregister(line.sock)
        line.sock.close()

    def _stranger(self, k: int, what: str) -> EmbedtuneError:
        return EmbedtuneError(f"TF_CONFIG: another program listens at worker {k}'s address, {self.hosts[k]} ({what}; "
                              "not an embedtune worker of this cluster)")


def wait_for_peers(hosts: tuple[str, ...], index: int, seconds: float,
                   note: Callable[[str], None] | None = None, stop: Callable[[], bool] | None = None) -> None:
    """Return once every worker of ``hosts`` but ``index`` (this one) has answered the handshake at its
    address and greeted this one. An error naming a peer whose address another program holds, at once;
    an error naming the first still missing after ``seconds``; TrainingInterrupted (no position) when
    ``stop`` says so meanwhile. ``note`` is told once which peers it waits for, after SAY_AFTER."""
    meeting = _Meeting(hosts, index)
    try:
        began = time.monotonic()
        said = False
        while True:
            meeting.dial(time.monotonic())
            meeting.round(POLL)
            if meeting.done():
                return
            if stop is not None and stop():
                raise TrainingInterrupted(None, None)
            waited = time.monotonic() - began
            missing = meeting.missing() or [k for k in range(len(hosts))
                                            if k != index and k not in meeting.greeted]
            if waited > seconds:
                raise EmbedtuneError(f"TF_CONFIG: {named(hosts, missing)} did not start within {seconds:g} s "
                                     "(start every worker of TF_CONFIG; --peer-timeout sets the wait)")
            if not said and waited >= SAY_AFTER and note is not None:
                note(f"waiting for {named(hosts, missing)} (TF_CONFIG), up to {seconds:g} s")
                said = True
    finally:
        meeting.close()


@contextlib.contextmanager
def ctrl_c_ends_the_process():
    """Around TensorFlow's own wait for the cluster's servers (the strategy's start: short once every
    peer has answered, endless for one that died just then or a server address another program holds).
    That wait holds the interpreter: no Python handler runs, not even in another thread, so Ctrl-C did
    nothing there. The default action ends the process instead (a shell reports 130; nothing is written
    yet). SIGTERM cannot be given the same: TensorFlow's coordination service takes it over there."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    except ValueError:   # not the main thread
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def named(hosts, missing: list[int]) -> str:
    shown = ", ".join(f"worker {k} at {hosts[k]}" for k in missing[:3])
    return shown + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
