"""VECTORS as a run reads them (train, init, eval, neighbors, the Keras layer): how they are read
(``Reading``), rows no run can use left out, and the checks made of them before any work (``--dim``, a
fastText model's output)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from embedtune.errors import EmbedtuneError, counted
from embedtune.vectors import Vectors, VectorsOutline


@dataclass(frozen=True)
class Reading:
    """How VECTORS is read, as the reader's own errors recommend: keep the first row of a repeated
    word, leave out rows with NaN or infinity (no run can use one), replace bytes that are not UTF-8."""

    keep_first_duplicate: bool = False
    allow_nan: bool = False
    replace_bad_utf8: bool = False


def load_training_vectors(path: str, format: str | None, reading: Reading = Reading(), limit: int | None = None,
                          note: Callable[[str], None] | None = None, progress: Callable | None = None,
                          kernels: bool = False) -> Vectors:
    """VECTORS as train, init, eval and neighbors read them: with ``allow_nan``, rows with NaN or
    infinity left out (``note`` says which), since none of them can use such a row. ``progress``: the
    reader's (formats.load_vectors). ``kernels``: the caller loads numba anyway (train's corpus reader, eval's
    analogy search): formats.load_vectors's."""
    from embedtune import formats

    vectors = formats.load_vectors(path, format=format, limit=limit, progress=progress, kernels=kernels,
                                   **dataclasses.asdict(reading))
    left_out = []
    if reading.allow_nan:
        vectors, left_out = formats.without_nonfinite(vectors)
        if left_out and note is not None:
            note(f"left out {counted(len(left_out), 'row')} with NaN or infinity (--allow-nan; "
                 f"first: {', '.join(repr(w) for w in left_out[:5])})")
    if len(vectors) == 0:   # a header '0 50': nothing to fine-tune, start from or score (docs/formats.md)
        why = "every row has NaN or infinity (--allow-nan left them out)" if left_out else "0 rows"
        raise EmbedtuneError(f"holds no vectors ({why}): there is nothing to fine-tune, start from or score "
                             "(inspect and convert read such a file)", path)
    return vectors


def outline_training_vectors(path: str, format: str | None, reading: Reading = Reading(),
                             progress: Callable | None = None) -> VectorsOutline:
    """VECTORS as the dry run reads them (formats.outline_vectors): every row's word and the first rows'
    values, read as ``reading`` says. A file of no rows is the error load_training_vectors makes; rows with
    NaN or infinity past the sample cannot be known, so with ``allow_nan`` the rows counted are the file's."""
    from embedtune import formats

    vectors = formats.outline_vectors(path, format=format, progress=progress, **dataclasses.asdict(reading))
    if len(vectors) == 0:
        raise EmbedtuneError("holds no vectors (0 rows): there is nothing to fine-tune, start from or score "
                             "(inspect and convert read such a file)", path)
    return vectors


def check_model_output(vectors: Vectors, out_format: str, output: str) -> None:
    """A fastText model is written from one read (its subword rows and settings): said before any work."""
    if out_format == "fasttext-model":
        from embedtune.formats.fasttext_write import require_model

        require_model(vectors, output)


def check_dimension(vectors: Vectors, dim: int | None, source: str | None, option: str = "--dim") -> None:
    """The one check of ``dim`` (``--dim``, or the layer's ``dim``) against the vectors as loaded."""
    if dim is not None and dim != vectors.dim:
        raise EmbedtuneError(f"the vectors have {vectors.dim} dimensions, but {option} says {dim}", source)
