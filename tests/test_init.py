"""New-word starting vectors from contexts (embedtune.newwords.methods) and the `embedtune init` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune.cli.main import cli
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.formats import load_vectors, save_vectors
from embedtune.plan.choose import pick_new_words
from embedtune.newwords.common import fit_alacarte
from embedtune.newwords.contexts import context_sums, sif_weights
from embedtune.newwords.methods import initial_vectors
from embedtune.vectors import Vectors

CONTEXT_METHODS = ["context-mean", "alacarte"]


def cosines(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return matrix @ vector / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(vector))


def synthetic(n_words=300, dim=16, lines_per_word=40, seed=0, temperature=0.25):
    """Random vectors and a corpus in which a word's neighbours are words with similar vectors.

    Each line is a center word amid 4 distinct other words drawn with probability
    ~ exp(cos(center, word) / temperature), so contexts carry the information a start needs.
    """
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n_words, dim)).astype(np.float32)
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    words = [f"w{i}" for i in range(n_words)]
    lines = []
    for center in range(n_words):
        logits = unit @ unit[center] / temperature
        logits[center] = -np.inf
        p = np.exp(logits - logits.max())
        p /= p.sum()
        for _ in range(lines_per_word):
            a, b, c, d = rng.choice(n_words, 4, replace=False, p=p)
            lines.append([words[a], words[b], words[center], words[c], words[d]])
    return Vectors(words, matrix), lines


@pytest.fixture(scope="module")
def world():
    return synthetic()


def used_like(lines, known, new):
    """The corpus plus a copy of every line with ``known``, ``new`` in its place."""
    return lines + [[new if t == known else t for t in line] for line in lines if known in line]


@pytest.mark.parametrize("method", CONTEXT_METHODS)
def test_a_new_word_used_like_a_known_word_starts_nearest_to_it(world, method):
    vectors, lines = world
    for known in ["w0", "w17", "w123", "w250"]:
        corpus = Corpus(used_like(lines, known, "fresh"))
        result = initial_vectors(vectors, corpus, ["fresh"], method, window=2, fit_min_count=5)
        sims = cosines(vectors.matrix, result.matrix[0])
        assert vectors.words[int(np.argmax(sims))] == known, (method, known, np.sort(sims)[-3:])
        assert result.n_from_context == 1 and result.n_too_few == 0


def test_context_mean_of_a_stand_in_equals_that_of_the_word_it_stands_for(world):
    vectors, lines = world
    known = "w42"   # appears at most once per line, so the copy's contexts are exactly its own
    corpus = Corpus(used_like(lines, known, "fresh"))
    found = context_sums(vectors, corpus, [known, "fresh"], window=2)
    np.testing.assert_allclose(found.sums[1], found.sums[0], rtol=1e-6)
    assert found.mass[0] == found.mass[1] and found.contexts[0] == found.contexts[1]


def brute_force_sums(vectors, lines, targets, window, weight):
    """Within the window and over the whole line; a word is never its own context (a pretrained target
    stands for a word with no vector)."""
    dim = vectors.dim
    sums = {t: np.zeros(dim) for t in targets}
    line_sums = {t: np.zeros(dim) for t in targets}
    mass, contexts, line_mass, line_contexts = Counter(), Counter(), Counter(), Counter()
    for line in lines:
        for i, word in enumerate(line):
            if word not in sums:
                continue
            around = line[max(0, i - window):i] + line[i + 1:i + 1 + window]
            known = [w for w in around if w in vectors.index and w != word]
            for w in known:
                sums[word] += weight[w] * vectors[w]
                mass[word] += weight[w]
            contexts[word] += bool(known)
            in_line = [w for w in line if w in vectors.index and w != word]
            for w in in_line:
                line_sums[word] += weight[w] * vectors[w]
                line_mass[word] += weight[w]
            line_contexts[word] += bool(in_line)
    return sums, mass, contexts, line_sums, line_mass, line_contexts


@pytest.mark.parametrize("window", [1, 2, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_context_sums_match_a_brute_force_count_and_never_cross_a_line(window, weighted):
    rng = np.random.default_rng(3)
    vectors = Vectors([f"p{i}" for i in range(12)], rng.standard_normal((12, 5)))
    vocab = vectors.words + ["n0", "n1", "n2"]
    lines = [list(rng.choice(vocab, rng.integers(1, 9))) for _ in range(60)]
    targets = ["n0", "n1", "p3", "n2", "p7"]
    weights = rng.uniform(0.1, 1, 12).astype(np.float32) if weighted else None
    found = context_sums(vectors, Corpus(lines), targets, window, weights)
    weight = {w: (1.0 if weights is None else float(weights[i])) for i, w in enumerate(vectors.words)}
    sums, mass, contexts, line_sums, line_mass, line_contexts = brute_force_sums(vectors, lines, targets, window,
                                                                                weight)
    for row, word in enumerate(targets):
        np.testing.assert_allclose(found.sums[row], sums[word], rtol=1e-5, atol=1e-5)
        assert found.mass[row] == pytest.approx(mass[word], rel=1e-6), word
        assert found.contexts[row] == contexts[word], word
        np.testing.assert_allclose(found.line_sums[row], line_sums[word], rtol=1e-5, atol=1e-5)
        assert found.line_mass[row] == pytest.approx(line_mass[word], rel=1e-6, abs=1e-9), word
        assert found.line_contexts[row] == line_contexts[word], word


def test_context_sums_do_not_depend_on_chunk_size():
    rng = np.random.default_rng(4)
    vectors = Vectors([f"p{i}" for i in range(10)], rng.standard_normal((10, 3)))
    lines = [list(rng.choice(vectors.words + ["n"], rng.integers(1, 7))) for _ in range(80)]
    whole = context_sums(vectors, Corpus(lines), ["n", "p1"], 3)
    chunked = context_sums(vectors, Corpus(lines), ["n", "p1"], 3, chunk_tokens=5)
    np.testing.assert_allclose(chunked.sums, whole.sums, rtol=1e-6)
    np.testing.assert_array_equal(chunked.mass, whole.mass)
    np.testing.assert_array_equal(chunked.contexts, whole.contexts)


def test_context_sums_sample_occurrences_of_targets_as_asked(world):
    vectors, lines = world
    targets = ["w1", "w2", "w3"]
    everything = context_sums(vectors, Corpus(lines), targets, 2)
    sampled = context_sums(vectors, Corpus(lines), targets, 2, keep=np.array([1.0, 0.0, 0.5]), seed=3)
    assert sampled.contexts[0] == everything.contexts[0]
    np.testing.assert_allclose(sampled.sums[0], everything.sums[0], rtol=1e-6)
    assert sampled.contexts[1] == 0 and sampled.mass[1] == 0
    assert 0.35 < sampled.contexts[2] / everything.contexts[2] < 0.65


@pytest.mark.parametrize("method", CONTEXT_METHODS + ["random"])
def test_init_leaves_every_pretrained_row_bit_identical(world, method):
    vectors, lines = world
    before = vectors.matrix.copy()
    words_before = list(vectors.words)
    initial_vectors(vectors, Corpus(used_like(lines, "w3", "fresh")), ["fresh"], method, fit_min_count=5)
    assert vectors.words == words_before
    assert vectors.matrix.tobytes() == before.tobytes()


class Sentences:
    """A re-iterable corpus that builds its lines on the fly, like gensim's corpora."""

    def __init__(self, lines):
        self.lines = lines
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        return (" ".join(line) for line in self.lines)


