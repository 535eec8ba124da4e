"""`embedtune train` end to end: click's CliRunner and real subprocesses on GloVe rows and the Lee corpus."""

from __future__ import annotations

import bz2
import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune.cli.main import cli
from embedtune.training.batches import LOSS_EVERY

from train_fixtures import REPO, SAMPLE_CORPUS, SAMPLE_VECTORS, bits, glove, read_text_vectors, write_glove_text

N_WORDS = 5000
FAST = ["--epochs", "1", "--batch-size", "512"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A GloVe text file of the first 5,000 GloVe words, 30 lines of the sample corpus (mixed case)."""
    folder = tmp_path_factory.mktemp("train_cli")
    vectors = folder / "glove.5k.txt"
    write_glove_text(glove(N_WORDS), vectors)
    corpus = folder / "news.txt"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:30]) + "\n", encoding="utf-8")
    return {"vectors": vectors, "corpus": corpus, "input": read_text_vectors(vectors)}


def run(args, input=None):
    """Invoke the command in-process; an unexpected exception fails the test instead of becoming exit 1."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def run_process(args, input=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "embedtune.cli.main", *map(str, args)], input=input,
                          capture_output=True, cwd=cwd, timeout=300)


def read_stdout_vectors(data: bytes, tmp_path):
    path = tmp_path / "stdout.txt"
    path.write_bytes(data)
    return read_text_vectors(path)


def assert_frozen_rows_kept(out, original, n_frozen):
    """The first n_frozen rows: same words, same float32 bits as the input file."""
    assert out.words[: len(original)] == original.words
    np.testing.assert_array_equal(bits(out.matrix[:n_frozen]), bits(original.matrix[:n_frozen]))
    assert not np.array_equal(out.matrix[n_frozen: len(original)], original.matrix[n_frozen:])


def assert_one_error_line(stderr: str, *parts: str):
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr
    assert [line for line in lines if line.startswith("Error:")] == [lines[-1]], stderr
    for part in parts:
        assert part in lines[-1], lines[-1]


# ---------------------------------------------------------------------------------------------
# standard input and output


def test_corpus_from_stdin_and_vectors_to_stdout(files, tmp_path):
    result = run(["train", files["vectors"], "-", "-o", "-", "--freeze-top", 1000, *FAST],
                 input=files["corpus"].read_bytes())
    assert result.exit_code == 0, result.stderr
    out = read_stdout_vectors(result.stdout_bytes, tmp_path)
    assert_frozen_rows_kept(out, files["input"], 1000)
    new = len(out) - N_WORDS
    assert new > 0
    assert f"Plan: 1,000 frozen, 4,000 trainable, {new:,} new rows" in result.stderr
    assert "1,000 frozen rows read back from the output as written: all bit-identical" in result.stderr


def test_a_real_pipeline_with_the_summary_written_to_a_file(files, tmp_path):
    summary = tmp_path / "summary.json"
    result = run_process(["train", files["vectors"], "-", "-o", "-", "--freeze-top", 2000, *FAST,
                          "--json", summary], input=files["corpus"].read_bytes())
    assert result.returncode == 0, result.stderr.decode()
    out = read_stdout_vectors(result.stdout, tmp_path)
    assert_frozen_rows_kept(out, files["input"], 2000)
    s = json.loads(summary.read_text())
    assert (s["frozen"], s["trainable"], s["new"]) == (2000, 3000, len(out) - N_WORDS)
    assert s["max_frozen_change"] == 0.0 and s["corpus"] == "-" and s["output"] == "-"
    assert s["loss_first"] > 0 and s["epochs"] == 1


def test_json_summary_on_stdout_when_the_vectors_go_to_a_file(files, tmp_path):
    output = tmp_path / "tuned.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--freeze-pretrained", *FAST, "--json"])
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    assert (s["frozen"], s["trainable"]) == (N_WORDS, 0) and s["new"] > 0
    assert s["max_frozen_change"] == 0.0 and s["lowercase"] is True
    assert (s["objective"], s["optimizer"]) == ("glove", "adagrad")   # GloVe input: --objective auto is glove
    out = read_text_vectors(output)
    assert len(out) == N_WORDS + s["new"]
    np.testing.assert_array_equal(bits(out.matrix[:N_WORDS]), bits(files["input"].matrix))
    assert f"Wrote {len(out):,} vectors to {output}" in result.stderr


