"""Shares of a corpus and of each global batch. Worker k of N reads lines k, k + N, k + 2N, ... of the
corpus (the others' lines are not decoded; ``CorpusShare``) and makes its own batches of B / N units
from them (``share_batches``); an objective whose chunks are not read from the lines (glove's
co-occurrences, held in memory) makes the same chunks on every worker, and worker k takes units k,
k + N, ... of each. A chunk's random state comes from (seed, N, epoch, chunk, k), so a share's batches
depend on no other worker, and a resumed worker makes them again from its position alone."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from embedtune.corpus.held import HeldLines
from embedtune.errors import EmbedtuneError


def batch_part(t, workers: int) -> int:
    """Each worker's part of the global batch of train config ``t``; an error unless the parts are equal
    and each a multiple of the objective's unit (Objective.batch_unit: sgns's shared negatives need whole
    groups), as the single-process equivalence needs. One rule for the launcher's early check and the
    workers' split."""
    from embedtune.objectives import objective_class

    batch_size = t.batch_size
    if batch_size % workers:
        raise EmbedtuneError(f"--batch-size {batch_size} does not split evenly over {workers} workers")
    part = batch_size // workers
    unit, option = objective_class(t.objective).batch_unit(t)
    if part % unit:
        raise EmbedtuneError(f"{option}: each worker's part of the batch ({batch_size} / {workers} = "
                             f"{part}) must be a multiple of {unit}")
    return part


def check_split(t, workers: int) -> None:
    """What a run of ``workers`` workers with train config ``t`` refuses (one rule for the launcher's
    early check and the workers): gathered gradients (--sync-every 0) need equal parts of the batch."""
    if not t.sync_every:
        batch_part(t, workers)


# A share's position, as Position.shares keeps one a worker: [chunk, batch, words, more]: the chunk and
# the batch in it (plus one) of its last batch trained, its corpus words done in the epoch, and 1 while
# it has a batch after that one. A step gathers these and its pairs from every worker.
CHUNK, BATCH, WORDS, MORE, PAIRS = range(5)


class CorpusShare(HeldLines):
    """Lines k, k + n, k + 2n, ... of a corpus: worker k's share of n. Its figures are its own (``HeldLines``'
    defaults): a caller that reads several shares adds them up; ``WorkerShare`` gathers every worker's."""

    def __init__(self, corpus, index: int, size: int):
        self.corpus, self.share = corpus, (index, size)
        self.path = corpus.path

    def lines(self):
        return self.corpus.lines(share=self.share)

    def numbered_lines(self):
        return self.corpus.numbered_lines(share=self.share)

    @property
    def fast(self):
        """The compiled reader's kept ids of the corpus cut to this share (compiled_share.SharePass), for
        id_chunks: None where the corpus has none (then the share's lines are read and split here)."""
        from embedtune.distribute.compiled_share import SharePass

        passes = getattr(self.corpus, "fast", None)
        return None if passes is None else SharePass(passes, self.share)

    @property
    def reads(self):
        """The corpus's passes begun, by share: a pass over this object is one over its share."""
        return _ShareReads(self.corpus.reads, self.share)


class _ShareReads:
    """``reads[None] += 1`` (id_chunks' count of a pass) on a share: counted as a pass over the share."""

    def __init__(self, reads, share):
        self.counter, self.share = reads, share

    def __getitem__(self, key):
        return self.counter[self.share if key is None else key]

    def __setitem__(self, key, value):
        self.counter[self.share if key is None else key] = value


class WorkerShare(CorpusShare):
    """Worker k's share of the lines, handed to what reads the corpus before training (the new words'
    context sums, glove's co-occurrence count, classify's labelled lines): it reads its lines, then
    combines every worker's figures through the collectives (``gather_bytes``, ``sum_arrays``,
    ``combine``: every worker calls them, in the same order). ``held`` lists the shares this process
    holds (its own); ``chief`` whether it writes the run's figures."""

    def __init__(self, corpus, worker):
        super().__init__(corpus, worker.index, worker.size)
        self.worker = worker
        self.held, self.size, self.chief = [worker.index], worker.size, worker.chief
        self.joined = worker.joins   # its batches are parts of a joined global batch (the config's whole one)

    def gather_bytes(self, items: list[bytes]) -> list[bytes]:
        """Every share's item, in share order, from this worker's own (``items``, one)."""
        return self.worker.all_gather_bytes(items[0])

    def sum_arrays(self, items: list[np.ndarray]) -> np.ndarray:
        """The sum over every share of float64 arrays of one shape (this worker's own: ``items``, one),
        the same on every worker, bit for bit (Worker.sum_array)."""
        return self.worker.sum_array(np.asarray(items[0], np.float64))

    def combine(self, figure, to_bytes, merge):
        """Every worker's ``figure`` as bytes, all-gathered, merged the same on every worker."""
        return merge(self.worker.all_gather_bytes(to_bytes(figure)))


def share_batches(objective, corpus, local_index: dict, seed: int, epoch: int, index: int, size: int,
                  start: list | None, prepare) -> Iterator:
    """Worker ``index`` of ``size``'s batches of epoch ``epoch``, after ``start`` (its share's
    position, or None for the epoch's start), each prepared by ``prepare``; a Batch's ``words_done`` is
    the share's corpus words done in the epoch.

    An objective that reads lines (``reads_lines``) gets the share's lines; any other one makes the same
    chunks on every worker, and the worker takes units index, index + size, ... of each chunk and
    the same part of its words. A chunk's random state is drawn from (seed, size, epoch, chunk and, for
    a share of lines, index), so a share's batches depend on nothing that another worker does, and a
    resumed worker makes them again from its position alone.
    """
    from embedtune.training.batches import Batch

    lines = objective.reads_lines
    # An objective built from shares of the lines and holding one (classify from a WorkerShare) makes this
    # share's chunks from the lines it holds, as one that reads the lines does.
    own = lines or objective.share_index == index
    source = CorpusShare(corpus, index, size) if lines else corpus
    first, done_in_first = (start[CHUNK], start[BATCH]) if start else (0, 0)
    words = 0
    for number, chunk in enumerate(objective.chunks(source, local_index)):
        raw = chunk.raw_tokens if own else (chunk.raw_tokens * (index + 1)) // size - (chunk.raw_tokens * index) // size
        if number < first:   # resuming: already trained
            words += raw
            continue
        rng = np.random.default_rng([seed, size, epoch, number, index] if own else [seed, size, epoch, number])
        units = objective.units(chunk, rng)
        if not own:
            units = tuple(u[index::size] if isinstance(u, np.ndarray) else u for u in units)
        n_units = max(len(units[0]), 1)
        done = 0
        for batch_number, batch in enumerate(objective.batches(*units)):
            done += batch["pairs"]
            if number == first and batch_number < done_in_first:
                continue
            yield Batch(prepare(batch), batch["pairs"], number, batch_number + 1, None, words + raw * done // n_units)
        words += raw


def global_words(epoch: int, total_words: int, shares: list) -> int:
    """Corpus words done, all epochs, all shares: the learning rate's clock."""
    return (epoch - 1) * total_words + sum(int(s[WORDS]) for s in shares)
