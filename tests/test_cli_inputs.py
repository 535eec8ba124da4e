"""The command layer as a new user meets it: -q anywhere, format names, message wording, ranges,
and interrupts outside the training loop (real processes, real signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from embedtune.cli.main import COMMANDS, cli
from embedtune.config import Config, find_key, merge, ranges
from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints import state as checkpoint

from train_fixtures import SAMPLE_VECTORS, one_error_line

GLOVE_LINES = SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)


def run(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "v.txt"
    path.write_bytes(b"".join(GLOVE_LINES[:50]))
    return path


# ---------------------------------------------------------------------------------------------
# -q before or after the command's name


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_quiet_after_its_name(command):
    result = run(command, "-h")
    assert result.exit_code == 0
    assert "-q, --quiet" in result.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_after_the_command_silences_its_messages(small, tmp_path, where):
    args = ["convert", small, tmp_path / "out.txt", "--to", "word2vec"]
    args = ["-q", *args] if where == "before" else [*args, "-q"]
    result = run(*args)
    assert result.exit_code == 0 and result.stderr == ""
    assert "wrote 50 vectors" in run("convert", small, tmp_path / "out2.txt").stderr


# ---------------------------------------------------------------------------------------------
# format names: the option at fault is the one named


@pytest.mark.parametrize("args, option", [
    (["inspect", "{v}", "--format", "bogus"], "--format"),
    (["convert", "{v}", "{out}", "--format", "bogus"], "--format"),
    (["convert", "{v}", "{out}", "--to", "bogus"], "--to"),
    (["train", "{v}", "{v}", "-o", "{out}", "--format", "bogus"], "--format"),
    (["train", "{v}", "{v}", "-o", "{out}", "--format", "glove", "--to", "bogus"], "--to"),
    (["init", "{v}", "{v}", "-o", "{out}", "--format", "bogus"], "--format"),
    (["init", "{v}", "{v}", "-o", "{out}", "--to", "bogus"], "--to"),
    (["diff", "{v}", "{v}", "--format", "bogus"], "--format"),
    (["eval", "{v}", "--format", "bogus"], "--format"),
    (["neighbors", "{v}", "the", "--format", "bogus"], "--format"),
])
def test_an_unknown_format_is_reported_against_its_own_option(small, tmp_path, args, option):
    args = [a.format(v=small, out=tmp_path / "out.txt") for a in args]
    result = run(*args)
    assert result.exit_code == 2   # a usage error (docs/ci.md)
    assert result.stderr.splitlines() == [
        f"Error: {option}: unknown format 'bogus' (expected one of word2vec, word2vec-binary, glove, fasttext, fasttext-model)"]
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------------------------------------
# messages


def test_one_vector_is_one_vector(small, tmp_path):
    one = tmp_path / "one.txt"
    one.write_bytes(GLOVE_LINES[0])
    assert "wrote 1 vector of dimension 50" in run("convert", one, tmp_path / "o.txt").stderr
    bad = tmp_path / "bad.txt"
    bad.write_bytes(GLOVE_LINES[0] + GLOVE_LINES[1] + GLOVE_LINES[0])
    assert "duplicates  1 row: 'the' on line 3" in run("inspect", bad).stdout


def test_neighbors_with_k_far_beyond_the_vocabulary_lists_every_word_once(small):
    result = run("neighbors", small, "the", "-k", 10**17)
    assert result.exit_code == 0
    ranks = [line.split()[0] for line in result.stdout.splitlines()[2:]]
    assert ranks == [str(r) for r in range(1, 50)]


def test_a_value_beyond_float32_is_named_as_written(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"2 3\na 1 2 3\nb 4 -1e39 6\n")
    result = run("convert", path, tmp_path / "out.txt")
    assert result.stderr.splitlines() == [
        f"Error: {path} line 3: value 2 is -1e39, beyond float32's range (largest 3.4028235e+38); "
        "--allow-nan accepts it (as -inf)"]


def test_a_settings_mismatch_on_resume_says_what_an_unset_value_means(tmp_path):
    state = {"position": {}, "fingerprint": {"rows": "r", "corpus": {"words": 1, "lines": 1},
                                              "settings": {"lr": None, "window": 5, "vocab": {"min_count": 5}}}}
    folder = tmp_path / "ckpt-5"
    folder.mkdir()
    (folder / checkpoint.STATE_FILE).write_text(json.dumps(state))
    now = {**state["fingerprint"], "settings": {"lr": 0.05, "window": 5, "vocab": {"min_count": 3}}}
    with pytest.raises(EmbedtuneError) as info:
        checkpoint.load(str(folder), None, now)
    assert info.value.message == ("cannot resume: the settings differ from the checkpoint's "
                                  "(lr: unset (default) then, 0.05 now; vocab.min_count: 5 then, 3 now)")


# ---------------------------------------------------------------------------------------------
# ranges: every number of the config has one, checked on both sides


def _option(key):
    return key.split(".")[1]


def _default(key):
    """The default value of "table.name" (shared or an objective's key)."""
    return Config().value(find_key(*key.split(".")))


@pytest.mark.parametrize("key", [k for k in ranges() if not k.startswith("init.")])
def test_every_number_is_refused_just_outside_its_range(key):
    r = ranges()[key]
    is_int = isinstance(_default(key), int) \
        or _option(key) in ("window", "dim")
    below = r.low if r.low_open else (r.low - 1 if is_int else r.low - 1e-9)
    with pytest.raises(EmbedtuneError, match=rf"^--{_option(key).replace('_', '-')} must be"):
        merge(Config(), {_option(key): below})
    if r.high < 2**63 - 1 and r.high < 3e38:
        above = r.high + 1 if is_int else r.high * 1.5
        with pytest.raises(EmbedtuneError, match=r"must be at most|must be between"):
            merge(Config(), {_option(key): above})
    merge(Config(), {_option(key): r.high if r.high < 3e38 else 1e30})     # the bounds themselves pass
    if not r.low_open:
        merge(Config(), {_option(key): r.low})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("key", [k for k, r in ranges().items() if k.startswith("train.") and
                                 isinstance(_default(k), float | type(None))
                                 and _option(k) not in ("window", "dim")])
def test_float_options_must_be_finite(key, value):
    with pytest.raises(EmbedtuneError, match="must be a finite number"):
        merge(Config(), {_option(key): value})


@pytest.mark.parametrize("option, value, message", [
    ("--seed", "-1", "must be 0 or positive, got -1"),
    ("--seed", str(2**32), "must be at most 4,294,967,295"),
    ("--sif", "nan", "must be a finite number"),
    ("--window", "101", "must be at most 100"),
    ("--min-contexts", "0", "must be at least 1"),
])
def test_init_checks_the_same_ranges_before_reading(small, tmp_path, option, value, message):
    result = run("init", small, small, "-o", tmp_path / "out.txt", option, value)
    assert result.exit_code == 2   # as train's same checks: a value out of range is a usage error
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"Error: {option} {message}")
    assert "Loading" not in result.stderr


