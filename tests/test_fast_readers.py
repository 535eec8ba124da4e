"""The fast readers (issue 16.3): the array parser of decimal text and the memory-mapped binary reader
give the very bits and words of the careful readers they stand in front of, on every layout."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from embedtune import EmbedtuneError, load_vectors
from embedtune.formats import binary
from embedtune.formats.io import Source
from embedtune.formats.text import decimals, lines
from embedtune.formats.text import parse as textparse

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "glove.6B.50d.20k.txt"
PLAIN = re.compile(rb"-?([0-9]+\.?[0-9]*|\.[0-9]+)")


def bits(matrix) -> np.ndarray:
    return np.ascontiguousarray(matrix, dtype=np.float32).view(np.uint32)


def _tokens(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    digits = "0123456789"
    out = []
    for _ in range(n):
        sign = "-" if rng.random() < 0.4 else ""
        a = "".join(rng.choice(digits) for _ in range(rng.randint(0, 9)))
        b = "".join(rng.choice(digits) for _ in range(rng.randint(0, 9)))
        r = rng.random()
        if r < 0.45:
            t = sign + a + "." + b
        elif r < 0.6:
            t = sign + (a or "7")
        elif r < 0.7:
            t = sign + rng.choice(["1e5", "2.5E-3", "nan", "inf", "+1", ".", "-", "1-", "--1", "1.2.3", "x",
                                   "0x1", "\u0661", "1_0", "", "1\t"])
        else:  # GloVe-like: 0.000ddddd
            t = sign + "0." + "0" * rng.randint(0, 6) + "".join(rng.choice(digits) for _ in range(rng.randint(1, 9)))
        out.append(t.encode("utf-8"))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_decimals_parse_to_the_correctly_rounded_double(seed):
    """Every plain decimal of up to 15 characters parses to float()'s double (sign of zero included),
    with the point at every place in the 16 bytes; everything else is handed back, never guessed."""
    tokens = _tokens(seed, 50_000)
    tokens += [b"1" * 15, b"-" + b"9" * 14, b"." + b"9" * 14, b"9" * 14 + b".", b"1" * 16, b"-0", b"-0.000",
               b"0.0012345", b"-0.0012345", b"12345678.1234567"[:15], b"1234567.8"]
    for width in (7, 8, 9, 15):  # the point at every place, in one word (<= 8 bytes) and in two
        tokens += [b"1" * k + b"." + b"2" * (width - 1 - k) for k in range(width)]
        tokens += [b"-" + b"3" * k + b"." + b"4" * (width - 2 - k) for k in range(width - 1)]
    data = b"pad-pad-pad-pad-" + b" ".join(tokens) + b" "
    lengths = np.array([len(t) for t in tokens], np.intp)
    ends = 16 + np.cumsum(lengths + 1) - 1
    values = np.empty(len(tokens))
    odd = set(decimals.parse_decimals(np.frombuffer(data, np.uint8), ends, lengths, values).tolist())
    for i, token in enumerate(tokens):
        plain = PLAIN.fullmatch(token) is not None and len(token) <= decimals.MAX_CHARS
        assert (i not in odd) == plain, token
        if plain:
            want = float(token)
            assert values[i] == want and np.signbit(values[i]) == np.signbit(want), token


@pytest.mark.parametrize("seed", [0, 1])
def test_compiled_lines_parse_to_the_correctly_rounded_float32(seed):
    """Every plain decimal of up to 15 characters parses to float()'s double rounded to float32 (sign of zero
    included), with the point at every place; everything else is handed back with its bytes, never guessed."""
    tokens = _tokens(seed, 50_000)
    tokens += [b"1" * 15, b"-" + b"9" * 14, b"." + b"9" * 14, b"9" * 14 + b".", b"1" * 16, b"-0", b"-0.000",
               b"0.0012345", b"-0.0012345", b"12345678.1234567"[:15], b"1234567.8", b"9" * 19, b"9" * 25, b"-1.5-"]
    for width in (7, 8, 9, 15):  # the point at every place
        tokens += [b"1" * k + b"." + b"2" * (width - 1 - k) for k in range(width)]
        tokens += [b"-" + b"3" * k + b"." + b"4" * (width - 2 - k) for k in range(width - 1)]
    body = b"".join(b"w%d " % i + token + b"\n" for i, token in enumerate(tokens))
    joined, matrix, (odd, starts, ends) = lines.parse_lines(body, 1, len(tokens), len(tokens))
    assert bytes(joined).split(b" ") == [b"w%d" % i for i in range(len(tokens))]
    assert [body[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [tokens[i] for i in odd.tolist()]
    odd = set(odd.tolist())
    for i, token in enumerate(tokens):
        plain = PLAIN.fullmatch(token) is not None and len(token) <= lines.MAX_CHARS
        assert (i not in odd) == plain, token
        if plain:
            want = np.float32(float(token))
            assert bits(matrix[i])[0] == bits([want])[0], token


def _loadtxt_reference(body: bytes, dim: int):
    n = body.count(b"\n")
    return textparse.parse_loadtxt(body, dim, n)


def test_columns_parser_equals_numpy_reader_on_glove_in_small_pieces(monkeypatch):
    """Pieces of a few hundred bytes, so that lines cross piece ends everywhere."""
    body = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:3000])
    words, matrix = _loadtxt_reference(body, 50)
    for piece in (1 << 20, 4096, 700):
        monkeypatch.setattr(textparse, "PIECE_BYTES", piece)
        got_words, got = textparse.parse_columns(body, 50, body.count(b"\n"))
        assert got_words == words
        assert np.array_equal(bits(got), bits(matrix)), piece


@pytest.mark.parametrize("compiled", [False, True])
def test_columns_parser_takes_crlf_exponents_and_odd_forms_exactly(compiled):
    lines = [b"caf\xc3\xa9 -0.41242 4.0071e-05 +1 .5", b"x1 5. -0 1E3 -.25", b"nan? nan -inf 0.1 2",
             b"\xe6\x97\xa5 123456789012345 -1.5e-45 3.4028235e38 0"]
    body = b"\r\n".join(lines) + b"\r\n"
    words, matrix = textparse.parse_columns(body, 4, 4, compiled)
    ref_words, ref = _loadtxt_reference(body.replace(b"\r\n", b"\n"), 4)
    assert words == ref_words == ["café", "x1", "nan?", "日"]
    assert np.array_equal(bits(matrix), bits(ref))


@pytest.mark.parametrize("body", [
    b"a 1 2\nb 3\n",              # a short line
    b"a 1 2\nb 3 4 5\n",          # a long one
    b"a  1 2\nb 3 4\n",           # doubled space
    b" 1 2\nb 3 4\n",             # empty word
    b"a 1 2\nb 3 x\n",            # not a number
    b"a 1 2\rb 3 4\n",            # a lone carriage return
    b"a\xff 1 2\nb 3 4\n",        # bad UTF-8
    b"new york 1 2\nb 3 4\n",     # a word with a space
])
@pytest.mark.parametrize("compiled", [False, True])
def test_columns_parser_refuses_what_it_cannot_read_exactly(body, compiled):
    with pytest.raises(textparse.NotFast):
        textparse.parse_columns(body, 2, body.count(b"\n"), compiled)


@pytest.mark.parametrize("compiled", [False, True])
def test_columns_parser_hands_files_full_of_exponents_to_numpy(compiled):
    """Values float() must parse one by one cost 5x numpy's reader: past 1 in 64 the block goes there."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal((200, 8)).astype(np.float32)
    body = b"".join(b"w%d " % i + b" ".join(b"%.6e" % v for v in row) + b"\n" for i, row in enumerate(values))
    with pytest.raises(textparse.NotFast):
        textparse.parse_columns(body, 8, 200, compiled)
    words, matrix = textparse.parse_fast(body, 8, 200, compiled)
    assert words == ["w%d" % i for i in range(200)]
    assert np.array_equal(bits(matrix), bits(np.array([[float(b"%.6e" % v) for v in row] for row in values])))


