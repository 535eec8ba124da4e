"""The retrofit objective (a lexicon, no corpus) and the WordNet lexicon builder.

The update is checked against a brute-force loop and against the linear system whose solution is
its fixed point; frozen rows keep their bits and still pull their neighbours; the command runs end
to end on data/sample's GloVe rows and WordNet lexicons.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedtune.errors import EmbedtuneError
from embedtune.objectives import retrofit as retrofit_module
from embedtune.objectives.retrofit import (FROZEN_PULL, Lexicon, RetrofitKeys, adjacency, nearest_rows, read_lexicon,
                                           retrofit)
from embedtune.training import train
from embedtune.wordnet import wordnet_lexicons

from train_fixtures import REPO, SAMPLE_VECTORS, bits, glove, make_config, one_error_line, read_text_vectors, run, with_paths

SYNONYMS = REPO / "data" / "sample" / "wordnet-synonyms.10k.txt"
ANTONYMS = REPO / "data" / "sample" / "wordnet-antonyms.10k.txt"


def edges(n, pairs):
    rows = np.array([i for i, _ in pairs], np.int64)
    cols = np.array([j for _, j in pairs], np.int64)
    return adjacency(Lexicon("x", len(pairs), rows, cols), n)


# A tiny graph: 0-1-2 a chain of synonyms, 3 a frozen synonym of 2, 4 an antonym of 0 and 1,
# 5 has no neighbour.
PAIRS_S = [(0, 1), (1, 2), (2, 3)]
PAIRS_A = [(4, 0), (1, 4)]
FROZEN = np.array([False, False, False, True, False, False])


def brute_force(x0, frozen, rounds, anchor, repel, syn_pairs, ant_pairs, frozen_pull=FROZEN_PULL):
    """The update written out row by row: q_i <- (a q̂_i + mean_S q_j - repel mean_A q_j) / (a + 1 + repel),
    the means weighing a frozen neighbour ``frozen_pull`` times."""
    n = len(x0)
    syn = {i: set() for i in range(n)}
    ant = {i: set() for i in range(n)}
    for i, j in syn_pairs:
        syn[i].add(j), syn[j].add(i)
    for i, j in ant_pairs:
        ant[i].add(j), ant[j].add(i)
    x = x0.astype(np.float64).copy()
    for _ in range(rounds):
        new = x.copy()
        for i in range(n):
            if frozen[i] or not (syn[i] or ant[i]):
                continue
            num = anchor * x0[i].astype(np.float64)
            den = anchor
            w = {j: frozen_pull if frozen[j] else 1.0 for j in syn[i] | ant[i]}
            if syn[i]:
                num = num + sum(w[j] * x[j] for j in syn[i]) / sum(w[j] for j in syn[i])
                den += 1
            if ant[i]:
                num = num - repel * sum(w[j] * x[j] for j in ant[i]) / sum(w[j] for j in ant[i])
                den += repel
            new[i] = num / den
        x = new
    return x


@pytest.mark.parametrize("anchor,repel,rounds", [(1.0, 0.0, 10), (1.0, 0.3, 7), (0.5, 2.0, 3)])
def test_update_matches_a_brute_force_loop(anchor, repel, rounds):
    x0 = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    moving, rows, changes = retrofit(x0, edges(6, PAIRS_S), edges(6, PAIRS_A), FROZEN, rounds, anchor, repel)
    expected = brute_force(x0, FROZEN, rounds, anchor, repel, PAIRS_S, PAIRS_A)
    assert moving.tolist() == [0, 1, 2] + ([4] if repel else [])   # 3 frozen, 5 alone, 4 only antonyms
    np.testing.assert_allclose(rows, expected[moving], rtol=1e-6, atol=1e-6)
    assert len(changes) == rounds


def test_without_antonyms_it_is_faruqui_update():
    """Faruqui et al.: q_i = (deg q̂_i + sum_j q_j) / (2 deg), i.e. alpha 1 and beta 1/deg."""
    x0 = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    frozen = np.zeros(6, bool)
    moving, rows, _ = retrofit(x0, edges(6, PAIRS_S), None, frozen, 1, 1.0, 0.3)
    expected = np.array([(1 * x0[0] + x0[1]) / 2, (2 * x0[1] + x0[0] + x0[2]) / 4,
                         (2 * x0[2] + x0[1] + x0[3]) / 4, (1 * x0[3] + x0[2]) / 2])
    np.testing.assert_allclose(rows, expected, rtol=1e-6)


def test_rounds_reach_the_fixed_point_of_the_linear_system():
    """The update's fixed point solves D q_m = a q̂_m + W_mm q_m + W_mf q_f: solved here by numpy."""
    x0 = np.random.default_rng(2).normal(size=(6, 4)).astype(np.float32)
    anchor, repel = 1.0, 0.3
    moving, rows, changes = retrofit(x0, edges(6, PAIRS_S), edges(6, PAIRS_A), FROZEN, 60, anchor, repel)
    w = np.zeros((6, 6))
    syn, ant = edges(6, PAIRS_S).toarray(), edges(6, PAIRS_A).toarray()
    syn_w, ant_w = syn * np.where(FROZEN, FROZEN_PULL, 1.0), ant * np.where(FROZEN, FROZEN_PULL, 1.0)
    w += syn_w / np.maximum(syn_w.sum(1, keepdims=True), 1)
    w -= repel * ant_w / np.maximum(ant_w.sum(1, keepdims=True), 1)
    d = anchor + (syn.sum(1) > 0) + repel * (ant.sum(1) > 0)
    m, f = moving, np.flatnonzero(FROZEN)
    system = np.diag(d[m]) - w[np.ix_(m, m)]
    solution = np.linalg.solve(system, anchor * x0[m] + w[np.ix_(m, f)] @ x0[f])
    np.testing.assert_allclose(rows, solution, rtol=1e-5, atol=1e-6)
    assert changes[-1] < 1e-6 < changes[0]


