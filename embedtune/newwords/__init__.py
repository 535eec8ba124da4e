"""New words: which words get a row, and the vector each starts from.

add.py      the pipeline `embedtune init` and train call: count, choose, start (add_new_words)
defaults.py every default of the new words
choose.py   which words: those a ``--new-words`` file lists, corpus words seen ``--min-count`` times
methods.py  the start methods (``--init``): alacarte, context-mean, random, form-context
contexts.py the context sums of one corpus pass, the à la carte map and the form/context mix
fitted.py   the form-context start, its maps and gate fitted on the corpus's own frequent words
spelling.py the spelling model: hashed character n-grams fitted to the pretrained vectors
"""

from embedtune.newwords.add import NewWords, NewWordSettings, add_new_words

__all__ = ["NewWordSettings", "NewWords", "add_new_words"]
