"""The averaging workers' collectives over TCP (embedtune/distribute/mesh.py): workers as threads of this
process on free loopback ports, and a worker process whose peer never joins."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

from embedtune.distribute import PeerLost, free_ports
from embedtune.distribute.mesh import Mesh
from embedtune.distribute.peers import greeting, wait_for_peers
from embedtune.errors import EmbedtuneError, TrainingInterrupted


def _hosts(n: int) -> tuple[str, ...]:
    return tuple(f"localhost:{port}" for port in free_ports(n))


def _on_threads(hosts, work, seconds: float = 20.0, delays=None):
    """``work(mesh)`` on a thread per worker, each after its mesh started (worker k ``delays[k]`` seconds
    late, or once the event ``delays[k]`` is set): each one's result, or the exception it raised."""
    out: list = [None] * len(hosts)

    def worker(k):
        mesh = Mesh(hosts, k)
        try:
            delay = (delays or {}).get(k, 0)
            if isinstance(delay, threading.Event):
                delay.wait(30)
            else:
                time.sleep(delay)
            mesh.start(seconds)
            out[k] = work(mesh)
        except BaseException as err:   # noqa: BLE001 (the test reads it)
            out[k] = err
        finally:
            mesh.close()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return out


def test_every_worker_gets_every_workers_bytes_in_worker_order_large_or_empty():
    """Three workers; one sends 20 MB (more than the sockets' buffers hold while the others send theirs)."""
    hosts = _hosts(3)
    sent = [b"", os.urandom(20 << 20), b"two"]

    def work(mesh):
        return mesh.all_gather_bytes(sent[mesh.index]), mesh.all_gather_bytes(bytes([mesh.index]) * 3)

    for got in _on_threads(hosts, work, delays={2: 0.3, 0: 0.6}):
        assert not isinstance(got, BaseException), got
        assert got[0] == sent
        assert got[1] == [b"\0\0\0", b"\1\1\1", b"\2\2\2"]


def test_words_and_sums_are_the_same_bits_on_every_worker():
    hosts = _hosts(3)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 5, 7)) * 10.0 ** rng.integers(-8, 8, (4, 5, 7)) for _ in hosts]
    words = [rng.integers(-2**62, 2**62, n) for n in (5, 0, 3)]

    def work(mesh):
        return mesh.sum_array(arrays[mesh.index]), mesh.all_gather_words(words[mesh.index])

    results = _on_threads(hosts, work)
    expected = (arrays[0] + arrays[1]) + arrays[2]   # in worker order
    for total, gathered in results:
        assert total.shape == (4, 5, 7) and total.tobytes() == expected.tobytes()
        assert [g.tolist() for g in gathered] == [w.tolist() for w in words]


def test_a_dead_peer_is_peer_lost_at_once_naming_it():
    hosts = _hosts(2)

    def work(mesh):
        if mesh.index == 1:
            mesh.close()   # what a worker's death does to its connections
            return None
        began = time.monotonic()
        try:
            mesh.all_gather_bytes(b"x" * 1000)
        except PeerLost as lost:
            return str(lost), time.monotonic() - began
        return "no error", 0.0

    said, seconds = _on_threads(hosts, work)[0]
    assert said == "worker 0: a collective step failed (worker 1: its connection closed (the worker ended))"
    assert seconds < 2


def test_a_dial_that_meets_the_handshakes_listener_is_tried_again():
    """Worker 1 dials worker 0's port while worker 0 still answers the handshake there (its listener stays
    until every peer greeted it): worker 1 takes that answer for "not yet" and connects once worker 0's mesh
    listens."""
    hosts = _hosts(2)
    port = int(hosts[0].rsplit(":", 1)[1])
    handshake = socket.create_server(("", port))
    answered, closed = [], threading.Event()

    def answer():   # until worker 1 has dialled here twice (once answered, it dials again a poll later)
        handshake.settimeout(0.1)
        end = time.monotonic() + 20
        while len(answered) < 2 and time.monotonic() < end:
            try:
                conn, _ = handshake.accept()
            except socket.timeout:
                continue
            conn.sendall(greeting(hosts, 0))
            answered.append(conn)
        handshake.close()
        closed.set()   # worker 0's mesh listens there from now on

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    got = _on_threads(hosts, lambda mesh: mesh.all_gather_bytes(b"%d" % mesh.index), delays={0: closed})
    thread.join()
    assert len(answered) == 2, "worker 1 did not dial the handshake's listener again after its answer"
    assert got == [[b"0", b"1"], [b"0", b"1"]]
    for conn in answered:
        conn.close()


