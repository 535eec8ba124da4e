"""embedtune.compare on in-memory vectors and on the GloVe sample (first 20k words of GloVe 6B 50d)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors
from gensim.test.utils import datapath
from hypothesis import given, settings
from hypothesis import strategies as st

from embedtune.compare import diff as diff_module
from embedtune.compare import analogy_search
from embedtune.compare import (
    Evaluation,
    check_frozen,
    config_frozen_words,
    diff_vectors,
    evaluate,
    evaluate_analogies,
    evaluate_similarity,
    nearest_neighbors,
)
from embedtune.errors import EmbedtuneError
from embedtune.formats import load_vectors
from embedtune.vectors import Vectors

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"


def make_vectors(n=50, dim=8, seed=0, prefix="w"):
    rng = np.random.default_rng(seed)
    return Vectors([f"{prefix}{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def with_row(vectors, word, row):
    matrix = vectors.matrix.copy()
    matrix[vectors.index[word]] = row
    return Vectors(list(vectors.words), matrix)


# ---------------------------------------------------------------------------------------------
# diff


def test_diff_of_equal_sets_finds_nothing():
    a = make_vectors()
    d = diff_vectors(a, Vectors(list(a.words), a.matrix.copy()))
    assert (d.identical, d.changed, d.added, d.removed) == (50, 0, 0, 0)
    assert d.l2_max is None and d.cosine_min is None and d.most_moved == []


def test_diff_finds_the_one_changed_row_and_its_distances():
    a = make_vectors()
    old_row = a["w7"].astype(np.float64)
    new_row = a["w7"] + np.float32(0.25)
    b = with_row(a, "w7", new_row)
    d = diff_vectors(a, b)
    assert (d.identical, d.changed, d.added, d.removed) == (49, 1, 0, 0)
    assert [m.word for m in d.most_moved] == ["w7"]
    new64 = new_row.astype(np.float64)
    expect_l2 = np.linalg.norm(new64 - old_row)
    expect_cos = new64 @ old_row / (np.linalg.norm(new64) * np.linalg.norm(old_row))
    assert d.l2_max == pytest.approx(expect_l2, rel=1e-6) and d.l2_mean == d.l2_max
    assert d.cosine_min == pytest.approx(expect_cos, rel=1e-6) and d.cosine_mean == d.cosine_min


def test_diff_counts_a_sign_flip_of_zero_as_a_change():
    # Equal as numbers, different as bits: a frozen row must stay bit-identical.
    a = make_vectors()
    a.matrix[3, 0] = 0.0
    b = Vectors(list(a.words), a.matrix.copy())
    b.matrix[3, 0] = -0.0
    d = diff_vectors(a, b)
    assert d.changed == 1 and d.most_moved[0].word == "w3" and d.most_moved[0].l2 == 0.0


def test_diff_matches_rows_by_word_not_position():
    a = make_vectors(20)
    order = np.random.default_rng(1).permutation(20)
    keep = order[:17]  # drop three words, shuffle the rest
    words = [a.words[i] for i in keep] + ["new1", "new2"]
    matrix = np.vstack([a.matrix[keep], np.ones((2, a.dim), np.float32)])
    b = Vectors(words, matrix)
    d = diff_vectors(a, b)
    removed = [w for w in a.words if w not in b.index]
    assert (d.identical, d.changed, d.added, d.removed) == (17, 0, 2, 3)
    assert d.added_words == ["new1", "new2"] and d.removed_words == removed


def test_diff_lists_most_moved_largest_first():
    a = make_vectors(30, dim=4)
    matrix = a.matrix.copy()
    for i, step in [(2, 0.1), (9, 3.0), (4, 1.0), (20, 0.5)]:
        matrix[i, 0] += step
    d = diff_vectors(a, Vectors(list(a.words), matrix), top=3)
    assert d.changed == 4
    assert [m.word for m in d.most_moved] == ["w9", "w4", "w20"]
    assert [m.l2 for m in d.most_moved] == pytest.approx([3.0, 1.0, 0.5], rel=1e-5)


def test_diff_refuses_different_dimensions():
    with pytest.raises(EmbedtuneError, match="4 dimensions, but the other file's have 8"):
        diff_vectors(make_vectors(dim=8), make_vectors(dim=4))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    data=st.data(),
    chunk=st.sampled_from([1, 3, 7, 65536]),
    shuffle=st.booleans(),
)
def test_diff_finds_exactly_the_changed_rows(n, data, chunk, shuffle):
    a = make_vectors(n, dim=5, seed=n)
    changed = data.draw(st.sets(st.integers(0, n - 1)))
    matrix = a.matrix.copy()
    for i in changed:
        matrix[i, i % 5] = np.nextafter(matrix[i, i % 5], np.float32(np.inf))  # the smallest change there is
    order = np.random.default_rng(n).permutation(n) if shuffle else np.arange(n)
    b = Vectors([a.words[i] for i in order], matrix[order])
    old_chunk = diff_module.CHUNK_ROWS
    diff_module.CHUNK_ROWS = chunk
    try:
        d = diff_vectors(a, b, top=n)
        frozen = check_frozen(a, b, a.words)
    finally:
        diff_module.CHUNK_ROWS = old_chunk
    expected = {a.words[i] for i in changed}
    assert d.changed == len(changed) and d.identical == n - len(changed)
    assert {m.word for m in d.most_moved} == expected
    assert set(frozen.changed) == expected and frozen.ok == (not changed)


# ---------------------------------------------------------------------------------------------
# frozen words


def test_check_frozen_reports_changed_removed_and_unknown_words():
    a = make_vectors(10)
    b = with_row(a, "w2", np.zeros(a.dim, np.float32))
    b = Vectors(b.words[:9], b.matrix[:9])  # w9 gone
    result = check_frozen(a, b, ["w1", "w2", "w9", "nope", "w2"])
    assert result.changed == ["w2"] and result.removed == ["w9"] and result.unknown == ["nope"]
    assert result.checked == 3 and not result.ok
    assert check_frozen(a, b, ["w0", "w1", "nope"]).ok


def test_config_frozen_words_follow_the_freeze_rules(tmp_path):
    from embedtune.config import VocabConfig

    v = make_vectors(6)
    assert config_frozen_words(v, VocabConfig(freeze_top=2)) == ["w0", "w1"]
    assert config_frozen_words(v, VocabConfig()) == []
    train = tmp_path / "train.txt"
    train.write_text("w1\nw4\nunknown\n")
    assert config_frozen_words(v, VocabConfig(train_list=str(train))) == ["w0", "w2", "w3", "w5"]


# ---------------------------------------------------------------------------------------------
# evaluation and neighbours on real vectors


@pytest.fixture(scope="module")
def glove():
    return load_vectors(SAMPLE)


@pytest.fixture(scope="module")
def gensim_glove(glove):
    # Built through gensim's own API, independent of to_keyed_vectors.
    kv = KeyedVectors(glove.dim)
    kv.add_vectors(glove.words, glove.matrix.copy())
    return kv


def test_similarity_scores_equal_gensims(glove, gensim_glove):
    for name in ("wordsim353.tsv", "simlex999.txt"):
        pearson, spearman, oov = gensim_glove.evaluate_word_pairs(datapath(name))
        score = evaluate_similarity(glove, datapath(name))
        # Pearson follows scipy's steps: the same bits with scipy 1.17, within rounding of other versions'.
        assert score.pearson == pytest.approx(pearson.statistic, rel=0, abs=1e-15)
        assert score.spearman == spearman.statistic
        assert score.oov_ratio * 100 == pytest.approx(oov)
    assert evaluate_similarity(glove, datapath("wordsim353.tsv")).pairs == 353


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 400), st.integers(0, 2), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_pearson_and_spearman_are_scipys_on_tied_data(n, gold_digits, model_digits, seed):
    """Scores rounded to few digits (many ties, as human judgements have) against cosines as float32,
    as evaluate_similarity passes them: the average ranks are scipy's exactly, so Spearman is; Pearson
    within float rounding (the same bits with scipy 1.17, whose steps it follows)."""
    from scipy import stats

    from embedtune.compare.evaluation import average_ranks, pearson, spearman

    rng = np.random.default_rng(seed)
    gold = [float(g) for g in np.round(rng.uniform(0, 10, n), gold_digits)]
    model = list(np.round(rng.uniform(-1, 1, n), model_digits + 1).astype(np.float32))
    if min(gold) == max(gold) or min(model) == max(model):
        return   # no correlation exists (_check_correlatable says so before either is called)
    assert np.array_equal(average_ranks(gold), stats.rankdata(gold))
    assert np.array_equal(average_ranks(model), stats.rankdata(model))
    assert spearman(gold, model) == stats.spearmanr(gold, model).statistic
    assert pearson(gold, model) == pytest.approx(stats.pearsonr(gold, model).statistic, rel=0, abs=1e-15)
    if n == 2:
        assert abs(pearson(gold, model)) == 1.0


def test_average_ranks_share_the_mean_rank_of_equal_values():
    from embedtune.compare.evaluation import average_ranks

    assert average_ranks([3.0, 1.0, 3.0, 2.0, 3.0, 1.0]).tolist() == [5.0, 1.5, 5.0, 3.0, 5.0, 1.5]


def _gensim_sections(kv, path, restrict_vocab, case_insensitive=True):
    score, sections = kv.evaluate_word_analogies(path, restrict_vocab=restrict_vocab, case_insensitive=case_insensitive)
    return score, [(s["section"], len(s["correct"]), len(s["correct"]) + len(s["incorrect"])) for s in sections[:-1]]


def test_analogy_scores_equal_gensims_with_a_restricted_vocabulary(glove, gensim_glove):
    score, sections = _gensim_sections(gensim_glove, datapath("questions-words.txt"), 3000)
    ours = evaluate_analogies(glove, datapath("questions-words.txt"), restrict_vocab=3000)
    assert ours.accuracy == score and ours.questions == 19544
    assert [(s.name, s.correct, s.answered) for s in ours.sections] == sections
    assert 0 < ours.answered < ours.questions  # the restriction did skip questions
    headline = Evaluation([], [ours]).headline()
    assert headline[:2] == [("questions-words", "accuracy", score), ("questions-words", "oov_ratio", ours.oov_ratio)]
    assert headline[2] == ("questions-words: capital-common-countries", "accuracy", ours.sections[0].accuracy)
    assert len(headline) == 2 + len(ours.sections)


@pytest.mark.parametrize("case_insensitive, slots", [(True, 9), (False, 8)])
def test_analogies_in_odd_tiles_and_out_of_slots_equal_gensims(glove, gensim_glove, monkeypatch, case_insensitive,
                                                                slots):
    """Vocabulary blocks and tiles cut at odd places (an answer is often in a later tile than the
    first), and questions that run out of candidate slots (8: every one that finds a better row after
    its first eight is scored against every row) give gensim's answers."""
    monkeypatch.setattr(analogy_search, "TILE_ROWS", 997)
    monkeypatch.setattr(analogy_search, "BLOCK_ROWS", 1500)
    if slots == 8:
        monkeypatch.setattr(analogy_search, "BLOCK_BYTES", 1)   # blocks of one tile: many words' products
    monkeypatch.setattr(analogy_search, "SLOTS", slots)
    path = datapath("questions-words.txt")
    score, sections = _gensim_sections(gensim_glove, path, 4000, case_insensitive)
    ours = evaluate_analogies(glove, path, restrict_vocab=4000, case_insensitive=case_insensitive)
    assert [(s.name, s.correct, s.answered) for s in ours.sections] == sections
    assert ours.accuracy == score


