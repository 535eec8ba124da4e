"""Memory settings of a run (issue 16.2; the figures: benchmarks/memory.py).

embedtune._tf turns on TensorFlow's pooling (BFC) allocator for CPU tensors: the steps' transient
tensors are reused from one pool instead of piling up in glibc's per-thread arenas. These tests run
fresh processes (the allocator is chosen when TensorFlow's runtime starts): the pool is on by
default, a user's own choice of TF_CPU_ALLOCATOR_USE_BFC is kept, and the allocator does not change
a single bit of a deterministic Adam run's output (TensorFlow's step, EMBEDTUNE_KERNEL=0: a plain run's Adam
step is compiled and imports no TensorFlow). On TensorFlow's step, train.setup also has glibc
hand large blocks (4 MB and up) back to the system when they are freed (training.host.map_large_blocks).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from embedtune.training import host
from train_fixtures import REPO, SAMPLE_CORPUS, SAMPLE_VECTORS

# A deterministic Adam run (`embedtune train`, in a process of its own: the allocator is chosen when
# TensorFlow's runtime starts), then, in the same process, which allocator it ran on: allocator statistics
# exist only for a pooling allocator, glibc's malloc has none to give. One process answers both
# questions (which allocator, which bits), so each setting costs one TensorFlow start.
TRAIN_AND_PROBE = """
import sys
from embedtune.cli.main import cli
try:
    cli.main(sys.argv[1:], prog_name="embedtune")
except SystemExit as done:
    if done.code:
        raise
assert "tensorflow" in sys.modules, "the run never started TensorFlow: no allocator was used"
from embedtune._tf import tf
try:
    tf.config.experimental.get_memory_info("CPU:0")
    print("pool")
except ValueError:
    print("malloc")
sys.stdout.flush()
import os
os._exit(0)   # as the command itself ends (cli.main.exit_now): no interpreter teardown after TensorFlow
"""


def train(out, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    head = out.parent / "corpus.txt"
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        head.write_text("".join(f.readlines()[:120]), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", TRAIN_AND_PROBE, "train", str(SAMPLE_VECTORS), str(head), "--freeze-top", "5000",
         "--optimizer", "adam", "--objective", "sgns", "--epochs", "1", "--batch-size", "256", "--deterministic",
         "-o", str(out)], cwd=REPO, env={**environ, "EMBEDTUNE_KERNEL": "0", **env}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The run with TensorFlow's pool as embedtune sets it, and with a user's TF_CPU_ALLOCATOR_USE_BFC=false."""
    folder = tmp_path_factory.mktemp("allocators")
    return {"pool": (train(folder / "pool.txt"), folder / "pool.txt"),
            "malloc": (train(folder / "malloc.txt", TF_CPU_ALLOCATOR_USE_BFC="false"), folder / "malloc.txt")}


def test_cpu_tensors_come_from_tensorflows_pool(trained):
    assert trained["pool"][0].stdout.strip() == "pool"


def test_a_users_own_allocator_choice_is_kept(trained):
    assert trained["malloc"][0].stdout.strip() == "malloc"


def test_the_pool_changes_no_bit_of_a_deterministic_adam_run(trained):
    (pooled, pool_out), (plain, malloc_out) = trained["pool"], trained["malloc"]
    assert "all bit-identical to the input" in pooled.stderr
    assert pool_out.read_bytes() == malloc_out.read_bytes()
    assert "Trained" in plain.stderr


# Freed 5 MB blocks, each with a small live block after it so that the heap's top cannot shrink:
# what stays resident once they are freed.
LARGE_BLOCKS = """
import sys
import numpy as np
from embedtune.training import host

def resident():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

if sys.argv[1] == "map":
    assert host.map_large_blocks()
block = np.ones(24 << 20, np.uint8)
del block   # glibc's own rule: blocks up to this size now come from the heap
before = resident()
large, small = [], []
for _ in range(16):
    large.append(np.ones(5 << 20, np.uint8))
    small.append(np.ones(256 << 10, np.uint8))
del large
print(resident() - before)
"""


