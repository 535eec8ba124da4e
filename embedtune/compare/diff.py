"""What changed between two sets of vectors: rows moved, words added or lost, frozen rows checked."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from embedtune.errors import EmbedtuneError
from embedtune.frozen import FrozenCheck, bits_differ, frozen_verdict
from embedtune.vectors import Vectors


# Rows compared per step. 8192 x 300 float32 is 9 MiB per side: the temporaries stay small
# enough to be reused rather than freshly paged in, faster than larger steps (benchmarks/README.md,
# eval_speed), and the extra memory is bounded whatever the vocabulary size.
CHUNK_ROWS = 8192


def _finite(x: float | None) -> float | None:
    # JSON has no NaN; a score that does not exist is null.
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass
class MovedWord:
    word: str
    l2: float  # ||new - old||
    cosine: float  # cosine(new, old)


@dataclass
class Diff:
    """Rows of two vector sets matched by word.

    ``identical`` rows are bit-identical; L2 and cosine figures cover the ``changed`` rows only
    and are None when none changed. ``added_words`` / ``removed_words`` are the first few in
    file order, ``most_moved`` the rows with the largest L2 change, largest first.
    """

    old_words: int
    new_words: int
    dim: int
    identical: int
    changed: int
    added: int
    removed: int
    l2_max: float | None
    l2_mean: float | None
    cosine_min: float | None
    cosine_mean: float | None
    most_moved: list[MovedWord]
    added_words: list[str]
    removed_words: list[str]

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("l2_max", "l2_mean", "cosine_min", "cosine_mean"):
            d[key] = _finite(d[key])
        for row in d["most_moved"]:
            row["l2"], row["cosine"] = _finite(row["l2"]), _finite(row["cosine"])
        return d


@dataclass
class _RowChanges:
    """Matched rows and, for the changed ones, how far they moved.

    words : list of str, the m words both sets hold
    changed : int64 array of shape [c], positions into ``words`` of rows not bit-identical
    l2, cosine : float64 arrays of shape [c], ||new - old|| and cosine(new, old) of those rows
    removed_words : words the old set (or the asked-for list) has and the new set lacks
    """

    words: list[str]
    changed: np.ndarray
    l2: np.ndarray
    cosine: np.ndarray
    removed_words: list[str]


def _check_dims(old: Vectors, new: Vectors) -> None:
    if old.dim != new.dim:
        raise EmbedtuneError(
            f"vectors have {new.dim} dimensions, but the other file's have {old.dim}; "
            "rows of different sizes cannot be compared"
        )


def _match(old: Vectors, new: Vectors, words: list[str] | None = None):
    """Rows of ``old`` and ``new`` holding the same word.

    Returns (words, old_rows, new_rows, missing): old_rows/new_rows int64 arrays of shape [m]
    (None for both when the word lists are identical, so rows pair up by position), and the
    words that ``new`` lacks (in ``old``'s order, or ``words``' order when given).
    """
    if words is None:
        if old.words == new.words and len(old.index) == len(old.words):
            return old.words, None, None, []
        words = list(old.index)
        old_rows = np.fromiter(old.index.values(), dtype=np.int64, count=len(words))
    else:
        old_rows = np.fromiter((old.index[w] for w in words), dtype=np.int64, count=len(words))
    get = new.index.get
    new_rows = np.fromiter((get(w, -1) for w in words), dtype=np.int64, count=len(words))
    found = new_rows >= 0
    if found.all():
        return words, old_rows, new_rows, []
    missing = [words[i] for i in np.flatnonzero(~found)]
    keep = np.flatnonzero(found)
    return [words[i] for i in keep], old_rows[keep], new_rows[keep], missing


def _row_changes(old: Vectors, new: Vectors, words: list[str] | None = None) -> _RowChanges:
    """Compare every word both sets hold (or only ``words``), CHUNK_ROWS rows at a time."""
    _check_dims(old, new)
    matched_words, old_rows, new_rows, missing = _match(old, new, words)
    m = len(matched_words)
    changed, l2s, cosines = [], [], []
    for start in range(0, m, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, m)
        if old_rows is None:
            a, b = old.matrix[start:stop], new.matrix[start:stop]
        else:
            a, b = old.matrix[old_rows[start:stop]], new.matrix[new_rows[start:stop]]
        pos, l2, cos = _moves(a, b)
        if pos.size:
            changed.append(pos + start)
            l2s.append(l2)
            cosines.append(cos)
    return _RowChanges(
        words=matched_words,
        changed=np.concatenate(changed) if changed else np.zeros(0, np.int64),
        l2=np.concatenate(l2s) if l2s else np.zeros(0),
        cosine=np.concatenate(cosines) if cosines else np.zeros(0),
        removed_words=missing,
    )


def _moves(a: np.ndarray, b: np.ndarray):
    """-> (positions of the rows of ``b`` not bit-identical to ``a``'s, their L2 change, their cosine to ``a``)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    differs = bits_differ(a, b)   # bits, not values: the promise's own test (embedtune.frozen)
    pos = np.flatnonzero(differs)
    if pos.size == 0:
        return pos, np.zeros(0), np.zeros(0)
    if pos.size < differs.size:
        a, b = a[pos], b[pos]
    # float32 sums over one row lose ~1e-6 relative: plenty for a report, and converting
    # to float64 first would triple the time of a diff where every row moved.
    delta = b - a
    l2 = np.sqrt(np.einsum("ij,ij->i", delta, delta).astype(np.float64))
    na = np.sqrt(np.einsum("ij,ij->i", a, a).astype(np.float64))
    nb = np.sqrt(np.einsum("ij,ij->i", b, b).astype(np.float64))
    denom = na * nb
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.einsum("ij,ij->i", a, b).astype(np.float64) / denom
    # A zero vector has no direction: two zeros point the same way, one zero does not.
    cos = np.where(denom > 0, cos, np.where((na == 0) & (nb == 0), 1.0, 0.0))
    return pos, l2, np.clip(cos, -1.0, 1.0)


def diff_vectors(old: Vectors, new: Vectors, top: int = 10, examples: int = 10) -> Diff:
    """Match rows by word and say which are identical, changed, added and removed.

    top : how many of the most-moved words to list
    examples : how many added and removed words to list

    Two 400k x 300 sets take about a second: matching is one dict pass (none when the word
    lists are equal), identity is a uint32 comparison, distances are computed in chunks
    for the changed rows only.
    """
    rc = _row_changes(old, new)
    added_words = []
    n_added = len(new.index) - len(rc.words)
    if n_added:
        for w in new.index:
            if w not in old.index:
                added_words.append(w)
                if len(added_words) == examples:
                    break
    return _summarize(rc, len(old.index), len(new.index), old.dim, n_added, added_words, top, examples)


def _summarize(rc: _RowChanges, old_words: int, new_words: int, dim: int, n_added: int, added_words: list,
               top: int, examples: int) -> Diff:
    n_changed = int(rc.changed.size)
    most_moved = []
    if n_changed:
        k = min(top, n_changed)
        # NaN sorts as the largest move: a row that became NaN moved more than any other.
        order = np.nan_to_num(rc.l2, nan=np.inf)
        best = np.argpartition(-order, k - 1)[:k] if k < n_changed else np.arange(n_changed)
        best = best[np.argsort(-order[best], kind="stable")]
        most_moved = [
            MovedWord(rc.words[rc.changed[i]], float(rc.l2[i]), float(rc.cosine[i])) for i in best
        ]
    with warnings.catch_warnings():
        # Rows kept with NaN (--allow-nan) have no change to measure: when every changed row is one,
        # the figure is NaN, which is the answer, not a warning on standard error.
        warnings.simplefilter("ignore", RuntimeWarning)
        figures = (np.nanmax(rc.l2), np.nanmean(rc.l2), np.nanmin(rc.cosine), np.nanmean(rc.cosine)) \
            if n_changed else (None,) * 4
    l2_max, l2_mean, cosine_min, cosine_mean = (None if f is None else float(f) for f in figures)
    return Diff(
        old_words=old_words,
        new_words=new_words,
        dim=dim,
        identical=len(rc.words) - n_changed,
        changed=n_changed,
        added=n_added,
        removed=len(rc.removed_words),
        l2_max=l2_max,
        l2_mean=l2_mean,
        cosine_min=cosine_min,
        cosine_mean=cosine_mean,
        most_moved=most_moved,
        added_words=added_words,
        removed_words=rc.removed_words[:examples],
    )


# ---------------------------------------------------------------------------------------------
# frozen words: the verdict is embedtune.frozen's; here the words are matched and the rows read


def check_frozen(old: Vectors, new: Vectors, words) -> FrozenCheck:
    """Which of ``words`` (iterable of str; order kept, repeats dropped) did not stay bit-identical."""
    words = list(dict.fromkeys(words))
    _check_dims(old, new)
    old_rows, new_rows = old.index.rows(words), new.index.rows(words)
    both = np.flatnonzero((old_rows >= 0) & (new_rows >= 0))
    held, changed = np.zeros(len(old), bool), np.zeros(len(old), bool)
    held[old_rows[both]] = True
    for start in range(0, both.size, CHUNK_ROWS):
        part = both[start:start + CHUNK_ROWS]
        changed[old_rows[part]] = bits_differ(old.matrix[old_rows[part]], new.matrix[new_rows[part]])
    return frozen_verdict(words, old_rows, held, changed)


# ---------------------------------------------------------------------------------------------
# a new file read a block at a time


class _OldRows(Sequence):
    """Words of ``old`` at ``rows`` (a list's reads, without the list)."""

    def __init__(self, words, rows: np.ndarray):
        self._words, self._rows = words, rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._words[int(r)] for r in self._rows[i]]
        return self._words[int(self._rows[i])]