def test_analogies_screened_on_several_threads_equal_one_threads_and_gensims(glove, gensim_glove, monkeypatch):
    """Each thread screens its own share of the questions: shares of uneven sizes, a question that runs
    out of slots (SLOTS 8) in any share, and more threads than questions give one thread's answers,
    which are gensim's."""
    monkeypatch.setattr(analogy_search, "TILE_ROWS", 997)
    monkeypatch.setattr(analogy_search, "BLOCK_ROWS", 1500)
    monkeypatch.setattr(analogy_search, "SLOTS", 8)
    rows = {w: i for i, w in reversed(list(enumerate(glove.words)))}
    with open(datapath("questions-words.txt")) as f:
        questions = [line.lower().split() for line in f if not line.startswith(":")]
    asked = [q for q in questions if all(rows.get(w, 4000) < 4000 for w in q)][::7]
    abc = np.array([[rows[w] for w in q[:3]] for q in asked], np.int64)
    one = analogy_search.answer_analogies(glove.matrix, 4000, abc, threads=1)
    for threads in (2, 3, len(abc) + 5):
        assert analogy_search.answer_analogies(glove.matrix, 4000, abc, threads=threads) == one, threads
    few = [(a, b, c) for a, b, c, _ in asked[:40]]
    assert one[:40] == [[rows[w] for w, _ in gensim_glove.most_similar(positive=[b, c], negative=[a], topn=5,
                                                                        restrict_vocab=4000)] for a, b, c in few]