def test_nearest_rows_are_the_highest_cosines_in_the_pool_without_the_row_itself():
    x = np.random.default_rng(3).normal(size=(40, 5)).astype(np.float32)
    x[7] = 0.0   # a zero row scores 0, never a division by zero
    rows = np.array([0, 5, 7, 30, 39])
    got = nearest_rows(x * np.arange(1, 41)[:, None], rows, 4, 25)   # norms do not matter: cosines
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    for row, near in zip(rows, got):
        scores = unit[:25] @ unit[row]
        if row < 25:
            scores[row] = -np.inf
        expected = set(np.argsort(-scores, kind="stable")[:4])
        assert set(near) == expected and row not in near
    assert nearest_rows(x, rows, 50, 6).shape == (5, 5)   # at most pool - 1 neighbours


def test_the_top_k_kernel_gives_each_row_its_k_best_whatever_the_threads():
    from embedtune.kernels.nearest import top_k_columns

    scores = np.random.default_rng(5).integers(0, 30, size=(37, 200)).astype(np.float32)   # many ties
    scores[3, :150] = -np.inf   # as a row's own column is: never kept
    for threads in (1, 2, 3, 64):
        out = np.full((37, 6), -1, np.int64)
        top_k_columns(scores, 6, out, threads)
        for t in range(37):
            kept = scores[t, out[t]]
            assert len(set(out[t])) == 6 and kept.min() >= np.sort(scores[t])[-6], (threads, t)
        assert out[3].min() >= 150
        # ties keep the first columns: the same columns on every thread count
        assert threads == 1 or np.array_equal(np.sort(out, axis=1), first)
        first = np.sort(out, axis=1)