def test_docs_state_every_range(tmp_path):
    # The ranges table moved from the README to docs/training.md (issue 25, item 8).
    page = (Path(__file__).parent.parent / "docs" / "training.md").read_text(encoding="utf-8")
    for key, r in ranges().items():
        if key.startswith("init."):
            continue
        assert f"| `{_option(key)}` | {r.text()} |" in page, key


# ---------------------------------------------------------------------------------------------
# interrupts outside the training loop: real processes, real signals

WAIT = 120


def start(args, tmpdir, stdin=subprocess.DEVNULL):
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.Popen([sys.executable, "-m", "embedtune.cli.main", *map(str, args)], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def wait_until(process, ready, what):
    deadline = time.monotonic() + WAIT
    while not ready():
        assert process.poll() is None, f"ended before {what}: {process.communicate()[1].decode()}"
        assert time.monotonic() < deadline, f"no {what} after {WAIT} s"
        time.sleep(0.005)


def finish(process) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=WAIT)
    return process.returncode, stderr.decode()


def hidden_temporaries(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".") and n.endswith(".tmp")]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """60,000 GloVe rows (the sample three times over, renamed): a write that takes a while."""
    path = tmp_path_factory.mktemp("big") / "big.txt"
    with open(path, "wb") as f:
        for copy in range(3):
            f.writelines(line.replace(b" ", f"_{copy} ".encode(), 1) for line in GLOVE_LINES)
    return path


