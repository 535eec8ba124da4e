"""Other libraries' private names, read where the library offers no public way: one module a library
(``numba_private``, ``keras_private``, ``tensorflow_private``, ``numpy_private``, ``python_private``),
each private name read in one function there. tests/test_adapters.py checks each one still exists and
still does what embedtune uses it for, so a library that changes under it fails a test, not a run;
tests/test_layout.py refuses another library's private name anywhere else in embedtune/ and cli/."""