@pytest.mark.parametrize("keep,repel,rounds", [(1.0, 1.0, 5), (0.5, 0.0, 8)])
def test_keep_matches_a_brute_force_loop(keep, repel, rounds):
    """keep adds (keep / k) sum_N |(q_i - q_j) - (q̂_i - q̂_j)|^2: the numerator gains keep (q̂_i - mean_N q̂_j)
    + keep mean_N q_j (the neighbours' values of the previous round), the denominator keep."""
    x0 = np.random.default_rng(4).normal(size=(6, 4)).astype(np.float32)
    k, pool = 2, 6
    moving, rows, _ = _retrofit_with(x0, keep, repel, rounds, k, pool)
    near = dict(zip(moving, nearest_rows(x0, moving, k, pool)))
    x, x0d = x0.astype(np.float64), x0.astype(np.float64)
    for _ in range(rounds):
        new = x.copy()
        for i in moving:
            syn = {j for a, b in PAIRS_S for j in (a, b) if i in (a, b) and j != i}
            ant = {j for a, b in PAIRS_A for j in (a, b) if i in (a, b) and j != i}
            w = {j: FROZEN_PULL if FROZEN[j] else 1.0 for j in syn | ant}
            num, den = 1.0 * x0d[i], 1.0
            if syn:
                num = num + sum(w[j] * x[j] for j in syn) / sum(w[j] for j in syn)
                den += 1
            if ant and repel:
                num = num - repel * sum(w[j] * x[j] for j in ant) / sum(w[j] for j in ant)
                den += repel
            num = num + keep * (x0d[i] - x0d[near[i]].mean(0)) + keep * x[near[i]].mean(0)
            new[i] = num / (den + keep)
        x = new
    np.testing.assert_allclose(rows, x[moving], rtol=1e-5, atol=1e-6)


def _retrofit_with(x0, keep, repel, rounds, k, pool):
    saved = retrofit_module.KEEP_NEIGHBOURS, retrofit_module.KEEP_POOL
    retrofit_module.KEEP_NEIGHBOURS, retrofit_module.KEEP_POOL = k, pool
    try:
        return retrofit(x0, edges(6, PAIRS_S), edges(6, PAIRS_A), FROZEN, rounds, 1.0, repel, keep)
    finally:
        retrofit_module.KEEP_NEIGHBOURS, retrofit_module.KEEP_POOL = saved


def test_keep_holds_a_moving_row_nearer_its_input_neighbours():
    """With keep, the moving rows end nearer where they started (they keep their offsets to rows that move less)."""
    x0 = np.random.default_rng(5).normal(size=(6, 4)).astype(np.float32)
    moving, loose, _ = _retrofit_with(x0, 0.0, 1.0, 30, 2, 6)
    _, kept, _ = _retrofit_with(x0, 4.0, 1.0, 30, 2, 6)
    assert np.linalg.norm(kept - x0[moving]) < np.linalg.norm(loose - x0[moving])


# ---------------------------------------------------------------------------------------------
# train(): freeze rules, unknown words


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_frozen_rows_keep_their_bits_and_pull_their_neighbours(tmp_path):
    vectors = glove(3000)
    # 'huge' has no line of its own: the line of 'big' (frozen, among the first 400) pulls it.
    lexicon = write(tmp_path, "syn.txt", "big huge\nquick fast\n")
    config = with_paths(make_config({"freeze_top": 400}, objective="retrofit"), lexicon=lexicon)
    assert vectors.index["big"] < 400 <= vectors.index["huge"]
    result = train(vectors, None, config)
    out, before = result.vectors, glove(3000)
    np.testing.assert_array_equal(bits(out.matrix[:400]), bits(before.matrix[:400]))
    assert result.stats["max_frozen_change"] == 0.0
    assert cos(out["huge"], before["big"]) > cos(before["huge"], before["big"])
    # Moving the frozen row moves its neighbours: it pulls.
    shifted = glove(3000)
    shifted.matrix[shifted.index["big"]] *= -1
    again = train(shifted, None, config).vectors
    assert not np.array_equal(again["huge"], out["huge"])
    np.testing.assert_array_equal(bits(again.matrix[:400]), bits(shifted.matrix[:400]))
    # Rows without a neighbour in the lexicon are left alone, bit for bit.
    untouched = [i for i, w in enumerate(before.words) if w not in {"huge", "big", "quick", "fast"}]
    np.testing.assert_array_equal(bits(out.matrix[untouched]), bits(before.matrix[untouched]))
    assert result.stats["trained_rows"] == 3   # huge, quick, fast


def test_unknown_lexicon_words_are_counted_and_never_added(tmp_path):
    vectors = glove(3000)
    lexicon = write(tmp_path, "syn.txt", "Huge big zzzfoo\nqqqbar quick\nquick fast qqqbar\n")
    config = with_paths(make_config(objective="retrofit"), lexicon=lexicon)
    result = train(vectors, None, config)
    assert result.vectors.words == vectors.words
    lex = result.stats["lexicon"]
    assert (lex["words_not_in_vectors"], lex["first_not_in_vectors"]) == (2, ["zzzfoo", "qqqbar"])
    assert lex["pairs_in_vectors"] == 2   # huge-big (lower-cased: GloVe is), quick-fast
    assert result.stats["lowercase"] is True