def _candidates_of_every_row(products, pair_a, pair_b, c_rows, q_pair, q_c, scale, margin, top):
    """For each question, the rows that analogy_search._screen must keep, from every row's score in its
    arithmetic ((b - a + c) * scale in float32): those within ``margin`` of the 8th best, as {row: score}."""
    wanted = []
    for q in range(len(q_pair)):
        b_a = products[pair_b[q_pair[q]]] - products[pair_a[q_pair[q]]]
        scores = (b_a + products[c_rows[q_c[q]]]) * scale[q]
        threshold = np.sort(scores)[-top] - margin
        wanted.append({int(r): scores[r] for r in np.flatnonzero(scores >= threshold)})
    return wanted


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tile_rows, groups", [(64, 8), (100, 8), (700, 64), (37, 64), (64, 64)])
def test_the_screens_group_bounds_pass_over_no_group_holding_a_candidate(seed, tile_rows, groups):
    """The screen passes over a group of rows when the largest (b - a) and the largest c in it add up to less
    than a question's threshold: on products made to sit near the thresholds, scales from tiny to huge,
    thresholds of both signs, tiles cut into groups evenly, unevenly, into one row a group (the bound is then
    the row's own sum) and into more groups than rows, every question kept exactly the rows of the exact test
    run on every row, with their scores, or ran out of slots (and is then scored against every row)."""
    rng = np.random.default_rng(seed)
    words, rows, m, slots, top = 12, 700, 60, 12, 4
    products = rng.uniform(-1, 1, (words, rows)).astype(np.float32)
    products[:, rng.integers(0, rows, 40)] = products[:, :1]   # equal columns: ties at the threshold
    pairs = rng.integers(0, words, (9, 2))
    pair_a, pair_b = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
    c_rows = rng.permutation(words)[:7]
    q_pair, q_c = rng.integers(0, len(pairs), m), rng.integers(0, len(c_rows), m)
    scale = (10.0 ** rng.uniform(-3, 30, m)).astype(np.float32)
    margin = np.float32(1e-4)
    wanted = _candidates_of_every_row(products, pair_a, pair_b, c_rows, q_pair, q_c, scale, margin, top)
    score, row = np.full((m, slots), -np.inf, np.float32), np.zeros((m, slots), np.int64)
    count, overflow = np.zeros(m, np.int64), np.zeros(m, bool)
    analogy_search._screen(products, 0, tile_rows, groups, pair_a, pair_b, c_rows, q_pair, q_c, scale, score, row,
                           count, overflow, margin, top, np.empty((len(pairs), groups), np.float32),
                           np.empty((len(c_rows), groups), np.float32), np.empty(tile_rows, np.float32))
    for q in range(m):
        if not overflow[q]:   # else it is scored against every row
            n = count[q]
            assert dict(zip(row[q, :n].tolist(), score[q, :n])) == wanted[q], q
            assert score[q, :n].tolist() == sorted(wanted[q].values(), reverse=True), q
    assert (~overflow).sum() >= m // 2   # the test tests the kept rows of most questions