def test_json_to_stdout_with_vectors_on_stdout_is_an_error(files, tmp_path):
    result = run(["train", files["vectors"], files["corpus"], "-o", "-", *FAST, "--json"])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result.stderr, "give --json FILE")


@pytest.mark.parametrize("compress, suffix", [(gzip.open, ".gz"), (bz2.open, ".bz2")], ids=["gz", "bz2"])
def test_a_compressed_corpus_is_read_like_the_plain_one(files, tmp_path, compress, suffix):
    packed = tmp_path / ("news.txt" + suffix)
    with compress(packed, "wb") as f:
        f.write(files["corpus"].read_bytes())
    result = run(["train", files["vectors"], packed, "-o", tmp_path / "out.txt", "--freeze-top", 1000, *FAST,
                  "--json", "--tokenize", "none"])   # whitespace tokens: counted below with split()
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    lines = files["corpus"].read_text(encoding="utf-8").splitlines()
    assert s["corpus_lines"] == len(lines) and s["corpus_words"] == sum(len(line.split()) for line in lines)
    assert s["new"] == len(read_text_vectors(tmp_path / "out.txt")) - N_WORDS > 0


# ---------------------------------------------------------------------------------------------
# lists, case, config


def test_list_words_missing_from_the_vocabulary_are_noted(files, tmp_path):
    words = tmp_path / "train-words.txt"
    words.write_text("police\nzzabsent1\nfire\nzzabsent2\n", encoding="utf-8")
    output = tmp_path / "out.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--train-list", words, *FAST, "--json"])
    assert result.exit_code == 0, result.stderr
    assert f"Note: 2 words of {words} are not in the vocabulary (first: zzabsent1, zzabsent2)" in result.stderr
    s = json.loads(result.stdout)
    assert s["missing_list_words"] == {str(words): {"count": 2, "first": ["zzabsent1", "zzabsent2"]}}
    assert s["trainable"] == 2 and s["frozen"] == N_WORDS - 2


def test_strict_lists_make_a_missing_word_an_error_and_write_nothing(files, tmp_path):
    words = tmp_path / "freeze-words.txt"
    words.write_text("police\nzzabsent1\n", encoding="utf-8")
    output = tmp_path / "out.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--freeze-list", words,
                  "--strict-lists", *FAST])
    assert result.exit_code == 1 and result.stdout == ""
    assert_one_error_line(result.stderr, f"Error: {words} line 2: 'zzabsent1' is not in the vocabulary")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["freeze-words.txt"]


def test_the_corpus_follows_the_case_of_the_vectors_unless_told(files, tmp_path):
    auto = run(["train", files["vectors"], files["corpus"], "-o", "-", "--freeze-pretrained", *FAST])
    kept = run(["train", files["vectors"], files["corpus"], "-o", "-", "--freeze-pretrained", *FAST,
                "--lowercase", "no"])
    auto_words = read_stdout_vectors(auto.stdout_bytes, tmp_path).words[N_WORDS:]
    kept_words = read_stdout_vectors(kept.stdout_bytes, tmp_path).words[N_WORDS:]
    assert all(w == w.lower() for w in auto_words)
    assert "The" in kept_words and "The" not in auto_words


