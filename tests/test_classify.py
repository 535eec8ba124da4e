"""--objective classify (fastText's supervised model) on the shipped WordNet gloss sample.

Real commands on real files: the loss falls, accuracy on --valid rises, frozen rows keep their bits,
--save-classifier reads back and predicts as the model does, several labels a line switch to
one-vs-all with P@1 / R@1, bad lines are one-line errors with no output file.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedtune.corpus.labelled import LabelledCorpus
from embedtune.errors import EmbedtuneError
from embedtune.formats import load_vectors
from embedtune.objectives.classify.model import Classifier, line_means, load_classifier, predict, save_classifier

from train_fixtures import REPO, SAMPLE_VECTORS, bits, glove, make_config, one_error_line, run, with_paths

TRAIN = REPO / "data" / "sample" / "wordnet-glosses.train.txt"
VALID = REPO / "data" / "sample" / "wordnet-glosses.valid.txt"
FAST = ["--min-count", "1000000", "--epochs", "3"]   # no new words: no starts to fit (seconds)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One command: the sample, the first 5,000 rows frozen, --valid (the sample's 500 lines and one
    whose label training never saw), --save-classifier, --json."""
    folder = tmp_path_factory.mktemp("classify")
    out, clf, summary, valid = folder / "out.txt", folder / "clf.txt", folder / "summary.json", folder / "valid.txt"
    valid.write_text(VALID.read_text() + "__label__noun.unheard some new thing\n")
    result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "--valid", valid, "--freeze-top", 5000,
                  "--save-classifier", clf, "-o", out, "--json", summary, *FAST])
    assert result.exit_code == 0, result.output
    return result, json.loads(summary.read_text()), out, clf


def test_loss_falls_and_valid_accuracy_rises(trained):
    result, s, _, _ = trained
    assert s["objective"] == "classify" and s["loss_kind"] == "softmax" and s["labels"] == 24
    assert s["loss_last"] < s["loss_first"]
    v = s["valid"]
    assert v["before"]["lines"] == v["after"]["lines"] == 500
    assert v["after"]["accuracy"] > v["before"]["accuracy"], v
    assert f"accuracy before {v['before']['accuracy']:.4f} (classifier alone), after {v['after']['accuracy']:.4f}" \
        in result.output


def test_frozen_rows_bit_identical(trained):
    _, s, out, _ = trained
    before, after = load_vectors(SAMPLE_VECTORS), load_vectors(out)
    assert after.words[:20000] == before.words
    assert np.array_equal(bits(after.matrix[:5000]), bits(before.matrix[:5000]))
    assert not np.array_equal(bits(after.matrix[5000:20000]), bits(before.matrix[5000:]))   # others moved
    assert s["frozen_rows_checked"] == 5000 and s["max_frozen_change"] == 0.0


def test_saved_classifier_predicts_as_the_model(trained):
    """The file read back, with the output vectors, gives the accuracy the run reported, to the line."""
    _, s, out, clf = trained
    saved = load_classifier(clf)
    assert saved.weights.shape == (24, 50) and saved.bias.shape == (24,)
    assert clf.read_text().splitlines()[0] == "24 50 1"   # the line end's row (fastText's </s>)
    assert saved.ngrams == [] and saved.line_end.shape == (50,) and clf.read_text().splitlines()[-1].startswith("</s> ")
    assert saved.labels[0] == "__label__noun.person"   # most frequent first, as fastText orders them
    vectors = load_vectors(out)
    # The model's words: every word of the output, the pretrained words no training line has among them
    # (their rows as read), as fastText's -pretrainedVectors dictionary holds them.
    lines = [line.split() for line in VALID.read_text().splitlines()]
    ids = [[vectors.index[w] for w in words[1:] if w in vectors.index] for words in lines]
    trained_words = {w for line in TRAIN.read_text().splitlines() for w in line.split()[1:]}
    assert sum(w not in trained_words for i in ids for w in (vectors.words[j] for j in i)) > 100   # such words count
    starts = np.cumsum([0] + [len(i) for i in ids])
    # every line's mean counts the line end's row too
    means = line_means(vectors.matrix, np.concatenate(ids).astype(np.int64), starts,
                       (saved.line_end[None, :], np.zeros(len(lines), np.int64), np.arange(len(lines) + 1)))
    top = predict(saved, means)
    accuracy = np.mean([saved.labels[t] == words[0] for t, words in zip(top, lines)])
    assert accuracy == s["valid"]["after"]["accuracy"]