def test_a_big_file_read_by_the_compiled_kernel_gives_the_words_bits_and_errors_of_numpys(tmp_path, monkeypatch):
    """read.py parses a file of COMPILED_MIN_BYTES or more with lines.py's kernel once numba is loaded (this module
    imports lines.py; here every file, and in two processes): the same words and bits as decimals.py's path,
    and the same error for a bad line."""
    from embedtune.formats.text import read as textread

    monkeypatch.setattr(textread, "PARALLEL_MIN_BYTES", 1 << 16)
    monkeypatch.setattr(textread.os, "sched_getaffinity", lambda pid: {0, 1})
    good = tmp_path / "v.txt"
    data = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:4000])
    good.write_bytes(data + b"odd 1e-3 " + b"+2 " * 48 + b"nan\n")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(data + b"x " + b"1 " * 48 + b"1..5\n")
    read = {}
    for compiled_min in (1 << 62, 0):
        monkeypatch.setattr(textparse, "COMPILED_MIN_BYTES", compiled_min)
        vectors = load_vectors(str(good), allow_nan=True)
        with pytest.raises(EmbedtuneError) as error:
            load_vectors(str(bad))
        read[compiled_min] = vectors.words, bits(vectors.matrix), str(error.value)
    (words, numpy_bits, numpy_error), (compiled_words, compiled_bits, compiled_error) = read.values()
    assert compiled_words == words and words[-1] == "odd" and len(words) == 4001
    assert np.array_equal(compiled_bits, numpy_bits)
    assert compiled_error == numpy_error and "line 4001" in compiled_error, compiled_error


