"""Properties of embedtune.training on random vocabularies, corpora and settings (hypothesis).

tests/test_train.py holds the properties on GloVe rows (frozen rows under each optimizer, the
one-step cap, loss, new words); here the vocabulary itself is random (unicode words, 1 to 12
dimensions, values such as -0.0 and subnormals), and so are the batch size, the cap, the
optimizer, the objective and the window. Checked on every example: frozen rows and unused rows keep their
bits, the batches cover the pairs, under plain SGD no row moves further than the cap allows,
and the result written in every format reads back to exactly what was trained.

Then the readers (issue 24): random bytes, punctuation runs and damaged vectors files, plain and
compressed, through every vectors format, the corpus and labelled-lines readers, the early checks
and the tokenizer: each gives a result or the library's own error naming the file and a line, no
other exception, no warning, within a bound on work per byte (function calls counted, not seconds).
"""

from __future__ import annotations

import bz2
import functools
import gzip
import math
import re
import signal
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from embedtune.config import DEFAULT_LR
from embedtune.corpus import Corpus, Tokenizer
from embedtune.errors import EmbedtuneError
from embedtune.formats import FORMAT_NAMES, VECTOR_FORMATS, load_vectors, save_vectors
from embedtune.training import train
from embedtune.vectors import Vectors

from train_fixtures import bits, make_config

# Letters only: a word of digits alone could read as a `COUNT DIM` header in GloVe text.
WORD = st.text(st.characters(categories=("Ll", "Lu", "Lo")), min_size=1, max_size=6)
# Values a text writer could spoil: signed zero, subnormals, the smallest normal, no short decimal.
# (Not the float32 extremes: a dot product of two such rows overflows to inf and NaN.)
AWKWARD = np.array([-0.0, 1e-45, -1.4e-45, 1.1754942e-38, 0.1, 1 / 3, -65504.0 / 65536], dtype=np.float32)


@st.composite
def runs(draw):
    """(Vectors, corpus lines, frozen words, training settings) for one run."""
    words = draw(st.lists(WORD, min_size=2, max_size=40, unique=True))
    new = draw(st.lists(WORD.filter(lambda w: w not in words), max_size=3, unique=True))
    dim = draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    matrix = rng.standard_normal((len(words), dim)).astype(np.float32)
    awkward = rng.random(matrix.shape) < 0.1
    matrix[awkward] = rng.choice(AWKWARD, int(awkward.sum()))
    # The first word begins every line and is never frozen, so there is always a row to train.
    lines = draw(st.lists(st.lists(st.sampled_from(words + new), min_size=2, max_size=10), min_size=3,
                          max_size=25))
    lines = [[words[0], *line] for line in lines]
    frozen = draw(st.sets(st.sampled_from(words[1:]))) if len(words) > 1 else set()
    optimizer = draw(st.sampled_from(["sgd", "adagrad", "adam"]))
    options = {
        "objective": draw(st.sampled_from(["sgns", "glove"])),
        "x_max": draw(st.sampled_from([1.0, 100.0])),
        "optimizer": optimizer,
        "lr": DEFAULT_LR[optimizer] * draw(st.sampled_from([1, 10])),
        "clip_norm": draw(st.sampled_from([0.0, 1e-3, 0.1, 1.0])),
        "batch_size": draw(st.sampled_from([5, 64, 4096])),
        "epochs": draw(st.integers(1, 2)),
        "window": draw(st.integers(1, 4)),
        "negative": draw(st.integers(1, 4)),
        "sample": 0.0,   # subsampling would drop most of so small a corpus
        "context_init": draw(st.sampled_from(["zeros", "word"])),
        "seed": draw(st.integers(0, 1000)),
    }
    return Vectors(words, matrix), lines, frozen, draw(st.integers(1, 3)), options


