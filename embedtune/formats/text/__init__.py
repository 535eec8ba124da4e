"""The text formats (word2vec / fastText text and GloVe): reading, parsing, writing, and the exact float32 text.

read.py      TextReader: a file a block of lines at a time, a big plain file by several processes at once
outline.py   TextOutline: the dry run's read, every row's word and the first rows' values, not the matrix
ranges.py    the parallel read's byte ranges and the children's rows received into the matrix
parse.py     the ``COUNT DIM`` header and a block of whole lines into words and a float32 matrix, fast paths first
decimals.py  plain decimals parsed on whole arrays, the bits of a correctly rounded parser
lines.py     a big file's lines of a word and plain decimals by a compiled kernel (numba): decimals.py's bits
write.py     write_text: blocks rendered as lines on threads and read back as written; RenderedAhead
render.py    the lines rendered by a compiled kernel (numba): shortest.py's text, one pass per line
verbatim.py  the input file's own lines where they are the writer's text of their rows (RenderedAhead copies them)
shortest.py  the shortest ``%g`` text that reads back to the same float32 (the one-value reference, and numpy's
             whole-array writer: a small table's lines)

Nothing is imported here: formats/__init__.py and binary.py take what they need from the modules themselves.
"""