# -- the mapped binary reader --------------------------------------------------------------------

def _binary_file(tmp_path, newline: bool, n: int = 2000, dim: int = 7) -> tuple[str, list, np.ndarray]:
    rng = np.random.default_rng(1)
    words = [("w%d" % i) * (1 + i % 5) for i in range(n)]
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    end = b"\n" if newline else b""
    data = b"%d %d\n" % (n, dim) + b"".join(w.encode() + b" " + r.tobytes() + end for w, r in zip(words, matrix))
    path = tmp_path / f"v{int(newline)}.bin"
    path.write_bytes(data)
    return str(path), words, matrix


@pytest.mark.parametrize("newline", [True, False], ids=["C tool", "gensim"])
def test_mapped_binary_reader_is_used_and_exact(tmp_path, monkeypatch, newline):
    path, words, matrix = _binary_file(tmp_path, newline)
    used = []
    read_records = binary._read_records

    def spy(*args):
        result = read_records(*args)
        used.append(result is not None)
        return result

    monkeypatch.setattr(binary, "_read_records", spy)
    monkeypatch.setattr(binary, "MAPPED_BATCH", 7)       # batches and releases end mid-file
    monkeypatch.setattr(binary, "MAPPED_RELEASE", 4096)
    back = load_vectors(path)
    assert used == [True]
    assert back.words == words and np.array_equal(bits(back.matrix), bits(matrix))
    limited = load_vectors(path, limit=10)
    assert limited.words == words[:10] and np.array_equal(bits(limited.matrix), bits(matrix[:10]))
    with Source(path) as source:  # the buffered reader gives the same
        monkeypatch.setattr(binary, "_read_mapped", lambda *a: None)
        words2, matrix2, _ = binary.read_binary(source)
    assert words2 == words and np.array_equal(bits(matrix2), bits(matrix))


def test_mapped_binary_reader_leaves_damage_to_the_buffered_one(tmp_path):
    path, words, matrix = _binary_file(tmp_path, True, n=50)
    data = Path(path).read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[:-20])
    with pytest.raises(EmbedtuneError, match="record 50: file ends inside the record"):
        load_vectors(str(cut))
    extra = tmp_path / "extra.bin"
    extra.write_bytes(data + b"more " + matrix[0].tobytes())
    with pytest.raises(EmbedtuneError, match="more data after 50 records"):
        load_vectors(str(extra))
    assert load_vectors(str(extra), limit=49).words == words[:49]
    far = tmp_path / "far.bin"  # trailing blanks are fine, past them (beyond 1 MB) data is not
    far.write_bytes(data + b" " * (3 << 20))
    assert load_vectors(str(far)).words == words
    far.write_bytes(data + b" " * (3 << 20) + b"x")
    with pytest.raises(EmbedtuneError, match="more data after 50 records"):
        load_vectors(str(far))


# -- which parse a process takes (parse.py's takes_compiled) --------------------------------------