def test_options_override_the_config_file(files, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(
        f'vectors = "{files["vectors"]}"\ncorpus = "{files["corpus"]}"\noutput = "{tmp_path / "from-config.txt"}"\n'
        '[vocab]\nfreeze_top = 3000\n[train]\nepochs = 3\noptimizer = "adagrad"\nbatch_size = 512\n',
        encoding="utf-8")
    output = tmp_path / "from-options.txt"
    result = run(["train", "--config", config, "-o", output, "--freeze-top", 500, "--epochs", 1, "--json"])
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    assert (s["frozen"], s["epochs"], s["optimizer"]) == (500, 1, "adagrad")
    assert output.exists() and not (tmp_path / "from-config.txt").exists()


def test_a_config_error_names_the_key_and_the_file(files, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[train]\nepoch = 3\n", encoding="utf-8")
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", "--config", config])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, f"Error: {config}: unknown key 'train.epoch'")
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------------------------------------
# bad input: one line, non-zero exit, nothing written, input untouched


@pytest.mark.parametrize("options, parts, code", [   # out of range: a usage error, 2 (docs/ci.md)
    (["--window", "0"], ["--window", "must be at least 1, got 0"], 2),
    (["--epochs", "0"], ["--epochs", "must be at least 1, got 0"], 2),
    (["--lr", "-0.5"], ["--lr", "must be positive, got -0.5"], 2),
    (["--clip-norm", "-1"], ["--clip-norm", "got -1"], 2),
    # a usage error, as an empty pattern is (issue 45: checked by the key's declaration with the other values)
    (["--freeze-pattern", "(unclosed"], ["--freeze-pattern", "not a valid regular expression"], 2),
    (["--dim", "300"], ["50 dimensions", "300"], 1),
])
def test_bad_values_are_one_line_errors_and_leave_the_output_alone(files, tmp_path, options, parts, code):
    output = tmp_path / "out.txt"
    output.write_text("previous result\n")
    result = run(["train", files["vectors"], files["corpus"], "-o", output, *FAST, *options])
    assert result.exit_code == code and result.stdout == ""
    assert_one_error_line(result.stderr, *parts)
    assert output.read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_freeze_rule_on_a_new_word_stops_before_anything_is_written(files, tmp_path):
    output = tmp_path / "out.txt"
    # --tokenize none keeps raw tokens such as "said." as new words, which the pattern matches
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--freeze-pattern", "[.,]$", *FAST,
                  "--tokenize", "none"])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "a new word cannot be frozen")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_corpus_is_a_one_line_error(files, tmp_path):
    result = run(["train", files["vectors"], tmp_path / "nope.txt", "-o", tmp_path / "out.txt", *FAST])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, f"Error: {tmp_path / 'nope.txt'}: no such corpus file")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_vectors_file_is_a_one_line_error_naming_it(files, tmp_path):
    result = run(["train", tmp_path / "nope.txt", files["corpus"], "-o", tmp_path / "out.txt", *FAST])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, str(tmp_path / "nope.txt"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, parts", [
    (["--optimizer", "rmsprop"], ["Invalid value for '--optimizer'", "rmsprop"]),
    (["--window", "five"], ["Invalid value for '--window'", "five"]),
])
def test_option_syntax_errors_are_usage_errors(files, tmp_path, args, parts):
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", *args])
    assert result.exit_code == 2
    assert_one_error_line(result.stderr, *parts)


@pytest.mark.parametrize("drop, missing", [("-o", "OUTPUT"), ("corpus", "CORPUS")])
def test_a_missing_argument_is_a_usage_error(files, tmp_path, drop, missing):
    args = {"vectors": [files["vectors"]], "corpus": [files["corpus"]], "-o": ["-o", tmp_path / "out.txt"]}
    result = run(["train", *[a for key, part in args.items() if key != drop for a in part]])
    assert result.exit_code == 2
    assert_one_error_line(result.stderr, f"missing {missing}")


def test_an_output_over_an_input_is_refused(files):
    before = files["corpus"].read_bytes()
    result = run(["train", files["vectors"], files["corpus"], "-o", files["corpus"]])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "output would overwrite an input")
    assert files["corpus"].read_bytes() == before


def test_vectors_and_corpus_cannot_both_be_stdin():
    result = run(["train", "-", "-", "-o", "out.txt"], input=b"")
    assert result.exit_code == 2   # a usage error
    assert_one_error_line(result.stderr, "cannot both be standard input")


# ---------------------------------------------------------------------------------------------
# help, and what it imports


