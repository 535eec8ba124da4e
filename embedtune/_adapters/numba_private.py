"""numba's cache, read where numba has no public way: the index file it keeps for a cached kernel."""

from __future__ import annotations


def cache_index(kernel) -> str | None:
    """The path of the index file numba's cache keeps for ``kernel`` (a dispatcher made with
    ``cache=True``), there yet or not; None where numba's dispatcher is not laid out as read here
    (``Dispatcher._cache._cache_file._index_path``, numba 0.5x-0.6x). numba says whether a call hit
    its cache only after the call (``Dispatcher.stats``); this says beforehand, compiling nothing."""
    return getattr(getattr(getattr(kernel, "_cache", None), "_cache_file", None), "_index_path", None)


def without_reference_count(context, builder, array_type, value):
    """An array's value in compiled code (numba's struct of ``array_type``) with its meminfo and parent null: the
    same data, shape and strides, whose views and copies numba counts no reference to (an atomic add on the
    array's one counter each, which threads sharing the array contend for). For an intrinsic's code generator
    (kernels/glove.py ``_borrowed``): numba's struct proxy has no public way to give its value back
    (``_getvalue``, numba 0.5x-0.6x), though numba's own examples of its low-level API use it."""
    from numba.core import cgutils

    array = cgutils.create_struct_proxy(array_type)(context, builder, value=value)
    array.meminfo = cgutils.get_null_value(array.meminfo.type)
    array.parent = cgutils.get_null_value(array.parent.type)
    return array._getvalue()


def parallel_options(**options):
    """numba's ``parallel=`` options as the object numba makes of them (``numba.core.cpu.ParallelOptions``,
    numba 0.5x-0.6x). numba reads a dict given there by popping its keys, so the one dict a module hands every
    kernel is empty after the first compile, and each later compile in the process (another kernel, a second
    signature, a twin) takes numba's defaults instead; an instance is copied, so each compile reads what was
    given."""
    from numba.core.cpu import ParallelOptions

    return ParallelOptions(dict(options))


def in_cache(kernel, argtypes: tuple) -> bool | None:
    """Whether numba's cache holds ``kernel`` (a ``cache=True`` dispatcher) compiled for ``argtypes`` (a tuple of
    numba types, as a call's arguments type), for this CPU and this source; compiles and loads nothing. None where
    numba's cache is not laid out as read here (``Dispatcher._cache._index_key`` and its file's ``_load_index``,
    numba 0.5x-0.6x). numba has no public way to ask before a call."""
    cache = getattr(kernel, "_cache", None)
    index_key = getattr(cache, "_index_key", None)
    cache_file = getattr(cache, "_cache_file", None)
    codegen = getattr(getattr(kernel, "targetctx", None), "codegen", None)
    if index_key is None or not hasattr(cache_file, "_load_index") or codegen is None:
        return None
    try:
        return index_key(tuple(argtypes), codegen()) in cache_file._load_index()
    except Exception:   # an unreadable index: numba itself would compile
        return None


class _WaitingCache:
    """A dispatcher's cache (numba's ``Dispatcher._cache``) that, on a miss, asks ``wait(kernel, argtypes)``
    whether to look again (the kernel was being compiled elsewhere and is there now) before numba compiles it.
    Everything else is the cache's own."""

    def __init__(self, kernel, inner, wait):
        self._kernel, self.inner, self._wait = kernel, inner, wait

    def load_overload(self, sig, target_context):
        found = self.inner.load_overload(sig, target_context)
        if found is None and self._wait(self._kernel, tuple(sig)):
            found = self.inner.load_overload(sig, target_context)
        return found

    def __getattr__(self, name):
        return getattr(self.inner, name)


def wait_before_compiling(kernel, wait) -> bool:
    """``kernel``'s cache misses ask ``wait(kernel, argtypes)`` -> bool first (``_WaitingCache``): numba's
    dispatcher looks in its cache (``Dispatcher._cache.load_overload``) under its compiler lock right before it
    compiles, and has no public hook there (its compile event fires after the miss). False where the dispatcher
    is not laid out so (nothing changed)."""
    inner = getattr(kernel, "_cache", None)
    if not hasattr(inner, "load_overload") or isinstance(inner, _WaitingCache):
        return False
    kernel._cache = _WaitingCache(kernel, inner, wait)
    return True


def stop_waiting(kernel) -> None:
    """``kernel``'s own cache back (``wait_before_compiling`` undone)."""
    cache = getattr(kernel, "_cache", None)
    if isinstance(cache, _WaitingCache):
        kernel._cache = cache.inner
