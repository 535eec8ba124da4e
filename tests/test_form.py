"""The spelling model (embedtune.newwords.spelling) and the form-context start (embedtune.newwords.form_context,
`init`/`train --init form-context`)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from embedtune.corpus import Corpus
from embedtune.newwords.spelling import (FormModel, _conjugate_gradient, _fnv, _numpy_round, fit_form,
                                        piece_matrix, pieces)
from embedtune.formats import load_vectors
from embedtune.newwords import form_context, spelling
from embedtune.newwords.form_context import column_mean, combine_form_context
from embedtune.newwords.methods import initial_vectors
from embedtune.vectors import Vectors

from train_fixtures import SAMPLE_CORPUS, bits, glove, run, write_glove_text


def brute_force_pieces(word):
    """Every (start, end) slice of <word> 3 to 6 characters long, and <word> itself when longer than 6."""
    wrapped = "<" + word + ">"
    found = Counter()
    for start in range(len(wrapped)):
        for end in range(start + 1, len(wrapped) + 1):
            if 3 <= end - start <= 6:
                found[wrapped[start:end]] += 1
    if len(wrapped) > 6:
        found[wrapped] += 1
    return found


def fnv1a(piece):
    """32-bit FNV-1a, one round per code point (per byte for ASCII)."""
    h = 0x811C9DC5
    for ch in piece:
        h = ((h ^ ord(ch)) * 0x01000193) % 2 ** 32
    return h


def test_the_piece_hash_is_fnv1a():
    # The published FNV-1a 32-bit test vectors (www.isthe.com/chongo/tech/comp/fnv), by the reference
    # above and by the vectorised hash piece_matrix uses, all three pieces hashed at once.
    pieces_, expected = ["", "a", "foobar"], [0x811C9DC5, 0xE40C292C, 0xBF9CF968]
    assert [fnv1a(piece) for piece in pieces_] == expected
    codes = np.frombuffer("".join(pieces_).encode("utf-32-le"), np.uint32)
    lengths = np.array([len(piece) for piece in pieces_])
    assert _fnv(codes, np.cumsum(lengths) - lengths, lengths).tolist() == expected


@pytest.mark.parametrize("word", ["a", "of", "the", "tigers", "insurgency", "aaaaaa", "naïve", "東京", "antidisestablishmentarianism", "ab"])
def test_pieces_and_their_buckets_match_a_brute_force_definition(word):
    assert Counter(pieces(word)) == brute_force_pieces(word)
    buckets = 1000
    row = piece_matrix([word], buckets).toarray()[0]
    expected = np.zeros(buckets)
    total = sum(brute_force_pieces(word).values())
    for piece, times in brute_force_pieces(word).items():
        expected[fnv1a(piece) % buckets] += times / total
    np.testing.assert_allclose(row, expected, rtol=1e-6)
    assert row.sum() == pytest.approx(1.0)


def test_piece_matrix_of_many_words_has_each_words_own_row():
    # All words are hashed together (one array of code points): no piece may cross into a neighbour.
    words = ["a", "of", "tigers", "naïve", "東京", "antidisestablishmentarianism", "ab", "aaaaaa", "x"]
    together = piece_matrix(words, 1000).toarray()
    for i, word in enumerate(words):
        np.testing.assert_array_equal(together[i], piece_matrix([word], 1000).toarray()[0])


def morphology(n_stems=150, dim=20, seed=0):
    """Words stem + suffix whose vector is the stem's plus the suffix's (random letters, random vectors)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    stems = sorted({"".join(rng.choice(letters, 6)) for _ in range(n_stems)})
    suffixes = ["", "s", "ed", "ing", "er", "ers", "ly", "ness"]
    stem_vec = {s: rng.standard_normal(dim) for s in stems}
    suffix_vec = {s: 0.7 * rng.standard_normal(dim) for s in suffixes}
    words, matrix = [], []
    for stem in stems:
        for suffix in suffixes:
            words.append(stem + suffix)
            matrix.append(stem_vec[stem] + suffix_vec[suffix])
    return words, np.array(matrix, np.float32)


