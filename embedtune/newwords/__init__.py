"""New words: the vector each starts from (which words get a row is the plan's: embedtune/plan/choose.py).

add.py      the pipeline `embedtune init` and train call: count, choose, start (add_new_words)
defaults.py every default of the new words
methods.py  the start methods (``--init``), one call: form-context (the default), alacarte, context-mean, random
form_context.py  the default start: the context and spelling starts mixed by each word's evidence
fitted.py   form-context's maps and gate, fitted on the corpus's own frequent words playing rare ones
alacarte.py the context mean through a map fitted on frequent pretrained words (Khodak et al. 2018)
context_mean.py  the weighted mean of each word's contexts
common.py   what the methods share: the result, the random start, the map's fitting words and fit, when it can be fitted
contexts.py the context sums of one corpus pass, the floor every context start stands on
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
