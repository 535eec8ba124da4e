"""--tokenize auto|none: tokens split the way the vectors spell words, in the one place tokens are made."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
    # In this process: the checks are the summary and the words written, which a process of its own (an
    # interpreter's start and imports) would not change.
    result = CliRunner().invoke(cli, ["-q", "init", str(SAMPLE_VECTORS), str(SAMPLE_CORPUS), "-o", str(out),
                                      "--init", "random", "--json", *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    pretrained = set(load_vectors(SAMPLE_VECTORS).words)
    added = [w for w in load_vectors(out).words if w not in pretrained]
    return json.loads(result.stdout), added, pretrained


def test_quickstart_new_words_neither_begin_nor_end_with_punctuation(tmp_path):
    summary, added, pretrained = run_init(tmp_path)
    assert summary["tokenize"] == "auto" and summary["new"] == len(added) == 97   # the figures in docs/train-command.md
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


# --- The split is linear in a token's length and gives exactly the tokens it gave before. ---

class ReferenceTokenizer:
    """Tokenizer.split as it was before it became linear (issue 24): it tries every cut of the leading
    and trailing punctuation in turn, and every piece of a run longest first. Kept as the definition of
    the tokens, which must not change (trained vectors and resumed runs depend on them)."""

    def __init__(self, vocabulary):
        self.vocabulary = vocabulary

    def split(self, token):
        vocabulary = self.vocabulary
        if token in vocabulary:
            return (token,)
        n = len(token)
        lead = 0
        while lead < n and punctuation(token[lead]):
            lead += 1
        if lead == n:
            return self._run(token)
        trail = 0
        while punctuation(token[n - 1 - trail]):
            trail += 1
        if lead == 0 and trail == 0:
            return (token,)
        cut = (lead, trail)
        for removed in range(1, lead + trail + 1):
            found = next(((i, removed - i) for i in range(max(0, removed - trail), min(lead, removed) + 1)
                          if token[i:n - (removed - i)] in vocabulary), None)
            if found:
                cut = found
                break
        i, j = cut
        return self._run(token[:i]) + (token[i:n - j],) + self._run(token[n - j:])

    def _run(self, run):
        pieces, start = [], 0
        while start < len(run):
            stop = next((k for k in range(len(run), start, -1) if run[start:k] in self.vocabulary), None)
            if stop is None:
                start += 1
                continue
            pieces.append(run[start:stop])
            start = stop
        return tuple(pieces)


def shipped_texts():
    """The text files shipped in data/sample and gensim's test corpora: real tokens, as written."""
    import gensim.test.utils

    gensim_data = Path(gensim.test.utils.datapath(""))
    paths = sorted(ROOT.glob("data/sample/*.txt")) + sorted(ROOT.glob("data/sample/*.cor"))
    paths += sorted(gensim_data.glob("*.cor")) + sorted(gensim_data.glob("*.txt"))
    for path in paths:
        try:
            yield path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


@pytest.fixture(scope="module")
def sample_vocabulary():
    return load_vectors(SAMPLE_VECTORS).index


def test_real_tokens_split_as_before(sample_vocabulary):
    """Every distinct whitespace token of the shipped texts (as written and lower-cased: 390k) splits
    as the reference does, against the sample vectors and against the small vocabulary."""
    tokens = set()
    for text in shipped_texts():
        tokens.update(text.split())
        tokens.update(text.lower().split())
    assert len(tokens) > 100_000
    for vocabulary in (sample_vocabulary, VOCAB):
        tokenizer, reference = Tokenizer(vocabulary), ReferenceTokenizer(vocabulary)
        assert [t for t in tokens if tokenizer.split(t) != reference.split(t)] == []


