"""The lean word list and index (issue 16.2, the 3M x 300 case): WordIndex answers as the dict
``{w: i for i, w in enumerate(words)}`` would, WordList reads as the list of str it stands for, the
word2vec binary reader hands them out, and together they take a fraction of a dict's memory."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from embedtune import load_vectors
from embedtune.corpus import Corpus
from embedtune.formats import save_vectors
from embedtune.newwords.contexts import context_sums
from embedtune.vectors import Vectors
from embedtune.words import WordIndex, WordList

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample"
GLOVE = SAMPLE / "glove.6B.50d.20k.txt"


def word_lists(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(0, 60)
        # few distinct words, so that many repeat (a dict keeps the last row, in first-seen order)
        yield [rng.choice(["", "é", "ß"]) + f"w{rng.randint(0, max(1, n // 2))}" for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_word_index_answers_as_a_dict(seed):
    for words in word_lists(seed, 60):
        expected = {w: i for i, w in enumerate(words)}
        index = WordIndex(words)
        assert len(index) == len(expected)
        assert list(index) == list(expected)
        assert list(index.values()) == list(expected.values())
        assert dict(index.items()) == expected and index == expected
        probes = words + ["absent", "w-1", "", "é"]
        assert [index.get(w, -1) for w in probes] == [expected.get(w, -1) for w in probes]
        assert index.rows(probes).tolist() == [expected.get(w, -1) for w in probes]
        assert [w in index for w in probes] == [w in expected for w in probes]
        with pytest.raises(KeyError):
            index["absent"]


@pytest.mark.parametrize("seed", range(3))
def test_word_list_reads_as_a_list(seed):
    for words in word_lists(seed, 40):
        words = list(dict.fromkeys(w for w in words if w))
        listed = WordList.from_bytes([w.encode("utf-8") for w in words])
        assert listed == words and words == listed and list(listed) == words and len(listed) == len(words)
        n = len(words)
        for i in range(-n, n):
            assert listed[i] == words[i]
        for start in range(-2, n + 2):
            for stop in range(-2, n + 2):
                assert listed[start:stop] == words[start:stop]
        assert listed[::2] == words[::2]
        longer = listed.appended(["x", "y"])
        assert longer == words + ["x", "y"] and longer[n:] == ["x", "y"] and longer[-1] == "y"
        assert listed + ["z"] == words + ["z"] and ["z"] + listed == ["z"] + words
        with pytest.raises(IndexError):
            listed[n]


def test_word_list_refuses_what_it_cannot_hold():
    assert WordList.from_bytes([b"a", b""]) is None          # an empty word
    assert WordList.from_bytes([b"a\nb"]) is None             # a line break inside a word
    assert WordList.from_bytes([b"ab\xc3", b"\xa9"]) is None  # a character cut between two words


def test_binary_file_gives_the_same_words_and_bytes(tmp_path):
    text = load_vectors(GLOVE)
    path = tmp_path / "g.bin"
    save_vectors(text, path, "word2vec-binary")
    binary = load_vectors(path)
    assert isinstance(binary.words, WordList) and isinstance(binary.index, WordIndex)
    assert binary.words == text.words and dict(binary.index.items()) == dict(text.index.items())
    assert np.array_equal(binary.matrix.view(np.uint32), text.matrix.view(np.uint32))
    again = tmp_path / "again.bin"
    save_vectors(binary, again, "word2vec-binary")
    assert again.read_bytes() == path.read_bytes()


def test_words_and_index_of_many_words_take_little_memory(tmp_path):
    """60 bytes a word at most (32 measured): a list of str and a dict took 137 for these words
    (the str, the dict's entries, an int a row, the list), which put the 3M x 300 run over its goal."""
    n = 200_000
    raw = [b"w%07dx" % i for i in range(n)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        words = WordList.from_bytes(raw)
        vectors = Vectors(words, np.zeros((n, 1), np.float32))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert vectors.index["w0123456x"] == 123456
    assert held / n < 60, f"{held / n:.0f} bytes a word"


def test_context_sums_with_the_corpus_vocabulary_as_before(tmp_path):
    """context_sums looks tokens up in a dict of the corpus's words only: the same sums as with a
    dict of every vector's word (what it built before)."""
    vectors = load_vectors(GLOVE, limit=5000)
    corpus_path = tmp_path / "c.txt"
    corpus_path.write_text("the cat sat on the mat zzqx\nzzqx and the dog ran\nthe zzqx of cities\n")
    with Corpus(str(corpus_path)) as corpus:
        counts = corpus.count()[0]
        targets = ["zzqx", "the", "cat"]
        lean = context_sums(vectors, corpus, targets, window=2, vocabulary=counts)
        counted = context_sums(vectors, corpus, targets, window=2)
        everything = context_sums(vectors, corpus, targets, window=2, vocabulary=vectors.words)
    for found in (counted, everything):
        assert np.array_equal(lean.sums, found.sums) and np.array_equal(lean.contexts, found.contexts)
    assert lean.contexts.tolist()[0] == 3


def test_a_run_looks_the_corpus_s_words_up_in_the_vectors_index_once(monkeypatch):
    """The plan's row counts, the new words' choice and their context pass each need every corpus word's row:
    ``WordIndex.rows_of_keys`` looks them up once for the same counts (read-only), not once each."""
    from collections import Counter

    from train_fixtures import HIDDEN, glove, sample_lines

    from embedtune.plan.rows import decide_rows
    from embedtune.config import Config, resolve

    index = WordIndex(["a", "b", "c"])
    counts = Counter({"b": 3, "x": 2, "a": 1})
    rows = index.rows_of_keys(counts)
    assert rows.tolist() == [1, -1, 0] and not rows.flags.writeable
    assert index.rows_of_keys(counts) is rows and index.rows_of_keys(Counter(counts)) is not rows

    looked_up = []
    rows_of = WordIndex.rows
    monkeypatch.setattr(WordIndex, "rows", lambda self, words: looked_up.append(len(words)) or rows_of(self, words))
    vectors = glove(20000, drop=HIDDEN)
    corpus = Corpus(sample_lines(400))
    counts, total, _ = corpus.count()
    config = resolve(Config(vectors="v.txt", corpus="c.txt", format="glove"))
    plan, init = decide_rows(vectors, counts, total, config, corpus, 5)
    assert plan.n_new > 0 and init is not None
    assert looked_up.count(len(counts)) == 1
