"""embedtune: fine-tune pretrained word vectors while updating only the rows you choose."""

from embedtune.api import fine_tune
from embedtune.errors import EmbedtuneError
from embedtune.vectors import Vectors

__version__ = "0.1.0"

__all__ = ["EmbedtuneError", "Vectors", "fine_tune", "load_vectors", "save_vectors", "__version__"]


def __getattr__(name):
    # The format code is imported on first use, keeping `import embedtune` light.
    if name in ("load_vectors", "save_vectors"):
        from embedtune import formats

        return getattr(formats, name)
    raise AttributeError(name)