# Characters a split turns on: ASCII and Unicode punctuation and symbols (quotes, brackets, dashes,
# an emoji), apostrophes, hyphens, digits, letters with and without case, a combining mark, a
# non-breaking space (not punctuation, not split on by str.split), and a lone surrogate.
PUNCTUATION = '"\'()[]{}.,;:!?-–—…«»“”‘’¿¡#$%&*+/<=>@\\^_`|~€😀'
OTHERS = "aUsé0789ßİ\u0301\u00a0\ud800"
PIECE = st.one_of(
    st.text(st.sampled_from(PUNCTUATION), min_size=1, max_size=4),
    st.text(st.sampled_from(PUNCTUATION + OTHERS), min_size=1, max_size=4),
    st.builds(lambda char, n: char * n, st.sampled_from(PUNCTUATION), st.integers(1, 40)),   # runs
    st.sampled_from(sorted(VOCAB) + ["o'neill", "e-mail", "1990s", "'s", "u.s", "--"]),
)
TOKEN = st.lists(PIECE, min_size=0, max_size=8).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(vocabulary=st.sets(TOKEN, max_size=30), tokens=st.lists(TOKEN, min_size=1, max_size=20))
def test_random_tokens_split_as_before(vocabulary, tokens):
    """Random tokens of punctuation runs, brackets, quotes and words, against random vocabularies of
    the same pieces (words wrapped in punctuation, runs of it) and the small one: the same split."""
    vocabulary |= set(draw_free_words(tokens))
    for words in (vocabulary, VOCAB, vocabulary | VOCAB):
        tokenizer, reference = Tokenizer(words), ReferenceTokenizer(words)
        for token in tokens:
            assert tokenizer.split(token) == reference.split(token), (token, words)


def draw_free_words(tokens):
    """Parts of the tokens themselves, so that a random vocabulary holds what is inside them: each
    token without its first and last character, and its halves."""
    for token in tokens:
        n = len(token)
        yield token[1:n - 1]
        yield token[:n // 2]
        yield token[n // 2:]


# Python expressions, made in the child process
PATHOLOGICAL = ["'\"' * 20_000", "'(' * 1_000 + 'said' + ')' * 1_000", "'(' * 20_000 + 'said' + ')' * 20_000",
                "'.,;:!' * 4_000", "('\"' * 20_000 + ' ') * 3 + 'said'", "'-' * 20_000 + 'e-mail' + '.' * 20_000"]


def test_punctuation_runs_take_time_linear_in_their_length():
    """Lines of tens of thousands of quotes or brackets, cubic when every cut was tried
    (issue 24): each is tokenized in well under a second, in a child process that is stopped if not."""
    script = (
        "import sys, time\n"
        "from embedtune.corpus import Tokenizer\n"
        f"vocabulary = set({sorted(VOCAB)!r}) | {{'\"\"', '--', '((', '))', '.\"', 'said)', '(said'}}\n"
        f"for line in [{', '.join(PATHOLOGICAL)}]:\n"
        "    start = time.process_time()\n"
        "    Tokenizer(vocabulary).tokens(line.split())\n"
        "    print(time.process_time() - start, flush=True)\n")
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"tokenizing took more than 60 s; seconds per line until then: {err.stdout!r}")
    assert result.returncode == 0, result.stderr
    seconds = [float(s) for s in result.stdout.split()]
    assert len(seconds) == len(PATHOLOGICAL) and max(seconds) < 1.0, seconds


def test_pathological_lines_split_as_before():
    """Shorter versions of the lines above, which the reference tokenizes in a moment: the same tokens."""
    vocabulary = VOCAB | {'""', "--", "((", "))", '."', "said)", "(said"}
    for line in ['"' * 300, "(" * 40 + "said" + ")" * 40, "(" * 40 + "it" + ")" * 3, ".,;:!" * 60,
                 "-" * 50 + "e-mail" + "." * 50, '"(' * 30 + "said" + ')."' * 30]:
        tokenizer, reference = Tokenizer(vocabulary), ReferenceTokenizer(vocabulary)
        assert tokenizer.tokens(line.split()) == [p for t in line.split() for p in reference.split(t)]