def test_classifier_file_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    model = Classifier(["__label__a", "__label__b", "__label__c"], rng.standard_normal((3, 7)).astype(np.float32),
                       np.array([0.1, -0.0, 3e-39], np.float32))
    save_classifier(model, tmp_path / "c.txt")
    back = load_classifier(tmp_path / "c.txt")
    assert back.labels == model.labels
    assert np.array_equal(bits(back.weights), bits(model.weights)) and np.array_equal(bits(back.bias), bits(model.bias))
    (tmp_path / "bad.txt").write_text("2 3\n__label__a 1 2 3 4\n__label__b 1 2 3\n")
    with pytest.raises(EmbedtuneError, match="line 3: 3 values, header says 4"):
        load_classifier(tmp_path / "bad.txt")


def test_several_labels_a_line_train_one_vs_all(tmp_path):
    lines = TRAIN.read_text().splitlines()[:600]
    # Every third line gets a second label; the valid lines are training lines, so P@1 and R@1 differ.
    multi = [line if i % 3 else "__label__extra " + line for i, line in enumerate(lines)]
    (tmp_path / "t.txt").write_text("\n".join(multi) + "\n")
    (tmp_path / "v.txt").write_text("\n".join(multi[:90]) + "\n")
    result = run(["train", SAMPLE_VECTORS, tmp_path / "t.txt", "--objective", "classify", "--valid", tmp_path / "v.txt",
                  "-o", tmp_path / "o.txt", "--json", tmp_path / "s.json", *FAST])
    assert result.exit_code == 0, result.output
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["loss_kind"] == "one-vs-all" and s["loss_last"] < s["loss_first"]
    after = s["valid"]["after"]
    gold = 90 + 30   # 30 of the 90 lines carry two labels
    hits = round(after["precision_at_1"] * 90)
    assert after["recall_at_1"] == pytest.approx(hits / gold)
    assert "P@1" in result.output and "R@1" in result.output


@pytest.mark.parametrize("bad, what", [
    ("a line with no label at all", "no label"),
    ("__label__noun.act __label__noun.state", "labels but no words"),
    ("__label__noun.act a NUL\x00 byte", "contains NUL bytes"),   # as the plain corpus reader says
])
def test_bad_lines_are_one_error_line_and_no_output(tmp_path, bad, what):
    lines = TRAIN.read_text().splitlines()[:40]
    lines[6] = bad
    corpus = tmp_path / "t.txt"
    corpus.write_text("\n".join(lines) + "\n")
    out, clf = tmp_path / "o.txt", tmp_path / "c.txt"
    result = run(["train", SAMPLE_VECTORS, corpus, "--objective", "classify", "-o", out, "--save-classifier", clf, *FAST])
    one_error_line(result, str(corpus), "line 7", what)
    assert not out.exists() and not clf.exists()
    if what == "no label":   # the same line in --valid: the same error, naming the valid file
        result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "--valid", corpus, "-o", out, *FAST])
        one_error_line(result, str(corpus), "line 7", what)
        assert not out.exists()


def test_valid_labels_never_trained_are_a_note(trained):
    """Not an error: such a line is skipped, as fastText's test skips it, and a note says so."""
    result, s, _, _ = trained
    assert s["valid"]["after"]["lines"] == 500 and s["valid"]["lines_unseen_labels"] == 1
    assert "Note: 1 line of " in result.output
    assert "valid.txt (first: line 501) had only labels the training lines never have" in result.output