@pytest.mark.parametrize("sig, code, said", [(signal.SIGTERM, 143, "Terminated (SIGTERM)."),
                                              (signal.SIGINT, 130, "Interrupted (Ctrl-C).")])
def test_a_signal_while_convert_writes_leaves_no_temporary_file(big, tmp_path, sig, code, said):
    out = tmp_path / "out" / "big.txt.bz2"
    out.parent.mkdir()
    process = start(["convert", big, out], tmp_path)
    wait_until(process, lambda: hidden_temporaries(out.parent), "temporary output file")
    process.send_signal(sig)
    rc, stderr = finish(process)
    assert rc == code, stderr
    assert stderr.strip().splitlines()[-1] == said
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert os.listdir(out.parent) == []


def test_an_interrupt_while_the_output_folder_is_probed_leaves_no_probe_file(tmp_path, monkeypatch):
    """The writability probe (check_writable_file) is removed however the check ends: the signal test
    above once caught the process between creating it and removing it."""
    from embedtune import checks

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(checks.os, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checks.check_writable_file(str(tmp_path / "out.txt"), "-o")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_standard_input_is_spooled_leaves_no_spool_file(small, tmp_path, sig, code):
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    process = start(["init", small, "-", "-o", tmp_path / "out.txt"], spool_dir, stdin=subprocess.PIPE)
    process.stdin.write(b"the of and\n" * 1000)
    process.stdin.flush()                     # stdin stays open: the spooling waits for more
    # Only our spool file counts: a library imported meanwhile may use the temporary folder too.
    spools = lambda: [n for n in os.listdir(spool_dir) if n.startswith("embedtune-corpus-")]  # noqa: E731
    wait_until(process, spools, "spool file")
    process.send_signal(sig)
    rc, stderr = finish(process)
    process.stdin.close()
    assert rc == code, stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert spools() == []
    assert not (tmp_path / "out.txt").exists()


def test_ctrl_c_while_tensorflow_is_imported_exits_130(small, tmp_path):
    # sgns with an anchor steps through TensorFlow (its proximal step is TensorFlow's alone; glove and sgns
    # runs without one never import it)
    process = start(["train", small, small, "-o", tmp_path / "out.txt", "--objective", "sgns", "--anchor", "0.5"],
                    tmp_path)

    def importing_tensorflow():
        try:
            return "tensorflow" in Path(f"/proc/{process.pid}/maps").read_text()
        except OSError:
            return False

    wait_until(process, importing_tensorflow, "TensorFlow import")
    process.send_signal(signal.SIGINT)
    rc, stderr = finish(process)
    assert rc == 130, stderr
    assert stderr.strip().splitlines()[-1] == "Interrupted before training began; nothing was saved."
    assert "Aborted!" not in stderr and "Traceback" not in stderr
    assert sorted(os.listdir(tmp_path)) == ["v.txt"]


def reader_waits(fifo: Path) -> bool:
    """A process has ``fifo`` open for reading (a writer's non-blocking open fails with ENXIO until then);
    the write end, opened here, stays open: the reader then waits for lines that never come."""
    try:
        reader_waits.held.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_set_up_stops_the_run_at_once(small, tmp_path, sig, code):
    """Ctrl-C in the set-up (rows planned, new words started, tables made) waited for the first step of the
    loop: here the set-up waits on a --freeze-list pipe (`<(slow command)`) that never ends, so only a stop
    that acts at once ends the run."""
    fifo = tmp_path / "frozen.fifo"
    os.mkfifo(fifo)
    before = {name: (tmp_path / name).read_bytes() for name in ("v.txt",)}
    reader_waits.held = []
    process = start(["train", small, small, "-o", tmp_path / "out.txt", "--freeze-list", fifo, "--epochs", "1"],
                    tmp_path)
    try:
        wait_until(process, lambda: reader_waits(fifo), "--freeze-list read")
        process.send_signal(sig)
        rc, stderr = finish(process)
    finally:
        for fd in reader_waits.held:
            os.close(fd)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert rc == code, stderr
    assert stderr.strip().splitlines()[-1] == "Interrupted before training began; nothing was saved.", stderr
    assert "Traceback" not in stderr and "Aborted!" not in stderr
    assert sorted(os.listdir(tmp_path)) == ["frozen.fifo", "v.txt"]
    assert {name: (tmp_path / name).read_bytes() for name in before} == before


def test_a_cold_kernel_cache_is_said_in_one_line_and_only_then(small, tmp_path):
    """A fresh install's first run compiled numba's kernels for about 15 s without a word (issue 38: no silent
    stretch over 2 s): with an empty cache (NUMBA_CACHE_DIR), one line says so before the count; the next run,
    which loads them, says nothing of it. The corpus's bad last line ends each run once the count has run."""
    corpus = tmp_path / "c.txt"
    # past the first bytes' check, and large enough for the compiled reader (corpus/fast.SMALL_FILE)
    corpus.write_bytes(b"the cat sat on the mat\n" * 50000 + b"\xff bad\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def stderr_lines() -> list[str]:
        ran = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "train", small, corpus, "-o",
                              tmp_path / "out.txt"], env=env, capture_output=True, text=True, timeout=WAIT)
        assert ran.returncode == 1 and ran.stdout == "", ran.stderr
        return ran.stderr.splitlines()

    error = f"Error: {corpus} line 50001: not valid UTF-8 text"
    first = stderr_lines()
    assert first[1:2] == ["Compiling kernels (first run only) ..."] and first[2].startswith(error), first
    second = stderr_lines()
    assert len(second) == 2 and second[1].startswith(error), second


