"""embedtune.fine_tune and Vectors <-> gensim KeyedVectors: the Python API, and the README's example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import embedtune
from embedtune.config import from_options
from embedtune.cli.main import cli
from embedtune.config import Config, load_config, merge
from embedtune.formats import load_vectors

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_VECTORS = ROOT / "data" / "sample" / "glove.6B.50d.20k.txt"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "lee_background.cor"


@pytest.fixture(scope="module")
def lines():
    return SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:40]


def test_readme_python_example_runs(monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    # As a user's script would run it from the repository root; in this process, as nothing in it needs one.
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
    size, neighbours, error = capsys.readouterr().out.strip().splitlines()
    n, dim = map(int, size.split())
    assert n > 20000 and dim == 50
    found = eval(neighbours)   # most_similar's list of (word, cosine)
    assert len(found) == 3 and all(isinstance(w, str) and -1 <= c <= 1 for w, c in found)
    assert error.startswith("unknown option 'freeze_topp' (did you mean freeze_top?)")


def test_fine_tune_equals_the_command_with_the_same_options(tmp_path, lines):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "cli.txt"
    result = CliRunner().invoke(cli, [
        "-q", "train", str(SAMPLE_VECTORS), str(corpus), "-o", str(out), "--freeze-top", "5000", "--epochs", "1",
        "--min-count", "3", "--seed", "3", "--deterministic", "--objective", "sgns", "--batch-size", "512"])
    assert result.exit_code == 0, result.output
    from_cli = load_vectors(out)
    from_python = embedtune.fine_tune(str(SAMPLE_VECTORS), corpus, freeze_top=5000, epochs=1, min_count=3, seed=3,
                                      deterministic=True, objective="sgns", batch_size=512)
    assert from_python.words == from_cli.words and len(from_python) > 20000
    assert from_python.matrix.tobytes() == from_cli.matrix.tobytes()


def test_fine_tune_leaves_its_input_alone_and_frozen_rows_bit_identical(lines):
    vectors = load_vectors(SAMPLE_VECTORS)
    before = vectors.matrix.copy()
    tuned = embedtune.fine_tune(vectors, [line.split() for line in lines], freeze_top=5000, epochs=1,
                                objective="sgns", min_count=3)
    assert vectors.matrix.tobytes() == before.tobytes() and len(vectors) == 20000
    assert tuned.words[:20000] == vectors.words and len(tuned) > 20000
    assert tuned.matrix[:5000].tobytes() == before[:5000].tobytes()
    assert not np.array_equal(tuned.matrix[5000:20000], before[5000:20000])


@pytest.mark.parametrize("options, message", [
    ({"freeze_topp": 5}, "unknown option 'freeze_topp' (did you mean freeze_top?)"),
    ({"output": "x.txt"}, "unknown option 'output'"),
    ({"epochs": "5"}, "'train.epochs' must be an integer, got '5'"),
    # named as a Python caller wrote them (issue 45: the command line's flags were named before)
    ({"epochs": 0}, "epochs must be at least 1, got 0"),
    ({"tokenize": "words"}, "tokenize must be one of auto, none"),
])
def test_bad_options_are_embedtune_errors(options, message):
    with pytest.raises(embedtune.EmbedtuneError) as err:
        embedtune.fine_tune(embedtune.Vectors(["a"], np.ones((1, 2), np.float32)), [["a"]], **options)
    assert message in str(err.value)


def test_a_missing_file_is_an_embedtune_error(tmp_path):
    with pytest.raises(embedtune.EmbedtuneError):
        embedtune.fine_tune(tmp_path / "nope.txt", [["a"]])
    with pytest.raises(embedtune.EmbedtuneError, match="no such corpus file"):
        embedtune.fine_tune(embedtune.Vectors(["a"], np.ones((1, 2), np.float32)), str(tmp_path / "nope.txt"))


def test_a_binary_corpus_is_named_before_the_vectors_load_or_tensorflow_imports(tmp_path):
    """As `embedtune train` does: the corpus's first bytes tell, before seconds of loading and importing
    (the vectors path names no file, so an error about it would have come first)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"a fine line\nthen a NUL\x00 byte\n")
    script = (f"import sys, embedtune\n"
              f"try:\n    embedtune.fine_tune({str(tmp_path / 'no-vectors.txt')!r}, {str(corpus)!r})\n"
              f"except embedtune.EmbedtuneError as err:\n"
              f"    print(err, 'tensorflow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout == f"{corpus} line 2: contains NUL bytes; is this a text corpus? False\n", done.stderr


def test_options_build_the_config_the_command_line_builds():
    quickstart = ROOT / "configs" / "quickstart.toml"
    options = {"epochs": 2, "lr": 1, "tokenize": "none", "freeze_pretrained": True, "format": "glove"}
    assert from_options(options, quickstart) == merge(load_config(quickstart, check_values=False), options,
                                                        source=str(quickstart))
    assert from_options({}) == Config()
    assert from_options({"lr": 1}).train.lr == 1.0 and isinstance(from_options({"lr": 1}).train.lr, float)


def test_keyed_vectors_round_trip_as_copies():
    vectors = load_vectors(SAMPLE_VECTORS)
    kv = vectors.to_keyed_vectors()
    assert kv.index_to_key == vectors.words and kv.vectors.tobytes() == vectors.matrix.tobytes()
    assert kv.most_similar("france", topn=1)[0][0] == "french"
    kv.vectors[0] = 0.0
    kv.index_to_key[1] = "changed"
    assert vectors.matrix[0].any() and vectors.words[1] != "changed"
    back = embedtune.Vectors.from_keyed_vectors(vectors.to_keyed_vectors())
    assert back.words == vectors.words and back.matrix.tobytes() == vectors.matrix.tobytes()
    assert not np.shares_memory(back.matrix, vectors.matrix)


def test_from_keyed_vectors_needs_word_keys():
    from gensim.models import KeyedVectors

    kv = KeyedVectors(2)
    kv.add_vectors([1, 2], np.ones((2, 2), np.float32))
    with pytest.raises(embedtune.EmbedtuneError, match="keys must be words"):
        embedtune.Vectors.from_keyed_vectors(kv)


def test_fine_tune_retrofit_reads_a_lexicon_not_a_corpus():
    from embedtune.formats import load_vectors
    lexicon = ROOT / "data" / "sample" / "wordnet-synonyms.10k.txt"
    before = load_vectors(str(SAMPLE_VECTORS))
    after = embedtune.fine_tune(before, objective="retrofit", lexicon=str(lexicon), freeze_top=1000, epochs=3)
    assert after.words == before.words
    assert after.matrix[:1000].tobytes() == before.matrix[:1000].tobytes()
    assert not np.array_equal(after.matrix[1000:], before.matrix[1000:])
    with pytest.raises(embedtune.EmbedtuneError, match="reads no corpus"):
        embedtune.fine_tune(before, ["a b"], objective="retrofit", lexicon=str(lexicon))
    with pytest.raises(embedtune.EmbedtuneError, match="needs a corpus"):
        embedtune.fine_tune(before, objective="sgns")


@pytest.mark.parametrize("corpus, message", [
    ([b"the cat sat"], "sentences[0] is bytes (b'the cat sat'); expected a str or a list of str tokens (decode bytes first)"),
    (["the cat", ["the", 5]], "sentences[1][1] is int (5); expected a str or a list of str tokens"),
    (iter([["a"], [b"a"]]), "sentences[1][0] is bytes (b'a')"),
    ([["a"], 7], "sentences[1] is int (7); expected a str or a list of str tokens"),
    (5, "corpus is int; expected a path, or sentences"),
])
def test_sentences_of_the_wrong_type_are_embedtune_errors(corpus, message):
    with pytest.raises(embedtune.EmbedtuneError) as err:
        embedtune.fine_tune(embedtune.Vectors(["a", "b"], np.ones((2, 2), np.float32)), corpus, epochs=1,
                            min_count=1)
    assert message in str(err.value)


def test_fine_tune_reads_vectors_as_the_command_does_and_leaves_the_heap_alone(tmp_path, lines):
    """The reader options are the command's (here --allow-nan: the row left out, with a note), and the
    run's count leaves a library caller's cyclic collector as it was (the command freezes its heap)."""
    import gc

    words = SAMPLE_VECTORS.read_text(encoding="utf-8").splitlines()[:3000]
    first = words[0].split(" ")
    words[0] = " ".join([first[0], "nan", *first[2:]])
    vectors = tmp_path / "v.txt"
    vectors.write_text("\n".join(words) + "\n", encoding="utf-8")
    notes = []
    frozen = gc.get_freeze_count()
    out = embedtune.fine_tune(vectors, lines, allow_nan=True, note=notes.append, epochs=1, min_count=1000,
                              objective="sgns", seed=1)
    assert first[0] not in out.index and len(out) == 2999
    assert any(n.startswith("left out 1 row with NaN or infinity") for n in notes), notes
    assert gc.get_freeze_count() <= frozen and gc.isenabled()   # frozen by an earlier test: may be freed
    with pytest.raises(embedtune.EmbedtuneError, match="value 1 is nan"):
        embedtune.fine_tune(vectors, lines, epochs=1, objective="sgns")


def test_a_run_that_fails_after_the_load_leaves_no_rendering_thread(tmp_path):
    """The output's lines start rendering on a thread once the vectors load (formats.render_ahead); a run
    that fails after that (a line without a label, past the head check_start reads) stops it, writes
    nothing, and leaves no thread behind."""
    import threading

    glosses = (ROOT / "data" / "sample" / "wordnet-glosses.train.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "labelled.txt"
    corpus.write_text("\n".join(glosses[:2000] + ["no label on this line"] + glosses[2000:]) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    done = CliRunner().invoke(cli, ["train", str(SAMPLE_VECTORS), str(corpus), "--objective", "classify", "-o", str(out)])
    assert done.exit_code != 0 and "no label" in done.output, done.output
    assert not out.exists()
    assert not [t for t in threading.enumerate() if t.name == "embedtune-render-ahead"]
