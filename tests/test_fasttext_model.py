"""fastText model files (.bin with subwords): read exactly as fastText computes a word's vector, written
back byte for byte, trained with frozen words and unseen words' vectors unchanged. Models are trained here
from shipped text with the fastText package (the test extra), small: dim 10, one epoch, 2000 buckets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune import load_vectors
from embedtune.cli.main import cli
from embedtune.formats import detect_format
from embedtune.formats.summary import summarize_vectors

fasttext = pytest.importorskip("fasttext")

CORPUS = Path(__file__).resolve().parent.parent / "data" / "sample" / "lee_background.cor"
UNSEEN = ["zzqx", "héllo", "über-long-wörd", "日本語", "x" * 40, "</s>x", "q-q-q"]


def run(*args, input=None):
    result = CliRunner().invoke(cli, ["-q"] + [str(a) for a in args], input=input)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def train_model(path, **options):
    settings = dict(dim=10, epoch=1, bucket=2000, minCount=3, thread=1, verbose=0)
    settings.update(options)
    model = fasttext.train_unsupervised(str(CORPUS), **settings)
    model.save_model(str(path))
    return model


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ft") / "model.bin"
    return path, train_model(path)


def fasttext_vector(model, matrix, word):
    """fastText's getWordVector from its own subword ids and input matrix: the rows added in order from
    zero, times float32(1 / n). (The fasttext-community package's get_word_vector then scales the result to
    unit length, which Facebook's fastText does not; that is checked separately.)"""
    ids = model.get_subwords(word)[1].astype(np.int64)
    acc = np.zeros(matrix.shape[1], np.float32)
    for i in ids:
        acc += matrix[i]
    if len(ids):
        acc *= np.float32(1.0 / len(ids))
    return acc


def same_bits(a, b) -> bool:
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def unit(x):
    norm = np.linalg.norm(x)
    return x / norm if norm > 0 else x


# -- reading -----------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [None, {"model": "cbow", "minn": 2, "maxn": 4, "minCount": 10}])
def test_every_word_reads_as_fasttexts_own_arithmetic_bit_for_bit(model_file, tmp_path, options):
    path, model = model_file
    if options is not None:   # other n-gram lengths, and a model with fewer words
        path = tmp_path / "m.bin"
        model = train_model(path, **options)
    vectors = load_vectors(path)
    words = model.get_words()
    assert list(vectors.words) == words
    matrix = model.get_input_matrix()
    assert all(same_bits(vectors.matrix[i], fasttext_vector(model, matrix, w)) for i, w in enumerate(words))
    # The package's own get_word_vector: the same vector, scaled to unit length by this build.
    for i, w in enumerate(words[:200]):
        np.testing.assert_allclose(unit(vectors.matrix[i]), model.get_word_vector(w), rtol=1e-5, atol=1e-6)
    assert not any(w in vectors for w in UNSEEN)
    unseen = vectors.model.oov_vectors(UNSEEN)
    assert all(same_bits(unseen[i], fasttext_vector(model, matrix, w)) for i, w in enumerate(UNSEEN))


def test_detected_by_magic_number_whatever_the_name(model_file, tmp_path):
    path, _ = model_file
    other = tmp_path / "vectors.txt"
    other.write_bytes(path.read_bytes())
    assert detect_format(other) == "fasttext-model"
    assert detect_format(path) == "fasttext-model"


def test_reads_gensims_lee_model_as_gensim_does():
    gensim_utils = pytest.importorskip("gensim.test.utils")
    from gensim.models.fasttext import load_facebook_vectors

    path = gensim_utils.datapath("lee_fasttext.bin")   # from before fastText's magic number
    assert detect_format(path) == "fasttext-model"
    ours = load_vectors(path)
    theirs = load_facebook_vectors(path)
    assert list(ours.words) == list(theirs.index_to_key)
    # gensim divides where fastText multiplies by 1/n, and gives </s> n-grams that fastText does not.
    rows = [i for i, w in enumerate(ours.words) if w != "</s>"]
    np.testing.assert_allclose(ours.matrix[rows], theirs.vectors[rows], rtol=1e-5, atol=1e-6)
    unseen = ours.model.oov_vectors(UNSEEN[:4])
    np.testing.assert_allclose(unseen, np.array([theirs[w] for w in UNSEEN[:4]]), rtol=1e-5, atol=1e-6)


def test_inspect_names_the_model_and_its_settings(model_file):
    path, model = model_file
    result = run("inspect", path)
    assert result.exit_code == 0, result.output
    assert "fasttext-model" in result.stdout and "minn 3" in result.stdout and "bucket 2000" in result.stdout
    summary = json.loads(run("inspect", "--json", path).stdout)
    assert summary["format"] == "fasttext-model" and summary["count"] == len(model.get_words())
    assert summary["fasttext"]["bucket"] == 2000 and summary["fasttext"]["model"] == "skipgram"
    assert summarize_vectors(path)["dim"] == 10


def test_convert_to_vec_writes_every_words_vector(model_file, tmp_path):
    path, model = model_file
    out = tmp_path / "out.vec"
    result = run("convert", path, out)
    assert result.exit_code == 0, result.output
    read = load_vectors(out)
    assert read.words == model.get_words()
    assert np.array_equal(read.matrix, load_vectors(path).matrix)


def _damaged(path: Path, tmp_path: Path, data: bytes, name="bad.bin") -> Path:
    bad = tmp_path / name
    bad.write_bytes(data)
    return bad


def test_damaged_truncated_newer_and_quantized_models_are_one_line_errors(model_file, tmp_path):
    path, _ = model_file
    data = path.read_bytes()
    cases = [
        (data[:len(data) // 2], ["file ends inside the input matrix", "truncated"]),
        (data[:200], ["file ends inside the dictionary"]),
        (data[:30], ["file ends inside the settings"]),
        (data + b"\0\0\0\0", ["4 bytes after the output matrix"]),
        (data[:4] + (13).to_bytes(4, "little") + data[8:], ["version 13"]),
    ]
    # The quantization flag (one byte before the input matrix's header) set: what fastText's quantize writes.
    vectors = load_vectors(path)
    rows = vectors.model.input.shape[0]
    at = data.index(np.array([rows, 10], "<i8").tobytes()) - 1
    cases.append((data[:at] + b"\1" + data[at + 1:], ["quantized fastText model (.ftz"]))
    for i, (bad, fragments) in enumerate(cases):
        bad_path = _damaged(path, tmp_path, bad, f"bad{i}.bin")
        result = run("inspect", bad_path)
        assert_one_line_error(result, str(bad_path), *fragments)


# -- writing -----------------------------------------------------------------------------------

def test_an_untouched_model_is_written_back_byte_for_byte(model_file, tmp_path):
    path, _ = model_file
    out = tmp_path / "copy.bin"
    result = run("convert", path, out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == path.read_bytes()


def test_changed_and_new_words_written_back_load_in_fasttext_and_gensim(model_file, tmp_path):
    from gensim.models.fasttext import load_facebook_model

    from embedtune.formats import save_vectors
    from embedtune.vectors import PatchedVectors

    path, model = model_file
    vectors = load_vectors(path)
    rng = np.random.default_rng(0)
    changed = np.array([3, 10, 400])
    new = ["zzqx", "héllo"]
    values = rng.normal(0, 0.3, (len(changed) + len(new), vectors.dim)).astype(np.float32)
    out = PatchedVectors(vectors.words.appended(new), vectors.matrix, np.concatenate([changed, [len(vectors),
                         len(vectors) + 1]]), values, model=vectors.model)
    seen = []
    target = tmp_path / "out.bin"
    save_vectors(out, target, "fasttext-model", on_written=lambda a, b, r: seen.append((a, r.copy())))
    back = fasttext.load_model(str(target))
    matrix = back.get_input_matrix()
    assert back.get_words() == list(out.words)
    for row, word in enumerate(out.words):
        got = fasttext_vector(back, matrix, word)
        if row in changed or row >= len(vectors):
            np.testing.assert_allclose(got, out[word], rtol=0, atol=2e-6)
        else:   # every other word (and its own row) unchanged, bit for bit
            assert same_bits(got, vectors.matrix[row])
    for word in UNSEEN[2:]:   # unseen words: the n-gram rows are the model's own
        assert same_bits(fasttext_vector(back, matrix, word), fasttext_vector(model, model.get_input_matrix(), word))
    # The read-back computes what fastText computes from the rows written.
    read_back = np.concatenate([r for _, r in seen])
    assert all(same_bits(read_back[i], fasttext_vector(back, matrix, w)) for i, w in enumerate(out.words))
    theirs = load_facebook_model(str(target))
    np.testing.assert_allclose(theirs.wv["zzqx"], out["zzqx"], atol=1e-5)
    np.testing.assert_allclose(theirs.wv[vectors.words[5]], vectors.matrix[5], atol=1e-5)
    assert load_vectors(target).words == list(out.words)


def test_writing_a_model_needs_a_model_read(tmp_path):
    vectors_file = tmp_path / "v.vec"
    vectors_file.write_text("2 3\na 1 2 3\nb 4 5 6\n")
    result = run("convert", vectors_file, tmp_path / "out.bin", "--to", "fasttext-model")
    assert_one_line_error(result, "fastText model", "subword rows")
    assert not (tmp_path / "out.bin").exists()


def test_a_keras_layer_takes_the_model_from_its_vectors_and_writes_it_back(model_file, tmp_path):
    """The layer keeps the model from_vectors read (Vectors.model), so its save_vectors writes the model back:
    untouched, byte for byte; a layer over vectors without one says so and writes nothing."""
    from embedtune import EmbedtuneError, Vectors
    from embedtune.keras import Embedding

    path, _ = model_file
    layer = Embedding.from_vectors(str(path), freeze_top=50)
    assert layer.fasttext_model is not None and layer.fasttext_model.nwords == len(layer.vocabulary)
    check = layer.save_vectors(tmp_path / "layer.bin", to="fasttext-model")
    assert check.checked == 50 and (tmp_path / "layer.bin").read_bytes() == path.read_bytes()
    plain = Embedding.from_vectors(Vectors(["a", "b"], np.ones((2, 3), np.float32)))
    assert plain.fasttext_model is None
    with pytest.raises(EmbedtuneError, match="fastText model"):
        plain.save_vectors(tmp_path / "plain.bin", to="fasttext-model")
    assert not (tmp_path / "plain.bin").exists()


# -- training ----------------------------------------------------------------------------------

def test_train_keeps_frozen_and_unseen_words_bit_for_bit_and_fasttext_loads_the_result(model_file, tmp_path):
    import dataclasses

    from gensim.models.fasttext import load_facebook_model

    from embedtune.config import from_options
    from embedtune.run import run as run_training

    path, model = model_file
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quokkaville council met the quokkaville mayor on monday\n"
                      "quokkaville is a small town near the river and the council\n" * 30)
    out = tmp_path / "tuned.bin"
    config = from_options({"freeze_top": 1000, "epochs": 2, "optimizer": "sgd", "lr": 0.05}, None)
    config = dataclasses.replace(config, vectors=str(path), corpus=str(corpus), output=str(out))
    result = run_training(config)
    assert result.written.checked == 1000 and result.written.worst == 0.0
    before, after = model.get_input_matrix(), fasttext.load_model(str(out))
    words = after.get_words()
    assert words[:len(model.get_words())] == model.get_words() and "quokkaville" in words
    matrix = after.get_input_matrix()
    frozen = np.flatnonzero(result.plan.frozen)
    assert all(same_bits(fasttext_vector(after, matrix, words[i]), fasttext_vector(model, before, words[i]))
               for i in frozen)
    for word in UNSEEN:
        assert same_bits(fasttext_vector(after, matrix, word), fasttext_vector(model, before, word))
    read = load_vectors(path)
    moved = [w for w in ("council", "town", "river", "small") if w in read and not np.array_equal(result.vectors[w], read[w])]
    assert moved and not any(result.plan.frozen[read.index[w]] for w in moved)
    for word in moved + ["quokkaville"]:   # trained and new words: fastText's arithmetic gives the trained vector
        np.testing.assert_allclose(fasttext_vector(after, matrix, word), result.vectors[word], rtol=0, atol=2e-6)
    gensim_model = load_facebook_model(str(out))
    np.testing.assert_allclose(gensim_model.wv["quokkaville"], result.vectors["quokkaville"], atol=1e-5)


def test_a_new_word_without_contexts_starts_as_the_models_own_vector_for_it(model_file, tmp_path):
    path, model = model_file
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the council met the mayor on monday near the river\n" * 20)
    listed = tmp_path / "new.txt"
    listed.write_text("zzqxville\n")
    out = tmp_path / "out.vec"
    result = run("train", path, corpus, "--freeze-top", 1000, "--epochs", 1, "--new-words", listed, "-o", out,
                 "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new_from_spelling_only"] == 1
    expected = fasttext_vector(model, model.get_input_matrix(), "zzqxville")   # its n-gram rows, as fastText
    assert same_bits(load_vectors(out)["zzqxville"], expected)


def test_the_dry_run_counts_the_models_matrices(model_file, tmp_path):
    path, model = model_file
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the council met the mayor\n" * 5)
    result = run("train", path, corpus, "--dry-run", "--json", "-o", tmp_path / "out.bin")
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    parts = described["memory_parts_bytes"]
    n = len(model.get_words())
    # A plain file's matrices are mapped: their pages are counted apart (reclaimable), not in the estimate.
    assert described["memory_mapped_bytes"] == (n + 2000 + n) * 10 * 4   # input: words + buckets; output: words
    assert parts["fasttext_model_matrices"] == 0
    assert described["memory_estimate_bytes"] == sum(parts.values())
    assert parts["spelling_model_fit"] == 0
    assert not (tmp_path / "out.bin").exists()


def test_init_adds_new_words_to_the_model_and_fasttext_loads_it(model_file, tmp_path):
    path, model = model_file
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quokkaville council met near the river\n" * 10)
    out = tmp_path / "init.bin"
    result = run("init", path, corpus, "-o", out, "--min-count", 2)
    assert result.exit_code == 0, result.output
    loaded = fasttext.load_model(str(out))
    words = loaded.get_words()
    assert words[:len(model.get_words())] == model.get_words() and words[-1] == "quokkaville"
    before, after = model.get_input_matrix(), loaded.get_input_matrix()
    assert np.array_equal(after[:len(model.get_words())], before[:len(model.get_words())])
    assert np.array_equal(after[len(words):], before[len(model.get_words()):])   # the subword rows
    as_text = tmp_path / "init.vec"   # the same start, written as text
    assert run("init", path, corpus, "-o", as_text, "--min-count", 2).exit_code == 0
    start = load_vectors(as_text)["quokkaville"]
    np.testing.assert_allclose(fasttext_vector(loaded, after, "quokkaville"), start, atol=2e-6)


def test_cut_or_scrambled_models_read_or_fail_with_the_files_name(model_file, tmp_path):
    from embedtune.errors import EmbedtuneError

    path, _ = model_file
    data = path.read_bytes()
    rng = np.random.default_rng(0)
    header = 8 + 56 + 28 + 200   # the settings, the dictionary's header and its first entries
    cases = [data[:int(n)] for n in rng.integers(0, len(data), 20)]
    for _ in range(40):
        scrambled = bytearray(data)
        scrambled[int(rng.integers(4, header))] = int(rng.integers(0, 256))
        cases.append(bytes(scrambled))
    for i, case in enumerate(cases):
        bad = tmp_path / f"case{i}.bin"
        bad.write_bytes(case)
        try:
            load_vectors(bad, format="fasttext-model")
        except EmbedtuneError as err:
            assert str(err).startswith(str(bad)), err


def test_inspect_reads_a_models_vectors_a_block_at_a_time(model_file, monkeypatch):
    # inspect (formats.stream_table) computes a block's word vectors at a time from the mapped matrices, never
    # the whole matrix at once (issue 48 item 6), with the bits of the whole read.
    from embedtune import formats
    from embedtune.formats.fasttext import FastTextModel

    path, _ = model_file
    whole = load_vectors(path)
    asked, computed = [], FastTextModel.word_vectors

    def counted(self, words, own_rows, progress=None):
        asked.append(len(own_rows))
        return computed(self, words, own_rows, progress)

    monkeypatch.setattr(FastTextModel, "word_vectors", counted)
    monkeypatch.setattr(formats.TableStream, "BLOCK_ROWS", 7)
    with formats.stream_table(path) as stream:
        blocks = list(stream.blocks())
    assert max(asked) <= 7 and sum(asked) == len(whole) > 7
    assert [w for words, _ in blocks for w in words] == list(whole.words)
    assert same_bits(np.concatenate([rows for _, rows in blocks]), whole.matrix)
    assert summarize_vectors(path)["count"] == len(whole)