def diff_file(old: Vectors, new_path, *, format=None, keep_first_duplicate=False, allow_nan=False,
              replace_bad_utf8=False, frozen_words=None, top: int = 10, examples: int = 10,
              old_name: str = "OLD", progress=None) -> tuple[Diff, FrozenCheck | None]:
    """diff_vectors(old, new) and check_frozen(old, new, frozen_words) (None without words) for the
    vectors file ``new_path``, read a block of rows at a time: what is held is ``old``, 30 bytes per
    row of it and a block, never the new file's matrix (issue 48: two whole files held 14.8 GB where one
    is 7.2). The same figures and errors as load_vectors then diff_vectors: the new file's errors in
    its reader's order (a bad line, then the first NaN row, then the first repeated word), then a
    dimension that is not ``old``'s. ``progress``: the reader's (formats.stream_table)."""
    from embedtune.formats import duplicate_error, nonfinite_error, stream_table

    n_old = len(old)
    new_row = np.full(n_old, -1, np.int64)    # the first row of the new file holding each old word
    moved = np.zeros(n_old, bool)
    l2 = np.zeros(n_old)
    cosine = np.zeros(n_old)
    added: dict = {}                           # words old lacks -> their first row in the new file
    get = old.index.get
    rows = 0
    nonfinite = duplicate = dim = None
    with stream_table(new_path, format, replace_bad_utf8=replace_bad_utf8, progress=progress) as stream:
        for words, block in stream.blocks():
            dim = stream.dim
            if not allow_nan and nonfinite is None:
                finite = np.isfinite(block).all(axis=1)
                if not finite.all():
                    first = int(np.flatnonzero(~finite)[0])
                    nonfinite = (rows + first, block[first].copy())
            old_rows = np.fromiter((get(w, -1) for w in words), np.int64, len(words))
            # A repeated word: its first row counts, as load_vectors keeps it (--keep-first-duplicate).
            found = np.flatnonzero(old_rows >= 0)
            first_here = np.zeros(found.size, bool)
            first_here[np.unique(old_rows[found], return_index=True)[1]] = True
            fresh = first_here & (new_row[old_rows[found]] < 0)
            keep = found[fresh]
            new_row[old_rows[keep]] = rows + keep
            for k in found[~fresh].tolist() + np.flatnonzero(old_rows < 0).tolist():
                row = rows + k
                first = int(new_row[old_rows[k]]) if old_rows[k] >= 0 else added.setdefault(words[k], row)
                if first != row and (duplicate is None or row < duplicate[0]):
                    duplicate = (row, first, words[k])
            if dim == old.dim:
                for start in range(0, keep.size, CHUNK_ROWS):
                    part = keep[start:start + CHUNK_ROWS]
                    pos, part_l2, part_cos = _moves(old.matrix[old_rows[part]], block[part])
                    at = old_rows[part[pos]]
                    moved[at], l2[at], cosine[at] = True, part_l2, part_cos
            rows += len(words)
        head = stream.head
        dim = stream.dim if dim is None else dim
    if nonfinite is not None:
        raise nonfinite_error(new_path, head, *nonfinite)
    if duplicate is not None and not keep_first_duplicate:
        raise duplicate_error(head, duplicate[2], duplicate[0], duplicate[1])
    if dim != old.dim:
        raise EmbedtuneError(f"{dim}-dimensional vectors, but {old_name} has {old.dim}; "
                             "rows of different sizes cannot be compared", path=str(new_path))
    matched = np.flatnonzero(new_row >= 0)
    changed = np.flatnonzero(moved[matched])
    at = matched[changed]
    gone = np.flatnonzero(new_row < 0)
    rc = _RowChanges(words=_OldRows(old.words, matched), changed=changed, l2=l2[at], cosine=cosine[at],
                     removed_words=_OldRows(old.words, gone))
    added_words = list(itertools.islice(added, examples))   # a dict keeps the order words came in
    d = _summarize(rc, n_old, matched.size + len(added), old.dim, len(added), added_words, top, examples)
    if frozen_words is None:
        return d, None
    words = list(dict.fromkeys(frozen_words))
    return d, frozen_verdict(words, old.index.rows(words), new_row >= 0, moved)


def config_frozen_words(vectors: Vectors, vocab) -> list[str]:
    """The words of ``vectors`` that a training config's freeze rules (``vocab``: a
    :class:`embedtune.config.VocabConfig`) keep frozen, in file order.

    Only pretrained words can be frozen, so the plan is made without corpus words.
    """
    from embedtune.plan.rules import make_plan

    plan = make_plan(vectors, [], vocab)
    return [vectors.words[i] for i in np.flatnonzero(plan.frozen[: plan.n_pretrained])]