def test_a_dial_waits_for_a_peer_that_is_still_dialling_below_it(monkeypatch):
    """Worker 2 dials worker 1 while worker 1 still dials worker 0 (late): its connection waits in worker 1's
    backlog longer than a silent connection may (peers.REPLY_WITHIN, cut here), and is the one worker 1
    accepts and keeps, so worker 2 waits for its answer there rather than give it up."""
    import embedtune.distribute.mesh as mesh

    monkeypatch.setattr(mesh, "REPLY_WITHIN", 0.3)
    dial = Mesh._dial

    def slow(self, k, *args):
        if (self.index, k) == (1, 0):
            time.sleep(1.5)   # worker 1 listens, and is not accepting yet
        return dial(self, k, *args)

    monkeypatch.setattr(Mesh, "_dial", slow)
    hosts = _hosts(3)
    got = _on_threads(hosts, lambda m: m.all_gather_bytes(b"%d" % m.index))
    assert got == [[b"0", b"1", b"2"]] * 3


def test_a_peer_that_never_connects_is_named_after_the_wait_and_a_stop_ends_the_wait():
    hosts = _hosts(2)
    mesh = Mesh(hosts, 0)
    with pytest.raises(EmbedtuneError) as err:
        mesh.start(0.5)
    assert str(err.value) == (f"TF_CONFIG: worker 1 at {hosts[1]} answered the handshake but did not connect "
                              "for the workers' exchanges in time (--peer-timeout sets the wait)")
    began = time.monotonic()
    with pytest.raises(TrainingInterrupted):
        Mesh(hosts, 1).start(30, stop=lambda: time.monotonic() - began > 0.3)
    assert time.monotonic() - began < 2


# Worker 0's process, saying whether TensorFlow is imported as its mesh's wait begins and as it ends. The first
# line is said inside the ``try``: the test signals as soon as it reads it, and a signal's exception raised
# before the ``try`` skipped the second (once in CI; one raised inside the ``finally`` still could).
TELLS = ("import sys\nfrom embedtune.distribute.mesh import Mesh\nstart = Mesh.start\n"
         "def tell(when):\n    print(f'tensorflow imported {when}:', 'tensorflow' in sys.modules, file=sys.stderr, "
         "flush=True)\n"
         "def starts(self, *args):\n    try:\n        tell('as the mesh waits')\n        return start(self, *args)\n"
         "    finally:\n        tell('after the wait')\nMesh.start = starts\n"
         "from embedtune.cli.main import main\nmain()\n")


@pytest.mark.parametrize("sig, code", [(None, 1), (signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_worker_whose_peer_never_joins_the_mesh_says_so_or_stops_at_a_signal(tmp_path, sig, code):
    """Worker 1 (this test) answers the handshake and never connects: worker 0, an averaging worker (the
    default), waits at its mesh's listener without TensorFlow, until --peer-timeout or a signal."""
    from test_hostile_runs import _peer_wait
    from test_signals import WAIT

    hosts = _hosts(2)
    threading.Thread(target=wait_for_peers, args=(hosts, 1, WAIT), daemon=True).start()
    got, stderr, _, seconds = _peer_wait(tmp_path, "--peer-timeout", "3" if sig is None else "60", sig=sig,
                                         hosts=hosts, said="as the mesh waits", script=TELLS)
    assert got == code, stderr
    assert "Traceback" not in stderr, stderr
    assert "tensorflow imported as the mesh waits: False" in stderr, stderr
    assert "tensorflow imported after the wait: True" not in stderr, stderr
    if sig is None:   # the whole wait, to its end, without TensorFlow
        assert "tensorflow imported after the wait: False" in stderr, stderr
        assert stderr.strip().splitlines()[-1] == (
            f"Error: TF_CONFIG: worker 1 at {hosts[1]} answered the handshake but did not connect for the workers' "
            "exchanges in time (--peer-timeout sets the wait)"), stderr
    else:
        assert seconds is not None and seconds < 3, stderr
        assert "Interrupted before training began" in stderr, stderr
    assert not (tmp_path / "out0.txt").exists()


def test_a_collective_timeout_bounds_the_wait_for_a_silent_peer(monkeypatch):
    """EMBEDTUNE_COLLECTIVE_TIMEOUT (collectives.ENV_TIMEOUT), when set, bounds each wait; a peer that is only
    slow is otherwise waited for."""
    monkeypatch.setenv("EMBEDTUNE_COLLECTIVE_TIMEOUT", "0.5")
    hosts = _hosts(2)
    quiet = threading.Event()

    def work(mesh):
        if mesh.index == 1:
            quiet.wait(10)   # alive, connected, and not taking part
            return None
        try:
            mesh.all_gather_bytes(b"x")
        except PeerLost as lost:
            return str(lost)
        finally:
            quiet.set()
        return "no error"

    assert _on_threads(hosts, work)[0] == ("worker 0: a collective step failed (worker 1: no answer within "
                                           "EMBEDTUNE_COLLECTIVE_TIMEOUT's 0.5 s)")
