"""Writing a fastText model back (``--to fasttext-model``, or ``-o out.bin`` from a fastText model).

The model read (``vectors.model``) gives the settings, the dictionary, the subword rows and the output
matrix, all written as they were. Each word whose vector differs from the model's own (the bits of
get_word_vector) gets its own row set so that fastText's average of that row and its n-gram rows gives the
new vector (``subwords.solve_own_rows``: within float32 rounding, docs/formats.md); every other row is
written as read, so an untouched model comes back byte for byte and a frozen word's vector and every
unseen word's vector stay bit for bit. Words the model lacks are added to the dictionary after its words
(count 1, before the labels), their own rows after the model's word rows, and a zero output row each
when the output matrix has one row a word (fastText starts output rows at zero).

The read-back (``on_written``) computes the written words' vectors through the model's arithmetic from
the rows as written, so the frozen rows' proof covers what fastText will compute.
"""

from __future__ import annotations

import struct

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.formats.fasttext import _ARGS, _DICT, _MATRIX, ARGS, MAGIC, SUPERVISED
from embedtune.formats.subwords import solve_own_rows, word_vectors
from embedtune.words import WordList

BLOCK_ROWS = 1 << 14
NEW_WORD_COUNT = 1
FASTTEXT_SPACE = " \n\r\t\v\f\0"   # what fastText's readWord splits words at


def require_model(vectors, name: str):
    """The fastText model ``vectors`` came from; an error naming ``name`` (the output) when there is none."""
    model = vectors.model
    if model is None:
        raise EmbedtuneError("a fastText model (fasttext-model) is written from a fastText model only: it needs "
                             "the model's subword rows and settings (give a .bin model as the vectors, or write "
                             ".vec)", name)
    return model


def write_model(vectors, out, *, name: str, progress=None, on_written=None, check_rows=None) -> None:
    """Write ``vectors`` (Vectors or PatchedVectors carrying ``model``, the fastText model they came from)."""
    model = require_model(vectors, name)
    if vectors.dim != model.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, the fastText model {model.dim}", name)
    ids, new_words = _dictionary_ids(vectors.words, model, name)
    n_words = model.nwords + len(new_words)
    tick = _ticks(progress, len(vectors.words), len(vectors.words) * (1 + (on_written is not None)) + n_words
                  + model.bucket + len(model.output))
    changed_rows, solved = _changed_own_rows(vectors, model, ids, tick)
    _write_header(out, model, n_words, new_words, name)
    out.write(b"\0")   # not quantized
    changed_ids = ids[changed_rows]
    _write_input(out, model, n_words, changed_ids, solved, tick)
    out.write(b"\0")   # output not quantized
    _write_output(out, model, len(new_words), tick)
    if on_written is not None:
        _read_back(vectors, model, ids, changed_ids, solved, on_written, check_rows, tick)
    if progress is not None:
        progress(len(vectors.words), len(vectors.words))