# A command run in a child with every file big enough for the compiled parse once numba is loaded
# (COMPILED_MIN_BYTES 0) and COMPILED_ALONE_MIN_BYTES as the library has it (far above these files) unless
# the test says; it says on its last line of standard error whether numba was imported and whether the
# reader's compiled parse ran.
_CHOICE = """
import json, os, sys
from embedtune.formats.text import parse
parse.COMPILED_MIN_BYTES = 0
if os.environ.get("ALONE_MIN_BYTES"):
    parse.COMPILED_ALONE_MIN_BYTES = int(os.environ["ALONE_MIN_BYTES"])
taken = []
compiled = parse._parse_compiled

def spy(*args):
    taken.append(1)
    return compiled(*args)

parse._parse_compiled = spy
from embedtune.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="embedtune")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "numba": "numba" in sys.modules, "compiled": bool(taken)}), file=sys.stderr)
"""


def _choice(*args, alone_min=None) -> dict:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBEDTUNE_COMPILED_READER": "1"}
    env.pop("ALONE_MIN_BYTES", None)
    if alone_min is not None:
        env["ALONE_MIN_BYTES"] = str(alone_min)
    ran = subprocess.run([sys.executable, "-c", _CHOICE, *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=600)
    said = json.loads(ran.stderr.splitlines()[-1])
    assert said.pop("code") in (0, None), ran.stderr
    return said


def _corpus(glove_file: Path, tmp_path: Path) -> Path:
    """Lines of the file's words 100 to 400: trainable past --freeze-top 100."""
    words = [line.split(b" ", 1)[0] for line in glove_file.read_bytes().splitlines()[100:400]]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"".join(b" ".join(words[i:i + 12]) + b"\n" for i in range(0, len(words), 12)) * 4)
    return corpus


@pytest.fixture
def glove_file(tmp_path) -> Path:
    path = tmp_path / "v.txt"
    path.write_bytes(b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[:3000]))
    return path


def test_a_process_that_needs_no_kernel_reads_a_big_text_file_without_loading_numba(glove_file, tmp_path):
    """numba's load is a fixed cost (issue 48.6: it put a 400k x 300 read at 1.52x its matrix): a command that needs
    no compiled kernel (convert to binary, neighbors, eval of word pairs only) parses a file below
    COMPILED_ALONE_MIN_BYTES with numpy, however far above COMPILED_MIN_BYTES; before, every such file loaded it."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("the\tof\t1.0\nand\tto\t2.0\nin\ta\t3.0\n")
    for args in (["convert", glove_file, tmp_path / "v.bin"], ["neighbors", glove_file, "the", "-q"],
                 ["eval", glove_file, "--similarity", pairs, "-q"]):
        assert _choice(*args) == {"numba": False, "compiled": False}, args


def test_a_file_past_the_alone_threshold_takes_the_compiled_parse_in_any_process(glove_file, tmp_path):
    assert _choice("convert", glove_file, tmp_path / "v.bin", alone_min=0) == {"numba": True, "compiled": True}


def test_eval_train_and_a_text_convert_load_numba_before_a_big_text_file_and_parse_it_compiled(glove_file, tmp_path):
    """Each loads numba anyway (eval's analogy search, train's corpus reader, the text writer's kernel): the read
    takes the compiled parse (issue 48.5's speed: eval's 171 MB GloVe file), numba loaded before it
    (load_vectors's ``kernels``)."""
    assert _choice("convert", glove_file, tmp_path / "v.vec", "-q") == {"numba": True, "compiled": True}
    analogies = tmp_path / "questions.txt"
    analogies.write_text(": family\nthe of and to\nin a for is\n")
    assert _choice("eval", glove_file, "--analogy", analogies, "-q") == {"numba": True, "compiled": True}
    corpus = _corpus(glove_file, tmp_path)
    assert _choice("train", glove_file, corpus, "-o", tmp_path / "tuned.txt", "--freeze-top", "100", "--epochs", "1",
                   "-q") == {"numba": True, "compiled": True}


def test_the_streamed_and_outlined_reads_never_take_the_compiled_parse(glove_file, tmp_path):
    """inspect and the dry run look at each row once, or at a sample: numba's load would be most of what they hold."""
    assert _choice("inspect", glove_file, alone_min=0) == {"numba": False, "compiled": False}
    corpus = _corpus(glove_file, tmp_path)
    assert _choice("train", glove_file, corpus, "-o", tmp_path / "tuned.txt", "--freeze-top", "100", "--dry-run",
                   alone_min=0)["compiled"] is False