def test_the_fit_recovers_held_out_words_of_a_synthetic_morphology():
    words, matrix = morphology()
    rng = np.random.default_rng(1)
    held_out = np.zeros(len(words), bool)
    held_out[rng.choice(len(words), len(words) // 8, replace=False)] = True
    known = Vectors([w for w, h in zip(words, held_out) if not h], matrix[~held_out])
    model = fit_form(known, fit_words=0, buckets=2 ** 18, ridge=0.01, iterations=60)
    assert model.stats["form_relative_residual"] < 1e-3
    guess = model.predict([w for w, h in zip(words, held_out) if h])
    truth = matrix[held_out]
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    cos_truth = np.sum(guess * truth, axis=1) / (np.linalg.norm(guess, axis=1) * np.linalg.norm(truth, axis=1))
    assert np.median(cos_truth) > 0.8
    # Nearest word of the whole vocabulary is the true one for most held-out words.
    nearest = np.argmax(guess @ unit.T, axis=1)
    assert np.mean(nearest == np.flatnonzero(held_out)) > 0.6


def test_fit_uses_the_first_rows_and_unseen_pieces_give_zero():
    words, matrix = morphology(n_stems=40)
    vectors = Vectors(words, matrix)
    model = fit_form(vectors, fit_words=80, iterations=20)
    assert model.stats["form_fit_words"] == 80
    assert isinstance(model, FormModel) and model.table.shape[1] == matrix.shape[1]
    assert not model.predict(["qqqqqq"]).any() or "qqq" in "".join(words)
    zero = model.predict(["\u2603\u2603\u2603\u2603"])
    assert zero.shape == (1, matrix.shape[1]) and not zero.any()


def test_a_fit_for_some_words_keeps_only_their_buckets_and_predicts_them_bit_for_bit():
    words, matrix = morphology(n_stems=60)
    vectors = Vectors(words[:400], matrix[:400])
    asked = words[400:] + ["\u2603\u2603\u2603\u2603"]   # unseen stems, and a word of unseen pieces
    whole = fit_form(vectors, fit_words=0, buckets=2 ** 16, iterations=4)
    part = fit_form(vectors, fit_words=0, buckets=2 ** 16, iterations=4, words=asked)
    asked_buckets = np.unique(piece_matrix(asked, 2 ** 16).indices)
    assert set(part.used) == set(asked_buckets) & set(whole.used)
    assert len(part.used) < len(whole.used) == part.stats["form_used_buckets"]
    assert bits(part.predict(asked)).tobytes() == bits(whole.predict(asked)).tobytes()
    assert part.stats["form_relative_residual"] == whole.stats["form_relative_residual"]


def test_a_fit_for_given_words_keeps_their_vectors_not_their_buckets_table():
    # The 1M x 300 job's start held the asked words' buckets' table (67 MB) beside the fit's work arrays: a fit for
    # given words turns each block of columns into the words' vectors as it is solved, so its peak stays below a
    # fit of every bucket by more than half that table (here the same buckets: every fitting word asked).
    import tracemalloc

    words, matrix = morphology(n_stems=60, dim=512)
    vectors = Vectors(words, matrix)
    fit_form(vectors, fit_words=50, buckets=2 ** 10, iterations=1, words=words[:3])   # compiled before it counts
    peaks = []
    for asked in (None, words):
        tracemalloc.start()
        model = fit_form(vectors, fit_words=0, buckets=2 ** 16, iterations=3, words=asked)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        if asked is None:
            whole = model
    assert model.table is None and len(model.used) == len(whole.used)
    assert bits(model.vectors).tobytes() == bits(whole.predict(words)).tobytes()
    assert bits(model.predict(words[5:1:-1])).tobytes() == bits(whole.predict(words[5:1:-1])).tobytes()
    table_bytes = whole.table.nbytes
    assert peaks[1] + table_bytes // 2 < peaks[0], (peaks, table_bytes)
    with pytest.raises(ValueError, match="other words"):
        model.predict(["unasked"])


def test_the_fit_gives_the_same_bits_whatever_the_column_blocks(monkeypatch):
    # fit_form solves its columns a block at a time, the targets read from the rows a block at a time (no copy
    # of the fitting rows' vectors): each column's bits must not depend on the block it was solved in.
    # Blocks of one column are the exception (numpy sums a lone column pairwise): column_blocks leaves one alone
    # only where the blocks of 32 of before did (dim % 32 == 1).
    for dim in (33, 37):
        words, matrix = morphology(n_stems=60, dim=dim)
        vectors = Vectors(words[:400], matrix[:400])
        asked = words[400:]
        outputs = []
        for width in (32, 16, 5, 3):
            monkeypatch.setattr(spelling, "COLUMN_BLOCK", width)
            monkeypatch.setattr(spelling, "NARROW_BLOCK", width)
            blocks = spelling.column_blocks(dim, width)
            assert [c.stop - c.start == 1 for c in blocks] == [False] * (len(blocks) - 1) + [dim == 33]
            model = fit_form(vectors, fit_words=0, buckets=2 ** 16, iterations=3, words=asked,
                             exclude=np.arange(0, 400, 7))
            whole = fit_form(vectors, fit_words=0, buckets=2 ** 16, iterations=3, exclude=np.arange(0, 400, 7))
            outputs.append((whole.table.tobytes(), whole.predict(asked).tobytes(), model.predict(asked).tobytes()))
            assert outputs[-1][1] == outputs[-1][2]
        assert all(out == outputs[0] for out in outputs[1:])


def test_the_blocks_narrow_only_where_the_work_arrays_would_be_large():
    assert spelling.block_width(1000) == spelling.COLUMN_BLOCK
    width = spelling.block_width(478_375)   # 1M x 300's fit
    assert spelling.NARROW_BLOCK <= width < spelling.COLUMN_BLOCK and 16 * 478_375 * width <= spelling.WORK_BYTES
    assert spelling.block_width(10 ** 8) == spelling.NARROW_BLOCK
    assert 16 * 300_000 * spelling.block_width(300_000) <= spelling.WORK_BYTES


@pytest.mark.parametrize("shape", [(1, 4), (9, 1), (10, 2), (32, 3), (33, 50), (100, 7)])
def test_column_mean_has_the_bits_of_numpys_mean_without_its_float64_copy(monkeypatch, shape):
    # form-context's centre: the mean of the fitting rows in float64, summed a block of rows at a time (4 here,
    # so that the blocks' seams are crossed) and still numpy's bits, for a C-ordered matrix or any other.
    monkeypatch.setattr(form_context, "MEAN_BLOCK", 4)
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    matrix = (rng.standard_normal(shape) * rng.choice([1e-4, 1.0, 1e4], size=(shape[0], 1))).astype(np.float32)
    matrix[0, 0] = -0.0
    for m in (matrix, np.asfortranarray(matrix), matrix[::2]):
        assert column_mean(m).tobytes() == np.asarray(m, np.float64).mean(axis=0).tobytes()


def test_more_cg_rounds_bring_the_fit_closer_to_the_ridge_solution():
    words, matrix = morphology(n_stems=30, dim=5)
    vectors = Vectors(words, matrix)
    buckets, ridge = 2 ** 12, 0.1
    m = piece_matrix(words, buckets).toarray().astype(np.float64)
    exact = np.linalg.solve(m.T @ m + ridge * np.eye(buckets), m.T @ matrix)
    errors = []
    for rounds in (1, 3, 10, 200):
        model = fit_form(vectors, fit_words=0, buckets=buckets, ridge=ridge, iterations=rounds)
        errors.append(np.abs(model.table - exact[model.used]).max())
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-4, errors


def test_the_compiled_cg_rounds_give_numpys_bits():
    """The conjugate gradient's element-wise steps are compiled (kernels/spelling.py) and must round as numpy's
    did, operation by operation: the same X and residual, bit for bit, as the rounds made in numpy."""
    words, matrix = morphology(n_stems=80, dim=19)
    m = piece_matrix(words, 2 ** 12)
    m = m[:, np.unique(m.indices)].tocsr()
    mt = m.T.tocsr()
    ridge, keep, target = 0.1, np.arange(0, m.shape[1], 3), np.ascontiguousarray(matrix, np.float32)
    inv = (1.0 / (np.asarray(m.multiply(m).sum(axis=0)).ravel() + ridge)).astype(np.float32)[:, None]
    x, r_sq, b_sq = _conjugate_gradient(m, mt, inv, ridge, target, 4, keep)
    r = mt @ target
    want_x = np.zeros((len(keep), r.shape[1]), np.float32)
    z = inv * r
    p = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    for _ in range(4):
        rz = _numpy_round(m, mt, ridge, p, r, z, want_x, rz, inv, keep)
    assert np.abs(want_x).max() > 0
    assert x.tobytes() == want_x.tobytes()
    assert r_sq == float(np.einsum("ij,ij->", r, r, dtype=np.float64)) and b_sq > r_sq


def test_combined_start_weight_follows_the_evidence():
    context = np.array([[3.0, 0.0]] * 4)
    form = np.array([[0.0, 1.0]] * 4)
    k = 10.0
    evidence = np.array([0, 5, 10, 90])
    out = combine_form_context(form, context, evidence, k)
    angle_from_context = np.arctan2(out[:, 1], out[:, 0])
    # Orthogonal unit starts mixed n/(n+k) : k/(n+k): tan(angle) = k / n.
    np.testing.assert_allclose(np.tan(angle_from_context[1:]), k / evidence[1:], rtol=1e-5)
    assert angle_from_context[0] == pytest.approx(np.pi / 2)
    assert np.all(np.diff(angle_from_context) < 0)
    # Length: the same mix of the two lengths (3 and 1).
    w = evidence / (evidence + k)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), w * 3 + (1 - w) * 1, rtol=1e-5)
    # No seen piece: the context start is kept as it is.
    kept = combine_form_context(np.zeros((1, 2)), np.array([[0.3, -0.4]]), np.array([2]), k)
    np.testing.assert_array_equal(kept, np.array([[0.3, -0.4]], np.float32))


