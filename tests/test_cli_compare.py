"""`embedtune diff`, `eval` and `neighbors` run as commands on small real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from embedtune.cli.main import cli

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"

TINY = """\
the 0.1 0.2 0.3
of -0.5 0.25 1
and 1 0 0
to 0 1 0
in 0.5 0.5 0.5
"""


def run(*args):
    # -q: progress messages off, so standard error holds only what a test looks for.
    result = CliRunner().invoke(cli, ["-q"] + [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def write(path, text):
    path.write_text(text)
    return path


def doctor(text, word, new_values):
    """``text`` (GloVe lines) with ``word``'s vector replaced."""
    lines = []
    for line in text.splitlines(keepends=True):
        if line.split(" ", 1)[0] == word:
            line = word + " " + " ".join(new_values) + "\n"
        lines.append(line)
    out = "".join(lines)
    assert out != text
    return out


@pytest.fixture
def tiny(tmp_path):
    return write(tmp_path / "old.txt", TINY)


@pytest.fixture(scope="module")
def sample_text():
    return SAMPLE.read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# diff


def test_diff_finds_the_changed_row_and_nothing_else(tiny, tmp_path):
    new = write(tmp_path / "new.txt", doctor(TINY, "and", ["1", "0", "0.25"]))
    result = run("diff", tiny, new, "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert (d["identical"], d["changed"], d["added"], d["removed"]) == (4, 1, 0, 0)
    assert [m["word"] for m in d["most_moved"]] == ["and"]
    assert d["l2_max"] == pytest.approx(0.25)
    assert d["cosine_min"] == pytest.approx(1 / (1 + 0.25**2) ** 0.5)


def test_diff_table_names_counts_and_moved_words(tiny, tmp_path):
    new = write(tmp_path / "new.txt", doctor(TINY, "and", ["1", "0", "0.25"]) + "zebra 1 1 1\n")
    result = run("diff", tiny, new)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["old", str(tiny), "5", "words,", "3", "dimensions"]
    assert lines[1].split() == ["new", str(new), "6", "words"]
    assert lines[3].split() == ["identical", "4"]
    assert lines[4].split()[:2] == ["changed", "1"]
    assert lines[5].split() == ["added", "1", "zebra"]
    assert lines[6].split() == ["removed", "0"]
    assert lines[8:] == ["most moved:", "  word  L2 change  cosine to old", "  and      0.2500         0.9701"]


def test_diff_of_the_sample_with_one_doctored_row(sample_text, tmp_path):
    # One value of one real row moved by its last printed digit.
    line = sample_text.splitlines()[1234]
    word, *values = line.split(" ")
    values[7] = values[7][:-1] + str((int(values[7][-1]) + 1) % 10)
    new = write(tmp_path / "tuned.txt", doctor(sample_text, word, values))
    d = json.loads(run("diff", SAMPLE, new, "--json").stdout)
    assert (d["identical"], d["changed"], d["added"], d["removed"]) == (19999, 1, 0, 0)
    assert [m["word"] for m in d["most_moved"]] == [word]


def test_check_frozen_fails_on_a_doctored_file_and_passes_on_an_untouched_one(tiny, tmp_path):
    frozen = write(tmp_path / "frozen.txt", "the\nand\n")
    doctored = write(tmp_path / "doctored.txt", doctor(TINY, "and", ["1", "0", "-0"]))
    moved_other = write(tmp_path / "other.txt", doctor(TINY, "of", ["9", "9", "9"]))

    result = run("diff", tiny, doctored, "--check-frozen", frozen)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == ["frozen words: 2 checked, 1 changed, 0 removed", "  changed  and"]
    assert result.stderr == f"Error: 1 of 2 frozen words changed or removed in {doctored}\n"

    result = run("diff", tiny, moved_other, "--check-frozen", frozen)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "frozen words: 2 checked, 0 changed, 0 removed"
    assert result.stderr == ""


def test_check_frozen_counts_a_removed_word_and_reports_json(tiny, tmp_path):
    frozen = write(tmp_path / "frozen.txt", "the\nto\nnot-there\n")
    without_to = write(tmp_path / "new.txt", "".join(l for l in TINY.splitlines(True) if not l.startswith("to ")))
    result = run("diff", tiny, without_to, "--check-frozen", frozen, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["frozen"] == {
        "checked": 2, "changed": [], "removed": ["to"], "unknown": ["not-there"], "ok": False,
    }


def test_diff_with_config_checks_the_configs_frozen_words(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "new.txt", doctor(TINY, "in", ["0", "0", "0"]))
    config = write(
        tmp_path / "run.toml",
        'vectors = "old.txt"\noutput = "new.txt"\n[vocab]\nfreeze_top = 4\n',
    )
    result = run("diff", "--config", config)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "frozen words: 4 checked, 0 changed, 0 removed"
    write(tmp_path / "run.toml", 'vectors = "old.txt"\noutput = "new.txt"\n[vocab]\nfreeze_pretrained = true\n')
    result = run("diff", "--config", config)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-2:] == ["frozen words: 5 checked, 1 changed, 0 removed", "  changed  in"]


def test_diff_errors(tiny, tmp_path):
    wide = write(tmp_path / "wide.txt", "the 1 2 3 4\n")
    result = run("diff", tiny, wide)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        f"Error: {wide}: 4-dimensional vectors, but {tiny} has 3; rows of different sizes cannot be compared\n"
    )
    result = run("diff", tiny, tmp_path / "missing.txt")   # a file error: 1 (docs/ci.md)
    assert result.exit_code == 1 and "missing.txt: NEW: no such file" in result.stderr
    frozen = write(tmp_path / "f.txt", "the\n")
    result = run("diff", tiny, tiny, "--check-frozen", frozen, "--config", frozen)
    assert result.exit_code == 2 and "not both" in result.stderr