@pytest.mark.parametrize("method", CONTEXT_METHODS)
def test_a_generator_fed_corpus_gives_the_same_start_as_a_file(world, tmp_path, method):
    vectors, lines = world
    lines = used_like(lines, "w9", "fresh")
    path = tmp_path / "corpus.txt"
    path.write_text("".join(" ".join(line) + "\n" for line in lines), encoding="utf-8")
    sentences = Sentences(lines)
    streamed = initial_vectors(vectors, Corpus(sentences), ["fresh"], method, fit_min_count=5)
    from_file = initial_vectors(vectors, Corpus(str(path)), ["fresh"], method, fit_min_count=5)
    assert sentences.passes == 2   # counts (for the context weights), then contexts
    np.testing.assert_array_equal(streamed.matrix, from_file.matrix)


def test_words_with_too_few_contexts_start_random(world):
    vectors, lines = world
    lines = used_like(lines, "w5", "often") + [["w1", "rare", "w2"], ["rare", "w4"], ["alone", "other"]]
    result = initial_vectors(vectors, Corpus(lines), ["often", "rare", "alone"], "context-mean", min_contexts=3)
    occurrences = sum(line.count("w5") for line in lines)
    np.testing.assert_array_equal(result.contexts, [occurrences, 2, 0])
    assert (result.n_from_context, result.n_too_few) == (1, 2)
    random_rows = result.matrix[1:]
    assert np.all(np.abs(random_rows) <= 0.5 / vectors.dim)
    assert np.abs(result.matrix[0]).max() > 0.5 / vectors.dim


