"""pytest's settings for the whole suite: how many test processes, and how tests are handed to them."""

import pathlib
import sys

import pytest


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): one test process per core, at most 4. Many tests start TensorFlow in
    processes of their own (a worker each under --workers 2), so more would only trade memory for turns."""
    from embedtune.cores import local_cores   # no TensorFlow: the cores this process may use

    return max(1, min(local_cores(), 4))


@pytest.fixture(autouse=True)
def compiled_reader_for_small_files(monkeypatch):
    """In this process a corpus file of any size takes the compiled reader, as the tests of it were written for
    small files; a command's process keeps the default (a file under corpus/fast.SMALL_FILE: the reference's
    passes), and tests/test_corpus.py checks that rule with a bound of its own."""
    from embedtune.corpus import fast

    monkeypatch.setattr(fast, "SMALL_FILE", 0)


# Module-scoped fixtures that run training (real processes or a whole command). Under xdist, a module's
# fixture is built again in every test process that runs one of its tests, and again whenever that
# process's tests of the module are not consecutive; so the tests using one of these go together to one
# process (pytest-xdist's --dist loadgroup, pyproject.toml), one group per module and parameter.
SHARED_RUNS = {"uninterrupted", "interrupted", "trained", "trained_ngrams", "two_workers", "deterministic_runs",
               "ci_run"}

# The longest tests and groups, longest first: handed out first, so that no process is left with one of
# them at the end while the other has nothing to do (benchmarks/README.md, "The test suite's time").
# A name here that no longer matches a test only loses its place; nothing fails.
START_FIRST = [
    "test_fault_injection.py::test_signals_at_random_moments_in_every_phase",
    "test_resume.py@sgns",
    "test_resume.py@glove",
    "test_properties.py::test_every_reader_parses_or_names_the_file_and_line_in_bounded_work",
    "test_ps.py::test_a_loopback_cluster_trains_the_rows_one_process_trains",
    "test_distribute.py::test_classify_two_workers_read_their_shares_and_equal_one_process",
    "test_classify.py",
    "test_memory.py::test_the_pool_changes_no_bit_of_a_deterministic_adam_run",
    "test_distribute.py::test_a_worker_whose_share_ends_first_trains_padding_until_the_others_end",
    "test_distribute.py",
    "test_docs_snippets.py::test_every_block_runs_as_written",
    "test_properties.py::test_frozen_rows_keep_their_bits_and_the_result_reads_back_exactly",
    "test_memory.py::test_large_blocks_go_back_to_the_system_once_freed",
    "test_dry_run.py::test_cheap_checks_fail_before_tensorflow_and_before_the_vectors_load",
    "test_distribute.py::test_glove_two_workers_count_their_shares_and_equal_one_process",
    "test_sgns_speed_options.py",
    "test_averaging.py::test_averaging_workers_end_with_the_same_tables_and_train_as_one_process_does",
    "test_distribute.py::test_new_words_context_pass_reads_the_shares_and_equals_one_process",
    "test_formats.py::test_parallel_text_read_equals_one_process",
    "test_distribute.py::test_a_workers_threads_do_not_grow_with_its_steps",
    "test_memory.py::test_a_users_own_allocator_choice_is_kept",
    "test_memory.py::test_cpu_tensors_come_from_tensorflows_pool",
    "test_glove.py::test_glove_with_a_huge_anchor_keeps_trainable_rows_at_their_start",
    "test_objectives.py::test_a_stopped_and_resumed_run_gives_the_bits_of_an_uninterrupted_one",
    "test_golden.py::test_two_workers_give_their_recorded_bytes",
    "test_signals.py::test_a_signal_while_two_processes_read_a_big_file_stops_both",
    "test_signals.py::test_a_signal_to_the_launcher_stops_every_worker_at_once_with_a_checkpoint",
]


def fixture_params(item) -> list[str]:
    """The values the test's parametrised fixtures (`@pytest.fixture(params=...)`) take, by fixture name:
    its parameters less those of its `parametrize` marks. In the modules of SHARED_RUNS the only such
    fixtures are module-scoped (test_resume's `vectors`): a function-scoped one would split a group, not
    merge two."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return []
    direct = set()
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0]
        direct.update(name.strip() for name in (names.split(",") if isinstance(names, str) else names))
    return [str(value) for name, value in sorted(callspec.params.items()) if name not in direct]


def group_of(item) -> str | None:
    """The xdist group of a test that uses one of SHARED_RUNS: its module, and its module fixture's parameter."""
    if not SHARED_RUNS.intersection(getattr(item, "fixturenames", ())):
        return None
    module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    return "@".join([module, *fixture_params(item)])


