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