def test_words_are_lowered_and_split_token_by_token(tmp_path):
    """A line's words read as each token lower-cased and split alone, whatever the line's layout:
    the label first or not, odd whitespace, a final sigma at a token's end, letters that lower-case
    into two characters."""
    from itertools import chain

    from embedtune.corpus import Tokenizer
    vectors = glove(20000)
    lines = ["__label__A ΟΔΟΣ ΣΑΣ. Σ x", "__label__B Hello,\x1cWorld! (Über) İstanbul", "  __label__C   a  b ",
             "foo __label__D bar", "__label__E __label__F two labels", "__label__G x__label__y inside",
             "__label____label__ z", "\u00a0__label__I\u2003MiXeD\u3000Case\x85next", "__label__J ΑΣ\u00a0Β σΣ",
             "__label__K can't U.S., e-mail: :) ;-)"]
    path = tmp_path / "tricky.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = Tokenizer(vectors.index)
    for lowercase in (True, False):
        with LabelledCorpus(str(path), lowercase=lowercase, tokenize="auto", vocabulary=vectors.index) as corpus:
            examples = list(corpus.examples())
        assert len(examples) == len(lines)
        for example, line in zip(examples, lines):
            raw = line.split()
            words = [(t.lower() if lowercase else t) for t in raw if not t.startswith("__label__")]
            assert example.labels == [t for t in raw if t.startswith("__label__")]
            assert example.tokens == list(chain.from_iterable(tokenizer[w] for w in words)), line


def test_classify_options_need_the_objective(tmp_path):
    result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "sgns", "--valid", VALID, "-o", tmp_path / "o.txt"])
    one_error_line(result, "--valid", "only by --objective classify")


def test_labels_are_not_words(tmp_path):
    corpus = tmp_path / "t.txt"
    corpus.write_text("The __label__Big cat sat.\n__label__small __label__Big a dog\n")
    vectors = glove(20000)
    with LabelledCorpus(str(corpus), lowercase=True, tokenize="auto", vocabulary=vectors.index) as c:
        assert list(c.lines()) == [["the", "cat", "sat", "."], ["a", "dog"]]
        assert [e.labels for e in c.examples()] == [["__label__Big"], ["__label__small", "__label__Big"]]
        assert c.count()[1] == 6   # labels are not counted as words


def test_dry_run(tmp_path):
    result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "--valid", VALID, "-o", tmp_path / "o.txt",
                  "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["objective"] == "classify" and plan["settings"]["label_prefix"] == "__label__"
    assert plan["corpus_lines"] == 3000
    words = sum(len(line.split()) - 1 for line in TRAIN.read_text().splitlines())
    assert plan["corpus_words"] == words   # the labels are not words
    assert not (tmp_path / "o.txt").exists()


def test_new_words_start_at_random_unless_told(tmp_path):
    # classify's own start (Classify.new_word_start): the loop learns the new rows from the labels; the
    # other objectives keep the new words' default, and a start given is the one taken.
    def init(*options):
        result = run(["train", SAMPLE_VECTORS, TRAIN, "--min-count", 2, "-o", tmp_path / "o.txt", "--dry-run",
                      "--json", *options])
        assert result.exit_code == 0, result.output
        plan = json.loads(result.stdout)
        assert plan["new"] > 0
        return plan["init"]

    assert init("--objective", "classify") == "random"
    assert init("--objective", "classify", "--init", "form-context") == "form-context"
    assert init("--objective", "sgns") == "form-context"


def test_dry_run_checks_the_valid_lines(tmp_path):
    valid = tmp_path / "v.txt"
    valid.write_text("__label__noun.act the act of running\nno label here\n")
    result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "--valid", valid, "-o", tmp_path / "o.txt",
                  "--dry-run"])
    one_error_line(result, str(valid), "line 2", "no label")


def test_fine_tune_trains_classify_from_python_as_the_command_does(tmp_path):
    # The objective opens its own corpus (Objective.open_corpus), so the library reads labelled lines too.
    import embedtune

    out = tmp_path / "cli.txt"
    options = ["--freeze-top", "5000", "--epochs", "1", "--seed", "3", "--deterministic"]
    assert run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "-o", out, *options]).exit_code == 0
    tuned = embedtune.fine_tune(str(SAMPLE_VECTORS), str(TRAIN), objective="classify", freeze_top=5000, epochs=1,
                                seed=3, deterministic=True)
    np.testing.assert_array_equal(bits(tuned.matrix), bits(load_vectors(out).matrix))


