"""The objectives of ``embedtune train``, by name: the one registry.

The config's ``train.objective`` values, its per-objective defaults and the CLI's ``--objective``
choices all come from this table. Adding an objective is one file and one line here (see
embedtune/objectives/base.py). Importing it imports no TensorFlow.
"""

from embedtune.objectives.base import Objective
from embedtune.objectives.classify import Classify
from embedtune.objectives.glove import GloVe
from embedtune.objectives.retrofit import Retrofit
from embedtune.objectives.sgns import SkipGram

OBJECTIVES: dict[str, type[Objective]] = {
    "sgns": SkipGram,
    "glove": GloVe,
    "retrofit": Retrofit,
    "classify": Classify,
}
AUTO = "auto"   # glove for GloVe-format vectors, else sgns (config.resolve)
CHOICES = (AUTO, *OBJECTIVES)   # what train.objective and --objective accept


def objective_class(name: str) -> type[Objective]:
    """The class registered as ``name`` (a resolved objective, not "auto")."""
    return OBJECTIVES[name]


def check_corpus_start(config) -> None:
    """The first bytes of the config's corpus and --valid files, as its objective reads them (auto:
    plain text), checked before the vectors load (Corpus.check_start); standard input and pipes are
    left alone."""
    objective = config.train.objective
    reader = Objective if objective == AUTO else objective_class(objective)
    for path in (config.corpus, config.valid):
        reader.check_corpus_start(path, config)