def test_every_neighbour_frozen_is_nothing_to_train(tmp_path):
    lexicon = write(tmp_path, "syn.txt", "the of\n")
    config = with_paths(make_config({"freeze_top": 10}, objective="retrofit"), lexicon=lexicon)
    with pytest.raises(EmbedtuneError, match="nothing to train"):
        train(glove(100), None, config)


@pytest.mark.parametrize("content,line,text", [
    (b"good fine\nbad poor\nwell \xff\xfe\n", 3, "not valid UTF-8"),
    (b"good fine\nthe 0.418 0.24968 -0.41242\n", 2, "looks like a vectors file"),
])
def test_bad_lexicon_names_file_and_line(tmp_path, content, line, text):
    path = tmp_path / "lex.txt"
    path.write_bytes(content)
    with pytest.raises(EmbedtuneError) as info:
        read_lexicon(str(path), {"good": 0, "fine": 1})
    assert (info.value.path, info.value.line) == (str(path), line)
    assert text in info.value.message


# ---------------------------------------------------------------------------------------------
# the command


def test_cli_end_to_end_on_the_sample(tmp_path):
    output, summary = tmp_path / "retro.txt", tmp_path / "summary.json"
    result = run(["train", SAMPLE_VECTORS, "--objective", "retrofit", "--lexicon", SYNONYMS, "--antonyms", ANTONYMS,
                  "--freeze-top", 1000, "-o", output, "--json", summary])
    assert result.exit_code == 0, result.output
    s = json.loads(summary.read_text())
    assert (s["objective"], s["frozen"], s["epochs"], s["repel"], s["max_frozen_change"]) == \
        ("retrofit", 1000, 20, 1.0, 0.0)
    assert s["lexicon"]["words_not_in_vectors"] == 0 and s["lexicon"]["pairs_in_vectors"] > 10000
    assert "Retrofitted" in result.output
    before, after = read_text_vectors(SAMPLE_VECTORS), read_text_vectors(output)
    assert after.words == before.words
    np.testing.assert_array_equal(bits(after.matrix[:1000]), bits(before.matrix[:1000]))
    moved = np.flatnonzero((after.matrix != before.matrix).any(axis=1))
    assert len(moved) == s["trained_rows"] and moved.min() >= 1000
    # Synonyms come closer and antonyms move apart, on average over the lexicon's pairs.
    def mean_cos(vectors, path):
        pairs = [(w, n) for line in open(path, encoding="utf-8") for w, *ns in [line.split()] for n in ns
                 if vectors.index[w] >= 1000]
        return np.mean([cos(vectors[a], vectors[b]) for a, b in pairs])
    assert mean_cos(after, SYNONYMS) > mean_cos(before, SYNONYMS) + 0.1
    assert mean_cos(after, ANTONYMS) < mean_cos(before, ANTONYMS) - 0.1


