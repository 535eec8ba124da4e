"""`train --dry-run` and the cheap checks every command makes first (issue 10, item 1).

A dry run checks everything that needs no training and stops: no TensorFlow, nothing written. A bad
format name, regex, missing file or unwritable output fails before TensorFlow is imported and before a
vectors file is read, in every command: each case runs in a fresh interpreter whose vectors readers
raise if called, and reports whether TensorFlow was imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from embedtune import kernels
from embedtune.dryrun.estimate import COMPILED_RUNTIME_BYTES, OPTIMIZER_SLOTS, RUNTIME_BYTES, STEP_BATCH_ROWS

from bad_inputs import snapshot
from test_cli_train import assert_one_error_line, run
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

N_WORDS = 3000


@pytest.fixture
def folder(tmp_path):
    """The first 3,000 GloVe words and 40 lines of the sample corpus, in a folder of their own."""
    (tmp_path / "glove.txt").write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:N_WORDS]))
    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:40]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def read_only_folder(tmp_path):
    """A folder in which no file can be created: a mode-555 folder, or /sys for root (who ignores modes)."""
    if os.geteuid() == 0:
        if not os.path.isdir("/sys"):
            pytest.skip("no read-only place for root on this system")
        return "/sys"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return str(locked)


# ---------------------------------------------------------------------------------------------
# the dry run itself


def test_a_dry_run_reports_the_plan_imports_no_tensorflow_and_writes_nothing(folder):
    code = textwrap.dedent("""
        import sys
        from click.testing import CliRunner
        from embedtune.cli.main import cli
        result = CliRunner().invoke(cli, ["train", "glove.txt", "corpus.txt", "-o", "tuned.txt", "--freeze-top",
                                          "1000", "--checkpoint-dir", "ckpt", "--logdir", "logs", "--dry-run",
                                          "--json"], catch_exceptions=False)
        print(result.stdout)
        print(result.exit_code, "tensorflow" in sys.modules, file=sys.stderr)
    """)
    before = snapshot(folder)
    result = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "0 False"
    assert snapshot(folder) == before   # no output, no checkpoint folder, no log folder, no probe left
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True
    assert (plan["frozen"], plan["rows"], plan["dim"]) == (1000, N_WORDS, 50)
    assert plan["trainable"] == N_WORDS - 1000 and plan["new"] > 0
    assert plan["objective"] == "glove"   # auto: a GloVe-format file
    assert plan["settings"] == {"epochs": 5, "optimizer": "adagrad", "min_lr_fraction": 1e-4, "batch_size": 4096,
                                "clip_norm": 0.0, "anchor": 8.0, "seed": 1, "deterministic": False,
                                "window": 10, "x_max": 2.0, "lr": 0.1}
    assert plan["checkpoint_dir"] == "ckpt" and plan["logdir"] == "logs"


def test_the_plan_is_the_one_training_follows(folder):
    args = ["train", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "tuned.txt",
            "--freeze-top", "500", "--train-pattern", "^[a-m]", "--objective", "sgns"]
    dry = run([*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    trained = run([*args, "--max-steps", "3", "--json"])
    assert trained.exit_code == 0, trained.stderr
    summary = json.loads(trained.stdout)
    for key in ("frozen", "trainable", "new", "corpus_words", "corpus_lines", "init", "objective"):
        assert plan[key] == summary[key], key
    assert plan["trainable_in_corpus"] == summary["trained_rows"]
    assert plan["settings"]["window"] == summary["window"] == 5 and plan["settings"]["lr"] == summary["lr"]


def test_the_human_report_names_rows_settings_and_memory(folder):
    (folder / "train.txt").write_text("the\nzzzunknownword\nqqqnothere\n")
    result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "tuned.txt",
                  "--train-list", folder / "train.txt", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert text.startswith("Dry run: every check passed; nothing trained, nothing written.\n")
    assert f"{N_WORDS - 1:,} frozen, 1 trainable" in text
    assert f"2 words of {folder / 'train.txt'} are not in the vocabulary (first: zzzunknownword, qqqnothere)" in text
    assert "objective  glove: epochs 5, optimizer adagrad" in text
    assert "MiB at the peak (an estimate from the table sizes" in text
    assert not (folder / "tuned.txt").exists()


def test_the_memory_estimate_adds_up_from_the_table_sizes(folder, monkeypatch):
    def plan(*options):
        result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", "-", "--objective", "sgns",
                      "--dry-run", "--json", *options])
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    sgd, compiled = plan("--optimizer", "sgd"), plan("--optimizer", "adam")
    monkeypatch.setattr(kernels, "KERNEL", False)   # EMBEDTUNE_KERNEL=0: adam through TensorFlow's step
    adam = plan("--optimizer", "adam")
    parts = adam["memory_parts_bytes"]
    assert parts["input_matrix"] == N_WORDS * 50 * 4
    rows = (adam["trainable_in_corpus"] + 1) * 50 * 4   # + the sink row
    side = (adam["trainable_in_corpus"] + adam["frozen_in_corpus"] + 1) * 50 * 4
    assert parts["trainable_rows"] == 2 * rows
    assert parts["side_table"] == side
    assert parts["optimizer_slots"] == OPTIMIZER_SLOTS["adam"] * (rows + side) == 2 * (rows + side)
    assert sgd["memory_parts_bytes"]["optimizer_slots"] == 0
    # A compiled step steps a numpy copy of the side table, and of adam's two slots of both tables.
    assert parts["compiled_step_copies"] == 0 and sgd["memory_parts_bytes"]["compiled_step_copies"] == side
    assert compiled["memory_parts_bytes"]["compiled_step_copies"] == 3 * side + 2 * rows
    assert parts["output_rows"] == (adam["trainable_in_corpus"] + adam["new"]) * 50 * 4
    assert adam["memory_estimate_bytes"] == sum(parts.values())
    # TensorFlow's step holds its runtime; a compiled one (sgd, adam) numba's and no TensorFlow.
    assert parts["tensorflow_and_python"] == RUNTIME_BYTES and parts["python_and_numba"] == 0
    for one in (sgd, compiled):
        assert one["memory_parts_bytes"]["tensorflow_and_python"] == 0
        assert one["memory_parts_bytes"]["step_working_set"] == 0
    assert sgd["memory_parts_bytes"]["python_and_numba"] == COMPILED_RUNTIME_BYTES
    assert sgd["memory_parts_bytes"]["tensorflow_and_python"] == 0

    def held(plan):   # the spelling model's fit counts only for what it holds beyond the tables
        return plan["memory_estimate_bytes"] - plan["memory_parts_bytes"]["spelling_model_fit"]

    # TensorFlow's step holds a batch's working set; the compiled step's is counted in its copies.
    step = STEP_BATCH_ROWS * adam["settings"]["batch_size"] * 50 * 4
    assert parts["step_working_set"] == step and sgd["memory_parts_bytes"]["step_working_set"] == 0
    assert held(adam) - held(sgd) == 2 * (rows + side) - side + RUNTIME_BYTES - COMPILED_RUNTIME_BYTES + step


# Peak memory from VmHWM (ru_maxrss would carry over the size of the test process it was forked from).
PEAK_RUN = """
import sys
from embedtune.cli.main import cli