def test_unit_rows_transposed_are_numpys_quotients_with_rows_without_direction_as_zeros():
    """The compiled unit rows: numpy's float32 quotient of each row by its norm, bit for bit, and zeros for
    a zero row, a row with a NaN or an infinity, and a row whose norm overflows float32; rows past
    ``restrict`` are left out."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((9, 5)).astype(np.float32)
    matrix[1] = 0.0
    matrix[2, 3] = np.nan
    matrix[3, 0] = np.inf
    matrix[4] = 3e38
    matrix[5] *= np.float32(1e-15)
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(matrix, axis=1)
        want = matrix / norms[:, None]
    want[~np.isfinite(want).all(axis=1)] = 0.0
    got = analogy_search._unit_rows_transposed(matrix, norms[:7], 7)
    assert got.shape == (5, 7) and np.array_equal(got, want[:7].T)
    assert not got[:, 1:5].any() and got[:, [0, 5, 6]].all()


@pytest.mark.parametrize("width, groups", [(512, 64), (700, 64), (96, 8), (5, 8), (1, 1)])
def test_group_maxima_are_each_groups_largest_value(width, groups):
    """_group_maxima's halving on a width that halves down to the groups, one that does not and one narrower
    than the groups: each group's largest (b - a), or largest c, as numpy finds it."""
    rng = np.random.default_rng(width)
    products = rng.standard_normal((4, width + 3)).astype(np.float32)
    out = np.empty((2, groups), np.float32)
    analogy_search._group_maxima(products, np.array([1, -1]), np.array([2, 3]), 3, width + 3, groups,
                                 np.empty(width, np.float32), out)
    for i, values in enumerate([products[2, 3:] - products[1, 3:], products[3, 3:]]):
        want = [values[g::groups].max() if g < width else -np.inf for g in range(groups)]
        assert out[i].tolist() == want


