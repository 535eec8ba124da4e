"""The bad-input catalogue (issue 5): each case runs the real `embedtune train` on a small folder.

Every case must give exactly one `Error:` line naming the file (and the line, where there is
one) or the option at fault, a non-zero exit code and nothing on standard output; afterwards
the folder holds the very files it held before, byte for byte and with the same mtimes: no
output, no temporary file, no checkpoint folder, no input rewritten.

The files are tiny (the first 200 rows of the GloVe sample, a few corpus lines) so that the
cases which do reach training stay fast; one case, a 200 MB corpus line, runs in a process
of its own to measure its peak memory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_cli_train import assert_one_error_line, run
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

N_WORDS = 200
GLOVE_LINES = SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:N_WORDS]
VOCABULARY = [line.split(b" ", 1)[0].decode("utf-8") for line in GLOVE_LINES]
# Sample lines cut down to vocabulary words: the corpus brings no new word, so freezing
# every row leaves nothing to train.
CORPUS_LINES = [" ".join(w for w in line.lower().split() if w in frozenset(VOCABULARY))
                for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:5]]
FAST = ["--epochs", "1", "--batch-size", "512"]


class Folder:
    """A case's folder: the vectors file, the corpus, and where the output would go."""

    def __init__(self, path: Path):
        self.path = path
        self.vectors = self.path / "glove.txt"
        self.corpus = self.path / "corpus.txt"
        self.output = self.path / "tuned.txt"
        self.vectors.write_bytes(b"".join(GLOVE_LINES))
        self.corpus.write_text("\n".join(CORPUS_LINES) + "\n", encoding="utf-8")

    def file(self, name: str, data: str | bytes) -> Path:
        path = self.path / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    def args(self, *options, vectors=None, corpus=None, output=None) -> list:
        return ["train", self.vectors if vectors is None else vectors, self.corpus if corpus is None else corpus,
                "-o", self.output if output is None else output, *FAST, *options]

    def glove_with_line(self, number: int, line: bytes) -> Path:
        """The vectors file with line ``number`` (1-based) replaced."""
        lines = list(GLOVE_LINES)
        lines[number - 1] = line.rstrip(b"\n") + b"\n"
        return self.file("glove.txt", b"".join(lines))


def glove_line(number: int) -> bytes:
    return GLOVE_LINES[number - 1].rstrip(b"\n")


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too): relative path -> (sha256, mtime in ns)."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(root) / name
            if path.is_dir():
                files[str(path.relative_to(folder))] = "folder"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                files[str(path.relative_to(folder))] = (digest, path.stat().st_mtime_ns)
    return files


# ---------------------------------------------------------------------------------------------
# the cases: each takes a Folder, may write files into it, and returns the command's arguments
# and what the error line must say: its start (``Error: FILE line N:``), then any parts it must
# contain.

CASES = []


def case(name, bug=None):
    """Register a case; ``bug`` (what happens now) marks it as a known failure until it is fixed."""
    marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []

    def register(build):
        CASES.append(pytest.param(build, id=name, marks=marks))
        return build
    return register


# -- vector files


@case("vectors-missing")
def _(f):
    missing = f.path / "glove.6B.50d.txt"
    return f.args(vectors=missing), [f"Error: {missing}: no such file"]


@case("vectors-empty")
def _(f):
    f.file("glove.txt", b"")
    return f.args(), [f"Error: {f.vectors} line 1: empty file"]


@case("vectors-is-a-folder")
def _(f):
    folder = f.path / "vectors"
    folder.mkdir()
    return f.args(vectors=folder), [f"Error: {folder}: is a folder"]


@case("vectors-a-line-with-49-values")
def _(f):
    f.glove_with_line(7, glove_line(7).rsplit(b" ", 1)[0])
    return f.args(), [f"Error: {f.vectors} line 7:", "49", "50"]


