"""fastText models whose words are not all UTF-8, and models cut or damaged (issue 45, items 9, 11, 12): with
--replace-bad-utf8 such a word shows U+FFFD but is hashed as its own bytes, so `convert model.bin out.bin` writes
the model back byte for byte and training writes it back without a traceback; --keep-first-duplicate keeps the
model; --limit cannot cut a model written back; a header that counts too few words is called damaged."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune import load_vectors
from embedtune.cli.main import cli
from embedtune.formats.fasttext import _ARGS

fasttext = pytest.importorskip("fasttext")

CORPUS = Path(__file__).resolve().parent.parent / "data" / "sample" / "lee_background.cor"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)], catch_exceptions=False)


def one_line(result, code, *parts):
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def model_with(tmp_path_factory, extra: bytes, name: str) -> Path:
    """A small model of the sample corpus with the words of ``extra`` (bytes) added to every third line."""
    folder = tmp_path_factory.mktemp(name)
    lines = CORPUS.read_bytes().splitlines()
    corpus = folder / "corpus.txt"
    corpus.write_bytes(b"\n".join(line + b" " + extra if i % 3 == 0 else line for i, line in enumerate(lines)) + b"\n")
    model = fasttext.train_unsupervised(str(corpus), dim=10, epoch=1, bucket=2000, minCount=3, thread=1, verbose=0)
    path = folder / "model.bin"
    model.save_model(str(path))
    return path


@pytest.fixture(scope="module")
def latin1_model(tmp_path_factory):
    return model_with(tmp_path_factory, b"caf\xe9 na\xefve", "latin1")   # two words of Latin-1 bytes


@pytest.fixture(scope="module")
def twins_model(tmp_path_factory):
    return model_with(tmp_path_factory, b"caf\xe9 caf\xe8", "twins")   # both show as 'caf\ufffd'


def test_a_word_that_is_not_utf8_reads_as_its_bytes_hash(latin1_model):
    vectors = load_vectors(latin1_model, replace_bad_utf8=True)
    row = list(vectors.words).index("caf\ufffd")
    model = vectors.model
    # the vector is the model's arithmetic over the word's own bytes, not over the replacement's
    own = model.word_vectors([b"caf\xe9"], np.array([row]))
    shown = model.word_vectors(["caf\ufffd"], np.array([row]))
    assert np.array_equal(vectors.matrix[row], own[0]) and not np.array_equal(own, shown)
    limited = load_vectors(latin1_model, replace_bad_utf8=True, limit=row + 1)   # a slice of the words too
    assert np.array_equal(limited.matrix[row], own[0])


def test_convert_writes_the_model_back_byte_for_byte(latin1_model, tmp_path):
    # The word's own row was solved again from its replaced spelling (moved by up to 0.105).
    out = tmp_path / "out.bin"
    result = run("convert", latin1_model, out, "--replace-bad-utf8")
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == latin1_model.read_bytes()


def test_training_writes_the_model_back_and_keeps_the_frozen_word(latin1_model, tmp_path):
    # It ended in UnicodeDecodeError in the frozen rows' read-back, once new words were appended to the words.
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:200])
                      + "the zzqx of qqwy and\n" * 10)
    out = tmp_path / "out.bin"
    result = run("train", latin1_model, corpus, "--replace-bad-utf8", "--freeze-pattern", "\ufffd", "-o", out,
                 "--max-steps", "20")
    assert result.exit_code == 0, result.output
    before = load_vectors(latin1_model, replace_bad_utf8=True)
    after = load_vectors(out, replace_bad_utf8=True)
    assert "zzqx" in after.index
    for word in ("caf\ufffd", "na\ufffdve"):   # frozen: bit for bit, as fastText computes them from the file
        assert np.array_equal(after[word], before[word])


def test_keep_first_duplicate_keeps_the_model(twins_model, tmp_path):
    # Two words whose bytes are replaced alike; the second left out. It said "a fastText model is written from
    # a fastText model only" (the model was dropped with the row).
    result = run("convert", twins_model, tmp_path / "x.bin", "--replace-bad-utf8")
    one_line(result, 1, "duplicate word 'caf\ufffd'", "--keep-first-duplicate keeps the first")
    out = tmp_path / "out.bin"
    result = run("convert", twins_model, out, "--replace-bad-utf8", "--keep-first-duplicate")
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == twins_model.read_bytes()   # the row left out is the model's, written as it was
    vec = tmp_path / "out.vec"
    assert run("convert", twins_model, vec, "--replace-bad-utf8", "--keep-first-duplicate").exit_code == 0
    kept = load_vectors(twins_model, replace_bad_utf8=True, keep_first_duplicate=True)
    first = kept.model.word_vectors([b"caf\xe9", b"caf\xe8"], np.array([-1, -1]))
    assert not np.array_equal(first[0], first[1])
    assert np.array_equal(load_vectors(vec)["caf\ufffd"], kept["caf\ufffd"])


def test_limit_cannot_cut_a_model_written_back(latin1_model, tmp_path):
    # It wrote the whole model and said "wrote 10 vectors".
    out = tmp_path / "out.bin"
    result = run("convert", latin1_model, out, "--replace-bad-utf8", "--limit", "10")
    one_line(result, 2, "--limit 10: a fastText model is written whole", "--to fasttext")
    assert not out.exists()
    vec = tmp_path / "out.vec"
    assert run("convert", latin1_model, vec, "--replace-bad-utf8", "--limit", "10").exit_code == 0
    assert len(load_vectors(vec)) == 10


@pytest.mark.parametrize("fewer", [1, 5, 50])
def test_a_header_counting_too_few_words_is_damaged_not_quantized(latin1_model, tmp_path, fewer):
    data = latin1_model.read_bytes()
    at = 8 + _ARGS.size
    size, nwords = struct.unpack_from("<ii", data, at)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(data[:at] + struct.pack("<ii", size - fewer, nwords - fewer) + data[at + 8:])
    result = run("inspect", bad, "--replace-bad-utf8")
    one_line(result, 1, str(bad), f"the dictionary header's counts ({nwords - fewer} words, 0 labels) are wrong",
             "damaged?")
    assert "quantized" not in result.stderr
