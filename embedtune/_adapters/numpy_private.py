"""numpy's huge-page advice, used where numpy has no public switch for it."""

from __future__ import annotations


def set_hugepage_advice(enabled: bool) -> bool:
    """Whether numpy advises the kernel to back new large arrays with huge pages (``madvise``) from
    now on; returns the setting it had. numpy's ``_set_madvise_hugepage`` (numpy.core before 2.0); a
    numpy without it keeps its own default and this returns ``enabled``."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:   # numpy < 2 keeps it in numpy.core
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            return enabled
    return _set_madvise_hugepage(enabled)