def test_analogies_with_a_tiny_vocabulary_and_mixed_case_words_equal_gensims(tmp_path):
    """Fewer rows than gensim's 8 ranked candidates, a word in two cases (the first row counts) and
    a zero row: the edge cases of most_similar, compared with gensim itself. A zero row as a
    question's word makes its query NaN: no answer (gensim ranks the NaN scores in no set order)."""
    rng = np.random.default_rng(5)
    words = ["a", "b", "c", "d", "A", "e", "zero"]
    matrix = rng.standard_normal((len(words), 4)).astype(np.float32)
    matrix[-1] = 0.0
    v = Vectors(words, matrix)
    questions = tmp_path / "q.txt"
    lines = [": one"] + [" ".join(q) for q in
                         [("a", "b", "c", "d"), ("b", "c", "d", "e"), ("A", "b", "c", "a"), ("c", "d", "e", "b"),
                          ("d", "e", "a", "c"), ("a", "b", "c", "zero")]]
    questions.write_text("\n".join(lines) + "\n")
    kv = KeyedVectors(4)
    kv.add_vectors(words, matrix.copy())
    for restrict in (3, 5, 7):
        for ci in (True, False):
            with np.errstate(invalid="ignore", divide="ignore"):
                score, sections = _gensim_sections(kv, str(questions), restrict, ci)
            ours = evaluate_analogies(v, questions, restrict_vocab=restrict, case_insensitive=ci)
            assert [(s.name, s.correct, s.answered) for s in ours.sections] == sections, (restrict, ci)
    nan_query, plain = analogy_search.answer_analogies(matrix, 7, np.array([[6, 0, 1], [0, 1, 2]]))
    assert nan_query == []
    with np.errstate(invalid="ignore", divide="ignore"):
        want = kv.most_similar(positive=["b", "c"], negative=["a"], topn=5)
    assert plain == [words.index(w) for w, _ in want]