def test_train_help_gives_the_rules_and_an_example():
    result = run(["train", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "freeze rules win over train rules" in text
    assert "embedtune train --config configs/quickstart.toml" in text
    for option in ("--freeze-list", "--train-list", "--freeze-top", "--freeze-pattern", "--train-pattern",
                   "--freeze-pretrained", "--strict-lists", "--optimizer", "--clip-norm", "--json"):
        assert option in text


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"]])
def test_help_does_not_import_tensorflow(args):
    code = ("import sys\nfrom embedtune.cli.main import cli\n"
            f"try:\n    cli({args!r}, prog_name='embedtune')\nexcept SystemExit as exit:\n    assert exit.code == 0\n"
            "print('tensorflow' in sys.modules, file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "False"


def test_scipy_sparse_is_imported_beside_the_count_not_with_the_command():
    """scipy.sparse (the new words' spelling fit; glove's pair counts, retrofit) is not among the command's
    modules, imported one after another before anything runs: the run imports it on its import thread while
    the corpus is counted (embedtune.run.count_while_importing)."""
    code = ("import sys\nfrom embedtune.cli.main import cli\n"
            "try:\n    cli(['train', '--help'], prog_name='embedtune')\n"
            "except SystemExit as exit:\n    assert exit.code == 0\n"
            "print('scipy.sparse' in sys.modules, file=sys.stderr)\n"
            "from embedtune.corpus import Corpus\nfrom embedtune.run import count_while_importing\n"
            f"with Corpus({str(SAMPLE_CORPUS)!r}) as corpus:\n"
            "    count_while_importing(corpus, freeze=False, tensorflow=False)\n"
            "print('scipy.sparse' in sys.modules, file=sys.stderr)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-2:] == ["False", "True"]


# ---------------------------------------------------------------------------------------------
# the README's first command


def test_the_quickstart_config_runs_from_the_repository_root(tmp_path, monkeypatch):
    assert SAMPLE_VECTORS.is_file(), f"{SAMPLE_VECTORS} is missing"
    output, summary = tmp_path / "quickstart-out.txt", tmp_path / "summary.json"
    default_output = REPO / "quickstart-out.txt"
    default_before = default_output.stat().st_mtime_ns if default_output.exists() else None
    # One epoch instead of the config's five keeps the suite fast; the rest is the README's command.
    monkeypatch.chdir(REPO)
    result = run(["train", "--config", "configs/quickstart.toml", "--epochs", 1, "-o", output, "--json", summary])
    assert result.exit_code == 0, result.stderr
    assert (default_output.stat().st_mtime_ns if default_output.exists() else None) == default_before
    s = json.loads(summary.read_text())
    assert (s["frozen"], s["trainable"]) == (5000, 15000) and s["new"] > 0 and s["max_frozen_change"] == 0.0
    original, out = read_text_vectors(SAMPLE_VECTORS), read_text_vectors(output)
    assert len(out) == 20000 + s["new"]
    assert_frozen_rows_kept(out, original, 5000)


# ---------------------------------------------------------------------------------------------
# limits for CI: --max-steps, --max-words (issue 10, item 2)


def test_max_steps_stops_there_and_writes_a_finished_output(files, tmp_path):
    output, summary = tmp_path / "out.txt", tmp_path / "summary.json"
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--freeze-top", 1000,
                  "--batch-size", 256, "--epochs", 3, "--max-steps", 7, "--json", summary])
    assert result.exit_code == 0, result.stderr
    s = json.loads(summary.read_text())
    assert s["steps"] == 7 and s["stopped_at_limit"] == "max_steps"
    assert 0 < s["words_done"] < s["corpus_words"] * 3
    assert len(s["loss_history"]) == 1 + (7 - 1) // LOSS_EVERY   # and one at the stop
    assert "stopped at --max-steps 7" in result.stderr
    out = read_text_vectors(output)
    assert len(out) == N_WORDS + s["new"]
    assert_frozen_rows_kept(out, files["input"], 1000)
    assert s["max_frozen_change"] == 0.0


def test_max_words_stops_after_that_many_corpus_words(files, tmp_path):
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", "--objective", "sgns",
                  "--batch-size", 64, "--epochs", 2, "--max-words", 300, "--json"])
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    assert s["stopped_at_limit"] == "max_words"
    assert 300 <= s["words_done"] < s["corpus_words"]
    full = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "full.txt", "--objective", "sgns",
                "--batch-size", 64, "--epochs", 2, "--json"])
    assert json.loads(full.stdout)["steps"] > s["steps"]
    assert json.loads(full.stdout)["stopped_at_limit"] is None