cli(sys.argv[1:], prog_name="embedtune", standalone_mode=False)
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024)
"""


def test_the_memory_estimate_is_within_a_quarter_of_a_measured_peak(tmp_path):
    # A small real run of the main job (a GloVe file, a corpus, a freeze list: glove, its compiled step),
    # other than the one the runtime's constant was calibrated on: the sample's 20k rows, its corpus three
    # times over with the WordNet glosses, the top 2,000 frozen, new words from their contexts.
    corpus = tmp_path / "corpus.txt"
    glosses = (SAMPLE_VECTORS.parent / "wordnet-glosses.train.txt").read_text(encoding="utf-8")
    corpus.write_text(SAMPLE_CORPUS.read_text(encoding="utf-8") * 3 + glosses, encoding="utf-8")
    args = ["train", str(SAMPLE_VECTORS), str(corpus), "-o", str(tmp_path / "out.txt"), "--freeze-top", "2000",
            "--epochs", "2"]
    planned = run([*args, "--dry-run", "--json"])
    assert planned.exit_code == 0, planned.stderr
    estimate = json.loads(planned.stdout)["memory_estimate_bytes"]
    done = subprocess.run([sys.executable, "-c", PEAK_RUN, "-q", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split()[-1])
    assert 0.75 * peak <= estimate <= 1.25 * peak, (estimate / 2**20, peak / 2**20)


def test_a_dry_run_fails_where_training_would_before_it_trains(folder):
    (folder / "corpus.txt").write_text("the of and to\n" * 5)   # no new word; every corpus word frozen below
    before = snapshot(folder)
    result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "tuned.txt",
                  "--freeze-pretrained", "--dry-run"])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "nothing to train")
    assert snapshot(folder) == before


def test_a_dry_run_with_resume_needs_a_checkpoint(folder):
    (folder / "ckpt").mkdir()
    result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "tuned.txt",
                  "--checkpoint-dir", folder / "ckpt", "--resume", "--dry-run"])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "--resume: no checkpoint in this folder")


def test_help_says_the_memory_figure_is_an_estimate():
    text = " ".join(run(["train", "--help"]).stdout.split())
    assert "--dry-run" in text and "an estimate of peak memory" in text


# ---------------------------------------------------------------------------------------------
# cheap checks first, in every command: before TensorFlow, before the vectors are read

EARLY = textwrap.dedent("""
    import json, sys
    from click.testing import CliRunner
    import embedtune.formats as formats
    from embedtune.cli.main import cli

    def must_not_read(*args, **kwargs):
        raise AssertionError("a vectors file was read before the cheap checks")

    formats.load_vectors = formats.summarize_vectors = must_not_read
    for args in json.loads(sys.argv[1]):
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        print(json.dumps({"code": result.exit_code, "stderr": result.stderr, "tensorflow": "tensorflow" in sys.modules}))
""")


def early_cases(folder, locked):
    v, c, out = str(folder / "glove.txt"), str(folder / "corpus.txt"), str(folder / "out.txt")
    missing = str(folder / "missing.txt")
    (folder / "a-file").write_text("")
    (folder / "bad.toml").write_text(f'vectors = "{v}"\noutput = "{v}"\n[vocab]\nfreeze_pattern = "[a-"\n')
    return [
        (["train", v, c, "-o", out, "--to", "text"], "--to: unknown format 'text'"),
        (["train", v, c, "-o", out, "--format", "vec"], "--format: unknown format 'vec'"),
        (["train", v, c, "-o", out, "--freeze-pattern", "(a"], "is not a valid regular expression"),
        (["train", v, c, "-o", out, "--train-pattern", "[z-a]"], "is not a valid regular expression"),
        (["train", v, missing, "-o", out], f"{missing}: no such corpus file"),
        (["train", missing, c, "-o", out], f"{missing}: no such file"),
        (["train", v, c, "-o", out, "--freeze-list", missing], f"{missing}: no such word-list file"),
        (["train", v, c, "-o", f"{locked}/out.txt"], f"cannot write in {locked}"),
        (["train", v, c, "-o", out, "--json", f"{locked}/s.json"], f"cannot write in {locked}"),
        (["train", v, c, "-o", out, "--logdir", f"{locked}/logs"], f"--logdir: cannot write in {locked}"),
        (["train", v, c, "-o", out, "--checkpoint-dir", str(folder / "a-file")], "--checkpoint-dir: not a folder"),
        (["train", v, c, "-o", out, "--resume"], "--resume needs --checkpoint-dir"),
        (["train", v, c, "-o", out, "--max-steps", "-1"], "--max-steps must be 0 (no limit) or positive"),
        (["train", v, c, "-o", f"{locked}/out.txt", "--dry-run"], f"cannot write in {locked}"),
        (["init", v, c, "-o", out, "--to", "text"], "--to: unknown format 'text'"),
        (["init", v, missing, "-o", out], f"{missing}: no such corpus file"),
        (["init", v, c, "-o", f"{locked}/out.txt"], f"cannot write in {locked}"),
        (["convert", v, out, "--to", "text"], "--to: unknown format 'text'"),
        (["convert", v, f"{locked}/out.txt"], f"cannot write in {locked}"),
        (["convert", missing, out], f"{missing}: no such file"),
        (["inspect", v, "--format", "vec"], "--format: unknown format 'vec'"),
        (["inspect", missing], f"{missing}: no such file"),
        (["diff", v, v, "--format", "vec"], "--format: unknown format 'vec'"),
        (["diff", "--config", str(folder / "bad.toml")], "is not a valid regular expression"),
        (["eval", v, "--format", "vec"], "--format: unknown format 'vec'"),
        (["neighbors", v, "the", "--format", "vec"], "--format: unknown format 'vec'"),
    ]


def test_cheap_checks_fail_before_tensorflow_and_before_the_vectors_load(folder):
    locked = read_only_folder(folder)
    cases = early_cases(folder, locked)
    before = snapshot(folder)
    # One process for all the cases, in turn: a case that imported TensorFlow fails, and so does every one after it.
    result = subprocess.run([sys.executable, "-c", EARLY, json.dumps([args for args, _ in cases])],
                            capture_output=True, text=True, timeout=120, cwd=folder)
    assert result.returncode == 0, result.stderr
    outcomes = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(outcomes) == len(cases), result.stdout
    for (args, part), outcome in zip(cases, outcomes):
        assert outcome["code"] in (1, 2), (args, outcome)
        assert_one_error_line(outcome["stderr"], part)
        assert not outcome["tensorflow"], args
    assert snapshot(folder) == before


def test_the_modules_a_dry_run_uses_import_no_tensorflow():
    modules = ["embedtune.config", "embedtune.objectives", "embedtune.plan.rules","embedtune.corpus", "embedtune.newwords",
               "embedtune.newwords.methods",
               "embedtune.plan.rows", "embedtune.dryrun.runplan", "embedtune.dryrun.estimate",
               "embedtune.formats", "embedtune.compare", "embedtune.training.checkpoints", "embedtune.cli.common",
               "embedtune.cli.train_cmd", "embedtune.run", "embedtune.checks", "embedtune.cli.init_cmd", "embedtune.cli.formats_cmds",
               "embedtune.cli.compare_cmds"]
    code = f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\nprint('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------
# --workers in the dry run: its memory, its bound, its refusals; an output that cannot be written


def test_the_memory_estimate_counts_every_worker_process(folder):
    def plan(workers, *extra):
        result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", "-", "--objective", "sgns",
                      "--dry-run", "--json", "--workers", str(workers), *extra])
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    one, two = plan(1), plan(2)
    assert one["memory_estimate_bytes"] == one["memory_per_worker_bytes"] == sum(one["memory_parts_bytes"].values())
    # Each worker holds what one process does (the compiled reader's ids of the whole file included:
    # distribute/compiled_share.py); the launcher waits beside them. Averaging workers (the default) step
    # as one process does, the compiled step included, and exchange bytes without TensorFlow
    # (distribute/mesh.py): only averaging's copy of the tables is more. The gathered step's workers step
    # the joined batches as one process does (distribute/gathered.py), unless the objective's step is
    # TensorFlow's (--anchor): then through TensorFlow's strategy.
    per_worker = two["memory_per_worker_bytes"]
    assert per_worker == sum(two["memory_parts_bytes"].values())
    extra = two["memory_parts_bytes"]["averaging_last_sync"]
    assert one["memory_parts_bytes"]["step_working_set"] == 0 == two["memory_parts_bytes"]["step_working_set"]
    assert two["memory_parts_bytes"]["tensorflow_and_python"] == 0 == two["memory_parts_bytes"]["distribution_runtime"]
    joined = plan(2, "--sync-every", "0")["memory_parts_bytes"]
    apart = ("averaging_last_sync", "spelling_model_fit")   # the fit's figure: what it adds over the rest
    assert joined["averaging_last_sync"] == 0 and {k: v for k, v in joined.items() if k not in apart} == {
        k: v for k, v in two["memory_parts_bytes"].items() if k not in apart}
    gathered = plan(2, "--sync-every", "0", "--anchor", "1")["memory_parts_bytes"]
    assert gathered["tensorflow_and_python"] == RUNTIME_BYTES and gathered["distribution_runtime"] > 0
    assert gathered["step_working_set"] > 0 and gathered["python_and_numba"] == 0

    def held(plan):
        return plan["memory_per_worker_bytes"] - plan["memory_parts_bytes"]["spelling_model_fit"]

    assert held(two) - held(one) == extra and one["memory_parts_bytes"]["averaging_last_sync"] == 0
    # Averaging's copy of the tables at the last sync (sgd: the rows and the side table), with 12 bytes
    # a row for the sync; none with the gathered gradients.
    tables = one["memory_parts_bytes"]["trainable_rows"] // 2 + one["memory_parts_bytes"]["side_table"]
    assert two["memory_parts_bytes"]["averaging_last_sync"] == tables + 12 * tables // (4 * 50)
    assert gathered["averaging_last_sync"] == 0
    assert two["memory_estimate_bytes"] == 2 * per_worker + two["memory_launcher_bytes"]
    assert two["memory_launcher_bytes"] > 0 and two["workers"] == 2


def test_workers_are_bounded_by_the_cores(folder, monkeypatch):
    from embedtune import distribute

    monkeypatch.setattr(distribute, "local_cores", lambda: 2)
    args = ["train", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "tuned.txt", "--dry-run"]
    assert run([*args, "--workers", "2"]).exit_code == 0
    result = run([*args, "--workers", "3"])
    assert result.exit_code == 2   # out of range: a usage error
    assert result.stderr.splitlines() == ["Error: --workers must be between 1 and 2 (the CPU cores this process "
                                          "may use; each worker is a process of its own), got 3"]


def test_a_dry_run_with_workers_refuses_what_the_workers_would(folder):
    result = run(["train", folder / "glove.txt", "-", "-o", folder / "tuned.txt", "--workers", "2", "--dry-run"],
                 input="the of and\n")
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "--workers: every worker reads CORPUS, so it must be a file")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_dry_run_fails_on_an_output_that_cannot_be_written(folder):
    result = run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", "/dev/full", "--dry-run"])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "Error: /dev/full: -o: cannot write: No space left on device")
    assert run(["train", folder / "glove.txt", folder / "corpus.txt", "-o", "/dev/null", "--dry-run"]).exit_code == 0


# ---------------------------------------------------------------------------------------------
# what the run decides once


def test_lower_casing_is_decided_once_and_new_words_follow_the_corpus(folder, monkeypatch):
    from collections import Counter

    import numpy as np

    import embedtune.vectors
    from embedtune.config import Config, merge
    from embedtune.run import dry_run
    from embedtune.plan.rows import plan_rows
    from embedtune.vectors import Vectors

    (folder / "new.txt").write_text("Zebu\n", encoding="utf-8")
    calls = []
    decide = embedtune.vectors.is_lowercase_vocabulary
    monkeypatch.setattr(embedtune.vectors, "is_lowercase_vocabulary", lambda v: calls.append(1) or decide(v))
    config = merge(Config(), {"vectors": str(folder / "glove.txt"), "corpus": str(folder / "corpus.txt"),
                              "new_words": str(folder / "new.txt"), "objective": "sgns"})
    assert dry_run(config).description["new"] == 1
    assert len(calls) == 1
    # plan_rows takes the corpus's lower-casing as given (a lower-case vocabulary would say yes)
    words = Vectors(["the", "cat"], np.ones((2, 3), np.float32))
    assert plan_rows(words, Counter({"the": 2}), 2, config, None, lowercase=False)[0] == ["Zebu"]
    assert plan_rows(words, Counter({"the": 2}), 2, config, None)[0] == ["zebu"]


def test_train_init_and_retrofit_follow_one_lower_case_decision(folder, monkeypatch):
    """--lowercase auto is one rule (embedtune.vectors.decide_lowercase), asked once by each command:
    told that GloVe's vocabulary is not lower-case, each keeps the case of what it reads."""
    import embedtune.vectors
    from embedtune.config import Config, merge
    from embedtune.objectives.retrofit import plan_retrofit
    from embedtune.run import dry_run

    calls = []
    monkeypatch.setattr(embedtune.vectors, "is_lowercase_vocabulary", lambda v: calls.append(1) or False)
    paths = {"vectors": str(folder / "glove.txt"), "corpus": str(folder / "corpus.txt")}
    assert dry_run(merge(Config(), {**paths, "objective": "sgns"})).description["lowercase"] is False
    assert len(calls) == 1
    result = run(["init", folder / "glove.txt", folder / "corpus.txt", "-o", folder / "out.txt", "--init", "random",
                  "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["lowercase"] is False and len(calls) == 2
    (folder / "syn.txt").write_text("Big large\nbig huge\n", encoding="utf-8")
    from embedtune.formats import load_vectors

    config = merge(Config(), {**paths, "objective": "retrofit", "lexicon": str(folder / "syn.txt")})
    _, lowercase, _, _ = plan_retrofit(load_vectors(str(folder / "glove.txt")), config)
    assert lowercase is False and len(calls) == 3


def test_the_memory_estimate_counts_the_compiled_readers_kept_ids(folder):
    from embedtune.config import Config, merge
    from embedtune.run import dry_run

    config = merge(Config(), {"vectors": str(folder / "glove.txt"), "corpus": str(folder / "corpus.txt"),
                              "objective": "sgns", "tokenize": "none"})
    d = dry_run(config).description
    lines = [line.split() for line in (folder / "corpus.txt").read_text(encoding="utf-8").splitlines()]
    ids = 4 * sum(map(len, lines)) + 12 * sum(1 for line in lines if line)   # int32 a token; two figures a line
    parts = d["memory_parts_bytes"]
    assert ids < parts["corpus_ids"] < ids + 200 * d["distinct_words"] + 10_000
    assert d["memory_estimate_bytes"] == sum(parts.values())


@pytest.mark.parametrize("method", ["form-context", "context-mean"])
def test_the_new_words_starts_look_the_corpus_words_up_once(monkeypatch, method):
    """The context weights and the context pass both want the corpus's words' rows: one lookup."""
    from embedtune.corpus import Corpus
    from embedtune.newwords.methods import initial_vectors
    from embedtune.words import WordIndex
    from train_fixtures import glove, sample_lines

    vectors = glove(3000)
    corpus = Corpus(sample_lines(60), lowercase=True)
    counts = corpus.count()[0]
    new_words = [w for w, c in counts.items() if c >= 2 and w not in vectors.index][:5]
    looked_up, rows = [], WordIndex.rows

    def counted_rows(self, words):
        words = list(words)
        looked_up.append(words)
        return rows(self, words)

    monkeypatch.setattr(WordIndex, "rows", counted_rows)
    initial_vectors(vectors, corpus, new_words, method=method, counts=counts)
    assert sum(words == list(counts) for words in looked_up) == 1


# ---------------------------------------------------------------------------------------------
# the vectors' words and a sample, not their matrix (issue 48 item 6): a file too large to load gets its answer

OUTLINE_DIM = 8


def write_vectors(path, words, matrix, fmt: str, damaged_from: int | None = None) -> None:
    """``words`` and float32 ``matrix`` in ``fmt``; from row ``damaged_from`` on, values no reader accepts
    (NaN in a binary record, a word where a text line's numbers should be)."""
    import numpy as np

    if fmt == "word2vec-binary":
        rows = matrix.astype("<f4").copy()
        if damaged_from is not None:
            rows[damaged_from:] = np.nan
        path.write_bytes(b"%d %d\n" % rows.shape + b"".join(w.encode() + b" " + r.tobytes() + b"\n"
                                                             for w, r in zip(words, rows)))
        return
    lines = [f"{w} " + " ".join(f"{v:.5f}" if damaged_from is None or i < damaged_from else "oops" for v in row)
             for i, (w, row) in enumerate(zip(words, matrix))]
    head = [f"{len(words)} {matrix.shape[1]}"] if fmt != "glove" else []
    path.write_text("\n".join(head + lines) + "\n", encoding="utf-8")


def clean_and_damaged(tmp_path, fmt: str) -> tuple[list, object, object]:
    """Two files of the sample's rows and 500 more, the same words: clean, and damaged past the sample (rows no
    reader accepts) -> (words, clean, damaged)."""
    import numpy as np

    from embedtune.formats import OUTLINE_SAMPLE_ROWS

    n = OUTLINE_SAMPLE_ROWS + 500
    words = [f"w{i}" for i in range(n)]
    matrix = np.random.default_rng(0).standard_normal((n, OUTLINE_DIM)).astype(np.float32)
    clean, damaged = tmp_path / "clean.vec", tmp_path / "damaged.vec"
    write_vectors(clean, words, matrix, fmt)
    write_vectors(damaged, words, matrix, fmt, damaged_from=OUTLINE_SAMPLE_ROWS)
    return words, clean, damaged


def dry_run_plan(args: list) -> dict:
    """``train ARGS --dry-run --json``'s plan, less the vectors' path."""
    result = run([*args, "--dry-run", "--json"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    del plan["vectors"]
    return plan


@pytest.mark.parametrize("fmt", ["word2vec-binary", "glove", "word2vec"])
def test_a_dry_run_reads_the_words_and_a_sample_not_the_matrix(tmp_path, fmt):
    from embedtune.errors import EmbedtuneError
    from embedtune.formats import load_vectors

    words, clean, damaged = clean_and_damaged(tmp_path, fmt)
    n = len(words)
    with pytest.raises(EmbedtuneError):   # training would load every row, and stop at the first damaged one
        load_vectors(str(damaged), fmt)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(words[::7]) + " newword another w3 w1400\n", encoding="utf-8")

    def described(path):
        return dry_run_plan(["train", path, corpus, "--format", fmt, "-o", tmp_path / "out.txt", "--freeze-top",
                             "300", "--optimizer", "adam"])

    d = described(clean)
    # The same answer from a file whose rows past the sample no reader accepts: their values are never read.
    assert described(damaged) == d
    assert d["rows"] == n and d["dim"] == OUTLINE_DIM and d["frozen"] == 300
    assert d["memory_parts_bytes"]["input_matrix"] == n * OUTLINE_DIM * 4


@pytest.mark.parametrize("fmt", ["word2vec-binary", "glove"])
def test_a_dry_run_checks_the_sample_as_training_reads_it(tmp_path, fmt):
    import numpy as np

    words = [f"w{i}" for i in range(20)]
    matrix = np.ones((20, OUTLINE_DIM), np.float32)
    path = tmp_path / "vectors"
    write_vectors(path, words, matrix, fmt, damaged_from=5)
    (tmp_path / "corpus.txt").write_text("w1 w2 w3\n")
    args = ["train", path, tmp_path / "corpus.txt", "--format", fmt, "-o", tmp_path / "out.txt", "--dry-run"]
    planned, trained = run(args), run(args[:-1])
    assert planned.exit_code == trained.exit_code == 1
    assert_one_error_line(planned.stderr, "record 6" if fmt == "word2vec-binary" else "line 6")
    assert planned.stderr.strip().splitlines()[-1] == trained.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out.txt").exists()


def test_the_outlines_words_are_the_loaded_ones(tmp_path):
    # Every way a text line may hold its word: spaces in it, tabs, a trailing space, CRLF, a BOM, blank
    # lines at the end, a repeated word (kept first); with the sample cut before, inside and after them.
    from embedtune.formats import load_vectors, outline_vectors

    text = ("\ufeffnew york 0.5 1\r\nthe\t1 2\nof 3 4 \nnaïve 5 6\nthe 7 8\na  9 10\n\n\n").encode("utf-8")
    path = tmp_path / "odd.txt"
    path.write_bytes(text)
    loaded = load_vectors(str(path), "glove", keep_first_duplicate=True)
    for sample in (0, 2, 100):
        outline = outline_vectors(str(path), "glove", sample=sample, keep_first_duplicate=True)
        assert list(outline.words) == list(loaded.words) and outline.dim == loaded.dim == 2
        assert outline.sample.tobytes() == loaded.matrix[:len(outline.sample)].tobytes()
        assert len(outline.sample) == min(sample, len(loaded))


@pytest.mark.parametrize("name", ["v.bin", "v.bin.gz"])
def test_a_binary_outline_has_the_loaded_words_and_first_rows(tmp_path, name):
    # Plain or compressed, the records are stepped over through one buffer: words and sample as load's.
    import gzip

    import numpy as np

    from embedtune.formats import load_vectors, outline_vectors

    words = ["the", "naïve", "of", "w3"]
    matrix = np.arange(4 * OUTLINE_DIM, dtype=np.float32).reshape(4, OUTLINE_DIM)
    plain = tmp_path / "v.bin"
    write_vectors(plain, words, matrix, "word2vec-binary")
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(plain.read_bytes()))
    loaded = load_vectors(str(path), "word2vec-binary")
    outline = outline_vectors(str(path), "word2vec-binary", sample=2)
    assert list(outline.words) == list(loaded.words) == words and len(outline) == 4
    assert outline.sample.tobytes() == loaded.matrix[:2].tobytes() and outline.file_bytes == path.stat().st_size


@pytest.mark.parametrize("fmt", ["word2vec-binary", "glove"])
def test_retrofits_dry_run_reads_the_words_and_a_sample_not_the_matrix(tmp_path, fmt):
    """retrofit's dry run plans from the words and the lexicon, as train's does: a file whose rows past the
    sample no reader accepts gets the answer the clean file gets (before: the whole file loaded, and refused)."""
    _, clean, damaged = clean_and_damaged(tmp_path, fmt)
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("w1 w2 w1400\nw3 w1200 unknown\n", encoding="utf-8")

    def described(path):
        return dry_run_plan(["train", path, "--objective", "retrofit", "--lexicon", lexicon, "--format", fmt,
                             "--freeze-top", "2", "-o", tmp_path / "out.txt"])

    d = described(clean)
    assert described(damaged) == d
    assert (d["objective"], d["frozen"], d["lexicon"]["words_not_in_vectors"]) == ("retrofit", 2, 1)
    assert not (tmp_path / "out.txt").exists()