def test_combined_start_mixes_deviations_from_the_centre():
    # Both starts share the centre's direction (as skip-gram vectors share their mean's): mixed as they are,
    # it swamps the difference; mixed as deviations, each side's own part decides the direction.
    centre = np.array([10.0, 0.0, 0.0])
    form = centre + np.array([[0.0, 1.0, 0.0]])
    context = centre + np.array([[0.0, 0.0, 3.0]])
    out = combine_form_context(form, context, np.array([10]), 10.0, centre=centre)
    # w = 1/2 of the unit deviations, length the mean of theirs (1 and 3), then the centre added back
    np.testing.assert_allclose(out[0], centre + 2.0 * np.array([0.0, 1.0, 1.0]) / np.sqrt(2), rtol=1e-5)
    # A zero form (no piece seen) still leaves the context start as it is; neither side: zero (the random start's)
    kept = combine_form_context(np.zeros((2, 3)), np.vstack([context, np.zeros((1, 3))]), np.array([2, 0]), 10.0,
                                centre=centre)
    np.testing.assert_allclose(kept, np.vstack([context, np.zeros((1, 3))]), rtol=1e-6)


def test_form_context_gives_a_word_without_contexts_a_start_from_its_spelling():
    vectors = glove(20000, drop=("threatens",))
    corpus = Corpus([["the", "lions", "and", "the", "bears"]] * 3 + [["threatens"]])
    result = initial_vectors(vectors, corpus, ["threatens"], "form-context", fit_min_count=1)
    assert result.stats["from_form_only"] == 1 and result.n_too_few == 0
    start = result.matrix[0]
    unit = vectors.matrix / np.linalg.norm(vectors.matrix, axis=1, keepdims=True)
    nearest = [vectors.words[i] for i in np.argsort(-(unit @ start))[:10]]
    assert {"threaten", "threatened", "threatening"} & set(nearest), nearest


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("form_cli")
    vectors = folder / "glove.5k.txt"
    write_glove_text(glove(5000), vectors)
    corpus = folder / "news.txt"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:60]) + "\n",
                      encoding="utf-8")
    return {"vectors": vectors, "corpus": corpus, "input": load_vectors(vectors)}


