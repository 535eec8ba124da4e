"""New words: the vector each starts from (which words get a row is the plan's: embedtune/plan/choose.py).

add.py      the pipeline `embedtune init` and train call: count, choose, start (add_new_words)
defaults.py every default of the new words
methods.py  the start methods (``--init``): alacarte, context-mean, random, form-context
contexts.py the context sums of one corpus pass, the à la carte map and the form/context mix
fitted.py   the form-context start, its maps and gate fitted on the corpus's own frequent words
spelling.py the spelling model: hashed character n-grams fitted to the pretrained vectors
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # what __getattr__ gives, for a type checker
    from embedtune.newwords.add import NewWords, NewWordSettings, add_new_words

__all__ = ["NewWordSettings", "NewWords", "add_new_words"]


def __getattr__(name):
    # Read on use: embedtune.config.schema imports defaults.py (--init's choices), which must not bring the
    # new-word code (numpy, the corpus readers) into every config load.
    if name in __all__:
        from embedtune.newwords import add

        return getattr(add, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
