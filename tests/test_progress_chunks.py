"""Long reads and writes say how far they are (issue 48.7: no silence over ~2 s on a terminal, whatever the file's
size): each reader and writer tells its progress callback after every chunk, so a file of N chunks gets at least N
calls, never going back, the last one the whole. Chunks are made small here, so that small files have many; the
longest silence at real sizes is measured by benchmarks/silence.py."""

from __future__ import annotations

import gzip
import os
import time

import numpy as np
import pytest

import embedtune
from embedtune.formats import binary, fasttext_write, load_vectors, save_vectors, subwords
from embedtune.formats.text import ranges as textranges
from embedtune.formats.text import read as text


class Calls(list):
    """A progress callback's calls, (done, total) each."""

    def __call__(self, done, total):
        self.append((done, total))

    def check(self, at_least: int, whole: int) -> None:
        assert len(self) >= at_least, (len(self), at_least)
        done = [d for d, _ in self]
        assert done == sorted(done), done
        assert self[-1] == (whole, whole), self[-1]


def vectors(rows: int = 400, dim: int = 10) -> embedtune.Vectors:
    rng = np.random.default_rng(0)
    return embedtune.Vectors([f"w{i}" for i in range(rows)], rng.standard_normal((rows, dim)).astype(np.float32))


@pytest.mark.parametrize("processes", [1, 2], ids=["one process", "ranges"])
def test_the_text_reader_reports_each_block(tmp_path, monkeypatch, processes):
    path = tmp_path / "v.txt"
    save_vectors(vectors(), str(path), "glove")
    size = path.stat().st_size
    monkeypatch.setattr(text, "BLOCK_BYTES", 2048)
    monkeypatch.setattr(textranges, "PART_BYTES", 4 * 10 * 8)   # a range's rows sent 8 at a time
    # ranges: read by two processes; one process: never
    monkeypatch.setattr(text, "PARALLEL_MIN_BYTES", size // 2 if processes == 2 else size)
    monkeypatch.setattr(text.os, "sched_getaffinity", lambda pid: {0, 1})
    calls = Calls()
    back = load_vectors(str(path), progress=calls)
    assert len(back) == 400
    # with ranges, each of the reading process's blocks is a report, the other range's bytes read so far in it
    calls.check(size // 2048 // processes, size)


def test_a_ranged_text_read_reports_the_other_range_while_it_is_read(tmp_path, monkeypatch):
    """Issue 48.7: the second range's bytes were said only as its rows arrived, once it was all read: at 2.2M
    rows the bar sat at 50% for 11 s. Now its process counts its bytes in memory both share, and the reading
    process reports them while it waits. The second range is made slow here (its process, forked after the
    patch, sleeps per block) and marks its end in a file: reports past the first range come before that mark."""
    path = tmp_path / "v.txt"
    save_vectors(vectors(), str(path), "glove")
    size = path.stat().st_size
    monkeypatch.setattr(text, "BLOCK_BYTES", 2048)
    monkeypatch.setattr(text, "PARALLEL_MIN_BYTES", size // 2)
    monkeypatch.setattr(text.os, "sched_getaffinity", lambda pid: {0, 1})
    parent, marker = os.getpid(), tmp_path / "second range read"
    parse_lines, read_range = text.TextReader._parse_lines, text._read_range

    def slow_in_child(self, *args):
        if os.getpid() != parent:
            time.sleep(0.1)
        return parse_lines(self, *args)

    def marked(path, start, *args, **kwargs):
        result = read_range(path, start, *args, **kwargs)
        if os.getpid() != parent:
            marker.touch()
        return result

    monkeypatch.setattr(text.TextReader, "_parse_lines", slow_in_child)
    monkeypatch.setattr(text, "_read_range", marked)
    first_range_end, seen = [], []

    def cuts(*args):
        found = textranges._cuts(*args)
        first_range_end.append(found[1])
        return found

    monkeypatch.setattr(text, "_cuts", cuts)
    calls = Calls()

    def progress(done, total):
        calls(done, total)
        seen.append(marker.exists())

    back = load_vectors(str(path), progress=progress)
    assert len(back) == 400 and marker.exists()
    calls.check(1, size)
    during = [done for (done, _), after in zip(calls, seen) if not after and done > first_range_end[0]]
    assert len(during) >= 2 and during[0] < during[-1], (first_range_end, calls, seen)


def test_the_mapped_binary_reader_reports_each_batch(tmp_path, monkeypatch):
    path = tmp_path / "v.bin"
    save_vectors(vectors(), str(path), "word2vec-binary")
    monkeypatch.setattr(binary, "MAPPED_BATCH", 7)
    calls = Calls()
    load_vectors(str(path), progress=calls)
    calls.check(400 // 7, path.stat().st_size)


def test_the_compressed_binary_reader_reports_each_buffer(tmp_path, monkeypatch):
    path = tmp_path / "v.bin.gz"
    save_vectors(vectors(4000, 50), str(path), "word2vec-binary")
    monkeypatch.setattr(binary, "BLOCK_BYTES", 1 << 16)
    calls = Calls()
    load_vectors(str(path), progress=calls)
    # told the compressed bytes taken, which gzip takes in steps of its own: a call per few buffers
    calls.check(4000 * 204 // (1 << 16) // 3, path.stat().st_size)
    assert gzip.open(path).read(4)   # a real gzip file


def test_the_fasttext_model_reader_reports_each_block_of_words(monkeypatch):
    from gensim.test.utils import datapath

    path = datapath("lee_fasttext.bin")   # 1,762 words
    monkeypatch.setattr(subwords, "PROGRESS_WORDS", 100)
    calls = Calls()
    read = load_vectors(path, progress=calls)
    assert len(read) == 1762
    calls.check(1762 // 100, os.path.getsize(path))


def test_the_fasttext_model_writer_reports_each_block_of_rows(tmp_path, monkeypatch):
    from gensim.test.utils import datapath

    model = load_vectors(datapath("lee_fasttext.bin"))   # 1,762 words, 1,000 buckets, 1,762 output rows
    monkeypatch.setattr(fasttext_write, "BLOCK_ROWS", 64)
    calls = Calls()
    save_vectors(model, str(tmp_path / "out.bin"), "fasttext-model", progress=calls)
    # the words' vectors, the input matrix's words and buckets, the output matrix: a call per block of each
    calls.check((1762 + 1762 + 1000 + 1762) // 64, 1762)
    assert load_vectors(str(tmp_path / "out.bin")).words == model.words


def test_a_fasttext_models_vectors_are_the_same_bits_computed_in_blocks(monkeypatch):
    from gensim.test.utils import datapath

    whole = load_vectors(datapath("lee_fasttext.bin"))
    monkeypatch.setattr(subwords, "PROGRESS_WORDS", 37)
    blocks = load_vectors(datapath("lee_fasttext.bin"), progress=lambda done, total: None)
    assert np.array_equal(whole.matrix.view(np.uint32), blocks.matrix.view(np.uint32))


def test_a_run_reports_its_read_and_its_write_as_phases(tmp_path, monkeypatch):
    """train's vectors read and its output's write are phases (the command shows each as a bar once it lasts a
    second, and closes the training's bar as the write starts: its rate the loop's alone)."""
    import dataclasses

    from embedtune.config import from_options
    from embedtune.run import run

    path = tmp_path / "v.bin"
    save_vectors(vectors(400, 10), str(path), "word2vec-binary")
    corpus = tmp_path / "c.txt"
    corpus.write_text("w1 w2 w3 w4 w5 w6 w7\n" * 50)
    monkeypatch.setattr(binary, "MAPPED_BATCH", 7)
    phases = []
    config = from_options({"epochs": 1, "seed": 1, "min_count": 100})
    config = dataclasses.replace(config, vectors=str(path), corpus=str(corpus), output=str(tmp_path / "out.bin"))
    run(config, on_phase=phases.append)
    reading = [p for p in phases if p.name == "reading v.bin"]
    writing = [p for p in phases if p.name == "writing out.bin"]
    assert len(reading) >= 400 // 7 and reading[-1].finished and reading[-2].done == path.stat().st_size
    assert writing and writing[-1].finished and writing[-2].done == 400 and writing[0].total == 400
    names = [p.name for p in phases]
    assert names.index("writing out.bin") > max(i for i, n in enumerate(names) if n != "writing out.bin")