def _ticks(progress, n: int, units: int):
    """``tick(rows)``, called as each stage gets through rows (the words' vectors, the input and output
    matrices, the read-back: ``units`` in all), told to ``progress`` as a share of the ``n`` rows written:
    a model of millions of rows takes seconds a stage."""
    done = 0

    def tick(rows: int) -> None:
        nonlocal done
        done += rows
        if progress is not None:
            progress(n * min(done, units) // max(1, units), n)

    return tick


def _dictionary_ids(words, model, name) -> tuple[np.ndarray, list]:
    """(the dictionary id of each vector row, the words the model lacks in the order they get ids)."""
    n, nw = len(words), model.nwords
    ids = np.empty(n, np.int64)
    shared = isinstance(words, WordList) and words.data is model.words.data and len(words.ends) <= nw
    prefix = len(words.ends) if shared else 0
    ids[:prefix] = np.arange(prefix)
    rest = words[prefix:] if prefix < n else []
    lookup = None
    new_words = []
    expected = prefix   # the model's next word in its order: the rows follow it, some maybe left out
    for row, word in enumerate(rest, prefix):
        # In the model's order first: a word shown twice (two words whose bytes --replace-bad-utf8 replaced
        # alike, the later left out by --keep-first-duplicate) is the one at its place, not the last.
        if expected < nw and model.words[expected] == word:
            ids[row] = expected
            expected += 1
            continue
        if lookup is None:   # a read with --limit, a row left out, or words in another order: look it up
            from embedtune.words import WordIndex

            lookup = WordIndex(model.words)
        found = lookup.find(word)
        if found < 0:
            if not word or any(c in FASTTEXT_SPACE for c in word):
                raise EmbedtuneError(f"cannot add the word {word!r} to a fastText model: fastText's words hold no "
                                     "white space", name)
            found = nw + len(new_words)
            new_words.append(word)
        else:
            expected = found + 1
        ids[row] = found
    return ids, new_words


def _changed_own_rows(vectors, model, ids, tick=lambda rows: None):
    """(vector rows whose vector is not the model's own, their solved own rows): a row whose bits equal
    what the model computes for its word keeps the model's own row."""
    changed, solved = [], []
    patched = getattr(vectors, "rows", None)
    if patched is not None:   # a PatchedVectors: only its own rows can differ from the model's
        for s in range(0, len(patched), BLOCK_ROWS):
            rows = np.asarray(patched[s:s + BLOCK_ROWS], np.int64)
            _solve_block(vectors, model, ids, rows, vectors.values[s:s + BLOCK_ROWS], changed, solved)
        tick(len(vectors.words))
    else:
        n = len(vectors.words)
        for start in range(0, n, BLOCK_ROWS):
            stop = min(n, start + BLOCK_ROWS)
            _solve_block(vectors, model, ids, np.arange(start, stop), vectors.block(start, stop), changed, solved)
            tick(stop - start)
    if not changed:
        return np.zeros(0, np.int64), np.zeros((0, model.dim), np.float32)
    return np.concatenate(changed), np.concatenate(solved)


def _hashed_words(vectors, model, ids, rows) -> list:
    """The words of the vector rows ``rows`` as fastText hashes them: a word of the model by the bytes of its
    dictionary entry (one read with --replace-bad-utf8 shows U+FFFD, but its n-grams are its bytes', so its
    vector is the model's own), a word the model lacks by its UTF-8."""
    rows = np.asarray(rows, np.int64)
    block_ids = ids[rows]
    known = block_ids < model.nwords
    if known.all():
        return model.hashed_words(block_ids)
    raw = iter(model.word_bytes(block_ids[known]))
    return [next(raw) if k else vectors.words[int(r)] for r, k in zip(rows.tolist(), known.tolist())]


def _solve_block(vectors, model, ids, rows, targets, changed, solved) -> None:
    nw = model.nwords
    words = _hashed_words(vectors, model, ids, rows)
    block_ids = ids[rows]
    known = block_ids < nw
    differs = np.ones(len(rows), bool)
    if known.any():
        own = np.where(known, block_ids, -1)
        original = model.word_vectors(words, own)
        same = np.all(original.view(np.uint32) == np.ascontiguousarray(targets, np.float32).view(np.uint32), axis=1)
        differs = ~(same & known)
    if not differs.any():
        return
    pick = np.flatnonzero(differs)
    new_rows, _ = solve_own_rows([words[i] for i in pick], model.grams, model.minn, model.maxn,
                                 np.asarray(targets, np.float32)[pick])
    changed.append(rows[pick])
    solved.append(new_rows)


def _write_header(out, model, n_words: int, new_words: list, name) -> None:
    version = 12 if model.version is None else model.version
    args = dict(model.args)
    args["maxn"] = model.maxn   # a supervised model from before version 12 reads with maxn 0
    out.write(struct.pack("<ii", MAGIC, version))
    out.write(_ARGS.pack(*[args[a] for a in ARGS], model.t))
    size = n_words + model.nlabels
    out.write(_DICT.pack(size, n_words, model.nlabels, model.ntokens, -1))
    out.write(model.entries[:model.labels_at])
    if new_words:
        tail = struct.pack("<qb", NEW_WORD_COUNT, 0)
        out.write(b"".join(w.encode("utf-8") + b"\0" + tail for w in new_words))
    out.write(model.entries[model.labels_at:])


def _write_input(out, model, n_words: int, changed_ids: np.ndarray, solved: np.ndarray,
                 tick=lambda rows: None) -> None:
    nw, dim = model.nwords, model.dim
    out.write(_MATRIX.pack(n_words + model.bucket, dim))
    for start in range(0, n_words, BLOCK_ROWS):
        stop = min(n_words, start + BLOCK_ROWS)
        block = np.zeros((stop - start, dim), "<f4")
        if start < nw:
            block[:min(stop, nw) - start] = model.input[start:min(stop, nw)]
        here = (changed_ids >= start) & (changed_ids < stop)
        block[changed_ids[here] - start] = solved[here]
        out.write(block.tobytes())
        tick(stop - start)
    grams = model.grams
    for start in range(0, len(grams), BLOCK_ROWS):
        out.write(np.ascontiguousarray(grams[start:start + BLOCK_ROWS], "<f4").tobytes())
        tick(min(BLOCK_ROWS, len(grams) - start))


def _write_output(out, model, n_new: int, tick=lambda rows: None) -> None:
    output = model.output
    grows = n_new and model.args["model"] != SUPERVISED and output.shape[0] == model.nwords
    out.write(_MATRIX.pack(output.shape[0] + (n_new if grows else 0), model.dim))
    for start in range(0, len(output), BLOCK_ROWS):
        out.write(np.ascontiguousarray(output[start:start + BLOCK_ROWS], "<f4").tobytes())
        tick(min(BLOCK_ROWS, len(output) - start))
    if grows:
        out.write(bytes(4 * n_new * model.dim))


def _read_back(vectors, model, ids, changed_ids, solved, on_written, check_rows, tick=lambda rows: None) -> None:
    """on_written(start, stop, the rows' vectors as fastText computes them from the rows written)."""
    n = len(vectors.words)
    order = np.argsort(changed_ids)
    for start in range(0, n, BLOCK_ROWS):
        stop = min(n, start + BLOCK_ROWS)
        tick(stop - start)
        if check_rows is not None and not np.any(check_rows[start:stop]):
            continue
        block_ids = ids[start:stop]
        own = np.empty((stop - start, model.dim), np.float32)
        known = block_ids < model.nwords
        own[known] = model.input[block_ids[known]]
        # the solved rows, found by dictionary id (every id not among them is the model's own row)
        at = np.minimum(np.searchsorted(changed_ids, block_ids, sorter=order), max(len(order) - 1, 0))
        hit = (changed_ids[order[at]] == block_ids) if len(order) else np.zeros(len(block_ids), bool)
        own[hit] = solved[order[at[hit]]]
        words = _hashed_words(vectors, model, ids, np.arange(start, stop))
        on_written(start, stop, word_vectors(words, np.arange(stop - start), own, model.grams, model.minn,
                                             model.maxn))