# ---------------------------------------------------------------------------------------------
# eval's benchmark files


@pytest.mark.parametrize("option, data, line", [
    ("--similarity", b"the\tof\t1\ncaf\xe9\tthe\t2\n", 2),
    ("--analogy", b": s\nthe of and caf\xe9\n", 2),
])
def test_a_benchmark_file_that_is_not_utf8_is_one_error_line(small, tmp_path, option, data, line):
    path = tmp_path / "bench.txt"
    path.write_bytes(data)
    result = run("eval", small, option, path)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(f"Error: {path} line {line}: not valid UTF-8")


@pytest.mark.parametrize("option, data", [
    ("--similarity", "the\tof\t1\nand\tthe\t2\nto\ta\t3\nin\tis\t4\n"),
    ("--analogy", ": s\nthe of and to\n"),
])
def test_a_byte_order_mark_in_a_benchmark_file_is_not_part_of_its_first_line(small, tmp_path, option, data):
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_bytes(data.encode())
    marked.write_bytes(b"\xef\xbb\xbf" + data.encode())
    reports = []
    for path in (plain, marked):
        result = run("eval", small, option, path, "--json")
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        key = "similarity" if option == "--similarity" else "analogies"
        reports.append({k: v for k, v in report[key][0].items() if k not in ("name", "path")})
    assert reports[0] == reports[1]


def test_a_word_list_from_a_pipe_is_read_once_and_counts(tmp_path):
    # `--freeze-list <(cut -d' ' -f1 vectors.txt)`: checking the list early must not consume it.
    import threading

    vectors = tmp_path / "v.txt"
    vectors.write_bytes(b"".join(GLOVE_LINES[:200]))
    corpus = tmp_path / "c.txt"
    words = [line.split(b" ", 1)[0].decode() for line in GLOVE_LINES[:200]]
    corpus.write_text("\n".join(" ".join(words[i:i + 20]) for i in range(0, 200, 20)) + "\n")
    fifo = tmp_path / "list.fifo"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_text("\n".join(words[:20]) + "\n"), daemon=True).start()
    result = run("train", vectors, corpus, "-o", tmp_path / "out.txt", "--epochs", "1", "--objective", "sgns",
                 "--freeze-list", fifo)
    assert result.exit_code == 0, result.stderr
    assert "Plan: 20 frozen, 180 trainable, 0 new rows" in result.stderr