def test_gensim_compat_has_gensims_paths_and_unit_vectors_bit_for_bit():
    from gensim.matutils import unitvec as gensim_unitvec

    from embedtune.compare.gensim_compat import gensim_datapath, unit_rows, unitvec

    assert gensim_datapath("simlex999.txt") == datapath("simlex999.txt")
    rng = np.random.default_rng(3)
    rows = (rng.standard_normal((300, 50)) * rng.uniform(1e-3, 1e3, (300, 1))).astype(np.float32)
    rows[0], rows[1, 7] = 0.0, np.nan
    want = np.stack([gensim_unitvec(row) for row in rows])
    assert np.array_equal(unit_rows(rows), want, equal_nan=True)
    assert all(np.array_equal(unitvec(row), w, equal_nan=True) for row, w in zip(rows, want))


def test_evaluate_reports_progress_in_questions(glove):
    calls = []
    e = evaluate(glove, similarity=[], analogies=[datapath("questions-words.txt")], restrict_vocab=2000,
                 progress=lambda advance, total: calls.append((advance, total)))
    answered = e.analogies[0].answered
    assert sum(a for a, _ in calls) == answered and {t for _, t in calls} == {answered}


def test_evaluate_runs_only_the_files_asked_for(glove):
    e = evaluate(glove, similarity=[datapath("wordsim353.tsv")], analogies=[])
    assert [s.name for s in e.similarity] == ["wordsim353"] and e.analogies == []
    assert [row[:2] for row in e.headline()] == [
        ("wordsim353", "pearson"), ("wordsim353", "spearman"), ("wordsim353", "oov_ratio")
    ]


