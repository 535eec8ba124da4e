"""Properties of embedtune.train on random vocabularies, corpora and settings (hypothesis).

tests/test_train.py holds the properties on GloVe rows (frozen rows under each optimizer, the
one-step cap, loss, new words); here the vocabulary itself is random (unicode words, 1 to 12
dimensions, values such as -0.0 and subnormals), and so are the batch size, the cap, the
optimizer, the objective and the window. Checked on every example: frozen rows and unused rows keep their
bits, the batches cover the pairs, under plain SGD no row moves further than the cap allows,
and the result written in every format reads back to exactly what was trained.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from embedtune.config import DEFAULT_LR
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.formats import FORMAT_NAMES, load_vectors, save_vectors
from embedtune.train import train
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

        for fmt in FORMAT_NAMES:
            for suffix in ("", ".gz"):
                path = Path(folder) / f"out.{fmt}{suffix}"
                save_vectors(out, path, fmt)
                back = load_vectors(path, format=fmt)
                assert back.words == out.words, fmt
                np.testing.assert_array_equal(bits(back.matrix), bits(out.matrix), err_msg=f"{fmt}{suffix}")