def test_cli_retrofit_dry_run_reports_the_lexicons_and_writes_nothing(tmp_path):
    output = tmp_path / "retro.txt"
    result = run(["train", SAMPLE_VECTORS, "--objective", "retrofit", "--lexicon", SYNONYMS, "--antonyms", ANTONYMS,
                  "--freeze-top", 1000, "-o", output, "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert (d["dry_run"], d["objective"], d["frozen"], d["settings"]["epochs"]) == (True, "retrofit", 1000, 20)
    assert d["lexicon"]["pairs_in_vectors"] > 10000 and d["antonyms"]["pairs_in_vectors"] > 0
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_cli_retrofit_with_a_config_file_and_json_on_stdout(tmp_path):
    config = tmp_path / "retro.toml"
    config.write_text(f'lexicon = "{SYNONYMS}"\n[train]\nobjective = "retrofit"\nepochs = 3\n', encoding="utf-8")
    result = run(["-q", "train", "--config", config, SAMPLE_VECTORS, "-o", tmp_path / "out.txt", "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.stdout)
    assert (s["epochs"], s["antonyms"], s["repel"], len(s["round_changes"])) == (3, None, None, 3)


def test_cli_keep_is_an_option_reported_and_read_from_a_config(tmp_path):
    output = tmp_path / "retro.txt"
    result = run(["train", SAMPLE_VECTORS, "--objective", "retrofit", "--lexicon", SYNONYMS, "--keep", "0.5",
                  "--epochs", "3", "-o", output, "--json", tmp_path / "s.json"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "s.json").read_text())["keep"] == 0.5 and "keep 0.5" in result.output
    config = tmp_path / "retro.toml"
    config.write_text(f'lexicon = "{SYNONYMS}"\n[train]\nobjective = "retrofit"\nkeep = 0\nepochs = 3\n',
                      encoding="utf-8")
    result = run(["-q", "train", "--config", config, SAMPLE_VECTORS, "-o", tmp_path / "out.txt", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["keep"] == 0.0
    one_error_line(run(["train", SAMPLE_VECTORS, "--objective", "retrofit", "--lexicon", SYNONYMS, "--keep", "-1",
                        "-o", tmp_path / "bad.txt"]), "keep")


@pytest.mark.parametrize("args,parts", [
    (["--objective", "retrofit"], ["needs --lexicon"]),
    (["--lexicon", SYNONYMS], ["--lexicon is read only by --objective retrofit"]),
    (["--objective", "sgns"], ["missing CORPUS"]),
    (["--objective", "retrofit", "--lexicon", SYNONYMS, "--resume"], ["keeps no checkpoints"]),
    (["--objective", "retrofit", "--lexicon", "no-such.txt"], ["no-such.txt", "no such lexicon file"]),
    (["--objective", "retrofit", "--lexicon", SAMPLE_VECTORS], [str(SAMPLE_VECTORS), "line 1",
                                                                "looks like a vectors file"]),
    # --dim is checked once, as the vectors load: the dry run of an objective without the loop too
    (["--objective", "retrofit", "--lexicon", SYNONYMS, "--dim", "300", "--dry-run"],
     [str(SAMPLE_VECTORS), "the vectors have 50 dimensions, but --dim says 300"]),
])
def test_cli_errors_are_one_line(tmp_path, args, parts):
    output = tmp_path / "out.txt"
    result = run(["train", SAMPLE_VECTORS, *args, "-o", output])
    one_error_line(result, *parts)
    assert not output.exists()


def test_cli_lexicon_with_another_objective_is_an_error(tmp_path):
    result = run(["train", SAMPLE_VECTORS, REPO / "data" / "sample" / "lee_background.cor", "--objective", "sgns",
                  "--lexicon", SYNONYMS, "-o", tmp_path / "out.txt"])
    one_error_line(result, "--lexicon", "--objective retrofit")


# ---------------------------------------------------------------------------------------------
# the lexicon builder, on WordNet lines (real ones, from WordNet 3.0's data.adj and data.noun)

LICENCE = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
DATA_ADJ = LICENCE + (
    "00001740 00 a 01 able 0 005 = 05200169 n 0000 = 05616246 n 0000 + 05616246 n 0101 + 05200169 n 0101 "
    "! 00002098 a 0101 | (usually followed by `to') having the necessary means or skill\n"
    "00002098 00 a 01 unable 0 002 = 05200169 n 0000 ! 00001740 a 0101 | not having the necessary means\n"
    "00002312 00 a 02 abaxial 0 dorsal(a) 4 002 ;c 06037666 n 0000 ! 00002527 a 0101 | facing away from the axis\n"
    "00002527 00 a 02 adaxial 0 ventral(a) 4 002 ;c 06037666 n 0000 ! 00002312 a 0101 | nearest to the axis\n"
    "00002600 00 s 01 underside 0 001 & 00002312 a 0000 | a satellite of abaxial (made up for the test)\n"
)
DATA_NOUN = LICENCE + (
    "00021939 03 n 02 artifact 0 artefact 0 001 @ 00003553 n 0000 | a man-made object\n"
    "00022903 03 n 03 article 0 natural_object 0 thing 0 000 | one of a class of artifacts\n"
)


def wordnet_folder(tmp_path):
    folder = tmp_path / "wordnet"
    folder.mkdir()
    (folder / "data.adj").write_text(DATA_ADJ, encoding="utf-8")
    (folder / "data.noun").write_text(DATA_NOUN, encoding="utf-8")
    return folder


def test_lexicon_wordnet_writes_synonyms_and_antonyms(tmp_path):
    folder = wordnet_folder(tmp_path)
    syn, ant = tmp_path / "syn.txt", tmp_path / "ant.txt"
    result = run(["lexicon", "wordnet", folder, "-o", syn, "--antonyms", ant])
    assert result.exit_code == 0, result.output
    assert syn.read_text(encoding="utf-8") == (
        "artifact artefact\nartefact artifact\narticle natural_object thing\nnatural_object article thing\n"
        "thing article natural_object\nabaxial dorsal\ndorsal abaxial\nadaxial ventral\nventral adaxial\n")
    assert ant.read_text(encoding="utf-8") == "able unable\nunable able\nabaxial adaxial\nadaxial abaxial\n"
    result = run(["lexicon", "wordnet", folder, "-o", "-", "--single-words"])
    assert "natural_object" not in result.stdout and "article thing\n" in result.stdout
    # --similar: a satellite joins its head's synonyms and faces the head's antonym.
    result = run(["lexicon", "wordnet", folder, "-o", syn, "--antonyms", ant, "--similar"])
    assert result.exit_code == 0, result.output
    assert "underside abaxial dorsal\n" in syn.read_text(encoding="utf-8")
    assert ant.read_text(encoding="utf-8") == (
        "able unable\nunable able\nabaxial adaxial\nadaxial abaxial underside\nunderside adaxial\n")


def test_lexicon_built_from_wordnet_feeds_train(tmp_path):
    """Round trip: the builder's files are read by the objective with the pairs they hold."""
    syn, ant = wordnet_lexicons(str(wordnet_folder(tmp_path)))
    path = tmp_path / "syn.txt"
    run(["lexicon", "wordnet", tmp_path / "wordnet", "-o", path])
    index = {w: i for i, w in enumerate(syn)}
    lexicon = read_lexicon(str(path), index)
    assert len(lexicon.rows) == sum(map(len, syn.values())) and lexicon.unknown == 0


def test_lexicon_wordnet_bad_line_names_file_and_line(tmp_path):
    folder = wordnet_folder(tmp_path)
    (folder / "data.noun").write_text(DATA_NOUN + "00022904 03 n zz broken\n", encoding="utf-8")
    result = run(["lexicon", "wordnet", folder, "-o", tmp_path / "syn.txt"])
    one_error_line(result, "data.noun line 4", "not a WordNet data line")
    assert not (tmp_path / "syn.txt").exists()
    result = run(["lexicon", "wordnet", tmp_path, "-o", tmp_path / "syn.txt"])
    one_error_line(result, "no WordNet data files")


def test_epochs_are_decided_by_the_objective():
    from embedtune.config import Config, TrainConfig, resolve

    assert [resolve(Config(train=TrainConfig(objective=o))).train.epochs for o in ("sgns", "glove", "retrofit")] \
        == [5, 5, 20]
    assert resolve(Config(train=TrainConfig(objective="retrofit", epochs=3))).train.epochs == 3
    t = resolve(Config(train=TrainConfig(objective="retrofit"))).train
    assert (t.anchor, t.keys_of(RetrofitKeys).repel) == (1.0, 1.0)


def test_a_lexicon_with_no_pair_in_the_vectors_is_an_error(tmp_path):
    lexicon = write(tmp_path, "syn.txt", "zzzfoo qqqbar\nthe xxxbaz\n")
    config = with_paths(make_config(objective="retrofit"), lexicon=lexicon)
    with pytest.raises(EmbedtuneError) as info:
        train(glove(100), None, config)
    assert info.value.path == lexicon
    assert info.value.message == "no pair of its 4 words is in the vectors (3 of them are not)"


def test_lexicon_wordnet_refuses_an_unwritable_output_before_reading(tmp_path):
    folder = tmp_path / "wordnet"
    folder.mkdir()   # no data files: reading it would fail with another message
    result = run(["lexicon", "wordnet", folder, "-o", tmp_path / "missing" / "syn.txt"])
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "missing" in result.stderr and "data." not in result.stderr
