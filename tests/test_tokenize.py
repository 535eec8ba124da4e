"""--tokenize auto|none: tokens split the way the vectors spell words, in the one place tokens are made."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from embedtune.cli.main import cli
from embedtune.config import Config, load_config, merge
from embedtune.corpus import Corpus, Tokenizer, id_chunks
from embedtune.errors import EmbedtuneError
from embedtune.formats import load_vectors

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_VECTORS = ROOT / "data" / "sample" / "glove.6B.50d.20k.txt"
SAMPLE_CORPUS = ROOT / "data" / "sample" / "lee_background.cor"

VOCAB = {"said", "u.s.", "e-mail", ":)", ".", ",", '"', "(", ")", "...", "minister", "the", "it"}


def punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


@pytest.mark.parametrize("raw, tokens", [
    ("said", ["said"]),
    ("said.", ["said", "."]),
    ('"minister,', ['"', "minister", ","]),
    ("u.s.", ["u.s."]),            # the vectors have it: kept as written
    ("u.s.,", ["u.s.", ","]),      # the fewest cut that leave a known word
    ('("u.s.")', ["(", '"', "u.s.", '"', ")"]),
    ("e-mail", ["e-mail"]),
    ("e-mail.", ["e-mail", "."]),
    (":)", [":)"]),
    (":),", [":)", ","]),
    ("...", ["..."]),
    ("it...", ["it", "..."]),
    ("unknown.", ["unknown", "."]),  # a new word, without its full stop
    ("o'neill", ["o'neill"]),        # punctuation inside a word stays
    ("said!", ["said"]),             # '!' is not in the vectors: dropped, it can never be a new word
    ("¿¡", []),
    ("#", []),
])
def test_a_token_is_split_as_the_vectors_spell_words(raw, tokens):
    assert list(Tokenizer(VOCAB)[raw]) == tokens


def test_each_distinct_token_is_split_once():
    tokenizer = Tokenizer(VOCAB)
    calls = []
    split = tokenizer.split
    tokenizer.split = lambda token: calls.append(token) or split(token)
    corpus = Corpus(["said. said. said", "said."], tokenize="auto", vocabulary=VOCAB)
    corpus.tokenizer = tokenizer
    assert list(corpus.lines()) == [["said", ".", "said", ".", "said"], ["said", "."]]
    assert list(corpus.lines()) == [["said", ".", "said", ".", "said"], ["said", "."]]
    assert sorted(calls) == ["said", "said."]


def test_a_line_of_tokens_that_stay_is_itself_else_each_tokens_pieces():
    """Tokenizer.tokens: a line whose tokens all stay as they are (seen before) comes back as it is;
    any other line as each token's pieces in order, the same either way as token by token."""
    from itertools import chain

    tokenizer = Tokenizer(VOCAB)
    lines = [["said", "the", "minister"], ["said.", "u.s.,", "the"], ["said", "the"], ["¿¡", "the"], []]
    for line in lines * 2:   # the second time every token is remembered
        assert tokenizer.tokens(list(line)) == list(chain.from_iterable(Tokenizer(VOCAB)[t] for t in line))
    assert {"said", "the", "minister"} <= tokenizer.whole and not {"said.", "u.s.,", "u.s."} & tokenizer.whole
    same = ["said", "the"]
    assert tokenizer.tokens(same) is same   # no copy of a line that stays


def test_lower_case_first_then_look_up(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text('"The minister SAID. U.S., E-mail\n', encoding="utf-8")
    lowered = Corpus(str(path), lowercase=True, tokenize="auto", vocabulary=VOCAB)
    assert list(lowered.lines()) == [['"', "the", "minister", "said", ".", "u.s.", ",", "e-mail"]]
    as_written = Corpus(str(path), tokenize="auto", vocabulary=VOCAB)
    assert list(as_written.lines()) == [['"', "The", "minister", "SAID", ".", "U.S", ".", ",", "E-mail"]]


def test_none_keeps_whitespace_tokens_and_auto_needs_the_vocabulary(tmp_path):
    lines = ['"we said. u.s.,']
    assert list(Corpus(lines).lines()) == [['"we', "said.", "u.s.,"]]
    assert list(Corpus(lines, tokenize="none", vocabulary=VOCAB).lines()) == [['"we', "said.", "u.s.,"]]
    with pytest.raises(EmbedtuneError, match="needs the vectors' vocabulary"):
        Corpus(lines, tokenize="auto")
    with pytest.raises(EmbedtuneError, match="tokenize must be one of auto, none"):
        Corpus(lines, tokenize="words", vocabulary=VOCAB)


def test_counts_and_id_chunks_read_the_same_tokens():
    corpus = Corpus(["said. the minister,", "(it)"], tokenize="auto", vocabulary=VOCAB)
    counts, total, lines = corpus.count()
    assert counts == {"said": 1, ".": 1, "the": 1, "minister": 1, ",": 1, "(": 1, "it": 1, ")": 1}
    assert (total, lines) == (8, 2)
    index = {w: i for i, w in enumerate(sorted(VOCAB))}
    [chunk] = id_chunks(corpus, index)
    assert [sorted(VOCAB)[i] for i in chunk.ids] == ["said", ".", "the", "minister", ",", "(", "it", ")"]
    assert chunk.line.tolist() == [0, 0, 0, 0, 0, 1, 1, 1] and chunk.raw_tokens == 8


def test_the_config_key_and_the_option(tmp_path):
    assert Config().vocab.tokenize == "auto"
    path = tmp_path / "c.toml"
    path.write_text('[vocab]\ntokenize = "none"\n')
    assert load_config(path).vocab.tokenize == "none"
    path.write_text('[vocab]\ntokenize = "spacy"\n')
    with pytest.raises(EmbedtuneError, match="'vocab.tokenize' must be one of auto, none, got 'spacy'"):
        load_config(path)
    assert merge(Config(), {"tokenize": "none"}).vocab.tokenize == "none"


def run_init(tmp_path, *extra):
    out = tmp_path / "out.txt"
    result = subprocess.run(
        [sys.executable, "-m", "embedtune.cli.main", "-q", "init", str(SAMPLE_VECTORS), str(SAMPLE_CORPUS),
         "-o", str(out), "--init", "random", "--json", *extra],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    pretrained = set(load_vectors(SAMPLE_VECTORS).words)
    added = [w for w in load_vectors(out).words if w not in pretrained]
    return json.loads(result.stdout), added, pretrained


def test_quickstart_new_words_neither_begin_nor_end_with_punctuation(tmp_path):
    summary, added, pretrained = run_init(tmp_path)
    assert summary["tokenize"] == "auto" and summary["new"] == len(added) == 97   # the README's figures
    assert [w for w in added if punctuation(w[0]) or punctuation(w[-1])] == []
    assert "said" in pretrained and "said." not in added
    # the raw whitespace tokens, as before --tokenize: most new words were such junk
    summary, raw_added, _ = run_init(tmp_path, "--tokenize", "none")
    junk = [w for w in raw_added if punctuation(w[0]) or punctuation(w[-1])]
    assert "said." in junk and (len(raw_added), len(junk)) == (228, 151)


def test_train_takes_the_option_and_reports_it(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:20]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, [
        "-q", "train", str(SAMPLE_VECTORS), str(corpus), "-o", str(tmp_path / "o.txt"), "--objective", "sgns",
        "--epochs", "1", "--min-count", "3", "--tokenize", "none", "--json", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["tokenize"] == "none"
    added = load_vectors(tmp_path / "o.txt").words[20000:]
    assert "said." in added
