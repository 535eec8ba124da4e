"""numba's cache, read where numba has no public way: the index file it keeps for a cached kernel."""

from __future__ import annotations


def cache_index(kernel) -> str | None:
    """The path of the index file numba's cache keeps for ``kernel`` (a dispatcher made with
    ``cache=True``), there yet or not; None where numba's dispatcher is not laid out as read here
    (``Dispatcher._cache._cache_file._index_path``, numba 0.5x-0.6x). numba says whether a call hit
    its cache only after the call (``Dispatcher.stats``); this says beforehand, compiling nothing."""
    return getattr(getattr(getattr(kernel, "_cache", None), "_cache_file", None), "_index_path", None)
