"""What one checkpoint holds, and its reading and writing: everything a run needs to continue exactly
where it stopped.

A checkpoint is a folder ``ckpt-<step>`` (its place, lock and pruning: ``folder.py``) holding the tables: the
trainable table, the context table and the optimizer state (a compiled step's: ``tables.npz``, numpy's archive of
its own arrays, so that a run that checkpoints imports no TensorFlow; TensorFlow's step's: a
``tf.train.Checkpoint`` of them and of its random generator, ``tables.index`` and ``tables.data-*``); plus
``state.json``: the position in the corpus (``Position``), the numpy random state of the current chunk, the loss
so far and a fingerprint of the vectors, corpus and settings (``fingerprint``), which a resume must match
(``load``). Either step resumes from either form (``EMBEDTUNE_KERNEL=0`` switches the step, not the settings; a
folder from before the archive holds TensorFlow's form): a compiled step's random draws are not the generator's,
which stays at its seed, as a compiled run's checkpoint held it.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from dataclasses import asdict, dataclass, field

import numpy as np

from embedtune.errors import EmbedtuneError

STATE_FILE = "state.json"
TABLES = "tables"          # the tables' files in a checkpoint folder: tf.train.Checkpoint's prefix,
ARRAYS = TABLES + ".npz"   # or a compiled step's archive


@dataclass
class Position:
    """Where the loop is: the next batch to run is (epoch, chunk, batch)."""

    epoch: int = 1
    chunk: int = 0
    batch: int = 0
    words_done: int = 0
    steps: int = 0
    pairs: int = 0
    chunk_rng: dict | None = None   # numpy bit-generator state at the start of the chunk
    loss_history: list = field(default_factory=list)
    loss_start: float | None = None  # loss per pair of the run's first step, before any update
    # A multi-worker run's position in each worker's share of the lines, [chunk, batch, words, more]
    # a worker (embedtune/distribute/); None in one process
    shares: list | None = None


class DamagedCheckpoint(EmbedtuneError):
    """A checkpoint whose state or tables cannot be read; ``path`` names the damaged file."""


def fingerprint(words: list[str], frozen_bytes: bytes, corpus_words: int, corpus_lines: int, settings: dict,
                matrix: np.ndarray | None = None, corpus_digest: str | None = None) -> dict:
    """What must match for a resume: the rows (words, values and freeze plan), the corpus
    (counts and a hash of its content) and the settings."""
    h = hashlib.sha256()
    for w in words:
        h.update(w.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    h.update(frozen_bytes)
    if matrix is not None:
        # The values too: a vectors file edited in place, same words, must not resume. Hashing the
        # matrix is cheap next to loading it as text (benchmarks/README.md, io).
        h.update(np.ascontiguousarray(matrix, np.float32).data)
    corpus = {"words": corpus_words, "lines": corpus_lines}
    if corpus_digest is not None:
        corpus["sha256"] = corpus_digest
    return {
        "rows": hashlib.sha256(h.digest()).hexdigest()[:16],
        "corpus": corpus,
        "settings": settings,
    }


def write(path: str, trainer, position: Position, fp: dict) -> None:
    """A checkpoint's content into the folder ``path``: the ``trainer``'s tables, then the state, on disk."""
    arrays = trainer.checkpoint_arrays()
    if arrays is None:
        trainer.tf_checkpoint().write(os.path.join(path, TABLES))
    else:
        with open(os.path.join(path, ARRAYS), "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
    with open(os.path.join(path, STATE_FILE), "w") as f:
        json.dump({"position": asdict(position), "fingerprint": fp}, f)
        f.flush()
        os.fsync(f.fileno())


def _flat(settings: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _shown(value) -> str:
    # None in the settings is a key left to its default (the objective's, for lr and the like)
    return "unset (default)" if value is None else repr(value)


def _settings_diff(then: dict, now: dict) -> str:
    """'lr: unset (default) then, 0.05 now; vocab.min_count: 5 then, 3 now'"""
    then, now = _flat(then), _flat(now)
    keys = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
    return "; ".join(f"{k}: {_shown(then.get(k))} then, {_shown(now.get(k))} now" for k in keys)


def load(path: str, trainer, fp: dict) -> Position:
    """Restore the ``trainer``'s tables and the state from a checkpoint folder; the fingerprint must match.

    Raises DamagedCheckpoint when its state or tables cannot be read, EmbedtuneError when it
    belongs to other vectors, another corpus or other settings (then nothing was restored).
    """
    state_path = os.path.join(path, STATE_FILE)
    try:
        with open(state_path, "rb") as f:
            saved = json.loads(f.read().decode("utf-8"))
        theirs = saved["fingerprint"]
        position = Position(**saved["position"])
        for key in ("rows", "corpus", "settings"):
            theirs[key]
    except FileNotFoundError:
        raise DamagedCheckpoint("missing (the checkpoint is incomplete)", state_path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedCheckpoint(f"damaged, not JSON ({err})", state_path) from None
    except (KeyError, TypeError, AttributeError):
        raise DamagedCheckpoint("damaged, not a checkpoint's state", state_path) from None
    except OSError as err:
        raise DamagedCheckpoint(f"cannot be read: {err.strerror or err}", state_path) from None
    # The corpus and the settings first: either changes the rows too (the new words are the corpus's), so a
    # difference in the rows alone is the vectors' or the freeze rules' (a list file's words).
    for key, what in (("corpus", "corpus"), ("settings", "settings"), ("rows", "vectors or freeze rules")):
        if theirs.get(key) != fp.get(key):
            detail = ""
            if key == "settings":
                detail = f" ({_settings_diff(theirs[key], fp[key])})"
            elif key == "corpus":
                then, now = theirs[key], fp[key]
                if (then.get("words"), then.get("lines")) == (now.get("words"), now.get("lines")):
                    detail = f" (the same {now['words']:,} words in {now['lines']:,} lines, other content)"
                else:
                    detail = (f" ({then.get('words')} words in {then.get('lines')} lines then, "
                              f"{now['words']} in {now['lines']} now)")
            verb = "differs" if key == "corpus" else "differ"
            raise EmbedtuneError(f"cannot resume: the {what} {verb} from the checkpoint's{detail}", path)
    if os.path.lexists(os.path.join(path, ARRAYS)):
        trainer.restored(_read_arrays(os.path.join(path, ARRAYS), trainer.checkpoint_shapes()))
        return position
    from embedtune._tf import tf

    try:
        trainer.tf_checkpoint().read(os.path.join(path, TABLES)).assert_consumed()
    except (tf.errors.OpError, ValueError, AssertionError, IndexError) as err:
        reason = (getattr(err, "message", None) or str(err) or type(err).__name__).strip().splitlines()[0]
        # TensorFlow's words for a damaged index (measured: flipped, cut and missing index and data
        # files); anything else is the data file (a checksum mismatch, "Read less bytes than requested").
        in_index = any(w in reason for w in (".index", "sstable", "matching files"))
        data = sorted(n for n in os.listdir(path) if n.startswith(TABLES + ".data")) if os.path.isdir(path) else []
        damaged = TABLES + ".index" if in_index else (data[0] if data else TABLES + ".data-00000-of-00001")
        raise DamagedCheckpoint(f"damaged ({reason[:160]})", os.path.join(path, damaged)) from None
    trainer.restored()
    return position


def _read_arrays(path: str, shapes: dict) -> dict[str, np.ndarray]:
    """Every array of a compiled step's archive, each of the name, shape and type ``shapes`` says (name: (shape,
    dtype)), read whole before any is used: a cut or flipped file (zip's CRC of each array) is damaged, and
    nothing is restored from it."""
    try:
        if not zipfile.is_zipfile(path):   # np.load would read another file as a pickle, and refuse it as one
            raise ValueError("not a numpy archive")
        with np.load(path, allow_pickle=False) as archive:
            if sorted(archive.files) != sorted(shapes):
                raise ValueError(f"holds {', '.join(sorted(archive.files)) or 'no array'}, "
                                 f"not {', '.join(sorted(shapes))}")
            arrays = {name: archive[name] for name in shapes}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        reason = (getattr(err, "strerror", None) or str(err) or type(err).__name__).strip().splitlines()[0]
        raise DamagedCheckpoint(f"damaged ({reason[:160]})", path) from None
    for name, (shape, dtype) in shapes.items():
        if arrays[name].shape != tuple(shape) or arrays[name].dtype != dtype:
            raise DamagedCheckpoint(f"damaged ({name}: {arrays[name].dtype} {list(arrays[name].shape)}, not "
                                    f"{np.dtype(dtype)} {list(shape)})", path)
    return arrays
