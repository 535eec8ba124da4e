"""--new-words FILE (embedtune.plan.choose) and the starts fitted on the corpus's own words
(embedtune.newwords.form_context, its maps and gate in embedtune.newwords.fitted)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from embedtune.config import Config, VocabConfig, merge
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.plan.choose import effective_min_count, pick_new_words, read_new_words
from embedtune.newwords.contexts import context_sums
from embedtune.plan.rows import plan_rows
from embedtune.newwords.fitted import DEFAULT_SLOTS, PARTS, best_gate, fit_starts
from embedtune.newwords.form_context import form_context_vectors, gather
from embedtune.vectors import Vectors

from train_fixtures import bits, glove, make_config, run, sample_lines, write_glove_text


def small_vectors():
    return Vectors(["the", "cat", "sat", "on", "mat"], np.eye(5, 4, dtype=np.float32) + 0.1)


def test_a_list_gives_its_words_and_no_other_unless_min_count_is_given(tmp_path):
    path = tmp_path / "new.txt"
    path.write_text("Zebu\n\nzebu\ncat\nokapi\n", encoding="utf-8")
    listed = read_new_words(str(path), lowercase=True)
    assert listed == ["zebu", "cat", "okapi"]   # lower-cased as the corpus, repeats dropped, blank lines skipped
    counts = Counter({"the": 50, "frequent": 40, "zebu": 1, "cat": 9})
    vectors = small_vectors()
    assert effective_min_count(None, listed=True) is None and effective_min_count(None, listed=False) == 5
    assert pick_new_words(counts, vectors, None, 0, listed) == ["zebu", "okapi"]   # "cat" has a vector
    assert pick_new_words(counts, vectors, 5, 0, listed) == ["zebu", "okapi", "frequent"]
    assert pick_new_words(counts, vectors, 5, 0, None) == ["frequent"]


@pytest.mark.parametrize("content, message, line", [
    (b"good\ntwo words\n", "holds a space", 2),
    (b"ok\n\xff\xfe\n", "not valid UTF-8", 2),
    (b"\n\n", "holds no word", None),
])
def test_a_bad_list_is_one_error_naming_the_file_and_line(tmp_path, content, message, line):
    path = tmp_path / "new.txt"
    path.write_bytes(content)
    with pytest.raises(EmbedtuneError, match=message) as err:
        read_new_words(str(path))
    assert err.value.path == str(path) and err.value.line == line


def test_train_plans_only_the_listed_words_when_min_count_is_unset(tmp_path):
    path = tmp_path / "new.txt"
    path.write_text("zebu\nokapi\n", encoding="utf-8")
    counts = Counter({"the": 50, "frequent": 40, "zebu": 1})
    config = merge(Config(), {"new_words": str(path)})
    new_words, plan = plan_rows(small_vectors(), counts, 91, config, None)
    assert new_words == ["zebu", "okapi"] and plan.n_new == 2
    config = merge(Config(vocab=VocabConfig(new_words=str(path))), {"min_count": 30})
    assert plan_rows(small_vectors(), counts, 91, config, None)[0] == ["zebu", "okapi", "frequent"]


def test_cli_init_new_words_reports_the_words_without_context(tmp_path):
    vectors = glove(1000, drop=("river", "banks"))
    write_glove_text(vectors, tmp_path / "v.txt")
    lines = ["the river flooded the town after the storm", "boats on the river and the banks of the river"] * 20
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "new.txt").write_text("river\nbanks\nzorblat\nthe\n", encoding="utf-8")
    result = run(["init", tmp_path / "v.txt", tmp_path / "c.txt", "-o", tmp_path / "o.txt",
                  "--new-words", tmp_path / "new.txt", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["new"] == 3 and summary["listed_in_vectors"] == 1 and summary["listed_not_in_corpus"] == 1
    assert summary["from_form_only"] == 1 and summary["from_context"] == 2   # zorblat: spelling alone
    out = (tmp_path / "o.txt").read_text(encoding="utf-8").splitlines()
    assert [line.split(" ", 1)[0] for line in out[-3:]] == ["river", "banks", "zorblat"] and len(out) == len(vectors) + 3
    bad = run(["init", tmp_path / "v.txt", tmp_path / "c.txt", "-o", tmp_path / "o2.txt",
               "--new-words", tmp_path / "none.txt"])
    assert bad.exit_code == 1 and "none.txt: no such word-list file" in bad.output


def test_init_and_train_start_new_words_by_one_call(tmp_path):
    """`embedtune init` is add_new_words and its output; train makes the same call for the words its plan
    chose: the same words start from the same bits (form-context, the default: its spelling fit and probes)."""
    from embedtune.formats import load_vectors
    from embedtune.newwords import NewWordSettings, add_new_words
    from embedtune.training import train

    vectors = glove(3000)
    write_glove_text(vectors, tmp_path / "v.txt")
    lines = sample_lines(80)
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = str(tmp_path / "c.txt")
    added = add_new_words(vectors, Corpus(corpus, lowercase=True), NewWordSettings(min_count=3))
    assert len(added.chosen.words) > 5 and added.start.stats["method"] == "form-context"
    result = run(["init", tmp_path / "v.txt", tmp_path / "c.txt", "-o", tmp_path / "o.txt", "--min-count", "3",
                  "--tokenize", "none"])
    assert result.exit_code == 0, result.output
    written = load_vectors(str(tmp_path / "o.txt"))
    assert written.words[len(vectors):] == added.chosen.words
    assert bits(written.matrix[len(vectors):]).tolist() == bits(added.start.matrix).tolist()
    trained = train(vectors, Corpus(corpus, lowercase=True),
                    make_config({"min_count": 3}, objective="sgns", max_steps=1, seed=1))
    assert trained.plan.words[len(vectors):] == added.chosen.words
    assert bits(trained.init.matrix).tolist() == bits(added.start.matrix).tolist()


def test_probe_buckets_are_nested_and_the_last_holds_every_occurrence():
    rng = np.random.default_rng(5)
    vectors = Vectors([f"p{i}" for i in range(12)], rng.standard_normal((12, 4)))
    lines = [list(rng.choice(vectors.words, rng.integers(2, 9))) for _ in range(200)]
    found = context_sums(vectors, Corpus(lines), ["p3"], 2, probes=["p3", "p5"],
                         probe_counts=np.array([300.0, 300.0]), probe_slots=(2, 8, 10_000))
    seen = found.probe_line[:, :, -1]
    assert np.all(np.diff(seen, axis=1) >= 0) and seen[0, 0] < seen[0, 1] < seen[0, 2]
    # the last bucket (slot above the count) keeps every occurrence: the target's own sums
    np.testing.assert_allclose(found.probe_line[0, 2, :4], found.line_sums[0], rtol=1e-9)
    np.testing.assert_allclose(found.probe_near[0, 2, :4], found.sums[0], rtol=1e-9)
    assert seen[0, 2] == found.line_contexts[0]


def test_the_gate_follows_whichever_start_is_right():
    rng = np.random.default_rng(0)
    truth, other = rng.standard_normal((200, 8)), rng.standard_normal((200, 8))
    assert best_gate(truth + 0.01 * other, other, truth) == 1.0
    assert best_gate(other, truth + 0.01 * other, truth) == 0.0
    assert 0.2 < best_gate(truth + other, truth - other, truth) < 0.8


def test_fitted_starts_report_their_gate_and_start_held_out_words_near_their_vectors():
    drop = ("cities", "countries", "officials", "companies")
    vectors = glove(8000, drop=drop)
    from train_fixtures import SAMPLE_CORPUS

    with Corpus(str(SAMPLE_CORPUS), lowercase=True) as corpus:
        counts = corpus.count()[0]
        fitted = form_context_vectors(vectors, corpus, list(drop), parts=PARTS, counts=counts, probes=400)
    stats = fitted.stats
    assert stats["probe_words"] == 400 and len(stats["form_k_per_bucket"]) == 7
    assert all(k > 0 for k in stats["form_k_per_bucket"]) and np.isfinite(fitted.matrix).all()
    assert stats["form_fit_words"] == len(vectors) - 400   # from inside the spelling model's rows: left out of its fit
    truth = glove(20000).matrix[[glove(20000).index[w] for w in drop]]
    cos = np.sum(truth * fitted.matrix, 1) / np.linalg.norm(truth, axis=1) / np.linalg.norm(fitted.matrix, axis=1)
    assert cos.mean() > 0.5, cos


def test_train_dry_run_takes_new_words_as_an_option(tmp_path):
    vectors = glove(2000, drop=("river",))
    write_glove_text(vectors, tmp_path / "v.txt")
    (tmp_path / "c.txt").write_text("the river and the town\nthe river by the town\n" * 10, encoding="utf-8")
    (tmp_path / "new.txt").write_text("river\nzorblat\n", encoding="utf-8")
    result = run(["train", tmp_path / "v.txt", tmp_path / "c.txt", "-o", tmp_path / "o.txt", "--new-words",
                  tmp_path / "new.txt", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new"] == 2


def test_probes_inside_the_spelling_rows_are_left_out_of_its_fit_and_the_maps_are_centred():
    from train_fixtures import SAMPLE_CORPUS

    vectors = glove(20000, drop=("cities",))
    with Corpus(str(SAMPLE_CORPUS), lowercase=True) as corpus:
        counts = corpus.count()[0]
        evidence = gather(vectors, corpus, ["cities"], counts=counts, probes=300, form_options={"fit_words": 3000})
    inside = int((evidence.probe_rows < 3000).sum())
    assert len(evidence.probe_rows) == 300 and 0 < inside < 300
    assert evidence.stats["form_fit_words"] == 3000 - inside   # each probe's spelling predicted from other words
    model, stats = fit_starts(evidence.sums, evidence.fit_rows, 1, vectors, evidence.probe_rows,
                              evidence.form[1:], DEFAULT_SLOTS, ("per_n", "line", "gate", "centre"))
    assert any(stats["maps_per_bucket"][:2]) and not any(stats["maps_per_bucket"][2:])   # up to 2 contexts
    # a centred map: the bucket's mean average starts where the all-occurrence map puts it, whatever the
    # probes' own mean vector (which once pulled every start toward the probes' cluster)
    b = stats["maps_per_bucket"].index(True)
    a, mean_x, mean_start = model.maps[b]
    at_mean = model.context(mean_x[None, :50], mean_x[None, 50:], np.array([model.slots[b]]), per_n=True)[0]
    np.testing.assert_allclose(at_mean, model.base(mean_x[None, :50])[0], atol=1e-9)


def test_a_frequent_fitting_word_gives_its_map_a_sample_of_300_occurrences():
    """The map's fitting words each give about 300 of their occurrences (newwords.defaults.DEFAULT_FIT_OCCURRENCES:
    as good as 1,000 on the new-word benchmark, benchmarks/log/glove_job.md); a word seen fewer times gives all."""
    from train_fixtures import SAMPLE_CORPUS

    vectors = glove(20000, drop=("cities",))
    with Corpus(str(SAMPLE_CORPUS), lowercase=True) as corpus:
        counts = corpus.count()[0]
        evidence = gather(vectors, corpus, ["cities"], counts=counts, probes=0)
    seen = dict(zip((vectors.words[r] for r in evidence.fit_rows.tolist()), evidence.sums.contexts[evidence.n_new:]))
    frequent = [w for w in seen if counts[w] >= 1000]   # "the", "to", "of", ...: kept at 300 / count
    assert len(frequent) >= 4 and all(220 < seen[w] < 380 for w in frequent), {w: seen[w] for w in frequent}
    fewer = [w for w in seen if 30 <= counts[w] <= 200]
    assert fewer and all(seen[w] >= 0.9 * counts[w] for w in fewer)


def test_train_writes_a_listed_word_the_corpus_never_shows_from_its_spelling(tmp_path):
    from embedtune.training import train

    from train_fixtures import make_config

    (tmp_path / "new.txt").write_text("river\nzorblat\n", encoding="utf-8")
    vectors = glove(2000, drop=("river",))
    lines = [["the", "river", "and", "the", "town"], ["a", "boat", "on", "the", "river"]] * 10
    config = make_config({"new_words": str(tmp_path / "new.txt")}, epochs=1, max_steps=2, objective="sgns", sample=0.0)
    result = train(vectors, Corpus(lines), config)
    assert result.vectors.words[-2:] == ["river", "zorblat"] and result.stats["new_from_spelling_only"] == 1
    assert np.isfinite(result.vectors.matrix[-2:]).all() and np.any(result.vectors.matrix[-1] != 0)


def test_line_blend_weighs_the_window_and_the_line_as_the_probes_say():
    # best_blend picks the share of the window's average (the line's the rest) whose mix with the spelling is
    # nearest the probes' vectors: all window where only the window carries the word, all line where only the line
    # does, and a start of a blended bucket uses it.
    from embedtune.newwords.fitted import BLEND_GRID, FittedStarts, best_blend

    rng = np.random.default_rng(3)
    truth = rng.standard_normal((400, 12))
    noise = rng.standard_normal((400, 12)) * 3
    form = truth + rng.standard_normal((400, 12)) * 2
    model = FittedStarts((1.0, 2.0), [None, None], np.eye(12), np.full(2, 10.0), lambda near, line: near)
    assert best_blend(model, truth + 0.3 * noise, noise, form, truth, None)[0] == 1.0
    assert best_blend(model, noise, truth + 0.3 * noise, form, truth, None)[0] == 0.0
    model.blends[0] = BLEND_GRID[1]
    near, line = rng.standard_normal((2, 3, 12))
    out = model.context(near, line, np.array([1, 2, 30]), per_n=False)
    np.testing.assert_allclose(out[0], BLEND_GRID[1] * near[0] + (1 - BLEND_GRID[1]) * line[0])
    np.testing.assert_allclose(out[1:], near[1:])


def test_a_protocols_words_do_not_depend_on_the_others_that_run():
    # benchmarks/newwords.py: each protocol draws its words from a generator of its own, so adding a protocol
    # to --protocols leaves the others' words as they were (they shared one in turn before).
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "benchmarks"))
    import newwords as bench

    pair_words = sorted({w for a, b, _ in bench.pair_sets() for w in (a, b) if w.isalpha()})[:40]
    filler = [f"f{i}" for i in range(bench.SKIP_TOP)]
    rare = [f"rare{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(60)]
    words = filler + pair_words + rare
    vectors = Vectors(words, np.random.default_rng(0).standard_normal((len(words), 4)).astype(np.float32))
    lines = [f"f1 {w} f2" for w in pair_words for _ in range(max(bench.KS))]
    lines += [f"f3 {w}" for i, w in enumerate(rare) for _ in range(5 + i % 20)]
    counts = Counter(t for line in lines for t in line.split())
    for split in ("test", "valid"):
        alone = [test for _, test, _ in bench.protocols(vectors, lines, counts, 10, 0, {"rare"}, split)]
        both = [(name, test) for name, test, _ in bench.protocols(vectors, lines, counts, 10, 0, {"contexts", "rare"},
                                                                  split)]
        assert both[-1] == ("rare", alone[0]) and len(alone[0]) == 10
        assert both[0][0] == "contexts k=1" and len(both[0][1]) == 10


def test_a_checked_map_is_kept_only_where_it_beats_the_all_occurrence_start_on_held_out_probes():
    # held_out: a bucket map is cross-validated over the probes; features that say nothing the window does not
    # (here pure noise beside it) give no map, features that carry the vector give one.
    from embedtune.newwords.fitted import HELD_OUT_RIDGES, FittedStarts, checked_map

    rng = np.random.default_rng(5)
    truth = rng.standard_normal((600, 6))
    near = truth + rng.standard_normal((600, 6)) * 2
    form = truth + rng.standard_normal((600, 6)) * 2
    model = FittedStarts((1.0,), [None], np.eye(6), np.full(1, 10.0), lambda near, line: np.hstack([near, line]))
    noise = rng.standard_normal((600, 6))
    assert checked_map(model, np.hstack([near, noise * 50]), near, truth, form, None)[0] is None
    ridge, score, base = checked_map(model, np.hstack([near, truth + 0.1 * noise]), near, truth, form, None)
    assert ridge in HELD_OUT_RIDGES and score > base


def test_a_line_longer_than_the_cap_gives_its_window_as_the_line_context():
    vectors = Vectors([f"w{i}" for i in range(12)], np.random.default_rng(2).standard_normal((12, 3)).astype(np.float32))
    lines = ["new w1 w2 w3 w4 w5 w6 w7 w8", "w9 new w10"]
    whole = context_sums(vectors, Corpus(lines), ["new"], 2)
    capped = context_sums(vectors, Corpus(lines), ["new"], 2, line_cap=5)
    np.testing.assert_allclose(capped.sums, whole.sums)          # the window is the same
    # the first line (9 tokens) gives its window (w1 w2), the second (3 tokens) the whole line
    expect = vectors.matrix[[1, 2, 9, 10]].astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(capped.line_sums[0], expect, rtol=1e-6)
    np.testing.assert_allclose(whole.line_sums[0], vectors.matrix[[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]].sum(axis=0), rtol=1e-5)
    assert capped.line_contexts[0] == whole.line_contexts[0] == 2


def occurrence_uniform(seed: int, line: np.ndarray, place: np.ndarray) -> np.ndarray:
    """[n] float64 draws in [0, 1), one for each (line number, place in the line) of a corpus: splitmix64's
    mix of the three (the same draw for an occurrence whoever reads it, and in whatever order)."""
    z = (np.uint64(seed * 0x9E3779B97F4A7C15 % (1 << 64))
         + line.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03) + place.astype(np.uint64))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)   # uint64 arrays wrap, as the mix needs
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53



def _marks_with_numpy(chunk, target_of, probe_of, probe_count, keep, slots, seed, probed):
    """The chunk's marks made with whole-chunk numpy arrays, as contexts._marks made them before it was
    compiled: the reference the kernel must equal bit for bit."""
    ids, line = chunk.ids, chunk.line
    target = target_of[ids]
    level = np.full(len(ids), -1, np.int32)
    first = np.flatnonzero(np.concatenate([[True], line[1:] != line[:-1]]))
    if keep is not None:
        at = np.flatnonzero(target >= 0)
        draws = occurrence_uniform(seed, chunk.numbers[line[at]], at - first[line[at]])
        target[at[draws >= keep[target[at]]]] = -1
    probe = probe_of[ids]
    if probed:
        at = np.flatnonzero(probe >= 0)
        draws = occurrence_uniform(seed + 7919, chunk.numbers[line[at]], at - first[line[at]])
        level[at] = np.searchsorted(slots, draws * probe_count[ids[at]], side="right")
        level[level >= len(slots)] = -1
    return target, level, probe


@pytest.mark.parametrize("sampled, probed", [(True, True), (True, False), (False, True), (False, False)])
def test_compiled_marks_equal_numpy_s_bit_for_bit(sampled, probed):
    """The compiled marks (which occurrences count for a target, and in which probe bucket) are the numpy
    reference's, draw for draw, on chunks of lines numbered far into a corpus."""
    from embedtune.corpus.chunks import IdChunk
    from embedtune.newwords.contexts import _marks

    rng = np.random.default_rng(11)
    n_ids = 500
    lengths = rng.integers(1, 40, 300)
    ids = rng.integers(0, n_ids, int(lengths.sum())).astype(np.int32)
    line = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    numbers = np.sort(rng.choice(10**9, len(lengths), replace=False)).astype(np.int64)
    chunk = IdChunk(ids, line, len(ids), numbers)
    target_of = np.where(rng.random(n_ids) < 0.3, rng.integers(0, 50, n_ids), -1).astype(np.int32)
    probe_of = np.where(rng.random(n_ids) < 0.2, rng.integers(0, 40, n_ids), -1).astype(np.int32)
    probe_count = np.where(probe_of >= 0, rng.integers(1, 200, n_ids), 0).astype(np.float64)
    keep = rng.random(50) if sampled else None
    slots = np.asarray(DEFAULT_SLOTS, np.float64)
    got = _marks(chunk, target_of, probe_of, probe_count, keep, slots, 3, probed)
    want = _marks_with_numpy(chunk, target_of, probe_of, probe_count, keep, slots, 3, probed)
    for g, w in zip(got, want):
        assert g.dtype == np.int32 and g.tolist() == w.tolist()
    # The draws drop some occurrences and fill every bucket's level: the comparison is not of all -1s.
    if sampled:
        assert 0 < (got[0] >= 0).sum() < (target_of[ids] >= 0).sum()
    if probed:
        assert len(set(got[1].tolist())) > 3