def test_random_is_word2vecs_uniform_start(world):
    vectors, lines = world
    new = [f"n{i}" for i in range(50)]
    result = initial_vectors(vectors, Corpus(lines), new, "random", seed=7)
    assert result.matrix.shape == (50, vectors.dim) and result.matrix.dtype == np.float32
    assert np.abs(result.matrix).max() <= 0.5 / vectors.dim
    assert result.matrix.std() > 0.1 / vectors.dim
    assert (result.n_from_context, result.n_too_few) == (0, 0)
    again = initial_vectors(vectors, Corpus(lines), new, "random", seed=7)
    np.testing.assert_array_equal(result.matrix, again.matrix)


def test_fit_alacarte_recovers_a_linear_map():
    rng = np.random.default_rng(5)
    true = rng.standard_normal((6, 6))
    x = rng.standard_normal((200, 6))
    np.testing.assert_allclose(fit_alacarte(x, x @ true.T), true, atol=1e-8)


def test_sif_weights_make_frequent_context_words_weigh_less():
    vectors = Vectors(["the", "cat", "absent"], np.zeros((3, 2)))
    counts = Counter({"the": 900, "cat": 90, "zebra": 10})
    np.testing.assert_allclose(sif_weights(vectors, counts, 10), [10 / 910, 10 / 100, 1.0], rtol=1e-6)
    assert sif_weights(vectors, counts, 0) is None


def test_pick_new_words_most_frequent_first():
    vectors = Vectors(["a", "b"], np.zeros((2, 2)))
    counts = Counter({"a": 50, "x": 3, "y": 9, "z": 9, "b": 1, "q": 2})
    assert pick_new_words(counts, vectors, 3) == ["y", "z", "x"]
    assert pick_new_words(counts, vectors, 3, max_new=2) == ["y", "z"]


def test_bad_requests_are_errors(world):
    vectors, lines = world
    corpus = Corpus(lines)
    with pytest.raises(EmbedtuneError, match="unknown init method 'mean'"):
        initial_vectors(vectors, corpus, ["x"], "mean")
    with pytest.raises(EmbedtuneError, match="already have a vector"):
        initial_vectors(vectors, corpus, ["w1"], "context-mean")
    with pytest.raises(EmbedtuneError, match="window must be at least 1"):
        initial_vectors(vectors, corpus, ["x"], "context-mean", window=0)