@case("vectors-non-numeric-value")
def _(f):
    word, *values = glove_line(3).split(b" ")
    values[10] = b"0.1x5"
    f.glove_with_line(3, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 3:", "0.1x5"]


@case("vectors-nan")
def _(f):
    word, *values = glove_line(5).split(b" ")
    values[2] = b"nan"
    f.glove_with_line(5, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 5:", "value 3 is nan"]


@case("vectors-duplicate-word")
def _(f):
    word, rest = glove_line(9).split(b" ", 1)
    f.glove_with_line(9, glove_line(2).split(b" ", 1)[0] + b" " + rest)
    return f.args(), [f"Error: {f.vectors} line 9:", "duplicate word", "line 2"]


@case("vectors-bad-utf8-word")
def _(f):
    f.glove_with_line(4, b"caf\xe9 " + glove_line(4).split(b" ", 1)[1])
    return f.args(), [f"Error: {f.vectors} line 4:", "UTF-8"]


@case("vectors-word2vec-header-says-more-rows")
def _(f):
    f.file("glove.txt", f"{N_WORDS + 1} 50\n".encode() + b"".join(GLOVE_LINES))
    return f.args(), [f"Error: {f.vectors} line {N_WORDS + 2}:", f"expected {N_WORDS + 1}", f"got {N_WORDS}"]


@case("vectors-truncated-binary")
def _(f):
    from gensim.models import KeyedVectors

    # Written by gensim, not embedtune, then cut 100 bytes into the last record's 200-byte vector.
    kv = KeyedVectors.load_word2vec_format(str(f.vectors), binary=False, no_header=True)
    binary = f.path / "glove.bin"
    kv.save_word2vec_format(str(binary), binary=True)
    binary.write_bytes(binary.read_bytes()[:-100])
    f.vectors.unlink()
    return f.args(vectors=binary), [f"Error: {binary}: record {N_WORDS}:", "ends inside the record"]


@case("vectors-dimension-differs-from-dim")
def _(f):
    return f.args("--dim", "300"), [f"Error: {f.vectors}:", "50 dimensions", "300"]


# -- corpora


@case("corpus-empty")
def _(f):
    f.file("corpus.txt", b"")
    return f.args(), [f"Error: {f.corpus}: the corpus has no words"]


@case("corpus-blank-lines-only")
def _(f):
    f.file("corpus.txt", b"\n \n\t\r\n\n")
    return f.args(), [f"Error: {f.corpus}: the corpus has no words"]


@case("corpus-no-word-of-the-vocabulary")
def _(f):
    # Unknown words, each fewer than --min-count (5) times: neither a known row nor a new one.
    f.file("corpus.txt", "zzqa zzqb zzqc zzqd\nzzqb zzqe zzqa\n" * 2)
    return f.args(), [f"Error: {f.corpus}:"]


@case("corpus-binary-junk")
def _(f):
    f.file("corpus.txt", bytes(range(256)) * 64)
    return f.args(), [f"Error: {f.corpus} line 1:"]


@case("corpus-bad-utf8-on-line-3")
def _(f):
    f.file("corpus.txt", "the year\nof the\n".encode() + b"caf\xe9 the\n")
    return f.args(), [f"Error: {f.corpus} line 3:", "UTF-8"]


def long_line(megabytes: float) -> bytes:
    """Unknown words (zz0000qqq ...) on one line of about ``megabytes`` MB, no newline."""
    words = (" ".join(f"zz{i:04d}" + "q" * 93 for i in range(2000)) + " ").encode("ascii")
    return (words * (int(megabytes * 2**20) // len(words) + 1))[: int(megabytes * 2**20)].rstrip() + b" "


@case("corpus-bad-utf8-3-mb-into-a-line")
def _(f):
    line = long_line(3)
    f.file("corpus.txt", line + b"caf\xe9 the\n")
    # bytes are counted from 1, as the vectors reader counts columns: the 4th byte of "caf\xe9"
    return f.args(), [f"Error: {f.corpus} line 1:", "UTF-8", f"byte {len(line) + 4}"]


@case("corpus-bad-utf8-on-the-line-after-a-3-mb-line")
def _(f):
    f.file("corpus.txt", long_line(3) + b"\nthe of\ncaf\xe9 the\n")
    return f.args(), [f"Error: {f.corpus} line 3:", "UTF-8"]


@case("corpus-a-5-mb-token")
def _(f):
    f.file("corpus.txt", b"the of " + b"q" * (5 << 20) + b" the\n")
    return f.args(), [f"Error: {f.corpus} line 1:", "token"]


@case("corpus-missing")
def _(f):
    missing = f.path / "news.txt"
    return f.args(corpus=missing), [f"Error: {missing}: no such corpus file"]


@case("corpus-is-a-folder")
def _(f):
    folder = f.path / "news"
    folder.mkdir()
    return f.args(corpus=folder), [f"Error: {folder}: is a folder"]


@case("corpus-truncated-gzip")
def _(f):
    packed = gzip.compress(("\n".join(CORPUS_LINES) + "\n").encode() * 20)
    corpus = f.file("corpus.txt.gz", packed[: len(packed) // 2])
    return f.args(corpus=corpus), [f"Error: {corpus}:"]


# -- freeze and train lists


@case("freeze-list-freezes-everything")
def _(f):
    frozen = f.file("frozen.txt", "\n".join(VOCABULARY) + "\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen}", "nothing to train"]


@case("freeze-pretrained-and-no-new-word")
def _(f):
    return f.args("--freeze-pretrained"), ["Error: ", "nothing to train"]


@case("freeze-list-missing")
def _(f):
    missing = f.path / "frozen.txt"
    return f.args("--freeze-list", missing), [f"Error: {missing}: no such word-list file"]


@case("train-list-missing")
def _(f):
    missing = f.path / "train-words.txt"
    return f.args("--train-list", missing), [f"Error: {missing}: no such word-list file"]


@case("freeze-list-names-a-new-word")
def _(f):
    f.file("corpus.txt", "\n".join(CORPUS_LINES + ["the zzfresh of"] * 6) + "\n")
    frozen = f.file("frozen.txt", "the\nzzfresh\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen} line 2:", "'zzfresh'", "new word"]


@case("freeze-list-bad-utf8")
def _(f):
    frozen = f.file("frozen.txt", b"the\ncaf\xe9\n")
    return f.args("--freeze-list", frozen), [f"Error: {frozen} line 2:", "UTF-8"]


@case("freeze-pattern-invalid-regex")
def _(f):
    return f.args("--freeze-pattern", "^(the"), ["Error: ", "freeze", "pattern", "not a valid regular expression"]


# -- config files


def config_case(text):
    def build(f):
        config = f.file("run.toml", textwrap.dedent(text).lstrip())
        return f.args("--config", config), config
    return build


@case("config-not-toml")
def _(f):
    args, config = config_case("[train]\nepochs = = 3\n")(f)
    return args, [f"Error: {config}: not valid TOML", "line 2"]


@case("config-unknown-key")
def _(f):
    args, config = config_case("[train]\nlearning_rate = 0.1\n")(f)
    return args, [f"Error: {config}: unknown key 'train.learning_rate'"]


@case("config-unknown-table")
def _(f):
    args, config = config_case("[vocabulary]\nfreeze_top = 10\n")(f)
    return args, [f"Error: {config}: unknown key 'vocabulary'"]


@case("config-wrong-type")
def _(f):
    args, config = config_case('[train]\nepochs = "3"\n')(f)
    return args, [f"Error: {config}: key 'train.epochs' must be an integer, got '3'"]


@case("config-negative-learning-rate")
def _(f):
    args, config = config_case("[train]\nlr = -0.025\n")(f)
    return args, [f"Error: {config}: 'train.lr' must be positive, got -0.025"]


@case("config-window-0")
def _(f):
    args, config = config_case("[train]\nwindow = 0\n")(f)
    return args, [f"Error: {config}: 'train.window' must be at least 1, got 0"]


@case("config-unknown-optimizer")
def _(f):
    args, config = config_case('[train]\noptimizer = "rmsprop"\n')(f)
    return args, [f"Error: {config}: 'train.optimizer' must be one of sgd, adagrad, adam, got 'rmsprop'"]


@case("config-unknown-objective")
def _(f):
    args, config = config_case('[train]\nobjective = "cbow"\n')(f)
    return args, [f"Error: {config}: 'train.objective' must be one of auto, sgns, glove, retrofit, classify, got 'cbow'"]


@case("config-x-max-0")
def _(f):
    args, config = config_case("[train]\nx_max = 0\n")(f)
    return args, [f"Error: {config}: 'train.x_max' must be positive, got 0.0"]


@case("config-missing")
def _(f):
    missing = f.path / "run.toml"
    return f.args("--config", missing), [f"Error: {missing}: no such config file"]


# -- options


@case("epochs-0")
def _(f):
    return f.args("--epochs", "0"), ["Error: --epochs must be at least 1, got 0"]


@case("negative-0")
def _(f):
    return f.args("--negative", "0"), ["Error: --negative must be at least 1, got 0"]


@case("batch-size-0")
def _(f):
    return f.args("--batch-size", "0"), ["Error: --batch-size must be at least 1, got 0"]


@case("resume-without-checkpoint-dir")
def _(f):
    return f.args("--resume"), ["Error: ", "--resume needs --checkpoint-dir"]


@case("resume-from-a-folder-that-does-not-exist")
def _(f):
    folder = f.path / "checkpoints"   # never created: resuming must not create it either
    return f.args("--checkpoint-dir", folder, "--resume"), [f"Error: {folder}:", "no such folder"]


@case("resume-without-a-checkpoint")
def _(f):
    folder = f.path / "checkpoints"
    folder.mkdir()
    return f.args("--checkpoint-dir", folder, "--resume"), [f"Error: {folder}:", "no checkpoint"]


@case("batch-size-10-to-the-12")
def _(f):
    return f.args("--batch-size", str(10**12)), ["Error: --batch-size must be at most 1,048,576, got 1000000000000"]


@case("batch-size-written-1e12")
def _(f):
    return f.args("--batch-size", "1e12"), ["Error: ", "--batch-size", "'1e12' is not a valid integer"]


@case("seed-negative")
def _(f):
    return f.args("--seed", "-1"), ["Error: --seed must be 0 or positive, got -1"]


@case("lr-nan")
def _(f):
    return f.args("--lr", "nan"), ["Error: --lr must be a finite number, got nan"]


@case("lr-beyond-float32")
def _(f):
    return f.args("--lr", "1e39"), ["Error: --lr is beyond float32's range", "1e+39"]


@case("window-1000")
def _(f):
    return f.args("--window", "1000"), ["Error: --window must be at most 100, got 1000"]


@case("config-seed-beyond-range")
def _(f):
    args, config = config_case("[train]\nseed = 99999999999\n")(f)
    return args, [f"Error: {config}: 'train.seed' must be at most 4,294,967,295, got 99999999999"]


@case("config-sample-inf")
def _(f):
    args, config = config_case("[train]\nsample = inf\n")(f)
    return args, [f"Error: {config}: 'train.sample' must be a finite number, got inf"]


@case("config-unknown-format")
def _(f):
    args, config = config_case('format = "bogus"\n')(f)
    return args, [f"Error: {config}: 'format' must be one of word2vec, word2vec-binary, glove, fasttext, fasttext-model, got 'bogus'"]


@case("config-is-a-folder")
def _(f):
    folder = f.path / "configs"
    folder.mkdir()
    return f.args("--config", folder), ["Error: ", "--config", "is a folder"]


@case("checkpoint-dir-is-a-device")
def _(f):
    return f.args("--checkpoint-dir", "/dev/null"), ["Error: /dev/null: --checkpoint-dir: not a folder"]


@case("corpus-xz-compressed")
def _(f):
    import lzma

    corpus = f.file("corpus.txt.xz", lzma.compress(f.corpus.read_bytes()))
    return f.args(corpus=corpus), [f"Error: {corpus}: is xz-compressed"]


@case("vectors-value-beyond-float32")
def _(f):
    word, *values = glove_line(6).split(b" ")
    values[4] = b"1e39"
    f.glove_with_line(6, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 6: value 5 is 1e39, beyond float32's range"]


@case("learning-rate-so-large-that-training-diverges")
def _(f):
    # Rows become NaN: a file that `embedtune train` itself refuses to read must not be written.
    return f.args("--lr", "1e30"), ["Error: ", "--lr"]


@case("checkpoint-dir-is-a-file")
def _(f):
    return f.args("--checkpoint-dir", f.corpus), ["Error: ", "--checkpoint-dir", str(f.corpus)]


@case("unknown-output-format")
def _(f):
    return f.args("--to", "xml"), ["Error: --to: unknown format 'xml'"]


@case("unknown-input-format")
def _(f):
    return f.args("--format", "glove-binary"), ["Error: --format: unknown format 'glove-binary'"]


# -- outputs


@case("output-on-a-full-disk")
def _(f):
    return f.args(output="/dev/full"), ["Error: /dev/full: -o: cannot write: No space left on device"]


@case("output-folder-missing")
def _(f):
    target = f.path / "results" / "tuned.txt"
    return f.args(output=target), [f"Error: {target}:", "does not exist"]


@case("output-is-a-folder")
def _(f):
    folder = f.path / "results"
    folder.mkdir()
    return f.args(output=folder), [f"Error: {folder}:", "is a folder"]


@case("output-is-the-vectors-file")
def _(f):
    return f.args(output=f.vectors), [f"Error: {f.vectors}: output would overwrite an input"]


@case("output-is-the-vectors-file-spelled-another-way")
def _(f):
    other = f"{f.path}/./{f.vectors.name}"
    return f.args(output=other), [f"Error: {other}: output would overwrite an input"]


@case("output-is-the-freeze-list")   # issue 35: any input, not only the vectors
def _(f):
    words = f.file("frozen.txt", "the\n")
    return f.args("--freeze-list", words, output=words), [f"Error: {words}: output would overwrite an input"]


@case("report-is-the-freeze-list-through-a-symlink")
def _(f):
    words = f.file("frozen.txt", "the\n")
    (f.path / "page.html").symlink_to(words)
    return f.args("--freeze-list", words, "--report", f.path / "page.html"), [
        f"Error: {f.path / 'page.html'}: output would overwrite an input; choose another --report"]


@case("json-is-the-train-list-through-a-hard-link")
def _(f):
    words = f.file("train.txt", "the\n")
    os.link(words, f.path / "summary.json")
    return f.args("--train-list", words, "--json", f.path / "summary.json"), [
        f"Error: {f.path / 'summary.json'}: output would overwrite an input; choose another --json"]


@case("output-is-the-config")
def _(f):
    config = f.file("run.toml", "[train]\nepochs = 1\n")
    return f.args("--config", config, output=config), [f"Error: {config}: output would overwrite an input"]


@case("output-is-the-new-words-list-named-by-the-config")
def _(f):
    words = f.file("new.txt", "zorblax\n")
    config = f.file("run.toml", f'[vocab]\nnew_words = "{words}"\n')
    return f.args("--config", config, output=f"{f.path}/./new.txt"), [
        f"Error: {f.path}/./new.txt: output would overwrite an input"]


@case("freeze-list-empty-name")
def _(f):
    return f.args("--freeze-list", ""), ["Error: --freeze-list: empty file name"]


@case("freeze-pattern-empty")
def _(f):   # re.search finds "" in every word: it must not freeze all, nor be taken as no rule
    return f.args("--freeze-pattern", ""), ["Error: --freeze-pattern is an empty pattern (it would match every word)"]


@case("train-pattern-empty")
def _(f):
    return f.args("--train-pattern", ""), ["Error: --train-pattern is an empty pattern"]


@case("freeze-pattern-empty-in-the-config")
def _(f):
    config = f.file("run.toml", '[vocab]\nfreeze_pattern = ""\n')
    return f.args("--config", config), [f"Error: {config}: key 'vocab.freeze_pattern' is an empty pattern"]


@case("output-empty-name-in-a-dry-run")
def _(f):
    return f.args("--dry-run", output=""), ["Error: -o: empty file name"]


@case("vectors-with-no-rows")
def _(f):
    f.file("glove.txt", "0 50\n")
    return f.args(), [f"Error: {f.vectors}: holds no vectors (0 rows)"]


@case("json-summary-into-a-missing-folder")
def _(f):
    summary = f.path / "reports" / "summary.json"
    return f.args("--json", summary), [f"Error: {summary}:", "does not exist"]


@pytest.mark.parametrize("build", CASES)
def test_bad_input_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    folder = Folder(tmp_path)
    args, parts = build(folder)
    before = snapshot(tmp_path)
    result = run(args)
    assert result.exit_code != 0, result.stderr
    assert result.stdout == ""
    assert_one_error_line(result.stderr, *parts[1:])
    assert result.stderr.strip().splitlines()[-1].startswith(parts[0]), result.stderr
    assert snapshot(tmp_path) == before


def test_the_catalogue_holds_at_least_25_cases():
    assert len(CASES) >= 25


# ---------------------------------------------------------------------------------------------
# errors about the output come before the training, not after it


@pytest.mark.parametrize("where", ["missing-folder", "folder", "json-missing-folder"])
def test_an_output_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch, where):
    import embedtune.training

    def must_not_train(*args, **kwargs):
        raise AssertionError("training started although the output cannot be written")

    monkeypatch.setattr(embedtune.training, "train", must_not_train)
    folder = Folder(tmp_path)
    output = {"missing-folder": ["-o", tmp_path / "results" / "tuned.txt"],
              "folder": ["-o", tmp_path],
              "json-missing-folder": ["--json", tmp_path / "reports" / "summary.json"]}[where]
    result = run([*folder.args(), *output])
    assert result.exit_code == 1
    assert_one_error_line(result.stderr, "does not exist" if "missing" in where else "is a folder")


@pytest.mark.parametrize("where", ["seed", "batch-size", "corpus-missing", "freeze-list-missing",
                                   "train-list-is-a-folder", "resume-folder-missing", "format"])
def test_bad_options_and_missing_inputs_are_refused_before_the_vectors_are_read(tmp_path, monkeypatch, where):
    import embedtune.formats

    def must_not_load(*args, **kwargs):
        raise AssertionError("the vectors were read although an option or input is bad")

    monkeypatch.setattr(embedtune.formats, "load_vectors", must_not_load)
    monkeypatch.setattr(embedtune.formats, "detect_format", must_not_load)
    folder = Folder(tmp_path)
    options = {"seed": ["--seed", "-1"], "batch-size": ["--batch-size", str(2**21)],
               "corpus-missing": [], "freeze-list-missing": ["--freeze-list", tmp_path / "none.txt"],
               "train-list-is-a-folder": ["--train-list", tmp_path],
               "resume-folder-missing": ["--checkpoint-dir", tmp_path / "none", "--resume"],
               "format": ["--format", "glove6b"]}[where]
    corpus = tmp_path / "none.txt" if where == "corpus-missing" else None
    result = run(folder.args(*options, corpus=corpus))
    assert result.exit_code == (2 if where in ("seed", "batch-size", "format") else 1)   # usage errors: 2
    assert_one_error_line(result.stderr)


# ---------------------------------------------------------------------------------------------
# a single 200 MB line


# Peak memory from VmHWM: ru_maxrss would carry over the size of the test process it was forked from.
LONG_LINE_RUN = """
import sys
import click
from embedtune.cli.main import cli

vectors, runs = sys.argv[1], sys.argv[2:]
for corpus, output in zip(runs[::2], runs[1::2]):
    try:
        cli(["train", vectors, corpus, "-o", output, "--epochs", "1", "--min-count", "1000000000"],
            prog_name="embedtune", standalone_mode=False)
    except click.ClickException as err:
        err.show()
    with open("/proc/self/status") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print("peak_mb", peak_kb / 1024, flush=True)
"""

LONG_LINE_MB = 200
EXTRA_MB_ALLOWED = 150   # well under the line itself: the line must be read in pieces
PEAK_MB_ALLOWED = 1536


def test_a_single_200_mb_line_is_read_in_bounded_memory(tmp_path, tmp_path_factory):
    folder = Folder(tmp_path)
    # Unknown 99-letter words, 2 million of them, then a word that is not UTF-8: the whole line
    # is read before the error, and must never be held whole.
    path = tmp_path / "one-line.txt"
    piece = long_line(10)
    with open(path, "wb") as f:
        for _ in range(LONG_LINE_MB // 10):
            f.write(piece)
        f.write(b"caf\xe9\n")
    assert path.stat().st_size >= LONG_LINE_MB * 2**20
    try:
        before = snapshot(tmp_path)
        # The small corpus first, its output elsewhere: it sets the peak of TensorFlow and the
        # vectors; the long line may then add only a little.
        elsewhere = tmp_path_factory.mktemp("small-run") / "tuned.txt"
        result = subprocess.run([sys.executable, "-c", LONG_LINE_RUN, str(folder.vectors),
                                 str(folder.corpus), str(elsewhere), str(path), str(folder.output)],
                                capture_output=True, text=True, timeout=600)
        peaks = [float(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("peak_mb")]
        assert len(peaks) == 2, result.stderr
        small, large = peaks
        assert large - small < EXTRA_MB_ALLOWED and large < PEAK_MB_ALLOWED, \
            f"peak {small:.0f} MB on the small corpus, {large:.0f} MB with the 200 MB line"
        assert elsewhere.exists(), result.stderr
        assert_one_error_line(result.stderr, f"Error: {path} line 1:", "UTF-8")
        assert snapshot(tmp_path) == before
    finally:
        path.unlink()   # pytest keeps the last few temporary folders


# ---------------------------------------------------------------------------------------------
# the corpus's first bytes, checked before the vectors load and TensorFlow imports (issue 24)

EARLY_RUN = """
import json, sys
import click
import embedtune.formats
from embedtune.cli.main import cli

loaded = []
load_vectors = embedtune.formats.load_vectors
embedtune.formats.load_vectors = lambda *a, **k: loaded.append(a) or load_vectors(*a, **k)
results = []
for args in json.loads(sys.argv[1]):
    loaded.clear()
    try:
        cli(args, prog_name="embedtune", standalone_mode=False)
        error = None
    except click.ClickException as err:
        error = err.format_message()
    results.append({"error": error, "vectors_loaded": bool(loaded), "tensorflow": "tensorflow" in sys.modules})
print(json.dumps(results))
"""


def test_a_corpus_that_is_bad_from_its_first_bytes_is_refused_before_the_vectors_load(tmp_path):
    """Binary data, NUL bytes or another encoding in a corpus's first 64 KiB: the error a full read
    gives, before the vectors are read and TensorFlow is imported (seconds on a large file), in train
    (plain and labelled corpora, --valid) and init. In a fresh process, where TensorFlow is not yet
    imported: the run stops with it still absent. A corpus on standard input is read as before."""
    from embedtune.corpus import Corpus
    from embedtune.corpus.labelled import LabelledCorpus

    folder = Folder(tmp_path)
    good_labelled = folder.file("labelled.txt", "".join(f"__label__x {line}\n" for line in CORPUS_LINES))
    cases = {
        "binary junk": (folder.file("junk.txt", bytes(range(256)) * 64), Corpus, []),
        "nul bytes": (folder.file("nul.txt", "the year\n".encode() + b"of \x00 the\n"), Corpus, []),
        "latin-1, gzip": (folder.file("latin1.gz", gzip.compress(b"the year\ncaf\xe9 the\n")), Corpus, []),
        "labelled, latin-1": (folder.file("l.txt", b"__label__a the\n__label__b caf\xe9\n"), LabelledCorpus,
                              ["--objective", "classify"]),
    }
    runs, expected = [], []
    for corpus, reader, options in cases.values():
        with pytest.raises(Exception) as err, reader(str(corpus)) as full:
            full.count()
        expected.append(str(err.value))
        runs.append(["-q", "train", str(folder.vectors), str(corpus), "-o", str(folder.output), *FAST, *options])
    valid = cases["labelled, latin-1"][0]
    runs.append(["-q", "train", str(folder.vectors), str(good_labelled), "-o", str(folder.output), "--objective",
                 "classify", "--valid", str(valid), *FAST])
    expected.append(expected[-1])
    runs.append(["-q", "init", str(folder.vectors), str(cases["nul bytes"][0]), "-o", str(folder.output)])
    expected.append(expected[1])
    result = subprocess.run([sys.executable, "-c", EARLY_RUN, json.dumps(runs)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    outcomes = json.loads(result.stdout)
    assert [o["error"] for o in outcomes] == expected
    assert not any(o["vectors_loaded"] or o["tensorflow"] for o in outcomes), outcomes
    assert not folder.output.exists()

    # standard input is not peeked at: it is read (spooled) as before, and its errors come as before
    piped = subprocess.run([sys.executable, "-m", "embedtune.cli.main", "-q", "train", str(folder.vectors), "-",
                            "-o", str(folder.output), *FAST], input=cases["nul bytes"][0].read_bytes(),
                           capture_output=True, timeout=300)
    assert piped.returncode == 1
    assert_one_error_line(piped.stderr.decode(), "Error: - line 2: contains NUL bytes")
