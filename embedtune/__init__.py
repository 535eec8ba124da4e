"""embedtune: fine-tune pretrained word vectors while updating only the rows you choose."""

from embedtune.errors import EmbedtuneError

__version__ = "0.1.0"

__all__ = ["EmbedtuneError", "Vectors", "fine_tune", "load_vectors", "save_vectors", "__version__"]


def __getattr__(name):
    # Imported on first use: `import embedtune` (and with it the command's entry, cli/main.py) loads no
    # numpy, so the entry can still choose numpy's BLAS threads for the command (cli/blas_threads.py).
    if name == "fine_tune":
        from embedtune.api import fine_tune

        return fine_tune
    if name == "Vectors":
        from embedtune.vectors import Vectors

        return Vectors
    if name in ("load_vectors", "save_vectors"):
        from embedtune import formats

        return getattr(formats, name)
    raise AttributeError(name)