def _objective(vectors, corpus, **train):
    """The classify objective of a run set up on the sample (no step taken)."""
    from embedtune.config import resolve
    from embedtune.training.checkpoints import Checkpoints
    from embedtune.training.loop import setup

    config = resolve(with_paths(make_config({"min_count": 1000000}, objective="classify", **train),
                                corpus=str(corpus.path)))
    return setup(vectors, corpus, config, Checkpoints(None, 0)).trainer.objective


def test_batches_hold_each_distinct_word_once_and_rebuild_every_line():
    """Each batch lists its distinct words once; its tokens point at them (slot) and at their line
    (segment), so the lines read back exactly; a batch with more distinct words than its slots is
    cut at a line's end, and every line is trained once an epoch."""
    vectors = glove(20000)
    with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        obj = _objective(vectors, corpus, batch_size=64, epochs=1)
    lines = [obj.ids[a:b] for a, b in zip(obj.starts[:-1], obj.starts[1:])]
    assert obj.words_per_batch < obj.tokens_per_batch   # the budget is smaller than a slot a token
    obj.words_per_batch = W = 250   # fewer than 64 lines' distinct words: batches are cut
    order = np.random.default_rng(5).permutation(obj.n_lines)
    seen, batches = [], 0
    for batch in obj.batches(order):
        batches += 1
        word, weight, slot, segment = batch["word"], batch["weight"], batch["slot"], batch["segment"]
        assert len(word) == W + 1 and weight[-1] == 0
        real = word[weight > 0]
        assert len(real) <= W and len(np.unique(real)) == len(real)
        used = segment < obj.lines_per_batch
        assert (slot[~used] == W).all()
        for k in range(batch["pairs"]):
            line = order[len(seen)]
            np.testing.assert_array_equal(word[slot[segment == k]], lines[line])
            np.testing.assert_array_equal(batch["targets"][k], obj.targets[line])
            seen.append(line)
        assert not batch["targets"][batch["pairs"]:].any()
    assert seen == list(order)
    assert batches > -(-obj.n_lines // 64)   # some batches were cut by the distinct-word budget


def test_unmerged_step_trains_as_the_merged_one(monkeypatch):
    """Classify's batches hold each row once, so the trainer skips merging (distinct_ids); the result
    is the merged step's, to float rounding, with adam (merged rows) and an anchor (slices counted)."""
    from embedtune.objectives.classify import Classify
    from embedtune.training import train

    vectors = glove(20000)
    results = []
    for distinct in (True, False):
        monkeypatch.setattr(Classify, "distinct_ids", distinct)
        with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
            config = with_paths(make_config({"freeze_top": 5000, "min_count": 1000000}, objective="classify",
                                            epochs=1, anchor=0.5), corpus=str(TRAIN))
            results.append(train(vectors, corpus, config))
    (a, b) = results
    np.testing.assert_allclose(a.vectors.matrix[5000:], b.vectors.matrix[5000:], rtol=0, atol=2e-6)
    assert not np.array_equal(a.vectors.matrix[5000:], vectors.matrix[5000:])   # rows moved
    assert np.array_equal(bits(a.vectors.matrix[:5000]), bits(vectors.matrix[:5000]))


def test_anchor_slices_are_the_batches_holding_a_row():
    """The anchor's per-epoch pull is spread over a row's slices; a batch gives a row one slice, so a
    row's expected slices an epoch are the batches that hold it (measured over shuffled epochs)."""
    vectors = glove(20000)
    with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        obj = _objective(vectors, corpus, batch_size=256, epochs=1)
    rng = np.random.default_rng(0)
    held = np.zeros(obj.rows.n_trainable)
    epochs = 40
    for _ in range(epochs):
        for batch in obj.batches(rng.permutation(obj.n_lines)):
            ids = batch["word"][batch["weight"] > 0]
            held[ids[ids < obj.rows.n_trainable]] += 1
    held /= epochs
    assert held.sum() == pytest.approx(obj.slices.sum(), rel=0.01)
    common = obj.slices > 5
    np.testing.assert_allclose(held[common], obj.slices[common], rtol=0.15)


# --- word n-grams (--word-ngrams, fastText's -wordNgrams) ---------------------------------------------

@pytest.fixture(scope="module")
def trained_ngrams(tmp_path_factory):
    """The `trained` command with --word-ngrams 2: the first 5,000 rows frozen, --valid, --save-classifier."""
    folder = tmp_path_factory.mktemp("classify-ngrams")
    out, clf, summary = folder / "out.txt", folder / "clf.txt", folder / "summary.json"
    result = run(["train", SAMPLE_VECTORS, TRAIN, "--objective", "classify", "--valid", VALID, "--freeze-top", 5000,
                  "--word-ngrams", 2, "--save-classifier", clf, "-o", out, "--json", summary, *FAST])
    assert result.exit_code == 0, result.output
    return result, json.loads(summary.read_text()), out, clf


def _sample_bigrams(path) -> set[str]:
    """The bigrams of the lines' tokens as the run reads them (lower-cased, punctuation split off), of the
    lines that train (a word of the vectors: no new words here)."""
    vectors = glove(20000)
    with LabelledCorpus(str(path), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        return {f"{a} {b}" for e in corpus.examples() if any(t in vectors.index for t in e.tokens)
                for a, b in zip(e.tokens, e.tokens[1:])}


def test_ngram_rows_train_and_frozen_rows_keep_their_bits(trained_ngrams):
    """Every bigram of the training lines is a row (min count 1); the rows move from their start (the
    mean of their words); frozen word rows keep their bits; the output holds the words only."""
    result, s, out, clf = trained_ngrams
    assert s["word_ngrams"] == 2 and s["ngram_rows"] == len(_sample_bigrams(TRAIN)) > 20000
    assert f"{s['ngram_rows']:,} n-gram rows (up to 2 words)" in result.output
    assert s["loss_last"] < s["loss_first"]
    before, after = load_vectors(SAMPLE_VECTORS), load_vectors(out)
    assert after.words == before.words   # no n-gram rows in the output vectors
    assert np.array_equal(bits(after.matrix[:5000]), bits(before.matrix[:5000]))
    assert s["frozen_rows_checked"] == 5000 and s["max_frozen_change"] == 0.0
    saved = load_classifier(clf)
    assert set(saved.ngrams) == _sample_bigrams(TRAIN) and saved.ngram_vectors.shape == (s["ngram_rows"], 50)
    assert saved.ngrams.index("of the") < 5   # most frequent first
    start = np.stack([before.matrix[[before.index[w] for w in g.split()]].mean(axis=0) for g in saved.ngrams[:50]])
    moved = np.abs(saved.ngram_vectors[:50] - start).max(axis=1)
    assert (moved > 1e-3).all(), moved   # every frequent bigram trained


def test_valid_scoring_uses_the_ngram_rows(trained_ngrams):
    """The saved classifier with its n-gram rows and the output vectors give the accuracy the run reported,
    to the line; without the n-gram rows they do not (the rows carry part of the model)."""
    from embedtune.objectives.classify.model import text_means

    _, s, out, clf = trained_ngrams
    saved, vectors = load_classifier(clf), load_vectors(out)
    index = vectors.index   # every word of the output (test_saved_classifier_predicts_as_the_model)
    lines = [line.split() for line in VALID.read_text().splitlines()]

    def accuracy(classifier):
        top = predict(classifier, text_means(classifier, vectors.matrix, index, [words[1:] for words in lines]))
        return np.mean([classifier.labels[t] == words[0] for t, words in zip(top, lines)])

    assert accuracy(saved) == s["valid"]["after"]["accuracy"]
    words_only = Classifier(saved.labels, saved.weights, saved.bias)
    assert accuracy(words_only) != s["valid"]["after"]["accuracy"]


def test_ngrams_lift_valid_accuracy_with_most_rows_frozen(trained, trained_ngrams):
    """The point of n-grams for frozen vocabularies: trainable signal where the words cannot move."""
    assert trained_ngrams[1]["valid"]["after"]["accuracy"] > trained[1]["valid"]["after"]["accuracy"]


def test_ngram_min_count_keeps_the_frequent_ngrams(tmp_path):
    vectors = glove(20000)
    with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        obj = _objective(vectors, corpus, batch_size=64, epochs=1, word_ngrams=3, ngram_min_count=3)
    from collections import Counter

    from embedtune.objectives.classify.model import word_ngrams
    counts = Counter(g for line in TRAIN.read_text().splitlines() for g in word_ngrams(line.split()[1:], 3))
    assert obj.ngrams[-1] == "</s>"   # the line end's row, after the n-grams
    assert set(obj.ngrams[:-1]) == {g for g, c in counts.items() if c >= 3}
    assert any(g.count(" ") == 2 for g in obj.ngrams)   # trigrams too
    assert [counts[g] for g in obj.ngrams[:-1]] == sorted((counts[g] for g in obj.ngrams[:-1]), reverse=True)


def test_ngram_rows_are_each_lines_ngrams_in_order():
    """Each training line's n-gram ids are its word_ngrams (2-grams in order, then 3-grams) that have a
    row, the rows ordered most frequent first, ties by text, and each row starts at its words' mean."""
    from collections import Counter

    from embedtune.objectives.classify.model import word_ngrams
    vectors = glove(20000)
    with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        obj = _objective(vectors, corpus, batch_size=64, epochs=1, word_ngrams=3, ngram_min_count=2)
        lines = [e.tokens for e in corpus.examples() if any(t in obj.rows.local_index for t in e.tokens)]
    counts = Counter(g for tokens in lines for g in word_ngrams(tokens, 3))
    assert obj.ngrams == sorted((g for g, c in counts.items() if c >= 2), key=lambda g: (-counts[g], g)) + ["</s>"]
    assert len(lines) == obj.n_lines and obj.gram_ids.dtype == np.int32
    for k, tokens in enumerate(lines):   # each line's n-grams, then the line end (fastText's </s>)
        got = [obj.ngrams[i] for i in obj.gram_ids[obj.gram_starts[k]:obj.gram_starts[k + 1]]]
        assert got == [g for g in word_ngrams(tokens, 3) if counts[g] >= 2] + ["</s>"]
    assert not obj.ngram_start[-1].any()   # the line end's row starts at zero
    rows = obj.rows.vectors(np.arange(obj.rows.n_local)).astype(np.float64)
    for g, start in zip(obj.ngrams[:-1:97], obj.ngram_start[:-1:97]):
        ids = [obj.rows.local_index[w] for w in g.split() if w in obj.rows.local_index]
        np.testing.assert_allclose(start, rows[ids].mean(axis=0) if ids else 0.0, atol=1e-6)


def test_batches_hold_each_ngram_once_and_rebuild_every_line():
    """As for words: a batch lists its distinct n-gram rows once (side ids after the labels), its n-gram
    tokens point at them and at their line, and a batch over the n-gram budget is cut at a line's end."""
    vectors = glove(20000)
    with LabelledCorpus(str(TRAIN), lowercase=True, tokenize="auto", vocabulary=vectors.index) as corpus:
        obj = _objective(vectors, corpus, batch_size=64, epochs=1, word_ngrams=2)
    L, sink = len(obj.labels), len(obj.labels) + len(obj.ngrams)
    lines = [obj.gram_ids[a:b] for a, b in zip(obj.gram_starts[:-1], obj.gram_starts[1:])]
    words = [obj.ids[a:b] for a, b in zip(obj.starts[:-1], obj.starts[1:])]
    obj.distinct_grams_per_batch = G = 300   # fewer than 64 lines' distinct bigrams: batches are cut
    order = np.random.default_rng(5).permutation(obj.n_lines)
    seen, batches = [], 0
    for batch in obj.batches(order):
        batches += 1
        gram, weight, slot, segment = batch["gram"], batch["gram_weight"], batch["gram_slot"], batch["gram_segment"]
        assert len(gram) == G + 1 and weight[-1] == 0 and (gram[weight == 0] == sink).all()
        real = gram[weight > 0]
        assert len(np.unique(real)) == len(real) and (real >= L).all() and (real < sink).all()
        for k in range(batch["pairs"]):
            line = order[len(seen)]
            np.testing.assert_array_equal(gram[slot[segment == k]] - L, lines[line])
            np.testing.assert_array_equal(batch["word"][batch["slot"][batch["segment"] == k]], words[line])
            seen.append(line)
    assert seen == list(order)
    assert batches > -(-obj.n_lines // 64)   # some batches were cut by the n-gram budget


def test_classifier_file_round_trip_with_ngrams(tmp_path):
    rng = np.random.default_rng(0)
    model = Classifier(["__label__a", "__label__b"], rng.standard_normal((2, 3)).astype(np.float32),
                       np.array([0.1, -0.5], np.float32), ngrams=["of the", "in a big"],
                       ngram_vectors=rng.standard_normal((2, 3)).astype(np.float32))
    save_classifier(model, tmp_path / "c.txt")
    assert (tmp_path / "c.txt").read_text().splitlines()[0] == "2 3 2"
    back = load_classifier(tmp_path / "c.txt")
    assert back.ngrams == model.ngrams and back.word_ngrams == 3
    assert np.array_equal(bits(back.ngram_vectors), bits(model.ngram_vectors))
    (tmp_path / "bad.txt").write_text("1 2 2\n__label__a 1 2 3\nof the 1 2\n")
    with pytest.raises(EmbedtuneError, match="1 n-gram rows, header says 2"):
        load_classifier(tmp_path / "bad.txt")


@pytest.mark.parametrize("options, parts", [
    (["--word-ngrams", "0"], ["--word-ngrams", "must be"]),
    (["--word-ngrams", "9"], ["--word-ngrams", "must be"]),
    (["--ngram-min-count", "0"], ["--ngram-min-count", "must be"]),
    (["--objective", "sgns", "--word-ngrams", "2"], ["--word-ngrams", "only by --objective classify"]),
    (["--objective", "auto", "--ngram-min-count", "3"], ["--ngram-min-count", "only by --objective classify",
                                                         "the objective here is glove"]),
])
def test_ngram_options_are_checked(tmp_path, options, parts):
    args = ["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "o.txt", *FAST]
    result = run([*args, *(["--objective", "classify"] if "--objective" not in options else []), *options])
    one_error_line(result, *parts)
    assert not (tmp_path / "o.txt").exists()


def test_ngram_keys_in_a_config_file(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[train]\nobjective = "classify"\nword_ngrams = "two"\n')
    result = run(["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "o.txt", "--config", config])
    one_error_line(result, str(config), "word_ngrams")
    config.write_text('[train]\nobjective = "classify"\nword_ngrams = 7\n')
    result = run(["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "o.txt", "--config", config])
    one_error_line(result, str(config), "'train.word_ngrams' must be")


def test_a_resumed_run_with_ngrams_gives_the_bytes_of_an_uninterrupted_one(tmp_path):
    """The n-gram rows live in the side table, so a checkpoint holds them and their adam state: a run
    stopped at step 30 and resumed writes the same vectors and the same classifier (n-gram rows included)."""
    options = ["--objective", "classify", "--word-ngrams", 2, "--freeze-top", 5000, "--min-count", 1000000,
               "--epochs", 3, "--batch-size", 128, "--deterministic", "--seed", 2]
    ck = ["--checkpoint-dir", tmp_path / "ck", "--checkpoint-every", 10]
    whole = run(["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "a.txt", "--save-classifier", tmp_path / "a.clf",
                 *options])
    assert whole.exit_code == 0, whole.output
    stopped = run(["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "b.txt", *options, *ck, "--max-steps", 30,
                   "--keep-checkpoints"])
    assert stopped.exit_code == 0, stopped.output
    assert (tmp_path / "b.txt").read_bytes() != (tmp_path / "a.txt").read_bytes()
    resumed = run(["train", SAMPLE_VECTORS, TRAIN, "-o", tmp_path / "b.txt", "--save-classifier", tmp_path / "b.clf",
                   *options, *ck, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert (tmp_path / "b.txt").read_bytes() == (tmp_path / "a.txt").read_bytes()
    assert (tmp_path / "b.clf").read_bytes() == (tmp_path / "a.clf").read_bytes()
    assert load_classifier(tmp_path / "b.clf").ngrams
