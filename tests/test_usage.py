"""Issue 35: names never empty, one exit-code rule in every command, and the smaller promises.

The exit-code rule (docs/ci.md): 2 for the command line itself (unknown command or option, missing
argument, bad choice, a value out of its range, an empty file name, two standard inputs), 1 for a file or
its data. Each case runs in-process and stops before anything is loaded.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import click
import pytest

from embedtune.cli.files import Role, label
from test_no_overwrite import command_line, commands, run_in
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS, one_error_line, run

ALL = [pytest.param(words, command, id=" ".join(words)) for words, command in commands()]


def path_params(command):
    return [p for p in command.params if isinstance(p.type, Role)]


# ---------------------------------------------------------------------------------------------
# an empty name is never "not given"


@pytest.mark.parametrize("words, command", ALL)
def test_an_empty_name_is_a_usage_error_naming_it_in_every_command(tmp_path, words, command):
    """Every argument and option that names a file, of every command (read from the declarations)."""
    params = path_params(command)
    assert params, words
    for param in params:
        args = command_line(words, command, {param.name: ""}, tmp_path)
        result = run_in(tmp_path, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == ""
        assert result.stderr.splitlines() == [f"Error: {label(param)}: empty file name"], (args, result.stderr)


@pytest.mark.parametrize("args, named", [
    (["train", "", "c.txt", "-o", "o.txt"], "VECTORS"),
    (["train", "v.txt", "c.txt", "-o", "o.txt", "--freeze-list", ""], "--freeze-list"),
    (["train", "v.txt", "c.txt", "-o", "", "--dry-run"], "-o"),
    (["train", "v.txt", "c.txt", "-o", "o.txt", "--checkpoint-dir", ""], "--checkpoint-dir"),
    (["train", "v.txt", "c.txt", "-o", "o.txt", "--json", ""], "--json"),
    (["train", "v.txt", "c.txt", "-o", "o.txt", "--logdir", ""], "--logdir"),
    (["train", "v.txt", "c.txt", "-o", "o.txt", "--report", ""], "--report"),
])
def test_the_issues_empty_names(tmp_path, args, named):
    result = run_in(tmp_path, args)
    assert (result.exit_code, result.stderr) == (2, f"Error: {named}: empty file name\n")


@pytest.mark.parametrize("table, key", [("vocab", "freeze_list"), ("vocab", "train_list"), ("train", "checkpoint_dir"),
                                        ("", "report"), ("", "output")])
def test_an_empty_name_in_a_config_is_an_error_naming_the_key_and_the_file(tmp_path, table, key):
    config = tmp_path / "run.toml"
    config.write_text((f"[{table}]\n" if table else "") + f'{key} = ""\n', encoding="utf-8")
    result = run_in(tmp_path, ["train", "v.txt", "c.txt", "-c", str(config), "-o", "o.txt"])
    where = f"{table}.{key}" if table else key
    assert (result.exit_code, result.stderr) == (1, f"Error: {config}: key '{where}' is an empty file name\n")


def test_an_empty_name_given_to_fine_tune_is_an_error():
    from embedtune import fine_tune
    from embedtune.errors import EmbedtuneError

    with pytest.raises(EmbedtuneError, match="'vocab.freeze_list' is an empty file name"):
        fine_tune(str(SAMPLE_VECTORS), str(SAMPLE_CORPUS), freeze_list="")


# ---------------------------------------------------------------------------------------------
# exit codes: one rule in every command


def usage_cases():
    """(args, what the one line holds): a usage error in each command."""
    cases = []
    for words, _ in commands():
        cases.append((words + ["--no-such-option"], "No such option"))
    cases += [
        (["trian"], "did you mean 'train'?"),
        (["nieghbors"], "did you mean 'neighbors'?"),
        (["train", "{v}", "{c}", "-o", "{out}", "--objective", "bogus"], "'bogus'"),
        (["train", "{v}", "{c}", "-o", "{out}", "--epochs", "0"], "--epochs must be at least 1, got 0"),
        (["train", "{v}", "{c}", "-o", "{out}", "--workers", "0"], "--workers must be between 1"),
        (["train", "{v}", "{c}", "-o", "{out}", "--to", "bogus"], "--to: unknown format 'bogus'"),
        (["init", "{v}", "{c}", "-o", "{out}", "--window", "0"], "--window must be at least 1"),
        (["init", "{v}", "{c}", "-o", "{out}", "--init", "nope"], "'nope'"),
        (["init", "{v}", "{c}"], "Missing option '-o'"),
        (["neighbors", "{v}", "the", "-k", "0"], "'-k'"),
        (["neighbors", "{v}"], "Missing argument"),
        (["convert", "{v}", "{out}", "--limit", "-1"], "'--limit'"),
        (["convert", "{v}", "{out}", "--to", "bogus"], "--to: unknown format 'bogus'"),
        (["convert", "{v}"], "Missing argument 'OUT'"),
        (["eval", "{v}", "--restrict-vocab", "0"], "'--restrict-vocab'"),
        (["eval", "{v}", "--format", "bogus"], "--format: unknown format 'bogus'"),
        (["diff", "{v}", "{v}", "--top", "-1"], "'--top'"),
        (["diff", "-", "-"], "OLD and NEW cannot both be standard input"),
        (["eval", "-", "-"], "VECTORS and VECTORS2 cannot both be standard input"),
        (["neighbors", "-", "the", "--against", "-"], "VECTORS and --against cannot both be standard input"),
        (["train", "-", "-", "-o", "{out}"], "VECTORS and CORPUS cannot both be standard input"),
        (["init", "-", "-", "-o", "{out}"], "VECTORS and CORPUS cannot both be standard input"),
        (["report", "{v}", "{v}", "-o", "{out}", "-k", "0"], "'-k'"),
        (["inspect", "{v}", "--format", "bogus"], "--format: unknown format 'bogus'"),
        (["lexicon", "wordnet"], "Missing argument 'FOLDER'"),
    ]
    return cases


def data_cases():
    """(args, what the one line holds): an error in a file or its data, in each command."""
    return [
        (["train", "{missing}", "{c}", "-o", "{out}"], "no such file"),
        (["train", "{v}", "{c}", "-o", "{v}"], "output would overwrite an input"),
        (["init", "{missing}", "{c}", "-o", "{out}"], "no such file"),
        (["diff", "{v}", "{missing}"], "no such file"),
        (["eval", "{missing}"], "no such file"),
        (["neighbors", "{missing}", "the"], "no such file"),
        (["inspect", "{missing}"], "no such file"),
        (["convert", "{missing}", "{out}"], "no such file"),
        (["convert", "{v}", "{v}"], "output would overwrite an input"),
        (["report", "{v}", "{missing}", "-o", "{out}"], "no such file"),
        (["report", "{v}", "{v}", "-o", "{v}"], "output would overwrite an input"),
        (["lexicon", "wordnet", "{missing}", "-o", "{out}"], "no such folder"),
        (["train", "{v}", "{c}", "-o", "{out}", "-c", "{bad_config}"], "not valid TOML"),
        (["train", "{v}", "{c}", "-o", "{out}", "-c", "{range_config}"], "'train.epochs' must be at least 1"),
        (["train", "{zero}", "{c}", "-o", "{out}", "--dry-run"], "holds no vectors (0 rows)"),
    ]


@pytest.fixture
def names(tmp_path):
    (tmp_path / "v.txt").write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:50]))
    (tmp_path / "c.txt").write_text("the of and zorblax\n", encoding="utf-8")
    (tmp_path / "bad.toml").write_text("epochs = \n", encoding="utf-8")
    (tmp_path / "range.toml").write_text("[train]\nepochs = 0\n", encoding="utf-8")
    (tmp_path / "zero.txt").write_text("0 50\n", encoding="utf-8")
    return {"v": tmp_path / "v.txt", "c": tmp_path / "c.txt", "out": tmp_path / "out.txt",
            "missing": tmp_path / "missing.txt", "bad_config": tmp_path / "bad.toml",
            "range_config": tmp_path / "range.toml", "zero": tmp_path / "zero.txt"}


def invoke(args, names):
    return run([a.format(**names) for a in args], input="")


@pytest.mark.parametrize("args, part", usage_cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_a_usage_error_exits_2_in_every_command(names, args, part):
    result = invoke(args, names)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    one_error_line(result, part)
    assert not names["out"].exists()


@pytest.mark.parametrize("args, part", data_cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_an_error_in_a_file_exits_1_in_every_command(names, args, part):
    before = names["v"].read_bytes()
    result = invoke(args, names)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    one_error_line(result, part)
    assert not names["out"].exists() and names["v"].read_bytes() == before


def test_every_command_has_a_case_of_each_kind():
    named = {" ".join(words) for words, _ in commands()}
    for cases in (usage_cases(), data_cases()):
        covered = {" ".join(args[:2]) if args[0] == "lexicon" else args[0] for args, _ in cases}
        assert named <= covered, named - covered


# ---------------------------------------------------------------------------------------------
# smaller promises


def test_an_unknown_command_far_from_any_gets_no_suggestion():
    result = run(["bogus"])
    assert (result.exit_code, result.stderr) == (2, "Error: No such command 'bogus'.\n")


@pytest.mark.parametrize("words, command", ALL)
def test_format_options_list_their_choices(words, command):
    from embedtune.formats import FORMAT_NAMES

    ctx = click.Context(command)
    for param in command.params:
        if isinstance(param, click.Option) and param.opts[0] in ("--format", "--to"):
            help_text = param.get_help_record(ctx)[1]
            assert all(name in help_text for name in FORMAT_NAMES), (words, param.opts[0], help_text)


def test_an_empty_word_list_is_said(tmp_path, names):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    for option, path, said in (("--freeze-list", "/dev/null", "it freezes nothing"),
                               ("--freeze-list", str(empty), "it freezes nothing"),
                               ("--train-list", str(empty), "it trains nothing")):
        result = invoke(["train", "{v}", "{c}", "-o", "{out}", option, path, "--dry-run", "--json", "-",
                         "--min-count", "1"], names)
        assert result.exit_code == 0, result.output
        note = f"{option} {path} holds no word: {said}"
        assert any(note in n for n in json.loads(result.stdout)["notes"]), result.stdout
        text = invoke(["train", "{v}", "{c}", "-o", "{out}", option, path, "--dry-run", "--min-count", "1"], names)
        assert note in text.stdout


def test_listed_new_words_are_summed_up_and_said_in_train_as_in_init(tmp_path, names):
    """docs/new-words.md: the summary's listed_* counts, a Note for a listed word that already has a
    vector, and one for the words lower-cased to match the corpus."""
    listed = tmp_path / "new.txt"
    listed.write_text("The\nZorblax\nquuxly\n", encoding="utf-8")
    result = invoke(["train", "{v}", "{c}", "-o", "{out}", "--new-words", str(listed), "--dry-run", "--json", "-"],
                    names)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    counts = summary["listed_new_words"], summary["listed_in_vectors"], summary["listed_not_in_corpus"]
    assert counts == (2, 1, 1)   # zorblax is in the corpus
    assert summary["notes"] == [
        f"2 words of {listed} lower-cased, as the corpus is (--lowercase): 'The' -> 'the', 'Zorblax' -> 'zorblax'",
        f"1 word of {listed} already has a vector: it keeps it, no row is added (first: the)"]
    init = invoke(["init", "{v}", "{c}", "-o", "{out}", "--new-words", str(listed)], names)
    assert init.exit_code == 0, init.output
    for note in summary["notes"]:
        assert f"Note: {note}" in init.stderr


def test_counts_of_one_are_singular():
    from embedtune.objectives.describe import Describe

    stats = dict(epochs=1, corpus_words=1, stopped_at_limit=None, trained_rows=1, new=0, objective="sgns",
                 words_per_second=1, train_seconds=1.0, total_seconds=1.0, loss_first=1.0, loss_last=1.0,
                 frozen_rows_checked=1)
    result = SimpleNamespace(stats=stats, vectors=[0], written="o.txt")
    lines = Describe.report_lines(result, SimpleNamespace(output="o.txt"))
    assert lines[0].startswith("Trained 1 row (0 new) with sgns over 1 epoch of 1 word:"), lines[0]
    assert "1 frozen row read back from the output as written: bit-identical" in lines[0]
    assert lines[-1] == "Wrote 1 vector to o.txt"
