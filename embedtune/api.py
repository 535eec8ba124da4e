"""Fine-tuning from Python: one call that does what `embedtune train` does (both run
embedtune.run.run), and returns the vectors.

The options are the command line's, underscored (``freeze_top=5000``), and become the same
:class:`embedtune.config.Config` the command builds (``embedtune.config.from_options``: names and types,
then values over a config file when one is given), so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

if TYPE_CHECKING:   # embedtune.config loads the registry where it reads it; `import embedtune` stays light
    from embedtune.config.schema import Config


def fine_tune(vectors: Vectors | str | os.PathLike, corpus=None, *, config: Config | str | os.PathLike | None = None,
              progress: Callable | None = None, resume: bool = False, note: Callable[[str], None] | None = None,
              keep_first_duplicate: bool = False, allow_nan: bool = False, replace_bad_utf8: bool = False,
              **options) -> Vectors:
    """Fine-tune ``vectors`` on ``corpus`` and return the result; ``embedtune train`` from Python.

    vectors : a path (any supported format, detected; ``format=`` to name it) or a :class:`Vectors`.
        With a Vectors, ``objective="auto"`` means the default objective (the file format is unknown):
        pass ``format=`` (or ``objective=``) to have the one its format declares.
    corpus : None for an objective that reads no corpus (it reads its own files, named by its
        options); else a path (``.gz``/``.bz2`` too), or sentences: an iterable of strings or of token lists
        (a list, a re-iterable like gensim's corpora, or a generator, spooled to a temporary file).
    config : a TOML config file or a Config; ``options`` override it, as on the command line.
    progress : called with an :class:`embedtune.training.Progress` now and then.
    resume : continue from the newest checkpoint in ``checkpoint_dir``.
    note : called with the text of each note (a damaged checkpoint skipped, rows left out by ``allow_nan``).
    keep_first_duplicate, allow_nan, replace_bad_utf8 : how a vectors path is read, as the command's
        options of those names (``allow_nan`` leaves such rows out: no run can use them).
    options : the options of ``embedtune train``, underscored: ``freeze_top=5000``,
        ``freeze_list="words.txt"``, ``objective="sgns"``, ``epochs=1``, ``tokenize="none"``, ...
        (``embedtune train --help``; ``configs/default.toml`` lists every one with its default).

    Returns a new Vectors: the pretrained words in their order (frozen rows bit-identical), then
    the new words. ``vectors`` is left as it was. Bad input raises EmbedtuneError.
    """
    from embedtune.checks import objective_of
    from embedtune.config import from_options
    from embedtune.corpus.sentences import checked_sentences
    from embedtune.formats.reading import Reading
    from embedtune.objectives import registered
    from embedtune.run import run

    config = from_options(options, config)
    if isinstance(corpus, (str, os.PathLike)):
        corpus = os.fspath(corpus)
        config = dataclasses.replace(config, corpus=corpus)
    if not isinstance(vectors, Vectors):
        config = dataclasses.replace(config, vectors=os.fspath(vectors))
    objective = objective_of(config)
    if not objective.modes.corpus and corpus is not None:
        raise EmbedtuneError(f"objective {config.train.objective} reads no corpus; pass {_own_files(objective)} "
                             "instead")
    if objective.modes.corpus and corpus is None:
        readers = [f"objective={name!r} reads {_own_files(cls)}" for name, cls in registered().items()
                   if not cls.modes.corpus]
        raise EmbedtuneError("fine_tune needs a corpus" + (f" ({'only ' if len(readers) == 1 else ''}"
                                                           f"{'; '.join(readers)} instead)" if readers else ""))
    result = run(config, vectors=vectors if isinstance(vectors, Vectors) else None,
                 sentences=None if corpus is None or isinstance(corpus, str) else checked_sentences(corpus),
                 reading=Reading(keep_first_duplicate, allow_nan, replace_bad_utf8), resume=resume,
                 progress=progress, note=note)
    out = result.vectors
    # The run returns the input matrix with the trained rows put in place (PatchedVectors, for writing
    # a block at a time); a caller of the library gets a plain Vectors of its own.
    return out if isinstance(out, Vectors) else Vectors(out.words, out.matrix)


def _own_files(objective) -> str:
    """The options naming the files an objective reads besides VECTORS: "lexicon= (and antonyms=)"."""
    from embedtune.config.keys import declared

    names = [f"{key.name}=" for keys in objective.keys for key in declared(keys)
             if key.table == "" and key.role == "read"]
    return names[0] + "".join(f" (and {name})" for name in names[1:])