def test_similarity_with_every_pair_unknown_has_no_score(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("# header\nfoo\tbar\t3.5\nbaz\tqux\t1\n")
    score = evaluate_similarity(make_vectors(), pairs)
    assert (score.pearson, score.pairs, score.pairs_used, score.oov_ratio) == (None, 2, 0, 1.0)
    assert score.to_dict()["pearson"] is None


def test_evaluation_files_without_questions_are_errors(tmp_path):
    empty = tmp_path / "pairs.tsv"
    empty.write_text("a b c\n")
    with pytest.raises(EmbedtuneError, match="no word pairs found"):
        evaluate_similarity(make_vectors(), empty)
    headless = tmp_path / "analogies.txt"
    headless.write_text("a b c d\n")
    with pytest.raises(EmbedtuneError) as err:
        evaluate_analogies(make_vectors(), headless)
    assert str(err.value) == f"{headless} line 1: analogy question before any ': section' header line"


def test_neighbors_of_france_are_its_neighbours_in_glove(glove):
    result = nearest_neighbors(glove, ["france", "no-such-word"], k=5)
    assert result.unknown == ["no-such-word"]
    [france] = result.results
    assert [w for w, _ in france.neighbors] == ["french", "belgium", "paris", "spain", "netherlands"]


def test_neighbors_equal_gensims_most_similar(glove, gensim_glove):
    words = ["king", "frog", "computer", "the", "1990"]
    result = nearest_neighbors(glove, words, k=10)
    for word, got in zip(words, result.results):
        want = gensim_glove.most_similar(word, topn=10)
        assert got.word == word
        assert [w for w, _ in got.neighbors] == [w for w, _ in want]
        assert [c for _, c in got.neighbors] == pytest.approx([c for _, c in want], abs=1e-5)


def test_neighbors_exclude_the_word_itself_and_stop_at_the_vocabulary():
    v = Vectors(["a", "b", "c"], np.array([[1, 0], [1, 0.1], [0, 1]], np.float32))
    [a] = nearest_neighbors(v, ["a"], k=10).results
    assert [w for w, _ in a.neighbors] == ["b", "c"]
    assert a.neighbors[1][1] == pytest.approx(0.0)


# -- diff_file: the new file read a block at a time (issue 48) ----------------------------------

def _changed_copy(seed: int):
    """The sample's first 6000 rows with rows moved (by a little, to zeros, to -0.0, to NaN), some dropped,
    new words added and the order shuffled: every kind of row a diff reports."""
    vectors = load_vectors(SAMPLE, limit=6000)
    rng = np.random.default_rng(seed)
    matrix = vectors.matrix.copy()
    moved = rng.choice(len(matrix), 900, replace=False)
    matrix[moved] += rng.standard_normal((900, matrix.shape[1])).astype(np.float32) * 0.01
    matrix[moved[:3]] = 0
    matrix[moved[3]] = -0.0 * matrix[moved[3]]
    matrix[moved[4], 7] = np.nan
    keep = np.ones(len(matrix), bool)
    keep[rng.choice(len(matrix), 300, replace=False)] = False
    words = [w for w, k in zip(vectors.words, keep) if k] + [f"new{i}" for i in range(40)]
    matrix = np.concatenate([matrix[keep], rng.standard_normal((40, matrix.shape[1])).astype(np.float32)])
    order = rng.permutation(len(words))
    frozen = list(vectors.words[:200]) + [vectors.words[int(r)] for r in moved[:30]] + ["not-a-word", "the"]
    return vectors, Vectors([words[i] for i in order], matrix[order]), frozen


@pytest.mark.parametrize("fmt", ["glove", "word2vec-binary"])
def test_diff_file_reports_what_diff_vectors_and_check_frozen_do(tmp_path, fmt):
    from embedtune.compare import diff_file
    from embedtune.formats import save_vectors

    old, new, frozen = _changed_copy(3)
    path = tmp_path / "new.vec"
    save_vectors(new, path, fmt)
    expected = (diff_vectors(old, new, top=7).to_dict(), check_frozen(old, new, frozen).to_dict())
    d, check = diff_file(old, path, allow_nan=True, frozen_words=frozen, top=7)
    assert (d.to_dict(), check.to_dict()) == expected
    assert d.changed > 800 and d.added == 40 and d.removed == 300 and check.changed and check.removed


def test_diff_file_takes_a_repeated_words_first_row_and_says_errors_as_load_vectors(tmp_path):
    from embedtune.compare import diff_file

    old, new, _ = _changed_copy(4)
    lines = [w + " " + " ".join(repr(float(x)) for x in row) for w, row in zip(new.words, new.matrix)]
    lines[300] = lines[20].split(" ", 1)[0] + " " + lines[301].split(" ", 1)[1]   # a word old has, again
    lines[400] = "new0 " + lines[402].split(" ", 1)[1]                          # an added word, again
    path = tmp_path / "repeated.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kept = load_vectors(path, keep_first_duplicate=True, allow_nan=True)
    d, _ = diff_file(old, path, keep_first_duplicate=True, allow_nan=True)
    assert d.to_dict() == diff_vectors(old, kept).to_dict()
    for options in ({"allow_nan": True}, {"keep_first_duplicate": True}, {}):
        with pytest.raises(EmbedtuneError) as expected:
            load_vectors(path, **options)
        with pytest.raises(EmbedtuneError) as got:
            diff_file(old, path, **options)
        assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("case_insensitive", [True, False])
def test_the_benchmark_word_index_of_the_wanted_words_only_has_their_first_rows(case_insensitive, monkeypatch):
    """Asked for some words, _first_rows gives each the row it has in the index of every word (its first
    occurrence, across slices too), and nothing for the others; a wanted word missing from the file is missing."""
    from types import SimpleNamespace

    from embedtune.compare import evaluation

    monkeypatch.setattr(evaluation, "_FIRST_ROWS_SLICE", 3)
    vectors = SimpleNamespace(words=["the", "The", "of", "cat", "THE", "dog", "cat", "Of", "x"])
    every = evaluation._first_rows(vectors, case_insensitive)
    wanted = {"THE", "OF", "CAT", "cat", "bird", "The"}
    got = evaluation._first_rows(vectors, case_insensitive, wanted)
    assert got == {w: every[w] for w in wanted if w in every}
    assert got == ({"THE": 0, "OF": 2, "CAT": 3} if case_insensitive else {"cat": 3, "The": 1, "THE": 4})


def test_the_benchmark_word_index_lets_other_threads_run_while_it_builds():
    # The cli redraws an open bar from another thread; one C call that builds the whole index
    # holds the GIL, so that thread waited the whole build. Built in slices, it gets turns.
    import threading
    import time
    from types import SimpleNamespace

    from embedtune.compare.evaluation import _first_rows

    words = [f"w{i % 1_500_000}" for i in range(3_000_000)]
    vectors = SimpleNamespace(words=words)
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=tick)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    rows = _first_rows(vectors, case_insensitive=False)
    end = time.perf_counter()
    stop.set()
    thread.join()
    during = [t for t in ticks if start <= t <= end] + [end]
    longest = max(b - a for a, b in zip([start] + during, during))
    assert longest < 0.5 * (end - start)
    assert rows == dict(zip(reversed(words), range(len(words) - 1, -1, -1)))
    assert list(rows) == list(dict(zip(reversed(words), range(len(words) - 1, -1, -1))))
    assert rows["w0"] == 0 and rows["w1499999"] == 1_499_999


