"""Checkpoints of a run: ``Checkpoints`` (when to save, what a resume must match), over the locked folder
(``folder.py``: one run at a time, pruned, a damaged checkpoint skipped) and what one checkpoint holds
(``state.py``: the position, the fingerprint, reading and writing)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from embedtune.config import TrainConfig
from embedtune.corpus import Corpus
from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints import state
from embedtune.training.checkpoints.folder import Folder
from embedtune.training.checkpoints.state import Position
from embedtune.vectors import Vectors

CHECKPOINT_SECONDS = 300  # without --checkpoint-every, a checkpoint every this many seconds


class Checkpoints:
    """Checkpoint save, prune and resume for one run: the locked folder (``Folder``,
    which prunes), the run's fingerprint and when it last saved. Without a folder it saves nothing."""

    def __init__(self, folder: Folder | None, every: int, resuming: bool = False, writes: bool = True):
        self.folder = folder
        self.writes = writes   # False: a multi-worker run's other workers, which only read the chief's
        self.resuming = resuming   # restore the folder's newest usable checkpoint before training
        self.every = every   # steps between checkpoints; 0: every CHECKPOINT_SECONDS
        self.fingerprint: dict | None = None
        self.trainer = None   # the run's Trainer (bind)
        self.last_saved = time.monotonic()

    @classmethod
    def open(cls, train: TrainConfig, resume: bool, overwrite: bool, cleanup: contextlib.ExitStack,
             writes: bool = True) -> Checkpoints:
        """The folder locked and checked before any work (one folder, one run), held until ``cleanup``;
        ``writes`` False: not locked, only read (the other workers of a multi-worker run)."""
        if resume and not train.checkpoint_dir:
            raise EmbedtuneError("--resume needs --checkpoint-dir (the folder of the interrupted run)")
        folder = None
        if train.checkpoint_dir:
            folder = cleanup.enter_context(Folder(train.checkpoint_dir))
            if writes:
                folder.open(resume, overwrite=overwrite)
        return cls(folder, train.checkpoint_every, resume, writes)

    def bind(self, trainer, vectors: Vectors, corpus: Corpus, total_words: int, n_lines: int,
             settings: dict) -> None:
        """What is saved (the trainer's state) and what a resume must match (vectors, plan, corpus, settings)."""
        self.trainer = trainer
        if self.folder is not None:
            plan = trainer.plan
            self.fingerprint = state.fingerprint(
                plan.words, plan.frozen.tobytes(), total_words, n_lines, settings,
                matrix=vectors.matrix, corpus_digest=corpus.digest)
        self.last_saved = time.monotonic()

    def restore(self, note: Callable[[str], None] | None) -> Position:
        """The trainer's state from the newest usable checkpoint; the position to continue from."""
        found, pos = self.folder.resume(self.trainer, self.fingerprint, note)
        if note is not None:
            note(f"resuming from {found} (step {pos.steps:,}, epoch {pos.epoch})")
        self.last_saved = time.monotonic()
        return pos

    def due(self, pos: Position) -> bool:
        if self.folder is None:
            return False
        if self.every:
            return pos.steps % self.every == 0
        return time.monotonic() - self.last_saved > CHECKPOINT_SECONDS

    def save(self, pos: Position) -> str | None:
        """Write a checkpoint at ``pos`` (the folder keeps this run's newest few); its path, or None
        without a folder."""
        self.last_saved = time.monotonic()
        if self.folder is None or not self.writes:
            return None
        return self.folder.save(self.trainer, pos, self.fingerprint)