def test_alacarte_without_enough_fitting_words_falls_back_to_context_mean_and_says_why(world):
    vectors, _ = world
    tiny = Corpus([["w1", "w2", "x"]] * 3)
    fell_back = initial_vectors(vectors, tiny, ["x"], "alacarte", fit_min_count=3)
    asked = initial_vectors(vectors, tiny, ["x"], "context-mean", fit_min_count=3)
    assert fell_back.stats["method"] == "context-mean"
    assert fell_back.stats["method_note"] == (
        "alacarte needs 16 pretrained words seen 3+ times in the corpus to fit its 16x16 map, found 2; "
        "new words start from their plain context mean (context-mean) instead")
    assert fell_back.matrix.tobytes() == asked.matrix.tobytes()
    assert "method_note" not in asked.stats


def test_init_and_train_follow_one_new_word_rule_on_a_small_corpus(tmp_path):
    # 40 lines of the sample: fewer than 50 GloVe words seen 20+ times, too few to fit alacarte's map.
    corpus = tmp_path / "small.txt"
    corpus.write_text("".join(open(SAMPLE_CORPUS, encoding="utf-8").readlines()[:40]), encoding="utf-8")
    vectors = tmp_path / "glove.txt"
    vectors.write_bytes(b"".join(open(SAMPLE_VECTORS, "rb").readlines()[:5000]))
    note = "alacarte needs 50 pretrained words seen 20+ times in the corpus to fit its 50x50 map, found"
    # alacarte falls back to context-mean; form-context (the default) keeps its name, its context side falls back.
    for asked, used in (("alacarte", "context-mean"), ("form-context", "form-context")):
        init = run(["init", vectors, corpus, "-o", tmp_path / "init.txt", "--min-count", "2", "--init", asked,
                    "--json"])
        assert init.exit_code == 0, init.output
        assert json.loads(init.stdout)["method"] == used
        assert json.loads(init.stdout)["method_note"].startswith(note)
        assert f"Note: {note}" in init.stderr
        trained = run(["train", vectors, corpus, "-o", tmp_path / "train.txt", "--min-count", "2", "--epochs", "1",
                       "--objective", "sgns", "--init", asked, "--json"])
        assert trained.exit_code == 0, trained.output
        summary = json.loads(trained.stdout)
        assert summary["init"] == used and summary["init_note"].startswith(note)
        assert f"Note: {note}" in trained.stderr
        # The same rule, so the same new words: init's starts are train's before training.
        assert summary["new"] == json.loads(init.stdout)["new"] > 0