# No shrinking: each example trains (a second or two), and a failing one prints its settings.
@settings(max_examples=10, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(run=runs())
def test_frozen_rows_keep_their_bits_and_the_result_reads_back_exactly(run):
    vectors, lines, frozen_words, min_count, options = run
    before = vectors.matrix.copy()
    with tempfile.TemporaryDirectory() as folder:
        freeze_list = Path(folder) / "frozen.txt"
        freeze_list.write_text("".join(w + "\n" for w in sorted(frozen_words)), encoding="utf-8")
        config = make_config({"freeze_list": str(freeze_list), "min_count": min_count}, **options)
        try:
            result = train(vectors, Corpus(lines), config)
        except EmbedtuneError as err:
            # glove cannot fit its model without a pair of known words: a one-line error, nothing more.
            assert options["objective"] == "glove" and "no two words of the vectors file" in str(err)
            assume(False)

        out = result.vectors
        n = len(vectors)
        assert out.words[:n] == vectors.words
        np.testing.assert_array_equal(bits(vectors.matrix), bits(before))   # the input is not touched
        # Frozen rows and rows the corpus never uses keep their bits.
        used = {w for line in lines for w in line}
        kept = [i for i, w in enumerate(vectors.words) if w in frozen_words or w not in used]
        np.testing.assert_array_equal(bits(out.matrix[kept]), bits(before[kept]))
        assert result.stats["max_frozen_change"] == 0.0
        assert np.isfinite(out.matrix).all()

        # Every pair is in one batch: one epoch's pairs fill ceil(pairs / batch_size) steps.
        s, size = result.stats, options["batch_size"]
        assert math.ceil(s["pairs"] / size) <= s["steps"] <= math.ceil(s["pairs"] / size) + options["epochs"] - 1

        if options["optimizer"] == "sgd" and options["clip_norm"]:
            # A step moves a row by lr_t times its capped gradient, and lr_t never exceeds lr.
            movement = np.linalg.norm(out.matrix[:n].astype(np.float64) - before, axis=1)
            assert movement.max() <= options["lr"] * options["clip_norm"] * s["steps"] * (1 + 1e-5) + 1e-30

        for fmt in VECTOR_FORMATS:
            for suffix in ("", ".gz"):
                path = Path(folder) / f"out.{fmt}{suffix}"
                save_vectors(out, path, fmt)
                back = load_vectors(path, format=fmt)
                assert back.words == out.words, fmt
                np.testing.assert_array_equal(bits(back.matrix), bits(out.matrix), err_msg=f"{fmt}{suffix}")


# --- Every reader on random bytes: a result or the library's own error, in time (issue 24) ---

# The work of reading one file with every reader (15 reads), as the function calls (Python's and C's) that
# the main thread makes: a count that no machine's speed or load changes. Over the 1,200 examples (after the
# warm-up) the readers made at most 15k calls on a file under 1 kB and 11 a byte on one over 5 kB, a quarter
# of this bound at most; a reader whose calls grow with the square of a line (a loop over the characters
# inside another) makes millions on a 3,000-byte line of punctuation. Work inside one C call is not
# counted: only the hang guard below bounds that.
READ_CALLS = 100_000
READ_CALLS_PER_BYTE = 30
HANG_SECONDS = 60   # a read still running then (a hang, not a slow read) is stopped, and the example fails
# Errors about the whole file, with no line to name: the compressed stream itself is damaged or not read.
# A fastText model (read whole, not by lines) names what is wrong with it as a whole, or the byte where it ends.
WHOLE_FILE = re.compile(r": (damaged (gzip|bzip2) data|cannot read: |is (xz|zstd|zip)-compressed"
                        r"|(not a |a quantized )?fastText model)")
FUZZ_VOCABULARY = {"the", "of", ".", ",", '"', "(", ")", "...", "u.s.", "e-mail", ":)", "'s", "--"}
PUNCTUATION = '"\'()[]{}.,;:!?-–—…«»“”#$%&*+/<=>@\\^_`|~'
PIECES = [b"3 2\n", b"2 3\n", b"-5 50\n", b"0 0\n", b"1 1\n", b"4000000000 3\n", b"9" * 30 + b" 2\n", b"the", b"of",
          b" ", b"\t", b"\n", b"\r\n", b"0.5", b"-1e3", b"nan", b"inf", b"1e999", b"x4", b"\x00", b"\xff", b"\xc3",
          b"\xef\xbb\xbf", b"__label__a", b"__label__", b"__label__x the\n", "é".encode(), "😀".encode(), b"\x0b",
          b"\x1c", "\u2028".encode(), "\u00a0".encode()]
VALUE = st.one_of(st.floats(width=32).map(lambda f: repr(f).encode()),
                  st.sampled_from([b"1", b"-0", b".5", b"1e-45", b"3.4e39", b"NaN", b"-inf", b"1.", b"0x1", b"1_0",
                                   "１".encode(), b"", b"--1", b"1e", b"\x00"]))


@st.composite
def vectors_like(draw):
    """Text rows (`word v1 ... vDIM`, a header or not), now and then a value too many or too few, a
    value that is not one, a word that is not UTF-8 or has a NUL, tabs, CRLF, a byte order mark."""
    dim, n = draw(st.integers(1, 4)), draw(st.integers(0, 30))
    lines = []
    for _ in range(n):
        k = dim + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))
        word = draw(st.sampled_from([b"the", b"of", b"\xff", "é".encode(), b"a\x00b", b"1", b"-5", b"\xc2\xa0",
                                     b"x" * 100]))
        separator = draw(st.sampled_from([b" ", b" ", b"\t", b"  "]))
        lines.append(word + separator + separator.join(draw(VALUE) for _ in range(max(0, k))))
    head = draw(st.sampled_from([b"", b"", b"%d %d\n" % (n, dim), b"%d %d\n" % (n + 1, dim)]))
    return (draw(st.sampled_from([b"", b"\xef\xbb\xbf"])) + head + draw(st.sampled_from([b"\n", b"\r\n"])).join(lines)
            + draw(st.sampled_from([b"", b"\n"])))