def test_cli_init_form_context_keeps_glove_rows_and_reports_the_form_fit(files, tmp_path):
    out = tmp_path / "out.txt"
    result = run(["init", files["vectors"], files["corpus"], "-o", out, "--init", "form-context", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # the probe words (embedtune.newwords.fitted) are left out of the spelling fit, to be predicted as new words are
    assert summary["method"] == "form-context" and summary["form_fit_words"] == 5000 - summary["probe_words"]
    assert "spelling" in result.stderr
    written = load_vectors(out)
    original = files["input"]
    assert written.words[:len(original)] == original.words
    assert bits(written.matrix[:len(original)]).tobytes() == bits(original.matrix).tobytes()
    assert len(written) == len(original) + summary["new"] > len(original)


def test_cli_train_form_context_keeps_frozen_rows_and_a_huge_anchor_keeps_the_combined_start(files, tmp_path):
    started = tmp_path / "init.txt"
    trained = tmp_path / "trained.txt"
    assert run(["init", files["vectors"], files["corpus"], "-o", started, "--init", "form-context"]).exit_code == 0
    result = run(["train", files["vectors"], files["corpus"], "-o", trained, "--init", "form-context",
                  "--freeze-pretrained", "--objective", "glove", "--epochs", "1", "--anchor", "1e9", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["init"] == "form-context"
    # Every new word is counted once: from its contexts, from its spelling alone, or random.
    assert summary["new_from_context"] + summary["new_from_spelling_only"] + summary["new_too_few_contexts"] \
        == summary["new"] > 0
    assert "started from their spelling alone" in result.stderr
    original = files["input"]
    start, out = load_vectors(started), load_vectors(trained)
    assert out.words[:len(original)] == original.words
    assert bits(out.matrix[:len(original)]).tobytes() == bits(original.matrix).tobytes()
    assert out.words == start.words
    # The anchor pulls toward the form-context start, not toward some other start.
    np.testing.assert_allclose(out.matrix[len(original):], start.matrix[len(original):], atol=1e-4)


def test_a_fit_for_words_of_unseen_pieces_only_predicts_zeros():
    # Found by tests/test_properties.py: no asked word shares a piece with a pretrained word, so the
    # fit keeps no bucket, and predicting indexed an empty array.
    words, matrix = morphology(n_stems=20)
    part = fit_form(Vectors(words, matrix), fit_words=0, buckets=2 ** 16, iterations=3, words=["\u2603\u2603\u2603"])
    assert len(part.used) == 0
    zero = part.predict(["\u2603\u2603\u2603"])
    assert zero.shape == (1, matrix.shape[1]) and not zero.any()


def test_the_centred_gate_scores_the_mix_combine_form_context_makes():
    # best_gate's closed form picks the w whose start, as combine_form_context mixes it with the centre, has the
    # best mean cosine of deviations from the centre to the truth's: the same w as mixing every w.
    from embedtune.newwords.fitted import GATE_GRID, _unit, best_gate

    rng = np.random.default_rng(1)
    for noise in (0.2, 1.0, 4.0):
        centre = rng.normal(size=20) * 2
        truth = centre + rng.normal(size=(300, 20)) * 2
        context = 0.6 * truth + rng.normal(size=(300, 20)) * noise
        form = 0.5 * truth + rng.normal(size=(300, 20)) * 1.5
        form[:5] = 0
        keep = np.any(form != 0, axis=1)
        scores = []
        for w in GATE_GRID:
            start = combine_form_context(form[keep], context[keep], np.ones(keep.sum()),
                                         weight=np.full(keep.sum(), w), centre=centre).astype(np.float64)
            scores.append(np.einsum("ij,ij->i", _unit(start - centre), _unit(truth[keep] - centre)).mean())
        assert best_gate(context, form, truth, centre) == GATE_GRID[int(np.argmax(scores))]