def test_limits_come_from_the_config_file_too(files, tmp_path):
    config = tmp_path / "ci.toml"
    config.write_text(f'vectors = "{files["vectors"]}"\ncorpus = "{files["corpus"]}"\n'
                      f'output = "{tmp_path / "out.txt"}"\n[train]\nmax_steps = 3\nbatch_size = 128\n')
    result = run(["train", "--config", config, "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["steps"] == 3


# ---------------------------------------------------------------------------------------------
# TensorBoard scalars (issue 10, item 4)


def read_scalars(logdir):
    """{tag: [(step, value)]} from every event file under logdir."""
    from embedtune._tf import tf

    scalars = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars"
                scalars.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def test_logdir_holds_tensorboard_scalars_at_the_loss_points(files, tmp_path):
    logdir = tmp_path / "logs" / "run1"   # made, with its parent
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", "--freeze-top", 1000,
                  "--objective", "sgns", "--batch-size", 128, "--max-steps", 50, "--logdir", logdir, "--json"])
    assert result.exit_code == 0, result.stderr
    s = json.loads(result.stdout)
    scalars = read_scalars(logdir)
    assert set(scalars) == {"train/loss", "train/words_per_second", "train/learning_rate",
                            "rows/mean_change_trainable", "rows/mean_change_new"}
    # Written where the loss is read: every LOSS_EVERY steps and at the stop.
    points = list(range(LOSS_EVERY, 50, LOSS_EVERY)) + [50]
    assert [step for step, _ in scalars["train/loss"]] == points
    assert [value for _, value in scalars["train/loss"]] == pytest.approx(s["loss_history"])
    lrs = [value for _, value in scalars["train/learning_rate"]]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] <= s["lr"]
    changes = [value for _, value in scalars["rows/mean_change_trainable"]]
    assert 0 < changes[0] <= changes[-1]
    assert all(value > 0 for _, value in scalars["train/words_per_second"])


def test_a_frozen_row_changed_on_its_way_to_the_file_is_an_error(files, tmp_path, monkeypatch):
    """Issue 11.10: the check reads the frozen rows back from the bytes written, so a fault in writing
    (here: the formatter prints one frozen value wrong) is caught, not reported as 'no change'."""
    import embedtune.formats.text.write as textwrite

    render, copied = textwrite._render_lines, textwrite.RenderedAhead.lines

    def wrong_first_value(words, rows, digits_hint=0, compiled=True):
        data, digits = render(words, rows, digits_hint, compiled)
        return data.replace(b"the 0.418 ", b"the 0.419 ", 1), digits

    def wrong_copied_value(self, *args):
        # the run's output is rendered ahead, and its unchanged lines copied from the input (verbatim.py)
        made = copied(self, *args)
        return None if made is None else (made[0].replace(b"the 0.418 ", b"the 0.419 ", 1), made[1])

    monkeypatch.setattr(textwrite, "_render_lines", wrong_first_value)
    monkeypatch.setattr(textwrite.RenderedAhead, "lines", wrong_copied_value)
    output = tmp_path / "out.txt"
    result = run(["train", files["vectors"], files["corpus"], "-o", output, "--freeze-top", 1000, *FAST])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, str(output), "1 frozen row would be written changed (largest change 0.001)")
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_a_corpus_error_found_while_tensorflow_imports_reaches_the_terminal(files, tmp_path):
    """The corpus is counted while TensorFlow imports on a thread, and TensorFlow's import points fd 2
    at a sink: an error in the count must wait for the import and be printed after it, on the real
    stderr (a subprocess: CliRunner would not see fd 2), as one line naming the file and the line."""
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"the mat\n" * 200000 + b"the \xff dog\n")   # found a fraction of a second in
    output = tmp_path / "out.txt"
    # TensorFlow's import made 3 s longer, inside the sink (an import hook that waits), so the count's
    # error surely comes while it lasts
    code = ("import sys, time\n"
            "class Slow:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'tensorflow':\n"
            "            time.sleep(3)\n"
            "sys.meta_path.insert(0, Slow())\n"
            "from embedtune.cli.main import main\n"
            "sys.argv[0] = 'embedtune'\n"
            "sys.exit(main())\n")
    result = subprocess.run([sys.executable, "-c", code, "train", str(files["vectors"]), str(corpus), "-o", str(output),
                             *FAST], capture_output=True, timeout=300)
    assert result.returncode == 1
    assert_one_error_line(result.stderr.decode(), str(corpus), "line 200001", "not valid UTF-8")
    assert not output.exists()


