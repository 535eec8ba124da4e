"""An epoch's batches: made from the objective's chunks and units on the host (``epoch_batches``), grouped
into calls of the step (``step_groups``), and made ahead on a thread of their own (``prefetch``)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from embedtune.training.checkpoints.state import Position
from embedtune.config import TrainConfig

LOSS_EVERY = 20  # steps between reading the loss back (a host sync)
# Batches per call of the step (Step.run): the call's fixed cost (Python dispatch, the executor)
# is spread over them. A divisor of LOSS_EVERY, so that a call ends where the loss is read.
GROUP = 10


@dataclass
class Batch:
    """A batch ready for the step, and the position of the run once it is trained."""

    tensors: dict
    pairs: int
    chunk: int            # the chunk it comes from
    batch: int            # its number in the chunk, plus one
    chunk_rng: dict       # the random state at the chunk's start
    words_done: int
    shares: list | None = None   # a multi-worker run's: every worker's position after it (Position.shares)


def epoch_batches(trainer, corpus, start: Position, total_words: int) -> Iterator[Batch]:
    """The batches of epoch ``start.epoch`` from ``start``'s chunk and batch on.

    The pairs of a chunk depend only on the random state at its start, which a checkpoint keeps,
    so a resumed run makes the same batches.
    """
    chunk_start_words = (start.epoch - 1) * total_words
    for chunk_number, chunk in enumerate(trainer.objective.chunks(corpus, trainer.local_index)):
        if chunk_number < start.chunk:   # resuming: already trained
            chunk_start_words += chunk.raw_tokens
            continue
        resuming = chunk_number == start.chunk and start.batch
        if resuming and start.chunk_rng is not None:
            trainer.rng.bit_generator.state = start.chunk_rng
        chunk_rng = trainer.rng.bit_generator.state
        units = trainer.objective.units(chunk, trainer.rng)
        chunk_pairs = max(len(units[0]), 1)
        pairs_done = 0
        for number, batch in enumerate(trainer.objective.batches(*units)):
            pairs_done += batch["pairs"]
            if resuming and number < start.batch:
                continue
            yield Batch(trainer.prepare(batch), batch["pairs"], chunk_number, number + 1, chunk_rng,
                        chunk_start_words + chunk.raw_tokens * pairs_done // chunk_pairs)
        chunk_start_words += chunk.raw_tokens


def step_groups(batches: Iterator[Batch], steps: int, train: TrainConfig) -> Iterator[list[Batch]]:
    """``batches`` in runs of up to GROUP for Step.run, each ending at every step after which the
    loop acts: a multiple of GROUP, LOSS_EVERY or checkpoint_every, max_steps, max_words, and the
    end. ``steps``: the steps done before the first batch. Runs are aligned to step numbers, so a
    resumed run groups its batches as the uninterrupted one did from the next multiple on."""
    group = []
    for batch in batches:
        group.append(batch)
        steps += 1
        if (steps % GROUP == 0 or steps % LOSS_EVERY == 0
                or (train.checkpoint_every and steps % train.checkpoint_every == 0)
                or (train.max_steps and steps >= train.max_steps)
                or (train.max_words and batch.words_done >= train.max_words)):
            yield group
            group = []
    if group:
        yield group


PREFETCH = GROUP + 2   # batches made ahead of the step: a whole group is ready when its call starts


def prefetch(items: Iterator, depth: int = PREFETCH) -> Iterator:
    """``items``, made on a thread of their own up to ``depth`` ahead, so the host side (pairs,
    batches, frozen rows, tensors) runs while the step does (TensorFlow releases the GIL)."""
    ready: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def make():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if stop.is_set():
                    return
            ready.put(end)
        except BaseException as err:   # handed to the consumer, raised there
            ready.put(_Failed(err))

    thread = threading.Thread(target=make, name="embedtune-batches", daemon=True)
    thread.start()
    try:
        while (item := ready.get()) is not end:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                ready.get(timeout=0.1)
            except queue.Empty:
                pass
        thread.join()


@dataclass
class _Failed:
    error: BaseException