@st.composite
def binary_like(draw):
    """word2vec binary records, the header's count or dimension now and then wrong, words with a space,
    a newline, bad UTF-8 or 300 bytes, the vectors random bytes."""
    n, dim = draw(st.integers(0, 4)), draw(st.integers(1, 3))
    words = draw(st.lists(st.sampled_from([b"the", b"new york", b"", b"\xff", b"a\nb", b"\n", b"x" * 300]),
                          min_size=n, max_size=n))
    records = b"".join(word + b" " + draw(st.binary(min_size=4 * dim, max_size=4 * dim))
                       + draw(st.sampled_from([b"\n", b""])) for word in words)
    head = draw(st.sampled_from([b"%d %d\n" % (n, dim), b"%d %d\n" % (n + 1, dim), b"%d %d\n" % (n, dim + 1),
                                 b"-1 2\n"]))
    return head + records + draw(st.binary(max_size=4))


FILES = st.tuples(
    st.one_of(st.binary(max_size=2000),
              st.lists(st.one_of(st.sampled_from(PIECES),
                                 st.builds(lambda c, n: c.encode() * n, st.sampled_from(PUNCTUATION),
                                           st.integers(1, 3000)),
                                 st.binary(max_size=8)), max_size=40).map(b"".join),
              vectors_like(), binary_like()),
    st.sampled_from([None, None, None, gzip.compress, bz2.compress]))


class _TookTooLong(Exception):
    pass


def calls_made(work) -> int:
    """How many function calls (Python's and C's) ``work()`` makes in this thread."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(previous)
    return calls


@functools.cache
def readers_warmed() -> bool:
    """Every reader run once on a few files (plain, gzip, bzip2; text, binary, labelled, damaged), so that what
    happens once in a process (an import, a compiled kernel loaded or compiled) is counted for no example."""
    samples = [b"", b"2 2\nthe 0.5 1\nof 1 2\n", b"the 0.5 1\nof 1 2\n", b"1 2\nthe \x00\x00\x80?\x00\x00\x00@\n",
               b"__label__a the of\n\xff\x00 x\n", bytes(range(256))]
    with tempfile.TemporaryDirectory() as folder:
        for data in samples:
            for compress, name in ((None, "v.txt"), (gzip.compress, "v.gz"), (bz2.compress, "v.txt")):
                path = str(Path(folder) / name)
                Path(path).write_bytes(compress(data) if compress else data)
                read_with_every_reader(path)
                Tokenizer(FUZZ_VOCABULARY).tokens(data.decode("utf-8", "replace").split())
    return True


def read_with_every_reader(path: str) -> None:
    """Every vectors format (detected and each by name, bad UTF-8 refused and replaced), the corpus
    (plain and tokenized), labelled lines, and both commands' early checks of a corpus."""
    from embedtune.corpus.labelled import LabelledCorpus

    def whole(reader, **options):
        with reader(path, **options) as corpus:
            corpus.count()

    reads = [lambda fmt=fmt, replace=replace: load_vectors(path, format=fmt, replace_bad_utf8=replace)
             for fmt in (None, *FORMAT_NAMES) for replace in (False, True)]
    reads += [lambda: whole(Corpus), lambda: whole(Corpus, lowercase=True, tokenize="auto", vocabulary=FUZZ_VOCABULARY),
              lambda: whole(LabelledCorpus), lambda: Corpus.check_start(path), lambda: LabelledCorpus.check_start(path)]
    for read in reads:
        try:
            read()
        except EmbedtuneError as err:
            message = str(err)
            assert message.startswith(path), message
            assert re.match(r" line \d+: |: record \d+: ", message[len(path):]) or WHOLE_FILE.match(
                message[len(path):]), message


@settings(max_examples=1200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(file=FILES)
def test_every_reader_parses_or_names_the_file_and_line_in_bounded_work(file):
    """Random bytes, runs of punctuation, damaged vectors files (text and binary, plain or compressed)
    through every reader: a result, or an EmbedtuneError naming the file and a line (or a record; or
    the compressed stream as a whole), never another exception or a warning, and within a bound on the
    calls made per byte (a bound on work: it once failed on seconds, under a load of 14). The tokenizer
    splits the same text without any error."""
    data, compress = file
    raw = compress(data) if compress else data
    assert readers_warmed()

    def stop(signum, frame):
        raise _TookTooLong(f"a read ran past {HANG_SECONDS} s")

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("error")
        path = str(Path(folder) / ("v.gz" if compress is gzip.compress else "v.txt"))
        Path(path).write_bytes(raw)
        previous = signal.signal(signal.SIGALRM, stop)
        signal.alarm(HANG_SECONDS)
        try:
            calls = calls_made(lambda: (read_with_every_reader(path),
                                        Tokenizer(FUZZ_VOCABULARY).tokens(data.decode("utf-8", "replace").split())))
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    budget = READ_CALLS + READ_CALLS_PER_BYTE * max(len(data), len(raw))
    assert calls <= budget, f"{calls:,} calls to read {len(data):,} bytes (budget {budget:,})"