def test_the_corpus_is_counted_once(files, tmp_path, monkeypatch):
    """The command counts the corpus (while TensorFlow imports) and train() finds the count made:
    one pass over the file for the counts, the same output as before."""
    from embedtune.corpus import Corpus

    passes = []
    count = Corpus.count

    def counted(self, *args):   # args: the progress's advance, when the command counts
        if self._counted is None:
            passes.append(self.path)
        return count(self, *args)

    monkeypatch.setattr(Corpus, "count", counted)
    result = run(["train", files["vectors"], files["corpus"], "-o", tmp_path / "out.txt", *FAST])
    assert result.exit_code == 0, result.output
    assert passes == [str(files["corpus"])]


def test_count_while_importing_runs_no_collection_and_freezes_what_it_made():
    """The corpus count and TensorFlow's import run without Python's cyclic collector (its full
    collections re-scanned the growing heap and found nothing to free), which is on again after, with
    what they made frozen out of later collections."""
    import gc

    from embedtune.run import count_while_importing
    from embedtune.corpus import Corpus

    collections = []

    def seen(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.unfreeze()
    gc.callbacks.append(seen)
    try:
        with Corpus(str(REPO / "data" / "sample" / "wordnet-glosses.train.txt"), lowercase=True) as corpus:
            count_while_importing(corpus)
            assert corpus.counted
        assert collections == [] and gc.isenabled() and gc.get_freeze_count() > 0
    finally:
        gc.callbacks.remove(seen)
        gc.unfreeze()


def test_the_command_names_no_objective():
    """`embedtune train` is options -> embedtune.run -> messages: what differs by objective is the
    objective's to say (Objective's run hooks), so cli/ has no branch on a name."""
    source = (REPO / "cli" / "train_cmd.py").read_text(encoding="utf-8")
    body = source[source.index("def train_cmd("):]
    common = (REPO / "cli" / "common.py").read_text(encoding="utf-8")
    for name in ("sgns", "glove", "retrofit", "classify"):
        assert f'"{name}"' not in body and f'"{name}"' not in common, name


def test_between_two_set_up_phases_a_bar_of_the_elapsed_time_is_drawn(monkeypatch, capsys):
    # Issue 48.7: after the vectors' read, work no phase counts (checks, the words' choice) took 3 s at 220k rows
    # and load 15, silent; a message then goes above the bar, not onto its line.
    import time

    from embedtune.cli import common, train_cmd
    from embedtune.phases import Phase

    monkeypatch.setattr(train_cmd, "show_progress", lambda: True)
    monkeypatch.setattr(common, "REDRAW_EVERY", 0.1)
    bar = train_cmd.ProgressBar()
    try:
        bar.show_phase(Phase("reading v.txt", 0, 100, "B"))
        bar.show_phase(Phase("reading v.txt", 100, 100, "B", finished=True))
        capsys.readouterr()
        time.sleep(1.6)   # past the bar's delay of a second
        drawn = capsys.readouterr().err
        assert drawn.count("working [00:01]") >= 2, drawn
        common.message("Plan: 1 frozen")
        assert "\rPlan: 1 frozen\n" in capsys.readouterr().err   # the bar's line cleared first
    finally:
        bar.close()
