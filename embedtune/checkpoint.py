"""Checkpoints: everything a run needs to continue exactly where it stopped.

A checkpoint is a folder ``ckpt-<step>`` holding a ``tf.train.Checkpoint`` of the
trainable table, the context table, the optimizer state and the step's random
generator, plus ``state.json``: the position in the corpus, the numpy random state
of the current chunk, the loss so far and a fingerprint of the vectors, corpus and
settings. It is written under a temporary name and renamed when complete, so a run
killed while writing leaves the previous checkpoint intact; the last few are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field

from embedtune.errors import EmbedtuneError

STATE_FILE = "state.json"
PREFIX = "ckpt-"


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


def fingerprint(words: list[str], frozen_bytes: bytes, corpus_words: int, corpus_lines: int, settings: dict) -> dict:
    """What must match for a resume: the rows, the freeze plan, the corpus and the settings."""
    h = hashlib.sha256()
    for w in words:
        h.update(w.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    h.update(frozen_bytes)
    return {
        "rows": hashlib.sha256(h.digest()).hexdigest()[:16],
        "corpus": {"words": corpus_words, "lines": corpus_lines},
        "settings": settings,
    }


def latest(directory: str) -> str | None:
    """The newest complete checkpoint folder in ``directory``, or None."""
    if not os.path.isdir(directory):
        return None
    found = []
    for name in os.listdir(directory):
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            if os.path.exists(os.path.join(directory, name, STATE_FILE)):
                found.append((int(name[len(PREFIX):]), name))
    return os.path.join(directory, max(found)[1]) if found else None


def save(directory: str, tf_checkpoint, position: Position, fp: dict, keep: int = 3) -> str:
    """Write a checkpoint atomically; remove all but the newest ``keep``."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"{PREFIX}{position.steps}")
    partial = final + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    try:
        tf_checkpoint.write(os.path.join(partial, "tables"))
        with open(os.path.join(partial, STATE_FILE), "w") as f:
            json.dump({"position": asdict(position), "fingerprint": fp}, f)
            f.flush()
            os.fsync(f.fileno())
        shutil.rmtree(final, ignore_errors=True)
        os.rename(partial, final)
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise EmbedtuneError(f"cannot write a checkpoint: {err.strerror or err}", directory) from None
    names = sorted((int(n[len(PREFIX):]), n) for n in os.listdir(directory)
                   if n.startswith(PREFIX) and n[len(PREFIX):].isdigit())
    for _, name in names[:-keep]:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return final


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


def load(path: str, tf_checkpoint, fp: dict) -> Position:
    """Restore tables and state from a checkpoint folder; the fingerprint must match."""
    with open(os.path.join(path, STATE_FILE)) as f:
        saved = json.load(f)
    theirs = saved["fingerprint"]
    for key, what in (("rows", "vectors or freeze rules"), ("corpus", "corpus"), ("settings", "settings")):
        if theirs.get(key) != fp.get(key):
            detail = ""
            if key == "settings":
                detail = f" ({_settings_diff(theirs[key], fp[key])})"
            elif key == "corpus":
                detail = f" ({theirs[key]} then, {fp[key]} now)"
            raise EmbedtuneError(f"cannot resume: the {what} differ from the checkpoint's{detail}", path)
    tf_checkpoint.read(os.path.join(path, "tables")).assert_consumed()
    return Position(**saved["position"])