# ---------------------------------------------------------------------------------------------
# VECTORS from a pipe: `embedtune train <(zcat v.txt.gz) ...` reads it once


def feed(fifo: Path, data: bytes) -> None:
    """Write ``data`` into ``fifo`` a block at a time, opening it again whenever the reader closed it,
    as `<(cat FILE)` goes on writing into the one pipe: a reader that opens the path twice gets the
    rest of the bytes on its second open, never the start (nor a hang)."""
    done = 0
    while done < len(data):
        try:
            with open(fifo, "wb", buffering=0) as f:
                while done < len(data):
                    done += f.write(data[done:done + 4096])
        except BrokenPipeError:
            continue


def pipe_of(tmp_path: Path, data: bytes) -> Path:
    import threading

    fifo = tmp_path / "vectors.fifo"
    os.mkfifo(fifo)
    threading.Thread(target=feed, args=(fifo, data), daemon=True).start()
    return fifo


PIPED = b"".join(GLOVE_LINES[:2000])   # more than the format's peek and a pipe's buffer hold


@pytest.mark.parametrize("compress", [False, True], ids=["text", "gzip"])
def test_convert_reads_vectors_from_a_pipe_once(tmp_path, compress):
    import gzip

    fifo = pipe_of(tmp_path, gzip.compress(PIPED) if compress else PIPED)
    result = run("convert", fifo, tmp_path / "out.txt")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.txt").read_bytes() == PIPED


def test_init_reads_vectors_from_a_pipe_once(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the zzqnew of and zzqnew to the zzqnew in\n" * 5)
    result = run("init", pipe_of(tmp_path, PIPED), corpus, "-o", tmp_path / "out.txt", "--min-count", "2")
    assert result.exit_code == 0, result.output
    out = (tmp_path / "out.txt").read_bytes()
    assert out.startswith(PIPED) and out[len(PIPED):].startswith(b"zzqnew ")


def test_train_reads_vectors_from_a_pipe_once(tmp_path):
    corpus = tmp_path / "c.txt"
    words = [line.split(b" ", 1)[0].decode() for line in GLOVE_LINES[:200]]
    corpus.write_text("\n".join(" ".join(words[i:i + 20]) for i in range(0, 200, 20)) + "\n")
    result = run("train", pipe_of(tmp_path, PIPED), corpus, "-o", tmp_path / "out.txt", "--epochs", "1",
                 "--objective", "sgns", "--freeze-top", "100")
    assert result.exit_code == 0, result.output
    assert "Plan: 100 frozen, 1,900 trainable, 0 new rows" in result.stderr
    assert (tmp_path / "out.txt").read_bytes().splitlines()[:100] == PIPED.splitlines()[:100]


def test_binary_bytes_in_a_message_are_escaped(tmp_path):
    damaged = tmp_path / "v.txt"
    damaged.write_bytes(b"\xe0\x8b\x01\x02zz\xff\n" + GLOVE_LINES[0])
    result = run("convert", damaged, tmp_path / "out.txt")
    line = one_error_line(result, "line 1: expected a word followed by numbers")
    assert line.isascii() and line.isprintable(), line
    assert r"'\xe0\x8b\x01\x02zz\xff'" in line


# ---------------------------------------------------------------------------------------------
# The reader's hints (--keep-first-duplicate, --allow-nan, --replace-bad-utf8) work in train and init


def _damaged(kind: str) -> bytes:
    lines = GLOVE_LINES[:300]
    if kind == "duplicate":
        return b"".join(lines) + lines[5]
    if kind == "nan":
        fields = lines[7].split(b" ")
        fields[3] = b"nan"
        return b"".join(lines[:7]) + b" ".join(fields) + b"".join(lines[8:])
    word = lines[9].split(b" ", 1)[0]
    return b"".join(lines[:9]) + b"ab\xffc" + lines[9][len(word):] + b"".join(lines[10:])


HINTS = {"duplicate": "--keep-first-duplicate", "nan": "--allow-nan", "utf8": "--replace-bad-utf8"}


@pytest.mark.parametrize("command", ["train", "init"])
@pytest.mark.parametrize("kind", list(HINTS))
def test_following_the_readers_hint_makes_the_command_succeed(tmp_path, command, kind):
    vectors = tmp_path / "v.txt"
    vectors.write_bytes(_damaged(kind))
    words = [line.split(b" ", 1)[0].decode() for line in GLOVE_LINES[:300]]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(" ".join(words[i:i + 30]) + " zzqnew" for i in range(0, 300, 30)) + "\n")
    args = [command, vectors, corpus, "-o", tmp_path / "out.txt"]
    if command == "train":
        args += ["--epochs", "1", "--objective", "sgns", "--max-steps", "2"]
    one_error_line(run(*args), HINTS[kind])
    assert not (tmp_path / "out.txt").exists()
    result = run(*args, HINTS[kind])
    assert result.exit_code == 0, result.output
    out = (tmp_path / "out.txt").read_bytes()
    assert b"nan" not in out
    if kind == "nan":
        assert "Note: left out 1 row with NaN or infinity" in result.stderr