# ---------------------------------------------------------------------------------------------
# eval


# gensim's analogy loop makes 12k small matrix-vector products; on a busy 2-core machine OpenBLAS
# threads waking for each one made it 8x slower (83 s against 10 s measured), so these two runs
# use one BLAS thread. The scores do not depend on it.
ONE_BLAS_THREAD = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}

GENSIM_SCORES = """
import json, sys
from gensim.models import KeyedVectors
from gensim.test.utils import datapath
kv = KeyedVectors.load_word2vec_format(sys.argv[1], no_header=True)
pairs = {}
for name in ("wordsim353.tsv", "simlex999.txt"):
    pearson, spearman, oov = kv.evaluate_word_pairs(datapath(name))
    pairs[name.split(".")[0]] = [pearson.statistic, spearman.statistic, oov]
accuracy, sections = kv.evaluate_word_analogies(datapath("questions-words.txt"))
print(json.dumps({"pairs": pairs, "accuracy": accuracy,
                  "sections": [[s["section"], len(s["correct"]), len(s["incorrect"])] for s in sections[:-1]]}))
"""


def test_eval_on_the_sample_gives_gensims_scores():
    """`embedtune eval` with its default benchmarks against gensim loading and scoring the file itself."""
    want = json.loads(
        subprocess.run(
            [sys.executable, "-c", GENSIM_SCORES, str(SAMPLE)],
            capture_output=True, text=True, check=True, env=ONE_BLAS_THREAD,
        ).stdout
    )
    result = subprocess.run(
        [sys.executable, "-m", "embedtune.cli.main", "-q", "eval", str(SAMPLE), "--json"],
        capture_output=True, text=True, env=ONE_BLAS_THREAD,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["file"] == str(SAMPLE)
    # Pearson follows scipy's steps (embedtune.compare.evaluation.pearson): the same bits with scipy 1.17,
    # within rounding of other versions' order of operations.
    assert {s["name"]: [s["pearson"], s["spearman"], 100 * s["oov_ratio"]] for s in got["similarity"]} == {
        name: [pytest.approx(pearson, rel=0, abs=1e-15), spearman, pytest.approx(oov)]
        for name, (pearson, spearman, oov) in want["pairs"].items()
    }
    [a] = got["analogies"]
    assert a["accuracy"] == want["accuracy"]
    assert [[s["name"], s["correct"], s["answered"] - s["correct"]] for s in a["sections"]] == want["sections"]


def test_eval_table_with_one_file(tmp_path):
    pairs = write(tmp_path / "pairs.tsv", "# mine\nking\tqueen\t8\nman\tspain\t0.5\nfrance\tspain\t7\nfoo-bar\tking\t1\n")
    result = run("eval", SAMPLE, "--similarity", pairs)
    assert result.exit_code == 0, result.output
    header, row = result.stdout.splitlines()
    assert header.split() == ["word", "similarity", "Pearson", "Spearman", "pairs", "used", "OOV"]
    assert row.split()[0] == "pairs" and row.split()[3:] == ["3/4", "25.0%"]


def test_eval_before_after_shows_the_differences(tmp_path, sample_text):
    # Swap two words' vectors: the similarity scores change, the file is otherwise the sample.
    lines = sample_text.splitlines(keepends=True)
    i, j = next(k for k, l in enumerate(lines) if l.startswith("king ")), 3
    vi, vj = lines[i].split(" ", 1)[1], lines[j].split(" ", 1)[1]
    lines[i] = "king " + vj
    lines[j] = lines[j].split(" ", 1)[0] + " " + vi
    after = write(tmp_path / "after.txt", "".join(lines))
    pairs = write(tmp_path / "pairs.tsv", "king\tqueen\t8\nking\tspain\t0.5\nfrance\tspain\t7\nman\twoman\t8\n")
    result = run("eval", SAMPLE, after, "--similarity", pairs, "--json")
    assert result.exit_code == 0, result.output
    e = json.loads(result.stdout)
    change = {(r["benchmark"], r["metric"]): r for r in e["change"]}
    before_p, after_p = e["before"]["similarity"][0]["pearson"], e["after"]["similarity"][0]["pearson"]
    assert before_p != after_p
    assert change["pairs", "pearson"]["change"] == pytest.approx(after_p - before_p)
    assert change["pairs", "oov_ratio"]["change"] == 0

    table = run("eval", SAMPLE, after, "--similarity", pairs).stdout.splitlines()
    assert table[:2] == [f"before: {SAMPLE}", f"after:  {after}"]
    assert table[3].split() == ["benchmark", "metric", "before", "after", "change"]
    assert table[4].split() == ["pairs", "pearson", f"{before_p:.4f}", f"{after_p:.4f}", f"{after_p - before_p:+.4f}"]


def test_eval_analogy_restricted_like_compute_accuracy(tmp_path):
    analogies = write(
        tmp_path / "a.txt",
        ": capitals\nathens greece paris france\nparis france berlin germany\n: rare\nathens greece zurich switzerland\n",
    )
    result = run("eval", SAMPLE, "--analogy", analogies, "--restrict-vocab", "3000", "--json")
    assert result.exit_code == 0, result.output
    [a] = json.loads(result.stdout)["analogies"]
    # athens (row 3265) is outside the first 3000 words: only "paris france berlin germany" is asked.
    assert (a["restrict_vocab"], a["questions"], a["answered"], a["correct"]) == (3000, 3, 1, 1)
    assert [(s["name"], s["answered"]) for s in a["sections"]] == [("capitals", 1), ("rare", 0)]


def test_eval_progress_bar_counts_questions_on_stderr_after_a_second(tmp_path, monkeypatch):
    """The bar is tqdm's, told to wait a second (delay=1) and to write to standard error; it counts
    the questions asked. (Drawn only on a terminal: checked by hand under `script`.)"""
    import tqdm

    bars = []

    class Recording(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            bars.append({**kwargs, "stderr": sys.stderr})   # the runner's, while the command runs
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            self.advanced = 0
            bars[-1]["bar"] = self

        def update(self, n=1):
            self.advanced += n
            return super().update(n)

    monkeypatch.setattr(tqdm, "tqdm", Recording)
    analogies = write(tmp_path / "a.txt", ": capitals\nathens greece paris france\nparis france berlin germany\n")
    result = CliRunner().invoke(cli, ["eval", str(SAMPLE), "--analogy", str(analogies), "--json"])
    assert result.exit_code == 0, result.output
    [kwargs] = bars
    assert kwargs["delay"] == 1 and kwargs["file"] is kwargs["stderr"]
    assert kwargs["bar"].total == kwargs["bar"].advanced == 2


def test_eval_scoring_bar_is_redrawn_while_the_scoring_says_nothing(tmp_path, monkeypatch):
    """Issue 48.7: a similarity file's scoring reports no progress (scipy's import alone takes seconds on a
    loaded machine); on a terminal its bar shows after a second and is redrawn until the scores come."""
    import time

    import tqdm

    from embedtune import compare
    from embedtune.cli import common

    class OnATerminal(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = False   # tqdm's None: drawn only on a terminal, which the runner's stream is not
            super().__init__(*args, **kwargs)

    scoring = compare.evaluate

    def slow(*args, **kwargs):
        time.sleep(2.0)
        return scoring(*args, **kwargs)

    monkeypatch.setattr(tqdm, "tqdm", OnATerminal)
    monkeypatch.setattr(compare, "evaluate", slow)
    monkeypatch.setattr(common, "REDRAW_EVERY", 0.1)
    pairs = write(tmp_path / "pairs.tsv", "the\tof\t1\nthe\tand\t2\nof\tand\t3\n")
    result = CliRunner().invoke(cli, ["eval", str(SAMPLE), "--similarity", str(pairs), "--limit", "1000"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("scoring: 0") >= 3, result.stderr


def test_eval_bad_benchmark_file_is_one_line_error(tiny, tmp_path):
    bad = write(tmp_path / "bad.txt", "\nathens greece paris france\n")
    result = run("eval", tiny, "--analogy", bad)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"Error: {bad} line 2: analogy question before any ': section' header line\n"


# ---------------------------------------------------------------------------------------------
# neighbors


def test_neighbors_of_france_in_the_sample():
    result = run("neighbors", SAMPLE, "france", "-k", "5")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "france"
    assert [line.split()[1] for line in lines[2:]] == ["french", "belgium", "paris", "spain", "netherlands"]
    assert lines[2].split() == ["1", "french", "0.8868"]


def test_neighbors_unknown_words_are_reported_and_the_others_shown():
    result = run("neighbors", SAMPLE, "Paris", "frog", "qwzx", "-k", "3", "--json")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f'{SAMPLE}: no vector for "Paris" (did you mean "paris"?)',
        f'{SAMPLE}: no vector for "qwzx"',
    ]
    data = json.loads(result.stdout)
    assert data["unknown"] == ["Paris", "qwzx"]
    assert [r["word"] for r in data["results"]] == ["frog"]
    assert [n["word"] for n in data["results"][0]["neighbors"]] == ["snake", "monkey", "spider"]


def test_neighbors_with_no_known_word_fails(tiny):
    result = run("neighbors", tiny, "qwzx")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {tiny}: the word 'qwzx' has no vector"


def test_neighbors_against_another_file_side_by_side(tiny, tmp_path):
    other = write(tmp_path / "other.txt", doctor(TINY, "the", ["1", "0.1", "0"]))
    result = run("neighbors", tiny, "the", "--against", other, "-k", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "the"
    assert lines[1].split() == [str(tiny), "cosine", str(other), "cosine"]
    # old "the" (0.1 0.2 0.3) is closest to "in"; moved towards (1 0 0) it is closest to "and".
    assert lines[2].split()[:2] == ["1", "in"] and lines[2].split()[3] == "and"
    data = json.loads(run("neighbors", tiny, "the", "--against", other, "-k", "2", "--json").stdout)
    assert data["against"]["file"] == str(other)
    assert data["against"]["results"][0]["neighbors"][0]["word"] == "and"


# ---------------------------------------------------------------------------------------------
# the commands as a user runs them


@pytest.mark.parametrize("command", ["diff", "eval", "neighbors"])
def test_help_carries_an_example(command):
    result = run(command, "--help")
    assert result.exit_code == 0 and "Example:" in result.stdout and "embedtune " + command in result.stdout


def _imported_after(invocations, modules):
    """Which of ``modules`` a fresh interpreter holds after running the CLI ``invocations`` (lists of args),
    each asserted to succeed."""
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from embedtune.cli.main import cli\n"
        f"for args in {invocations!r}:\n"
        "    r = CliRunner().invoke(cli, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        f"print(sorted(m for m in {tuple(modules)!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip()


def test_commands_do_not_import_tensorflow(tiny, tmp_path):
    assert _imported_after([["diff", str(tiny), str(tiny)], ["neighbors", str(tiny), "the"]], ["tensorflow"]) == "[]"


def test_eval_imports_neither_tensorflow_nor_scipy_stats(tiny, tmp_path):
    """eval computes Pearson and Spearman itself (embedtune.compare.evaluation): importing scipy.stats
    cost it more than scoring the pairs did, and TensorFlow far more."""
    pairs = write(tmp_path / "pairs.tsv", "the\tof\t1\nand\tto\t2\nin\tthe\t3\n")
    analogies = write(tmp_path / "analogies.txt", ": one\nthe of and to\n")
    invocation = ["eval", str(tiny), "--similarity", str(pairs), "--analogy", str(analogies)]
    assert _imported_after([invocation], ["tensorflow", "scipy.stats"]) == "[]"


# What the command's entry leaves in OPENBLAS_NUM_THREADS and OMP_NUM_THREADS once it has loaded numpy
# (the entry point's own start: its module imported with the command's arguments, as the console script does).
BLAS_THREADS_AT_ENTRY = """
import json, os, sys
sys.argv = ["embedtune"] + sys.argv[1:]
import embedtune.cli.main
assert "numpy" in sys.modules   # the entry has loaded it (cli.common): the choice below was made before
print(json.dumps([os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS")]))
"""


@pytest.mark.parametrize("args, user, want", [
    (["-q", "eval", "v.txt"], {}, ["1", None]),
    (["eval", "v.txt", "--json"], {}, ["1", None]),
    (["-q", "eval", "v.txt"], {"OMP_NUM_THREADS": "3"}, [None, "3"]),    # the user's count stays
    (["eval", "v.txt"], {"OPENBLAS_NUM_THREADS": "2"}, ["2", None]),
    (["-q", "train", "v.txt", "c.txt"], {}, ["1", None]),
    (["train", "v.txt", "c.txt"], {"OPENBLAS_NUM_THREADS": "2"}, ["2", None]),
    (["-q", "diff", "v.txt", "w.txt"], {}, [None, None]),              # other commands: numpy's default
    (["--help"], {}, [None, None]),
])
def test_eval_and_train_start_numpy_with_one_blas_thread_unless_the_user_chose(args, user, want):
    """eval's analogy screen runs between matrix products on one thread; a second OpenBLAS thread spun
    beside it; train's new words' products are small, and their two threads waited on each other
    (cli/blas_threads.py): so their entry asks for one before numpy loads."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", BLAS_THREADS_AT_ENTRY, *args], capture_output=True, text=True,
                          env={**env, **user})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want


@pytest.mark.parametrize("args, user, want", [
    (["-q", "train", "v.txt", "c.txt"], {}, "4"),
    (["train", "v.txt", "c.txt"], {"OPENBLAS_THREAD_TIMEOUT": "28"}, "28"),   # the user's stays
    (["-q", "init", "v.txt", "c.txt", "-o", "out.txt"], {}, "4"),          # the same spelling fit as train's
    (["init", "v.txt", "c.txt", "-o", "-"], {"OPENBLAS_THREAD_TIMEOUT": "28"}, "28"),
    (["-q", "eval", "v.txt"], {}, None),                                   # one BLAS thread: nothing spins
])
def test_train_and_init_start_numpy_with_a_short_blas_spin_unless_the_user_chose(args, user, want):
    """train's few small BLAS products (the new words' fit, which init runs too) left OpenBLAS's idle threads
    spinning for about a tenth of a second after each (cli/blas_threads.py), so both entries ask for the
    shortest spin before numpy loads."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    code = BLAS_THREADS_AT_ENTRY.replace('[os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS")]',
                                         'os.environ.get("OPENBLAS_THREAD_TIMEOUT")')
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env={**env, **user})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want


def test_import_embedtune_loads_no_numpy():
    """What lets eval's entry choose the BLAS threads: `import embedtune` and the entry's own first imports
    load no numpy (embedtune/__init__.py imports its names on first use)."""
    code = ("import sys, embedtune, embedtune.errors, embedtune.cli.blas_threads\n"
            "print(sorted(m for m in ('numpy', 'numba') if m in sys.modules))\n"
            "from embedtune import Vectors, fine_tune, load_vectors\n"
            "print(Vectors.__module__, fine_tune.__module__, load_vectors.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "embedtune.vectors embedtune.api embedtune.formats"]

def test_check_frozen_reads_a_hash_line_as_a_word_as_its_help_says(tmp_path):
    old, new, frozen = tmp_path / "old.txt", tmp_path / "new.txt", tmp_path / "frozen.txt"
    old.write_text("#tag 1 2\nb 3 4\n")
    new.write_text("#tag 1 2.5\nb 3 4\n")
    frozen.write_text("#tag\n")
    result = run("diff", old, new, "--check-frozen", frozen)
    assert result.exit_code == 1 and "#tag" in result.output
    help_text = " ".join(run("diff", "--help").output.split())
    assert "lines skipped" not in help_text and "every non-empty line is a word" in help_text
