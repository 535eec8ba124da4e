"""How a run is spread over processes: the strategy the loop is given. ``OneProcess`` (the default) is
every method's plain answer; a multi-worker strategy (embedtune/distribute/strategy.py) overrides them,
as DDP wraps a model: the loop itself never asks how many workers there are."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from embedtune.training.batches import Batch, epoch_batches, step_groups
from embedtune.training.step import Step, choose_step


class OneProcess:
    """One process trains the whole corpus, and writes everything."""

    size = 1        # workers
    chief = True    # writes checkpoints, the TensorBoard log, the summary and the output
    threads: int | None = None   # TensorFlow's threads when --threads is not given (None: every core)

    def start(self, train=None, note: Callable[[str], None] | None = None,
              stop: Callable[[], bool] | None = None) -> None:
        """Set up before any TensorFlow variable exists (``train``: the run's TrainConfig; ``stop``
        polled while a multi-worker strategy waits for its peers)."""

    def count(self, corpus):
        """``corpus.count()``'s (counts, total words, lines) of the whole corpus."""
        return corpus.count()

    def init_corpus(self, corpus):
        """What the new words' context pass reads (embedtune.newwords.contexts.context_sums)."""
        return corpus

    def objective_corpus(self, corpus):
        """What the objective's constructor reads (glove counts its pairs, classify keeps its lines)."""
        return corpus

    def split(self, config):
        """The config this process's trainer runs with."""
        return config

    def settings(self, settings: dict) -> dict:
        """The settings a resume must match (the checkpoint's fingerprint)."""
        return settings

    def make_step(self, trainer, words, side, note: Callable[[str], None] | None) -> Step:
        """The run's step (Trainer's ``make_step``), chosen once."""
        return choose_step(trainer, words, side, note)

    def epoch(self, trainer, corpus, pos, total_words: int) -> Iterator[Batch]:
        """The batches of epoch ``pos.epoch`` from ``pos`` on, prepared for the step."""
        return epoch_batches(trainer, corpus, pos, total_words)

    def groups(self, batches: Iterator[Batch], pos, train) -> Iterator[list[Batch]]:
        """The batches in calls of the step."""
        return step_groups(batches, pos.steps, train)

    def finish(self, trainer) -> None:
        """After the last step."""

    def close(self) -> None:
        """After the run, however it ended (an error, an interrupt): release what ``start`` took."""

    def summary(self) -> dict:
        """The run summary's figures of the strategy (several workers: the syncs)."""
        return {}