# --- the command ----------------------------------------------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_VECTORS = os.path.join(REPO, "data", "sample", "glove.6B.50d.20k.txt")
SAMPLE_CORPUS = os.path.join(REPO, "data", "sample", "lee_background.cor")


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_cli_adds_the_corpus_new_words_after_bit_identical_glove_rows(tmp_path):
    out = tmp_path / "out.txt"
    # whitespace tokens, so the expected new words are the plain counts' (tests/test_tokenize.py: auto)
    result = run(["init", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", out, "--json", "--tokenize", "none"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    original = load_vectors(SAMPLE_VECTORS)
    counts = Counter(w for line in open(SAMPLE_CORPUS, encoding="utf-8") for w in line.lower().split())
    expected_new = pick_new_words(counts, original, 5)
    assert len(expected_new) > 100
    assert (summary["new"], summary["from_context"], summary["too_few_contexts"]) == (len(expected_new),
                                                                                      len(expected_new), 0)
    assert summary["method"] == "form-context" and summary["lowercase"] is True
    assert "Added" in result.stderr and "Wrote" in result.stderr
    # Unchanged rows are written as the very text they were read from.
    with open(SAMPLE_VECTORS, "rb") as f:
        original_bytes = f.read()
    assert out.read_bytes().startswith(original_bytes)
    written = load_vectors(out)
    assert written.words == original.words + expected_new
    assert written.matrix[: len(original)].tobytes() == original.matrix.tobytes()
    assert np.isfinite(written.matrix).all()


@pytest.mark.parametrize("method", CONTEXT_METHODS)
def test_cli_a_new_word_used_like_a_known_word_lands_next_to_it(world, tmp_path, method):
    vectors, lines = world
    vectors_path, corpus_path, out = tmp_path / "v.txt", tmp_path / "c.txt", tmp_path / "out.bin"
    save_vectors(vectors, vectors_path, "word2vec")
    corpus_path.write_text("".join(" ".join(line) + "\n" for line in used_like(lines, "w77", "fresh")))
    result = run(["init", vectors_path, corpus_path, "-o", out, "--to", "word2vec-binary", "--init", method,
                  "--window", "2", "--fit-min-count", "5"])
    assert result.exit_code == 0, result.output
    written = load_vectors(out, format="word2vec-binary")
    assert written.words == vectors.words + ["fresh"]
    assert written.matrix[:-1].tobytes() == vectors.matrix.tobytes()
    assert vectors.words[int(np.argmax(cosines(vectors.matrix, written["fresh"])))] == "w77"


def test_cli_random_and_too_few_contexts_are_reported(tmp_path):
    vectors = Vectors(["a", "b", "c"], np.eye(3))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a new b\n" * 3 + "lonely lonely lonely\n")
    out = tmp_path / "out.txt"
    result = run(["init", _saved(vectors, tmp_path), corpus, "-o", out,
                  "--init", "context-mean", "--min-count", "3", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["new"], summary["from_context"], summary["too_few_contexts"]) == (2, 1, 1)
    written = load_vectors(out)
    assert written.words == ["a", "b", "c", "lonely", "new"]
    np.testing.assert_allclose(written["new"], [0.5, 0.5, 0], rtol=1e-6)
    assert np.abs(written["lonely"]).max() <= 0.5 / 3


def _saved(vectors, folder):
    path = folder / "v.txt"
    save_vectors(vectors, path, "glove")
    return path


def test_cli_errors_are_one_line_and_leave_no_output(tmp_path):
    out = tmp_path / "out.txt"
    result = run(["init", SAMPLE_VECTORS, tmp_path / "missing.txt", "-o", out])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"Error: {tmp_path / 'missing.txt'}: no such corpus file"
    assert not out.exists() and result.stdout == ""
    result = run(["init", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", SAMPLE_CORPUS])
    assert result.exit_code == 1 and "output would overwrite an input" in result.stderr
    result = run(["init", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", "-", "--json"])
    assert result.exit_code == 1 and "standard output already carries the vectors" in result.stderr
    result = run(["init", SAMPLE_VECTORS, SAMPLE_CORPUS, "-o", out, "--window", "0"])
    assert result.exit_code == 2 and "--window" in result.stderr and "must be at least 1, got 0" in result.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    result = run(["init", SAMPLE_VECTORS, empty, "-o", out])
    assert result.exit_code == 1 and "the corpus has no words" in result.stderr
    assert not out.exists()
    assert "Traceback" not in result.output


def test_init_does_not_import_tensorflow(tmp_path):
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from embedtune.cli.main import cli\n"
        f"r = CliRunner().invoke(cli, ['init', {SAMPLE_VECTORS!r}, {SAMPLE_CORPUS!r}, '-o', {str(tmp_path / 'o.txt')!r},"
        " '--init', 'random'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('tensorflow' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_cli_refuses_an_output_that_is_the_input_spelled_another_way(tmp_path):
    vectors = tmp_path / "glove.txt"
    vectors.write_bytes(b"".join(open(SAMPLE_VECTORS, "rb").readlines()[:200]))
    before = vectors.read_bytes()
    result = run(["init", vectors, SAMPLE_CORPUS, "-o", f"{tmp_path}/./glove.txt"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {tmp_path}/./glove.txt: output would overwrite an input; choose another -o"]
    assert vectors.read_bytes() == before


def test_a_one_pass_generator_is_spooled_and_read_as_often_as_needed(world):
    vectors, lines = world
    corpus = Corpus(" ".join(line) for line in lines)
    first, second = list(corpus.lines()), list(corpus.lines())
    assert first == second == [line for line in lines if line]
    corpus.close()