def kept_after_free(mode: str) -> int:
    result = subprocess.run([sys.executable, "-c", LARGE_BLOCKS, mode], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return int(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's mallopt")
def test_large_blocks_go_back_to_the_system_once_freed():
    assert kept_after_free("default") > 60e6   # 80 MB freed, left in the heap by glibc's own rule
    assert kept_after_free("map") < 20e6       # 4 MB of small blocks still live


def test_large_blocks_setting_is_skipped_off_glibc(monkeypatch):
    class NoMallopt:   # a C library without mallopt (macOS, musl's stubs aside)
        def __init__(self, name):
            pass

    monkeypatch.setattr(host.ctypes, "CDLL", NoMallopt)
    assert host.map_large_blocks() is False


def test_the_compiled_reader_keeps_the_ids_and_frees_what_only_a_scan_reads(tmp_path):
    from embedtune.corpus import Corpus, id_chunks

    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat\n\non the mat, the end\n", encoding="utf-8")
    corpus = Corpus(str(path))
    counts, total, _ = corpus.count()
    table = corpus.fast.table
    assert corpus.fast.kept is not None and table.slots is None and table.pool is None and table.word_ids is None
    index = {w: i for i, w in enumerate(counts)}
    passes = [[chunk.ids.tolist() for chunk in id_chunks(corpus, index)] for _ in range(2)]
    assert passes[0] == passes[1] == [[index[w] for w in "the cat sat on the mat, the end".split()]]
    rows = corpus.fast.rows_of(index)
    assert corpus.fast.rows_of(index) is rows   # made once for the index every pass gives
    assert corpus.fast.rows_of(dict(index)) is not rows
    assert corpus.fast.held_bytes() >= 4 * total + 12 * 2


# -- commands that look at each row once hold a block of rows, not the matrix (issue 48) ---------

def whole_matrix_summary(path) -> dict:
    """inspect's figures as they were computed before it streamed: from the whole matrix read at once."""
    import numpy as np

    from embedtune.formats import find_duplicates, read_table

    table = read_table(path)
    finite = np.isfinite(table.matrix).all(axis=1)
    kept = table.matrix[finite]
    norms = np.sqrt(np.einsum("ij,ij->i", kept, kept, dtype=np.float64))
    return {"count": len(table.words), "dim": table.matrix.shape[1],
            "norm": {"min": float(norms.min()), "median": float(np.median(norms)), "max": float(norms.max())},
            "nonfinite": [table.words[r] for r in np.flatnonzero(~finite)],
            "duplicates": find_duplicates(table.words)}


def awkward_files(folder) -> list:
    """The sample in every format, with NaN and infinite rows and repeated words (one at the very end, one
    across the binary reader's batches)."""
    import numpy as np

    from embedtune.formats import load_vectors, save_vectors

    vectors = load_vectors(SAMPLE_VECTORS, limit=5000)
    vectors.matrix[[7, 2000, 4999], [0, 3, 49]] = [np.nan, np.inf, -np.inf]
    words = list(vectors.words)
    words[1500], words[4999], words[3000] = words[2], words[2], words[1024]
    paths = []
    for fmt, name in (("glove", "v.txt"), ("word2vec", "v.w2v.txt"), ("word2vec-binary", "v.bin")):
        plain = folder / f"plain.{name}"
        save_vectors(vectors, plain, fmt)
        data = plain.read_bytes()
        for old, new in zip(vectors.words, words):   # repeats written in by hand: the writer would refuse none,
            if old != new:                           # but Vectors cannot hold them
                sep = b" "
                data = data.replace(b"\n" + old.encode() + sep, b"\n" + new.encode() + sep, 1)
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_inspect_says_what_the_whole_matrix_says(tmp_path):
    from embedtune.formats.summary import summarize_vectors

    for path in [SAMPLE_VECTORS, *awkward_files(tmp_path)]:
        summary, expected = summarize_vectors(path), whole_matrix_summary(path)
        assert summary["count"] == expected["count"] and summary["dim"] == expected["dim"]
        assert summary["norm"] == expected["norm"]
        assert [entry["word"] for entry in summary["nonfinite"]] == expected["nonfinite"]
        assert summary["duplicate_words"] == len(expected["duplicates"])
        where = "line" if str(path).endswith("txt") else "record"
        offset = {"line": 1 if path.name in ("v.txt",) or path == SAMPLE_VECTORS else 2, "record": 1}[where]
        assert [(d[where] - offset, d[f"first_{where}"] - offset) for d in summary["duplicates"]] == \
            expected["duplicates"]
        if path != SAMPLE_VECTORS:
            assert summary["nonfinite_rows"] == 3 and summary["duplicate_words"] == 3


# Peak resident memory of one summarize_vectors call, less the process's before it. VmHWM, not ru_maxrss:
# the latter carries over the peak of the process that started this one (Linux keeps it across exec).
PEAK = """
import sys
from embedtune.formats.summary import summarize_vectors

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

before = peak()
summarize_vectors(sys.argv[1])
print(peak() - before)
"""


def write_random(path, rows: int, dim: int, binary: bool) -> int:
    """A vectors file of ``rows`` distinct words, written a block at a time; -> its matrix's bytes."""
    import numpy as np

    block = np.random.default_rng(0).standard_normal((1000, dim)).astype(np.float32)
    rendered = [" ".join(f"{x:.4f}" for x in row).encode() for row in block] if not binary else None
    with open(path, "wb") as f:
        if binary:
            f.write(b"%d %d\n" % (rows, dim))
        for start in range(0, rows, len(block)):
            if binary:
                f.write(b"".join(b"w%d " % (start + i) + row.tobytes() + b"\n" for i, row in enumerate(block)))
            else:
                f.write(b"".join(b"w%d %s\n" % (start + i, line) for i, line in enumerate(rendered)))
    return 4 * rows * dim


def inspect_peak(path, rows: int, binary: bool, compressed: bool) -> tuple[int, int]:
    """-> (summarize_vectors's peak on a random file of ``rows`` x 100, its matrix's bytes)."""
    import gzip
    import shutil

    matrix_bytes = write_random(path, rows, 100, binary)
    if compressed:   # read through the buffer, not a map: before, the whole matrix read, then handed on in blocks
        with open(path, "rb") as src, gzip.open(str(path) + ".gz", "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        path = path.with_name(path.name + ".gz")
    result = subprocess.run([sys.executable, "-c", PEAK, str(path)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return int(result.stdout), matrix_bytes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
@pytest.mark.parametrize("binary, compressed", [(True, False), (False, False), (True, True)],
                         ids=["word2vec-binary", "glove", "word2vec-binary.gz"])
def test_inspect_holds_far_less_than_the_matrix(tmp_path, binary, compressed):
    # What a streamed read holds is a block's text and rows (tens of MB, the same for any file), plus ~30 bytes a
    # row; where glibc's heap leaves the freed blocks moves that level by up to ~15 MB between machines and
    # imports (60 MB on one, 76 on another, for this code and file). So the peak is compared between a file and
    # one 5x its size: it grows by a few MB, where one copy of the matrix held would add the matrix's growth and
    # the reader before issue 48 three times it.
    name = "v.bin" if binary else "v.txt"
    (tmp_path / "small").mkdir(), (tmp_path / "large").mkdir()
    small, small_matrix = inspect_peak(tmp_path / "small" / name, 40_000, binary, compressed)
    large, large_matrix = inspect_peak(tmp_path / "large" / name, 200_000, binary, compressed)   # 80 MB of float32
    assert large - small < 0.5 * (large_matrix - small_matrix), (small, large)
    assert large < 1.2 * large_matrix   # and, on this file, less than the matrix and its margin


# Peak resident memory of a text file's read by two processes, less the reading process's before it (a read of a
# few rows first: the reader's imports); prints that and the matrix's bytes.
TEXT_READ_PEAK = """
import sys
import embedtune.formats.text.read as text
from embedtune.formats import load_vectors

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

text.BLOCK_BYTES = 1 << 18   # small blocks: their parse is not what is measured
text.PARALLEL_MIN_BYTES = 1 << 20
text.MAX_PROCESSES = 2
text.os.sched_getaffinity = lambda pid: {0, 1}   # two processes on any machine
ranged = []
read_parallel = text.TextReader._read_parallel
text.TextReader._read_parallel = lambda self, n: ranged.append(read_parallel(self, n)) or ranged[-1]
load_vectors(sys.argv[1], limit=10)
before = peak()
vectors = load_vectors(sys.argv[1], format="glove")
assert ranged and ranged[-1] is not None, "not read in two processes"
print(peak() - before, vectors.matrix.nbytes)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_a_text_read_by_two_processes_holds_the_matrix_and_little_more(tmp_path):
    """Issue 48.6: the text reader <= 1.3x the matrix. The reading process received each part of the other
    range's rows into a buffer of its own before copying it into the matrix (multiprocessing's recv_bytes_into):
    0.65x the matrix above it here (the other range is one part), 1.39x in all at 400k x 300. Now the rows go
    straight into the matrix: above it, the words, the index and a block's parse (0.25x here, where the fixed
    costs weigh more than on a big file)."""
    path = tmp_path / "v.txt"
    write_random(path, 40_000, 300, binary=False)
    result = subprocess.run([sys.executable, "-c", TEXT_READ_PEAK, str(path)], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    grown, matrix_bytes = map(int, result.stdout.split())
    assert matrix_bytes == 40_000 * 300 * 4
    assert grown < 1.45 * matrix_bytes, grown / matrix_bytes


# Peak resident memory of one diff of two files, less the process's before it (WARM: what runs before the
# count starts).
DIFF_PEAK_TEMPLATE = """
import sys
from embedtune.cli.main import cli

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

WARM
before = peak()
try:
    cli.main(["-q", "diff", *sys.argv[1:]], prog_name="embedtune")
except SystemExit as done:
    assert not done.code, done.code
print(peak() - before, file=sys.stderr)
"""
DIFF_PEAK = DIFF_PEAK_TEMPLATE.replace("WARM", "")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_diff_holds_one_matrix_not_two(tmp_path):
    from embedtune.formats.binary import MAPPED_RELEASE

    old, new, frozen = tmp_path / "old.bin", tmp_path / "new.bin", tmp_path / "frozen.txt"
    matrix_bytes = write_random(old, 200_000, 100, binary=True)   # 80 MB of float32 each
    new.write_bytes(old.read_bytes())
    frozen.write_text("w1\nw199999\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", DIFF_PEAK, str(old), str(new), "--check-frozen", str(frozen)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "200000" in result.stdout and "2 checked, 0 changed" in result.stdout
    # OLD's matrix, its index, and the pages of OLD's map read before they are let go; before, NEW's matrix too
    assert int(result.stderr.split()[-1]) < 1.2 * matrix_bytes + MAPPED_RELEASE


def write_fasttext_model(path, nwords: int, buckets: int, dim: int) -> int:
    """A fastText model file (version 12, cbow, character 5-grams as cc.en.300.bin's) of ``nwords`` distinct
    words of 5-12 letters and random rows; -> (its input matrix's bytes, its first word)."""
    import struct

    import numpy as np

    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    tails = letters[np.arange(nwords)[:, None] // 26 ** np.arange(4, -1, -1) % 26]
    heads, lengths = letters[rng.integers(0, 26, (nwords, 7))], rng.integers(0, 8, nwords)
    words = [heads[i, :lengths[i]].tobytes() + tails[i].tobytes() for i in range(nwords)]
    with open(path, "wb") as f:
        f.write(struct.pack("<ii", 793712314, 12))
        f.write(struct.pack("<12id", dim, 5, 5, 5, 10, 1, 2, 1, buckets, 5, 5, 100, 1e-4))
        f.write(struct.pack("<iiiqq", nwords, nwords, 0, 5 * nwords, -1))
        f.write(b"".join(w + b"\0" + struct.pack("<qb", 5, 0) for w in words))
        f.write(b"\0" + struct.pack("<qq", nwords + buckets, dim))
        f.write((rng.standard_normal((nwords + buckets, dim), np.float32) * np.float32(0.1)).astype("<f4").tobytes())
        f.write(b"\0" + struct.pack("<qq", nwords, dim))
        f.write(bytes(4 * nwords * dim))
    return 4 * (nwords + buckets) * dim, words[0].decode("ascii")


# diff of two fastText models, its peak less the process's once the subword arithmetic is compiled (a first read
# of OLD compiles it, then its peak is reset: /proc/self/clear_refs).
MODEL_DIFF_PEAK = DIFF_PEAK_TEMPLATE.replace("WARM", """from embedtune import load_vectors
assert len(load_vectors(sys.argv[1], limit=100)) == 100
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status, /proc/self/clear_refs")
def test_diff_of_two_fasttext_models_lets_their_mapped_pages_go(tmp_path):
    old, new, frozen = tmp_path / "old.bin", tmp_path / "new.bin", tmp_path / "frozen.txt"
    matrix_bytes, word = write_fasttext_model(old, 20_000, 200_000, 100)   # 88 MB input matrix; 8 MB of words'
    new.write_bytes(old.read_bytes())
    frozen.write_text(word + "\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", MODEL_DIFF_PEAK, str(old), str(new), "--check-frozen", str(frozen)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "20000" in result.stdout and "1 checked, 0 changed" in result.stdout
    # OLD's word vectors and index, and what one model's map holds between two lets-go of its pages: at most its
    # matrix (a kernel that maps the page cache's large folios whole maps most of it for a few thousand words); before,
    # both models' whole matrices (every page of each, read and left mapped): more than twice the matrix
    assert int(result.stderr.split()[-1]) < 1.6 * matrix_bytes


def test_a_compressed_binary_streams_the_whole_reads_rows_and_errors(tmp_path, monkeypatch):
    """binary_blocks through the buffer (a compressed file) hands on the rows load_vectors reads, bit for bit, a batch
    at a time; a word with a space in it that is the last record of a batch is named as load_vectors names it."""
    import gzip

    import numpy as np

    from embedtune.formats import binary, load_vectors, stream_table
    from embedtune.formats.summary import summarize_vectors

    monkeypatch.setattr(binary, "MAPPED_BATCH", 7)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((50, 4)).astype("<f4")
    records = [b"w%d " % i + row.tobytes() + b"\n" for i, row in enumerate(rows)]
    path = tmp_path / "v.bin.gz"
    path.write_bytes(gzip.compress(b"50 4\n" + b"".join(records)))
    whole = load_vectors(str(path))
    with stream_table(str(path)) as stream:
        blocks = list(stream.blocks())
    assert len(blocks) > 5 and max(len(w) for w, _ in blocks) <= 8
    assert [w for words, _ in blocks for w in words] == list(whole.words)
    assert np.concatenate([m for _, m in blocks]).tobytes() == whole.matrix.tobytes()
    # record 8 (the first batch's last, with the 7 after it) "new york": its vector's first bytes taken for text
    spaced = [r if i != 7 else b"new york " + rows[i].tobytes() + b"\n" for i, r in enumerate(records)]
    bad = tmp_path / "bad.bin.gz"
    bad.write_bytes(gzip.compress(b"50 4\n" + b"".join(spaced)))
    with pytest.raises(Exception) as loaded:
        load_vectors(str(bad))
    with pytest.raises(Exception) as inspected:
        summarize_vectors(str(bad))
    assert str(inspected.value) == str(loaded.value)


# Peak resident memory of longest_row over a table, less the process's before it.
LONGEST_ROW_PEAK = """
import numpy as np
from embedtune.training.progress import longest_row

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

matrix = np.ones((200_000, 100), np.float32)   # 80 MB
assert longest_row(matrix[:10]) == 10.0
before = peak()
assert longest_row(matrix) == 10.0
print(peak() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_the_longest_row_of_a_table_takes_a_small_share_of_it():
    result = subprocess.run([sys.executable, "-c", LONGEST_ROW_PEAK], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    # blocks widened to float64 a few thousand rows at a time; before, two blocks of 65,536 rows (105 MB here)
    assert int(result.stdout) < 0.3 * 80_000_000


def test_a_chunks_pairs_are_shuffled_in_place_as_the_permutation_did():
    # sgns's pairs of a chunk (3.6M for a 1M-token chunk) were shuffled by an int64 permutation and two gathered
    # copies beside them: 24 bytes a pair on the batch thread at each chunk, under the training loop's level.
    import tracemalloc

    import numpy as np

    from embedtune.config import Config, VocabConfig, resolve, train_config
    from embedtune.corpus import Corpus
    from embedtune.kernels.sgns import window_pairs
    from embedtune.plan.rules import make_plan
    from embedtune.training.trainer import Trainer
    from train_fixtures import glove

    vectors = glove(20000)
    config = resolve(Config(vocab=VocabConfig(), train=train_config(objective="sgns", optimizer="adam", seed=3,
                                                                    deterministic=True)))
    corpus = Corpus(str(SAMPLE_CORPUS))
    counts, _, _ = corpus.count()
    trainer = Trainer(vectors.matrix, make_plan(vectors, [], config.vocab), counts, config, corpus=corpus)
    objective = trainer.objective
    chunk = next(iter(objective.chunks(corpus, trainer.local_index)))
    # the reference: the pairs as they were made, by the same draws
    rng = np.random.default_rng(11)
    kept = rng.random(len(chunk.ids)) < objective.keep[chunk.ids]
    ids, line = chunk.ids[kept], chunk.line[kept]
    reach = rng.integers(1, objective.window + 1, size=len(ids), dtype=np.int32)
    centers, contexts = window_pairs(ids, line, reach, objective.window)
    seed = int(rng.integers(1 << 63))
    order = rng.permutation(len(centers))
    after = rng.bit_generator.state
    rng = np.random.default_rng(11)
    objective.units(chunk, rng)   # compiled before it counts
    rng = np.random.default_rng(11)
    tracemalloc.start()
    made = objective.units(chunk, rng)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert made[0].tobytes() == centers[order].tobytes() and made[1].tobytes() == contexts[order].tobytes()
    assert made[2] == seed and rng.bit_generator.state == after
    assert len(centers) > 100_000
    # the pairs themselves (8 bytes a pair) and the draws over the chunk's tokens, not 24 bytes a pair
    assert peak < 8 * len(centers) + 20 * len(chunk.ids), (peak, len(centers), len(chunk.ids))


def test_every_run_hands_large_blocks_back_before_its_new_words_start(monkeypatch, tmp_path):
    # The compiled step's runs too (a plain sgns Adam run, the 1M x 300 job's): the spelling fit's work arrays and
    # the chunks' pairs, left in the heap, had raised the start's and the loop's peaks.
    from embedtune.training import loop, train
    from train_fixtures import glove, make_config, sample_lines

    calls = []
    monkeypatch.setattr(loop, "map_large_blocks", lambda: calls.append("map"))
    decide_rows = loop.decide_rows
    monkeypatch.setattr(loop, "decide_rows", lambda *a, **k: calls.append("starts") or decide_rows(*a, **k))
    (tmp_path / "c.txt").write_text("\n".join(sample_lines(80)) + "\n", encoding="utf-8")
    from embedtune.corpus import Corpus

    trained = train(glove(3000), Corpus(str(tmp_path / "c.txt"), lowercase=True),
                    make_config({"min_count": 3}, objective="sgns", optimizer="adam", max_steps=1, seed=1))
    assert trained.stats["steps"] == 1 and trained.init is not None
    assert calls == ["map", "starts"]
