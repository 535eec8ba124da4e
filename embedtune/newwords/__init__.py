"""New words: which words get a row, and the vector each starts from.

choose.py   which words: those a ``--new-words`` file lists, corpus words seen ``--min-count`` times
methods.py  the start methods (``--init``): alacarte, context-mean, random, form-context
contexts.py the context sums of one corpus pass, the à la carte map and the form/context mix
fitted.py   the form-context start, its maps and gate fitted on the corpus's own frequent words
spelling.py the spelling model: hashed character n-grams fitted to the pretrained vectors
"""
