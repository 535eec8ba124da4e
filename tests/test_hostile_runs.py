"""Hostile inputs and runs (issue 35, part B): benchmark files that scipy cannot correlate, a vectors
line far past any dimension, regexes that backtrack without end, TF_CONFIG that makes no sense, and
signals at every moment of a `--workers 2` run. Each gives one `Error:` line (or 130/143), never a
traceback, a warning or a hang."""

from __future__ import annotations

import warnings

import pytest

from train_fixtures import SAMPLE_VECTORS, one_error_line, run, seconds_to_stop

# ---------------------------------------------------------------------------------------------
# eval and report: a similarity file scipy cannot correlate


def _pairs(tmp_path, text: str):
    path = tmp_path / "pairs.tsv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("score", ["nan", "inf", "-Infinity"])
def test_a_score_that_is_not_finite_names_the_file_and_line(tmp_path, score):
    pairs = _pairs(tmp_path, f"king\tqueen\t8\nman\twoman\t{score}\nfrance\tspain\t7\n")
    result = run(["eval", SAMPLE_VECTORS, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, f"{pairs} line 2", "not a finite number")


@pytest.mark.parametrize("command", ["eval", "report"])
def test_one_usable_pair_says_a_correlation_needs_two(tmp_path, command):
    pairs = _pairs(tmp_path, "the\tof\t3\n")
    args = ([SAMPLE_VECTORS] if command == "eval" else [SAMPLE_VECTORS, SAMPLE_VECTORS, "-o", tmp_path / "r.html"])
    result = run([command, *args, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, str(pairs), "at least 2")
    assert not (tmp_path / "r.html").exists()


def test_constant_scores_are_one_error_and_no_scipy_warning(tmp_path):
    pairs = _pairs(tmp_path, "king\tqueen\t5\nman\twoman\t5\nfrance\tspain\t5\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # scipy's ConstantInputWarning would fail the test
        result = run(["eval", SAMPLE_VECTORS, "--similarity", pairs])
    assert result.exit_code == 1
    one_error_line(result, str(pairs), "same score (5)")


# ---------------------------------------------------------------------------------------------
# a vectors line far past any dimension: refused as it is read, in bounded memory


@pytest.mark.parametrize("values", [70_000, 1_200_000])
def test_a_glove_line_past_65536_values_is_one_error_in_bounded_memory(tmp_path, values):
    import tracemalloc

    from embedtune.errors import EmbedtuneError
    from embedtune.formats import load_vectors

    path = tmp_path / "one-line.txt"
    path.write_bytes(b"word " + b" ".join([b"0.5"] * values) + b"\n")   # 4.8 MB at most
    result = run(["inspect", path])
    assert result.exit_code == 1
    one_error_line(result, f"{path} line 1", "more than 65,536 values", "at most 65,536")
    from train_fixtures import SAMPLE_CORPUS

    dry = run(["train", path, SAMPLE_CORPUS, "-o", tmp_path / "out.txt", "--dry-run"])   # it said: all passed
    assert dry.exit_code == 1
    one_error_line(dry, f"{path} line 1", "more than 65,536 values")
    tracemalloc.start()
    try:
        with pytest.raises(EmbedtuneError, match="more than 65,536 values"):
            load_vectors(path, "glove")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The fields were never made (split: 1.2M bytes objects, about 60 MB): the file's bytes and masks.
    assert peak < 6 * path.stat().st_size + (8 << 20), peak


@pytest.mark.parametrize("fmt, header", [("word2vec", b"1 70000\nw 0.5\n"),
                                         ("word2vec-binary", b"1 70000\nw \x00\x00\x00\x3f\n")])
def test_a_header_past_65536_dimensions_is_one_error(tmp_path, fmt, header):
    path = tmp_path / "v.bin"
    path.write_bytes(header)
    result = run(["inspect", path, "--format", fmt])
    assert result.exit_code == 1
    one_error_line(result, f"{path} line 1", "dimension 70,000 (at most 65,536)")


def test_a_later_line_past_the_dimension_is_refused_before_it_is_read_whole(tmp_path):
    path = tmp_path / "late.txt"
    with open(path, "wb") as f:   # 20 MB: the long line runs past two of the reader's reads
        f.write(b"a 0.5 0.25\n")
        f.write(b"b " + b" ".join([b"0.5"] * 5_000_000) + b"\n")
    result = run(["inspect", path])
    assert result.exit_code == 1
    one_error_line(result, f"{path} line 2", "more than 2 values")


# ---------------------------------------------------------------------------------------------
# a pattern that backtracks without end: a bounded match, naming the pattern and the word


@pytest.fixture
def hostile_vocabulary(tmp_path):
    words = [line.split(b" ", 1)[0] for line in SAMPLE_VECTORS.read_bytes().splitlines()[:200]]
    words += [b"a" * 40 + b"b", b"aaaa"]
    vectors = tmp_path / "v.txt"
    vectors.write_bytes(b"".join(w + b" 0.5 0.25\n" for w in words))
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b" ".join(words[:50]) + b"\n")
    return vectors, corpus


def _guarded(args, seconds: float = 30):
    """The command in this process, failed (not hung) after ``seconds``: a thread sends SIGUSR1 to
    this one, whose handler raises inside re (re looks for signals as it backtracks). Not SIGALRM:
    the matching uses that one itself, when nobody else does."""
    import _thread
    import signal
    import threading

    class Hung(Exception):
        pass

    def hung(signum, frame):
        raise Hung(f"still running after {seconds} s: {args}")

    previous = signal.signal(signal.SIGUSR1, hung)
    timer = threading.Timer(seconds, _thread.interrupt_main, (signal.SIGUSR1,))
    timer.start()
    try:
        return run(args)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.parametrize("option, pattern", [("--freeze-pattern", "(a|aa)+$"), ("--train-pattern", "(a+)+$")])
def test_a_catastrophic_pattern_is_one_error_naming_the_pattern_and_the_word(hostile_vocabulary, tmp_path, option,
                                                                            pattern):
    vectors, corpus = hostile_vocabulary
    result = _guarded(["train", vectors, corpus, "-o", tmp_path / "out.txt", option, pattern, "--dry-run"])
    assert result.exit_code == 1
    one_error_line(result, option, repr(pattern), repr("a" * 40 + "b"), "backtracks")
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("pattern", [r"ing$", r"^[A-Z\W]+$", r"(?<=n)'t$"])
def test_patterns_match_the_words_re_search_matches_across_chunks(pattern):
    import re

    from embedtune.plan.patterns import WordPattern

    words = [line.split(" ", 1)[0] for line in SAMPLE_VECTORS.read_text(encoding="utf-8").splitlines()]
    words += ["café", "naïve", "Ünïcode", "ABC-DEF", "x" * 300]
    want = [re.search(pattern, w) is not None for w in words]
    assert WordPattern(pattern, "freeze_pattern").matches(words, len(words)).tolist() == want


# ---------------------------------------------------------------------------------------------
# TF_CONFIG that makes no sense: a usage error (exit 2) naming TF_CONFIG; a peer that never comes


@pytest.mark.parametrize("tf_config, said", [
    ('{"cluster": {"worker": ["localhost:23456"]}, "task": {"type": "worker", "index": 5}}',
     "task worker 5 is not in the cluster (its one worker task is 0)"),
    ('{"cluster": {"worker": ["localhost:23456", "localhost:23457"]}, "task": {"type": "worker", "index": -1}}',
     "task worker -1 is not in the cluster (its worker tasks are 0 to 1)"),
    ('{"cluster": {"worker": ["localhost:23456"]}, "task": {"type": "evaluator", "index": 0}}',
     'task type "evaluator" is not one embedtune runs'),
    ('{"cluster": {"worker": ["localhost:23456"]}, "task": {"type": "chief", "index": 0}}',
     "task chief 0 is not in the cluster (it has no chief task)"),
    ('{"cluster": {"worker": "localhost:23456"}}', 'cluster "worker" must be a list of "host:port" strings'),
    ('{"cluster": {"worker": ["localhost:1"]}, "task": {"index": "0"}}', 'task index "0" is not a whole number'),
    ('{"cluster": ', "TF_CONFIG is not a cluster description (not JSON"),
    ("[1, 2]", "TF_CONFIG is not a cluster description"),
    # a port a socket cannot take (99999 overflowed inside bind), a host without one (found only after
    # the vectors loaded, exit 1), two chiefs, two tasks at one address, no task among several
    ('{"cluster": {"worker": ["localhost:23456", "localhost:99999"]}, "task": {"type": "worker", "index": 0}}',
     '"localhost:99999" is not host:port with a port from 1 to 65535'),
    ('{"cluster": {"worker": ["localhost:0", "localhost:23457"]}, "task": {"type": "worker", "index": 0}}',
     '"localhost:0" is not host:port with a port from 1 to 65535'),
    ('{"cluster": {"worker": ["localhost:23456", "host2"]}, "task": {"type": "worker", "index": 0}}',
     '"host2" is not host:port'),
    ('{"cluster": {"worker": ["localhost:23456", ":23457"]}, "task": {"type": "worker", "index": 0}}',
     '":23457" is not host:port'),
    ('{"cluster": {"worker": ["localhost:23456", "host2:http"]}, "task": {"type": "worker", "index": 0}}',
     '"host2:http" is not host:port'),
    ('{"cluster": {"chief": ["localhost:23456", "localhost:23457"], "worker": ["localhost:23458"]}, '
     '"task": {"type": "worker", "index": 0}}', "a cluster has one chief, not 2"),
    ('{"cluster": {"worker": ["localhost:23456", "LOCALHOST:23456"]}, "task": {"type": "worker", "index": 0}}',
     "worker 0 and worker 1 have the same address, LOCALHOST:23456"),
    ('{"cluster": {"chief": ["localhost:23456"], "worker": ["localhost:23456"]}, "task": {"type": "chief", '
     '"index": 0}}', "chief 0 and worker 0 have the same address, localhost:23456"),
    ('{"cluster": {"worker": ["localhost:23456", "localhost:23457"]}}', "names several tasks but not this process's"),
])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_tf_config_that_makes_no_sense_is_a_usage_error(tmp_path, monkeypatch, tf_config, said, dry_run):
    """Before anything loads, in a run as in a dry run: a run that got past the check would load the
    vectors and then wait for peers (bounded here by --peer-timeout)."""
    from train_fixtures import SAMPLE_CORPUS

    monkeypatch.setenv("TF_CONFIG", tf_config)
    out = tmp_path / "out.txt"
    result = run(["train", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", out, "--peer-timeout", "1",
                  *(["--dry-run"] if dry_run else [])])
    assert result.exit_code == 2, result.output
    one_error_line(result, "TF_CONFIG", said)
    assert "Loading" not in result.output
    assert not out.exists()


# `embedtune train` as the command runs it, its wait for peers first saying whether TensorFlow is imported yet.
TELLS_TENSORFLOW = ("import sys\nimport embedtune.distribute.peers as peers\nwait = peers.wait_for_peers\n"
                    "def waits(*args):\n    print('tensorflow imported at the wait:', 'tensorflow' in sys.modules, "
                    "file=sys.stderr, flush=True)\n    return wait(*args)\npeers.wait_for_peers = waits\n"
                    "from embedtune.cli.main import main\nmain()\n")


def _peer_wait(tmp_path, *extra, sig=None, hosts=None, index=0, said="waiting for worker 1", tells=False,
               reply_within=None, script=None):
    """`train` as worker ``index`` of a two-worker TF_CONFIG (``hosts``, by default two free ports where
    nothing listens); ``sig`` sent once stderr says ``said``; ``tells``: stderr says whether TensorFlow
    was imported when the wait began (TELLS_TENSORFLOW); ``reply_within``: the seconds a connection may stay
    silent (peers.REPLY_WITHIN, set before the command runs); ``script``: Python run in the command's place
    (``-c``), the command line its arguments. -> (exit code, stderr, hosts, seconds from the signal, or from
    the first line when no signal is sent)."""
    import os
    import subprocess
    import sys
    import threading
    import time

    from embedtune.distribute import free_ports
    from test_signals import WAIT
    from train_fixtures import SAMPLE_CORPUS

    vectors = tmp_path / "v.txt"
    if not vectors.exists():
        vectors.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:300]))
    hosts = hosts or [f"localhost:{port}" for port in free_ports(2)]
    env = dict(os.environ, TF_CONFIG=f'{{"cluster": {{"worker": ["{hosts[0]}", "{hosts[1]}"]}}, '
                                     f'"task": {{"type": "worker", "index": {index}}}}}')
    command = ["-c", TELLS_TENSORFLOW] if tells else ["-m", "embedtune.cli.main"]
    if reply_within is not None:
        command = ["-c", f"import embedtune.distribute.peers as peers\npeers.REPLY_WITHIN = {reply_within!r}\n"
                         "from embedtune.cli.main import main\nmain()\n"]
    if script is not None:
        command = ["-c", script]
    process = subprocess.Popen([sys.executable, *command, "train", str(vectors), str(SAMPLE_CORPUS),
                                "-o", str(tmp_path / f"out{index}.txt"), *extra], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    lines = []
    began = None
    # A hung worker (TensorFlow's wait for a peer that is another program) holds its stderr open: the
    # reading below ends when the watchdog kills it.
    watchdog = threading.Timer(WAIT, os.killpg, (process.pid, 9))
    watchdog.start()
    try:
        for line in iter(process.stderr.readline, b""):
            lines.append(line.decode())
            if sig is None and began is None:
                began = time.monotonic()
            if sig is not None and began is None and said in lines[-1]:
                began = time.monotonic()
                process.send_signal(sig)
        process.wait(timeout=WAIT)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
    return process.returncode, "".join(lines), hosts, (time.monotonic() - began if began else None)


def test_a_peer_that_never_comes_is_named_and_the_wait_is_bounded_and_paid_no_tensorflow_import(tmp_path):
    """A worker imports TensorFlow only once its peers are met (distribute/strategy.py's Worker.start):
    one whose peer never comes, or that is stopped while it waits, does not pay for it."""
    code, stderr, hosts, _ = _peer_wait(tmp_path, "--peer-timeout", "2", tells=True)
    assert code == 1, stderr
    assert "tensorflow imported at the wait: False" in stderr
    assert f"Note: waiting for worker 1 at {hosts[1]} (TF_CONFIG), up to 2 s" in stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last == (f"Error: TF_CONFIG: worker 1 at {hosts[1]} did not start within 2 s (start every worker "
                    "of TF_CONFIG; --peer-timeout sets the wait)"), stderr
    assert not (tmp_path / "out0.txt").exists()


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_stops_the_wait_for_a_peer_at_once(tmp_path, sig, code):
    import signal

    got, stderr, _, seconds = _peer_wait(tmp_path, sig=getattr(signal, sig))
    assert seconds is not None, stderr
    assert got == code, stderr
    # The wait polls every 0.1 s and a signal interrupts it there; the rest is the process's exit.
    assert seconds < 2, f"{seconds:.1f} s after {sig}"
    assert "Traceback" not in stderr and "Interrupted before training began" in stderr, stderr


class _Foreign:
    """Another program on a peer's port: a plain TCP server on 127.0.0.1 that answers each connection
    ``how``: "junk" (a line of another protocol), "silent" (accepts, says nothing) or "close"."""

    def __init__(self, how: str):
        import socket
        import threading

        self.how, self.kept = how, []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import socket

        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            if self.how == "junk":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            if self.how == "close":
                conn.close()
            else:
                self.kept.append(conn)

    def close(self):
        self.done.set()
        self.thread.join(timeout=5)
        for conn in self.kept:
            conn.close()
        self.server.close()


@pytest.mark.parametrize("how, why", [("junk", "it answered 'SSH-2.0-OpenSSH_9.6'"),
                                      ("silent", "it accepted a connection and said nothing for 1 s"),
                                      ("close", "it closed 3 connections in a row without a word")])
def test_another_program_on_a_peers_port_is_named_at_once(tmp_path, how, why):
    """An open port passed the old check; the run then hung in TensorFlow's wait, deaf to Ctrl-C. (A silent
    one is named after peers.REPLY_WITHIN, 1 s here: its 5 s held the test process idle. The others keep the
    5 s, so that a loaded machine's slow answer is not taken for silence.)"""
    from embedtune.distribute import free_ports

    foreign = _Foreign(how)
    try:
        code, stderr, hosts, seconds = _peer_wait(tmp_path, "--peer-timeout", "60",
                                                  reply_within=1.0 if how == "silent" else None,
                                                  hosts=[f"127.0.0.1:{free_ports(1)[0]}", foreign.address])
    finally:
        foreign.close()
    assert code == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert lines[-1] == (f"Error: TF_CONFIG: another program listens at worker 1's address, {hosts[1]} ({why}; "
                         "not an embedtune worker of this cluster)"), stderr
    assert sum(line.startswith("Error:") for line in lines) == 1, stderr
    assert seconds < 30, f"{seconds:.1f} s"   # the peer timeout is 60 s: it did not wait that out
    assert not (tmp_path / "out0.txt").exists()


def test_two_workers_at_one_address_are_refused_at_once(tmp_path):
    """Two spellings of one address (TF_CONFIG's own check refuses the same spelling twice): the second
    worker cannot listen there, and the first meets itself where worker 1 should be. Both hung before."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from embedtune.distribute import free_ports

    port = free_ports(1)[0]
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_peer_wait, tmp_path, "--peer-timeout", "60", hosts=hosts, index=0)
        time.sleep(0.5)   # the first is listening by the time the second tries (if not, the roles swap)
        second = pool.submit(_peer_wait, tmp_path, "--peer-timeout", "60", hosts=hosts, index=1)
        ran = [first.result(), second.result()]
    said = []
    for code, stderr, _, seconds in ran:
        assert code == 1, stderr
        assert "Traceback" not in stderr
        lines = stderr.strip().splitlines()
        assert sum(line.startswith("Error:") for line in lines) == 1 and lines[-1].startswith("Error: "), stderr
        assert seconds < 30, f"{seconds:.1f} s"
        said.append(lines[-1])
    # Each meets itself at the other's address, or (the first still listening) cannot listen there.
    assert f"Error: TF_CONFIG: worker 1 at localhost:{port} answers as this worker itself" in said[0], said
    assert (f"worker 0 at 127.0.0.1:{port} answers as this worker itself" in said[1]
            or f"this worker cannot listen at localhost:{port}" in said[1]), said


def _listening(port: int) -> set[str]:
    """The sockets (inodes) listening at ``port`` on this machine (Linux's /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table, encoding="ascii").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:   # 0A: LISTEN
                found.add(fields[9])
    return found


def test_ctrl_c_ends_tensorflows_own_wait_for_a_peer(tmp_path):
    """A peer that answered the handshake and then never started TensorFlow's server (here: this test,
    as worker 1): worker 0 of the gathered step through TensorFlow (--sync-every 0 with sgns's --anchor,
    which has no compiled step; averaging workers and the joined batches' start no TensorFlow:
    tests/test_mesh.py) waits inside TensorFlow, which holds the interpreter, and Ctrl-C did nothing
    there. Now it ends the process at once (by the signal: a shell reports 130)."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    from embedtune.distribute import free_ports
    from embedtune.distribute.peers import wait_for_peers
    from test_signals import WAIT
    from train_fixtures import SAMPLE_CORPUS

    vectors = tmp_path / "v.txt"
    vectors.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:300]))
    hosts = (f"127.0.0.1:{free_ports(1)[0]}", f"127.0.0.1:{free_ports(1)[0]}")
    met = threading.Event()
    peer = threading.Thread(target=lambda: (wait_for_peers(hosts, 1, WAIT), met.set()), daemon=True)
    peer.start()
    env = dict(os.environ, TF_CONFIG=f'{{"cluster": {{"worker": ["{hosts[0]}", "{hosts[1]}"]}}, '
                                     '"task": {"type": "worker", "index": 0}}')
    with open(tmp_path / "stderr", "wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", "train", str(vectors),
                                    str(SAMPLE_CORPUS), "--sync-every", "0", "--objective", "sgns", "--anchor", "1",
                                    "-o", str(tmp_path / "out.txt")], env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                   start_new_session=True)
    try:
        assert met.wait(WAIT), (tmp_path / "stderr").read_text()
        # Worker 0 imports TensorFlow only now (its peers met), then starts TensorFlow's server at its port
        # and waits there for worker 1's, where nothing listens: the signal waits for that server.
        port = int(hosts[0].rsplit(":", 1)[1])
        before, deadline = _listening(port), time.monotonic() + WAIT
        while not _listening(port) - before and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _listening(port) - before, (tmp_path / "stderr").read_text()
        time.sleep(1)   # from its server's start into its wait for the peer
        assert process.poll() is None, (tmp_path / "stderr").read_text()
        seconds = seconds_to_stop(process)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
    said = (tmp_path / "stderr").read_text()
    assert process.returncode in (-signal.SIGINT, 130), (process.returncode, said)
    assert seconds < 2, f"{seconds:.1f} s after SIGINT"
    assert "Traceback" not in said, said
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------------------------------------
# a signal at any moment of `train --workers 2`: 130 (SIGINT) or 143 (SIGTERM), never 0


def test_a_signal_the_chief_gets_as_it_finishes_still_ends_the_launcher_with_its_code():
    """The chief took the signal after its loop's last look at the stop request and finished the run
    (exit 0), as did the other worker: the launcher exited 0, so a pipeline read Ctrl-C as success.
    Here each worker is a script that takes SIGINT and exits 0 all the same."""
    import os
    import signal
    import sys
    import threading

    from embedtune.distribute import launch

    worker = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda *a: None)\n"
              "time.sleep(1.5)\n"
              "sys.exit(0)\n")
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        done = launch([sys.executable, "-c", worker], 2, 1)
    finally:
        timer.cancel()
    assert (done.code, done.failure) == (130, None)


def test_a_stop_request_after_the_last_step_exits_with_its_code(tmp_path, monkeypatch):
    """The same window in one process: a Ctrl-C the loop never looked at again (its last step done)
    let the run finish and exit 0."""
    import embedtune.run
    from train_fixtures import SAMPLE_CORPUS

    calls = []
    monkeypatch.setattr(embedtune.run, "run", lambda config, **kw: calls.append(1) or _finish(kw["stop"]))
    result = run(["train", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", tmp_path / "out.txt"])
    assert calls == [1]
    assert result.exit_code == 143, result.output
    assert "the stop request came after the last step; the run finished" in result.output


def _finish(stop):
    """A run that returns as one worker of several returns (nothing written), its stop asked on the way."""
    import os
    import signal
    from types import SimpleNamespace

    with stop:
        os.kill(os.getpid(), signal.SIGTERM)
    return SimpleNamespace(written=None, report=[], stats={})


def test_a_signal_at_every_moment_of_a_workers_run_exits_with_its_code(tmp_path):
    """Real `train --workers 2` runs, each signalled once at a moment found by what it says: as the
    workers start, as the chief loads, as the chief reports the finished run. Every one ends 130 or 143 (0 only where it had exited before the signal was sent),
    with no traceback and no process left."""
    import os
    import signal
    import time
    from concurrent.futures import ThreadPoolExecutor

    from test_fault_injection import Run
    from test_signals import CODES, WAIT, children
    from train_fixtures import SAMPLE_CORPUS

    vectors = tmp_path / "v.txt"
    vectors.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:2000]))
    # The loop itself: tests/test_signals.py's launcher test and test_fault_injection's workers moments.
    moments = [("start", "Starting 2 workers", signal.SIGINT), ("loading", "Loading", signal.SIGTERM),
               ("end", "Trained ", signal.SIGINT)]

    def signalled(moment) -> str:
        name, said, sig = moment
        folder = tmp_path / name
        folder.mkdir()
        checkpoints = folder / "ckpt"
        run_ = Run(["train", vectors, SAMPLE_CORPUS, "-o", folder / "out.txt", "--epochs", "1", "--batch-size", "512",
                    "--seed", "3", "--workers", "2", "--checkpoint-dir", checkpoints, "--checkpoint-every", "5"])
        seen = lambda: run_.said(said)   # noqa: E731
        deadline = time.monotonic() + WAIT
        while not seen() and run_.process.poll() is None and time.monotonic() < deadline:
            run_.others.update(children(run_.process.pid))
            time.sleep(0.002)
        sent = run_.process.poll() is None
        if sent:
            run_.others.update(children(run_.process.pid))
            run_.process.send_signal(sig)
        code, stderr = run_.finish(name)
        problems = []
        if code != CODES[sig] and not (code == 0 and not sent):
            problems.append(f"exit {code} (signal {'sent' if sent else 'not sent: it had ended'})")
        if "Traceback" in stderr:
            problems.append("a traceback")
        if left := run_.left():
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            problems.append(f"processes {left} left")
        return f"{name}, {sig.name}: {'; '.join(problems)}\n{stderr}" if problems else ""

    with ThreadPoolExecutor(3) as pool:
        problems = [p for p in pool.map(signalled, moments) if p]
    assert not problems, "\n\n".join(problems)