@pytest.mark.filterwarnings("error::RuntimeWarning")   # numpy's all-NaN warnings would reach standard error
@pytest.mark.parametrize("command", ["diff", "eval", "neighbors"])
@pytest.mark.parametrize("kind", list(HINTS))
def test_the_readers_hints_work_in_the_commands_that_compare(tmp_path, command, kind):
    vectors, clean, pairs = tmp_path / "v.txt", tmp_path / "clean.txt", tmp_path / "pairs.tsv"
    vectors.write_bytes(_damaged(kind))
    clean.write_bytes(b"".join(GLOVE_LINES[:300]))
    pairs.write_text("the\tof\t1.0\nand\tto\t2.0\nin\ta\t3.0\n")
    args = {"diff": ["diff", vectors, clean], "eval": ["eval", vectors, "--similarity", pairs],
            "neighbors": ["neighbors", vectors, "the"]}[command]
    one_error_line(run(*args), HINTS[kind])
    result = run(*args, HINTS[kind])
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------------------------------------
# A usage error is one line, as every other error is (exit code 2, as click and shells have it)


@pytest.mark.parametrize("args, parts", [
    (["train", "{v}", "{v}", "-o", "{out}", "--objective", "cbow"], ["'--objective'", "'cbow'", "'sgns'"]),
    (["train", "{v}", "-o", "{out}", "--objective", "retrofit"], ["--objective retrofit needs --lexicon"]),
    (["train", "{v}", "-o", "{out}"], ["missing CORPUS"]),
    (["train", "{v}", "{v}", "-o", "{out}", "--epochs", "five"], ["'--epochs'", "'five'", "integer"]),
    (["train", "{v}", "{v}", "-o", "{out}", "--bogus"], ["No such option '--bogus'"]),
    (["train", "{v}", "{v}", "-o", "{out}", "--negatives", "some"], ["'--negatives'", "'some'", "'per-pair'"]),
    (["--bogus", "inspect", "{v}"], ["No such option '--bogus'"]),
    (["nosuch"], ["No such command 'nosuch'"]),
    (["convert", "{v}"], ["Missing argument 'OUT'"]),
    (["convert", "{v}", "{out}", "--limit", "0"], ["'--limit'", "0", "x>=1"]),
    (["init", "{v}", "{v}", "-o", "{out}", "--init", "nope"], ["'--init'", "'nope'", "'alacarte'"]),
    (["neighbors", "{v}"], ["Missing argument"]),
    # a value that parses but is out of its range or not among the choices (issue 35: one rule, docs/ci.md)
    (["train", "{v}", "{v}", "-o", "{out}", "--workers", "0"], ["Error: --workers must be between 1 and"]),
    (["train", "{v}", "{v}", "-o", "{out}", "--epochs", "0"], ["Error: --epochs must be at least 1, got 0"]),
    # an objective's own option, checked as the shared ones are
    (["train", "{v}", "{v}", "-o", "{out}", "--x-max", "0"], ["Error: --x-max must be positive, got 0.0"]),
    (["init", "{v}", "{v}", "-o", "{out}", "--min-count", "0"], ["Error: --min-count must be at least 1, got 0"]),
    (["convert", "{v}", "{out}", "--to", "bogus"], ["Error: --to: unknown format 'bogus'"]),
])
def test_a_usage_error_is_one_line_and_exit_code_2(small, tmp_path, args, parts):
    result = run(*[a.format(v=small, out=tmp_path / "out.txt") for a in args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    one_error_line(result, *parts)
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize("args, line", [
    (["train", "{v}", "{v}", "-o", "{out}", "--checkpoint-dir", "{v}"], "Error: {v}: --checkpoint-dir: not a folder"),
    (["train", "{v}", "{v}", "-o", "{out}", "--logdir", "{v}"], "Error: {v}: --logdir: not a folder"),
    (["lexicon", "wordnet", "{out}", "-o", "{out}"], "Error: {out}: FOLDER: no such folder"),
])
def test_a_file_that_is_not_what_the_option_needs_is_one_line_and_exit_code_1(small, tmp_path, args, line):
    result = run(*[a.format(v=small, out=tmp_path / "out.txt") for a in args])
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(line.format(v=small, out=tmp_path / "out.txt")), result.stderr
    assert not (tmp_path / "out.txt").exists()


def test_no_command_still_shows_the_help():
    result = run()
    assert "Usage: " in result.output and "Commands:" in result.output


# ---------------------------------------------------------------------------------------------
# The output's extension chooses its format (gensim's names), unless --to says otherwise


@pytest.mark.parametrize("name, header, binary", [
    ("out.bin", b"50 50\n", True), ("out.w2v.bin", b"50 50\n", True), ("out.bin.gz", b"50 50\n", True),
    ("out.vec", b"50 50\n", False), ("out.vec.bz2", b"50 50\n", False), ("out.txt", b"", False),
])
@pytest.mark.parametrize("command", ["convert", "train", "init"])
def test_the_output_name_chooses_the_format(small, tmp_path, command, name, header, binary):
    from embedtune.formats import load_vectors
    from embedtune.formats.io import Source

    out = tmp_path / name
    corpus = tmp_path / "c.txt"
    corpus.write_text(" ".join(line.split(b" ", 1)[0].decode() for line in GLOVE_LINES[:50]) + "\n")
    args = {"convert": ["convert", small, out],
            "train": ["train", small, corpus, "-o", out, "--objective", "sgns", "--epochs", "1"],
            "init": ["init", small, corpus, "-o", out]}[command]
    result = run(*args)
    assert result.exit_code == 0, result.output
    with Source(out) as written:   # decompressed
        data = b"".join(iter(lambda: written.read(1 << 20), b""))
    assert (data.split(b"\n", 1)[0].endswith(b" 50") if header else data.startswith(GLOVE_LINES[0]))
    assert (b"\x00" in data) == binary
    if command == "convert":
        assert load_vectors(out).matrix.tobytes() == load_vectors(small).matrix.tobytes()


@pytest.mark.parametrize("command", ["convert", "train", "init"])
@pytest.mark.parametrize("name, to", [("out.bin", "glove"), ("out.vec.gz", "word2vec-binary"),
                                      ("out.bin", "fasttext")])
def test_to_that_the_output_name_contradicts_is_an_error(small, tmp_path, command, name, to):
    out = tmp_path / name
    args = {"convert": ["convert", small, out],
            "train": ["train", small, small, "-o", out],
            "init": ["init", small, small, "-o", out]}[command]
    result = run(*args, "--to", to)
    one_error_line(result, str(out), f"but --to says {to}")
    assert result.exit_code == 1 and "Loading" not in result.stderr
    assert not out.exists()
