"""TensorBoard's projector files (``train --logdir``): the new and most-moved rows, next to the scalars.

The format is the one tensorboard/plugins/projector/projector_plugin.py reads, written without
TensorBoard (not a dependency): ``projector_config.pbtxt`` (a ProjectorConfig in protobuf text form)
in the folder of the event files, naming a tensor TSV (one row per line, values split by tabs, read
with ``float``) and a metadata TSV (a header line when it has more than one column, then one line
per row). Paths in the config are relative to its folder, so the folder can be moved.

The logdir is the user's: a file under one of these three names is replaced only when embedtune wrote it
(``check_logdir``): the config is written first and names our tensor, and the two TSV files count as ours
only beside it. A link, a folder, or a file of the user's under these names is refused, nothing written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from embedtune.compare import diff_vectors
from embedtune.plainfile import plain_file

CONFIG_FILE = "projector_config.pbtxt"   # the plugin's metadata.PROJECTOR_FILENAME
TENSOR_FILE = "embedtune-rows.tsv"
METADATA_FILE = "embedtune-rows-metadata.tsv"
TENSOR_NAME = "embedtune: new and most-moved rows"
TOP_MOVED = 1000    # most-moved pretrained rows, each drawn where it is and where it was
MAX_NEW = 10_000    # new rows, in AFTER's order; the projector's own PCA and t-SNE slow past ~10k points
COLUMNS = ("word", "kind", "moved", "contexts")


@dataclass
class ProjectorRows:
    """The points: words [n], kinds [n] ("new", "moved", "moved: before"), matrix float32 [n, dim],
    moved (L2 from before, NaN for new rows) and contexts (-1: not known)."""

    words: list[str]
    kinds: list[str]
    matrix: np.ndarray
    moved: np.ndarray
    contexts: np.ndarray


def projector_rows(before, after, new_contexts: dict | None = None, top_moved: int = TOP_MOVED,
                   max_new: int = MAX_NEW) -> ProjectorRows:
    """The new rows of ``after`` and its ``top_moved`` most-moved pretrained rows, with those rows'
    ``before`` vectors too (so the projector shows where each came from)."""
    new_contexts = new_contexts or {}
    new = [w for w in after.words if w not in before.index][:max_new]
    moved = diff_vectors(before, after, top=top_moved).most_moved
    words = new + [m.word for m in moved] * 2
    kinds = ["new"] * len(new) + ["moved"] * len(moved) + ["moved: before"] * len(moved)
    after_rows = np.array([after.index[w] for w in new + [m.word for m in moved]], np.int64)
    before_rows = np.array([before.index[m.word] for m in moved], np.int64)
    matrix = np.concatenate([after.matrix[after_rows], before.matrix[before_rows]]) if len(words) else \
        np.zeros((0, after.dim), np.float32)
    l2 = np.array([np.nan] * len(new) + [m.l2 for m in moved] * 2, np.float64)
    contexts = np.array([new_contexts.get(w, -1) for w in new] + [-1] * (2 * len(moved)), np.int64)
    return ProjectorRows(words, kinds, matrix.astype(np.float32, copy=False), l2, contexts)


def _own_config(path: str) -> bool:
    if not plain_file(path):
        return False
    try:
        with open(path, "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return f"tensor_name: {_quoted(TENSOR_NAME)}" in text and f"tensor_path: {_quoted(TENSOR_FILE)}" in text


def check_logdir(logdir: str) -> None:
    """Refuse ``logdir`` when one of the projector's names there holds what embedtune did not write (a
    user's TensorBoard config, a link to a file, a folder): it would be replaced. Changes nothing."""
    from embedtune.errors import EmbedtuneError

    if not os.path.isdir(logdir):
        return
    config = os.path.join(logdir, CONFIG_FILE)
    ours = _own_config(config)
    for name in (CONFIG_FILE, TENSOR_FILE, METADATA_FILE):
        path = os.path.join(logdir, name)
        if not os.path.lexists(path) or (ours and plain_file(path)):
            continue
        why = ("a link" if os.path.islink(path) else "a folder" if os.path.isdir(path)
               else "not a file" if not os.path.isfile(path) else "a file with another name too"
               if os.lstat(path).st_nlink != 1 else "a file embedtune did not write")
        raise EmbedtuneError(f"--logdir: {why}; the names {CONFIG_FILE}, {TENSOR_FILE} and {METADATA_FILE} are "
                             "embedtune's in a logdir: move it, or give another --logdir", path)


def write_projector(logdir: str, rows: ProjectorRows) -> list[str]:
    """The three files in ``logdir`` (made if missing), each written to a temporary file and renamed;
    their paths. Nothing is written for no rows (the projector would show an empty tensor). The config
    goes first: it is what marks the other two as embedtune's (``check_logdir``), checked again here."""
    from embedtune.formats.io import open_target

    if not len(rows.words):
        return []
    check_logdir(logdir)
    os.makedirs(logdir, exist_ok=True)
    paths = [os.path.join(logdir, name) for name in (TENSOR_FILE, METADATA_FILE, CONFIG_FILE)]
    n, dim = rows.matrix.shape
    config = (f"embeddings {{\n  tensor_name: {_quoted(TENSOR_NAME)}\n  tensor_path: {_quoted(TENSOR_FILE)}\n"
              f"  metadata_path: {_quoted(METADATA_FILE)}\n  tensor_shape: {n}\n  tensor_shape: {dim}\n}}\n")
    with open_target(paths[2]) as f:
        f.write(config.encode("utf-8"))
    with open_target(paths[0]) as f:
        # %.9g: every float32 comes back bit-identical through float().
        for row in rows.matrix:
            f.write(("\t".join(f"{x:.9g}" for x in row.tolist()) + "\n").encode("utf-8"))
    with open_target(paths[1]) as f:
        f.write(("\t".join(COLUMNS) + "\n").encode("utf-8"))
        for word, kind, l2, n in zip(rows.words, rows.kinds, rows.moved.tolist(), rows.contexts.tolist()):
            cells = (_cell(word), kind, "" if l2 != l2 else f"{l2:.6g}", "" if n < 0 else str(n))
            f.write(("\t".join(cells) + "\n").encode("utf-8"))
    return paths


def _cell(word: str) -> str:
    # A tab or line break in a word would split its metadata line (the word stays findable by the rest).
    return word.replace("\t", " ").replace("\r", " ").replace("\n", " ") or " "


def _quoted(text: str) -> str:
    """A protobuf text-format string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