def test_the_screens_bound_is_lowered_below_threshold_over_scale():
    """The screen tests a group by its largest sum against threshold / scale, where the exact test multiplies:
    a row whose score x * f (float32) just reaches the threshold can have threshold / f round above x. Without
    lowering that quotient a little, the screen passed over the row's group and lost a candidate the exact test
    keeps (here: the second of two equal rows, the first setting the threshold, with no margin)."""
    x = np.uint32(1054348639).view(np.float32)   # 0.42203805
    f = np.uint32(1077015683).view(np.float32)   # 2.7805488
    threshold = x * f
    assert threshold / f > x   # the case itself: the quotient rounds up past the row's own sum
    products = np.array([[0, 0], [x, x], [0, 0]], np.float32)   # the words a, b, c against two rows
    one = np.array([0]), np.array([1]), np.array([2])
    score, row = np.full((1, 4), -np.inf, np.float32), np.zeros((1, 4), np.int64)
    count, overflow = np.zeros(1, np.int64), np.zeros(1, bool)
    analogy_search._screen(products, 0, 1, 1, *one, np.array([0]), np.array([0]), np.array([f]), score, row, count,
                           overflow, np.float32(0), 1, np.empty((1, 1), np.float32), np.empty((1, 1), np.float32),
                           np.empty(1, np.float32))
    assert not overflow[0] and count[0] == 2
    assert row[0, :2].tolist() == [0, 1] and score[0, :2].tolist() == [threshold, threshold]


def test_the_rescoring_of_all_questions_at_once_is_each_questions_own():
    """_ranked_all ranks every question's candidates with one gather and one sort: the same rows in the same
    order as _ranked gives each question alone (its sgemv on its own rows: the same bits), with equal rows (ties
    in row order), a zero row (a NaN score, last), a question without candidates and ones with fewer than top."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((300, 6)).astype(np.float32)
    matrix[10:20] = matrix[5]   # ties
    matrix[30] = 0.0
    norms = np.linalg.norm(matrix, axis=1)
    candidates = [np.sort(rng.choice(300, size, replace=False)) for size in (9, 0, 3, 12, 8, 1)]
    candidates.append(np.array(sorted({*range(5, 13), 30, *rng.choice(300, 10).tolist()})))   # ties, the zero row
    counts = np.array([len(c) for c in candidates])
    queries = analogy_search._queries(matrix, norms, rng.integers(0, 300, (len(counts), 3)))
    with np.errstate(divide="ignore", invalid="ignore"):
        got = analogy_search._ranked_all(matrix, norms, np.concatenate(candidates), counts, queries, 8)
        want = [analogy_search._ranked(matrix, norms, c, queries[j], 8) for j, c in enumerate(candidates)]
    assert [[r for r in row if r >= 0] for row in got.tolist()] == want
    assert (got[counts < 8] < 0).any() and (got[counts >= 8] >= 0).all()


def test_analogy_lines_upper_cased_whole_give_their_words_upper_cases(tmp_path):
    """_read_analogies upper-cases a line before it splits it: the same words as each word upper-cased."""
    from embedtune.compare.evaluation import _read_analogies

    path = tmp_path / "q.txt"
    lines = ["straße ﬁsh\tὀδυσσεύς paris", "ʼn\u00a0b c d"]   # a tab and a no-break space between words
    path.write_text(": one\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert _read_analogies(str(path), True) == [("one", [tuple(w.upper() for w in line.split()) for line in lines])]