def rank(item) -> int:
    """The test's place in START_FIRST (its group's name, its module::name without parameters, or its
    module), or one past the end."""
    group = next((mark.args[0] for mark in item.iter_markers("xdist_group")), None)
    path, _, name = item.nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    for key in (group, f"{module}::{name.split('[', 1)[0]}", module):
        if key in START_FIRST:
            return START_FIRST.index(key)
    return len(START_FIRST)


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if group := group_of(item):
            item.add_marker(pytest.mark.xdist_group(group))
    # A stable sort: tests of one rank keep pytest's order, so a module's tests stay together.
    items.sort(key=rank)


def warm_stamp() -> tuple[pathlib.Path, str]:
    """(the warm-up's stamp file, what it must hold): beside numba's cache of the kernels (NUMBA_CACHE_DIR when set),
    the numba and Python versions and the size and time of change of every source file that defines cached kernels,
    numba's own test of a cached kernel (such a file changed since the warm-up: some of its kernels may be stale)."""
    import hashlib
    import importlib.metadata
    import os

    root = pathlib.Path(__file__).resolve().parent.parent
    cache = os.environ.get("NUMBA_CACHE_DIR")
    folder = pathlib.Path(cache) if cache else root / "embedtune" / "kernels" / "__pycache__"
    digest = hashlib.sha256(f"{importlib.metadata.version('numba')} {sys.version}".encode())
    for path in sorted([*(root / "embedtune").rglob("*.py"), root / "tests" / "warm_kernels.py"]):
        if path.name != "warm_kernels.py" and "cache=True" not in path.read_text(encoding="utf-8"):
            continue
        stat = path.stat()
        digest.update(f"{path.relative_to(root)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return folder / "embedtune-warm-kernels.stamp", digest.hexdigest()


def pytest_sessionstart(session):
    """Compile the common kernels once, in two processes, before the test processes start (tests/warm_kernels.py),
    unless the last warm-up ran on these very sources (its stamp). A fresh clone warms up even where the README's
    quickstart ran first and left some kernels in numba's cache (as .ci/run does): without it every test process,
    and every run it starts, that meets a kernel no process has cached yet compiles it, several at once."""
    import subprocess

    script = pathlib.Path(__file__).resolve().parent / "warm_kernels.py"
    # An xdist test process: the controller has done it. No script beside this file: a copy of it run on a
    # suite of its own (tests/test_first_contact.py's session test), which has no kernels to warm.
    if hasattr(session.config, "workerinput") or not script.is_file():
        return
    stamp, key = warm_stamp()
    if stamp.is_file() and stamp.read_text() == key:
        return
    parts = [subprocess.Popen([sys.executable, str(script), part], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for part in ("glove", "other")]
    for part in parts:   # a failure here is not the suite's to report: the tests meet the same code
        part.communicate()
    if all(part.returncode == 0 for part in parts):
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(key)
        except OSError:   # a folder this user cannot write: the next session warms up again
            pass


# No test skips on a full `.[test]` install (issue 45): the skips allowed are those of a machine that cannot
# run the test (its reason starts with one of these); any other (a package missing from the test extra, a
# new skip) fails the session, named in its summary.
ALLOWED_SKIPS = (
    "no chromium on this machine",                   # test_report.py: where apt cannot install it (.ci/run)
    "glibc's mallopt",                               # test_memory.py: another C library
    "mounting a tmpfs needs root on Linux",          # test_checkpoint_errors.py
    "cannot mount a tmpfs here",                     # the same, in a container that forbids mounts
    "no read-only place for root on this system",    # test_dry_run.py
    "no /dev/full",                                  # test_dry_run.py
    "one core: the file is read in one process",     # test_signals.py
    "counts threads through /proc",                  # test_distribute.py
)
_unexpected_skips: list[str] = []


def skip_reason(report) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail") and not skip_reason(report).startswith(ALLOWED_SKIPS):
        _unexpected_skips.append(f"{report.nodeid}: {skip_reason(report)}")


def pytest_terminal_summary(terminalreporter):
    if _unexpected_skips:
        terminalreporter.section("skips no machine explains (tests/conftest.py, ALLOWED_SKIPS)", red=True)
        for line in _unexpected_skips:
            terminalreporter.line(line, red=True)


def pytest_sessionfinish(session):
    if _unexpected_skips and session.exitstatus == 0:
        session.exitstatus = 1
