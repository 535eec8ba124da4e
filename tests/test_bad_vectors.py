"""The bad-input catalogue (issue 5), vector files: a missing, empty or damaged vectors file, or one that
does not fit the options, is one error line naming the file and line, and the folder is left as it was
(tests/bad_inputs.py)."""

from __future__ import annotations

import pytest

from bad_inputs import GLOVE_LINES, N_WORDS, Catalogue, assert_refused, glove_line

cases = Catalogue()


@cases.case("vectors-missing")
def _(f):
    missing = f.path / "glove.6B.50d.txt"
    return f.args(vectors=missing), [f"Error: {missing}: no such file"]


@cases.case("vectors-empty")
def _(f):
    f.file("glove.txt", b"")
    return f.args(), [f"Error: {f.vectors} line 1: empty file"]


@cases.case("vectors-is-a-folder")
def _(f):
    folder = f.path / "vectors"
    folder.mkdir()
    return f.args(vectors=folder), [f"Error: {folder}: is a folder"]


@cases.case("vectors-a-line-with-49-values")
def _(f):
    f.glove_with_line(7, glove_line(7).rsplit(b" ", 1)[0])
    return f.args(), [f"Error: {f.vectors} line 7:", "49", "50"]


@cases.case("vectors-non-numeric-value")
def _(f):
    word, *values = glove_line(3).split(b" ")
    values[10] = b"0.1x5"
    f.glove_with_line(3, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 3:", "0.1x5"]


@cases.case("vectors-nan")
def _(f):
    word, *values = glove_line(5).split(b" ")
    values[2] = b"nan"
    f.glove_with_line(5, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 5:", "value 3 is nan"]


@cases.case("vectors-duplicate-word")
def _(f):
    word, rest = glove_line(9).split(b" ", 1)
    f.glove_with_line(9, glove_line(2).split(b" ", 1)[0] + b" " + rest)
    return f.args(), [f"Error: {f.vectors} line 9:", "duplicate word", "line 2"]


@cases.case("vectors-bad-utf8-word")
def _(f):
    f.glove_with_line(4, b"caf\xe9 " + glove_line(4).split(b" ", 1)[1])
    return f.args(), [f"Error: {f.vectors} line 4:", "UTF-8"]


@cases.case("vectors-word2vec-header-says-more-rows")
def _(f):
    f.file("glove.txt", f"{N_WORDS + 1} 50\n".encode() + b"".join(GLOVE_LINES))
    return f.args(), [f"Error: {f.vectors} line {N_WORDS + 2}:", f"expected {N_WORDS + 1}", f"got {N_WORDS}"]


@cases.case("vectors-truncated-binary")
def _(f):
    from gensim.models import KeyedVectors

    # Written by gensim, not embedtune, then cut 100 bytes into the last record's 200-byte vector.
    kv = KeyedVectors.load_word2vec_format(str(f.vectors), binary=False, no_header=True)
    binary = f.path / "glove.bin"
    kv.save_word2vec_format(str(binary), binary=True)
    binary.write_bytes(binary.read_bytes()[:-100])
    f.vectors.unlink()
    return f.args(vectors=binary), [f"Error: {binary}: record {N_WORDS}:", "ends inside the record"]


@cases.case("vectors-dimension-differs-from-dim")
def _(f):
    return f.args("--dim", "300"), [f"Error: {f.vectors}:", "50 dimensions", "300"]


@cases.case("vectors-value-beyond-float32")
def _(f):
    word, *values = glove_line(6).split(b" ")
    values[4] = b"1e39"
    f.glove_with_line(6, b" ".join([word, *values]))
    return f.args(), [f"Error: {f.vectors} line 6: value 5 is 1e39, beyond float32's range"]


@cases.case("vectors-with-no-rows")
def _(f):
    f.file("glove.txt", "0 50\n")
    return f.args(), [f"Error: {f.vectors}: holds no vectors (0 rows)"]


@pytest.mark.parametrize("build", cases.params)
def test_a_bad_vectors_file_is_one_error_line_and_leaves_the_folder_as_it_was(tmp_path, build):
    assert_refused(tmp_path, build)
