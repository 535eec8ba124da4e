"""Periodic sparse averaging of the workers' tables (local SGD), the default of `--workers` (--sync-every K).

Each worker trains its own share of the lines with the single process's step (the compiled one where
the config allows it), on its own copy of the tables. Every K steps (a *round*) the workers sync: each
finds the rows it changed since the last sync (rows of the trainable table, of the objective's table
and of their optimizer state that differ from the last sync's values), sends their ids and their
changes (float32, current - last sync) to every other worker (one all-gather of bytes), and every worker
sets each such row to its value at the last sync plus the mean of the changes of the workers that
changed it (added in worker order): a row one worker trained gets its whole change, a row several trained
the mean of theirs (model averaging). After each sync all tables are identical, bit for bit. Frozen rows
are never in a table, so never sent; a row no worker changed is not sent.

With the sync, the workers gather their positions in their shares, the round's pairs and loss: the
learning rate, the summary and the checkpoints follow the words done by all (between syncs a worker
takes the others' words to go at its own pace), and the epoch ends at the sync after which no worker has
a batch left. A worker whose share has ended takes empty steps (no compute) until then.
"""

from __future__ import annotations

import math
import time

import numpy as np

from embedtune.distribute import sync_rows
from embedtune.distribute.shares import MORE, PAIRS, WORDS, global_words
from embedtune.training.batches import GROUP, Batch
from embedtune.training.step import Step

HEADER = PAIRS + 2   # int64s before the tables' rows: the share's position (4), the round's pairs, its loss


class Tables:
    """What a step trains, as numpy arrays read and written by rows: the trainable table, the
    objective's table and their optimizer state (a compiled step's own numpy copies, or the trainer's
    variables)."""

    def __init__(self, step: Step, trainer):
        if step.compiled:
            kernel = step.kernel
            self.arrays = [kernel.words, kernel.side, *kernel.word_state.values(), *kernel.side_state.values()]
            self.variables = None
        else:
            self.variables = [trainer.trainable_variable, trainer.side_variable,
                              *trainer.word_opt.variables().values(), *trainer.side_opt.variables().values()]

    def read(self) -> list[np.ndarray]:
        """Each table as [rows, width] (a compiled step's arrays themselves; a variable's copy); a scalar
        (adam's step count) as one row of one."""
        arrays = self.arrays if self.variables is None else [writable(v.numpy()) for v in self.variables]
        return [a.reshape(len(a), -1) if a.ndim else a.reshape(1, 1) for a in arrays]

    def write(self, i: int, rows: np.ndarray, values: np.ndarray, current: np.ndarray) -> None:
        """Table ``i``'s ``rows`` set to ``values``; ``current``: what ``read`` returned for it."""
        if not len(rows):
            return
        if self.variables is None:
            current[rows] = values   # a view of the kernel's array
            return
        from embedtune._tf import tf

        var = self.variables[i]
        if var.shape.rank == 0:
            var.assign(values.reshape(()))
        else:
            var.scatter_update(tf.IndexedSlices(values.reshape((len(rows), *var.shape[1:])), rows))


def writable(array: np.ndarray) -> np.ndarray:
    """``array``, or a copy of it where it may not be written (a variable's read can be)."""
    return array if array.flags.writeable else array.copy()


class Averaging:
    """The sync of one worker's tables with the others' (``sync``), from the values at the last sync
    (``base``, a copy of every table: a worker holds its tables twice)."""

    def __init__(self, tables: Tables, gather):
        self.tables, self.gather = tables, gather   # gather: int64 array -> every worker's, in worker order
        self.base: list[np.ndarray] | None = None
        # Per table: the changed rows' ids, then the rows the sync touched; each row's changes received.
        self.rows: list[np.ndarray] = []
        self.count: list[np.ndarray] = []
        self.syncs = self.bytes_sent = self.rows_sent = 0
        self.seconds = 0.0
        self.parts = {"pack": 0.0, "gather": 0.0, "combine": 0.0}   # a sync's seconds, by what it does

    def snapshot(self) -> None:
        self.base = [a.copy() for a in self.tables.read()]
        self.rows = [np.empty(len(b), np.int64) for b in self.base]
        self.count = [np.zeros(len(b), np.int32) for b in self.base]

    def payload(self, header: np.ndarray, arrays: list[np.ndarray]) -> np.ndarray:
        """int64 words: the header, then each table's changed rows: their count, their ids, their changes
        (float32, current - last sync, padded to a whole word)."""
        found = [sync_rows.changed(current, base, rows) for current, base, rows in zip(arrays, self.base, self.rows)]
        sizes = [1 + n + -(-n * base.shape[1] // 2) for n, base in zip(found, self.base)]
        data = np.zeros(HEADER + sum(sizes), np.int64)
        data[:HEADER] = header
        at = HEADER
        for current, base, rows, n, size in zip(arrays, self.base, self.rows, found, sizes):
            ids, changes = self._table(data, at, n, base.shape[1])
            ids[:] = rows[:n]
            if base.dtype.kind == "f":
                sync_rows.pack(current, base, ids, changes)
            else:   # adam's step count
                changes[:] = current[ids] - base[ids]
            at += size
            self.rows_sent += n
        return data

    @staticmethod
    def _table(data: np.ndarray, at: int, n: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The ids and the changes of a table's ``n`` rows, views of ``data`` from word ``at`` (its count)."""
        data[at] = n
        changes = data[at + 1 + n:at + 1 + n + -(-n * width // 2)].view(np.float32)[:n * width]
        return data[at + 1:at + 1 + n], changes.reshape(n, width)

    def combine(self, payloads: list[np.ndarray], arrays: list[np.ndarray]) -> np.ndarray:
        """Every worker's changes of a row, added up in worker order and divided by the number of
        workers that changed it, added to the row's value at the last sync (the same bits on every
        worker) and written to this worker's tables; every worker's header [N, HEADER]. (The plain sum,
        each change counted once, trained frequent rows too far: benchmarks/README.md, distribute_speed.)"""
        changes = [[] for _ in arrays]
        for data in payloads:
            at = HEADER
            for i, base in enumerate(self.base):
                n, width = int(data[at]), base.shape[1]
                changes[i].append((data[at + 1:at + 1 + n],
                                   data[at + 1 + n:at + 1 + n + -(-n * width // 2)].view(np.float32)[:n * width]
                                   .reshape(n, width)))
                at += 1 + n + -(-n * width // 2)
        for i, (parts, current) in enumerate(zip(changes, arrays)):
            base, touched, count = self.base[i], self.rows[i], self.count[i]
            if base.dtype.kind != "f":   # adam's step count: the mean of the workers' steps, rounded
                union = np.unique(np.concatenate([rows for rows, _ in parts]))
                total = np.zeros((len(union), base.shape[1]), np.float32)
                for rows, delta in parts:
                    total[np.searchsorted(union, rows)] += delta
                    count[rows] += 1
                base[union] += np.rint(total / count[union, None]).astype(base.dtype)
                count[union] = 0
                self.tables.write(i, union, base[union], current)
                continue
            n = 0
            for rows, delta in parts:   # in worker order
                n = sync_rows.add_changes(rows, delta, current, count, touched, n)
            sync_rows.finish(touched[:n], current, base, count)
            if self.tables.variables is not None:   # else ``current`` is the compiled step's own table
                self.tables.write(i, touched[:n], current[touched[:n]], current)
        return np.stack([data[:HEADER] for data in payloads])

    def sync(self, header: np.ndarray) -> np.ndarray:
        """This worker's changes sent, every worker's applied; every worker's header."""
        began = time.perf_counter()
        arrays = self.tables.read()
        data = self.payload(header, arrays)
        packed = time.perf_counter()
        payloads = self.gather(data)
        gathered = time.perf_counter()
        headers = self.combine(payloads, arrays)
        done = time.perf_counter()
        self.syncs += 1
        self.bytes_sent += data.nbytes
        self.seconds += done - began
        for part, seconds in zip(self.parts, (packed - began, gathered - packed, done - gathered)):
            self.parts[part] += seconds
        return headers


class AveragedStep(Step):
    """The single process's step (``inner``) over this worker's batches, a round a call (the loop's
    group, ``rounds``), then the sync. The round's Batch objects (``worker.round``) get the figures of
    all workers: the last one every worker's position, the words done by all and the others' pairs; its
    loss the others' loss."""

    def __init__(self, trainer, inner: Step, worker):
        super().__init__(trainer)
        self.inner, self.worker = inner, worker
        self.compiled, self.kernel = inner.compiled, inner.kernel
        self.averaging = Averaging(Tables(inner, trainer), worker.all_gather_words)
        if inner.compiled:
            # numba's compiler and threads started now, in the set-up, not in the first step: one process
            # starts them while it counts (run.count_while_importing), a worker has not (it counted since).
            from embedtune.kernels.common import warm_up

            warm_up()

    def prepare(self, batch: dict) -> dict:
        return self.inner.prepare(batch)

    def run(self, batches, lrs):
        if self.averaging.base is None:
            self.averaging.snapshot()
        real = [i for i, batch in enumerate(batches) if batch is not None]
        losses: list = [np.float32(0.0)] * len(batches)
        for start in range(0, len(real), GROUP):
            part = real[start:start + GROUP]
            for i, loss in zip(part, self.inner.run([batches[i] for i in part], [lrs[i] for i in part])):
                losses[i] = loss
        worker, round_ = self.worker, self.worker.round
        pairs = sum(batch.pairs for batch in round_)
        loss = float(sum(float(losses[i]) for i in real))
        header = np.array([*worker.mine, pairs, 0], np.int64)
        header[-1:] = np.array([loss], np.float64).view(np.int64)
        headers = self.averaging.sync(header)
        others = [k for k in range(len(headers)) if k != worker.index]
        last = round_[-1]
        last.shares = headers[:, :PAIRS].tolist()
        last.words_done = global_words(worker.epoch_number, worker.total_words, last.shares)
        last.pairs += int(headers[others, PAIRS].sum())
        losses[-1] = losses[-1] + np.float32(headers[others, PAIRS + 1].copy().view(np.float64).sum())
        return losses

    def sync(self):
        self.inner.sync()

    def arrays(self):
        return self.inner.arrays()

    def restored(self, arrays=None):
        self.inner.restored(arrays)
        self.averaging.snapshot()   # a checkpoint is written after a sync: every worker's tables alike

    def trained_matrix(self):
        return self.inner.trained_matrix()

    def trainable_rows(self, ids):
        return self.inner.trainable_rows(ids)

    def summary(self) -> dict:
        a = self.averaging
        return {"syncs": a.syncs, "sync_bytes_sent": a.bytes_sent, "sync_rows_sent": a.rows_sent,
                "sync_seconds": round(a.seconds, 3),
                **{f"sync_{part}_seconds": round(seconds, 3) for part, seconds in a.parts.items()}}


def rounds(worker, batches, pos, train):
    """The steps of an epoch in rounds of ``train.sync_every`` (``round_length``), the
    same number of steps on every worker: this worker's own batches, then empty steps (None tensors)
    once its share has ended. Between syncs a batch's words done is an estimate (the round's start plus
    N times this share's words since); the sync makes the last batch's exact, the same everywhere. The
    epoch ends after the sync at which no worker had a batch left."""
    if pos.shares and not any(s[MORE] for s in pos.shares):
        return   # resumed after the epoch's last sync
    mine = list(pos.shares[worker.index]) if pos.shares else [0, 0, 0, 1]
    at_sync, steps, rate = pos.words_done, pos.steps, 0.0
    current = next(batches, None)
    while True:
        length = round_length(train, steps, at_sync, rate)
        own_start, group = mine[WORDS], []
        for _ in range(length):
            if current is None:
                mine = [*mine[:MORE], 0]
                group.append(Batch(None, 0, 0, 0, None, group[-1].words_done if group else at_sync))
                continue
            following = next(batches, None)
            mine = [current.chunk, current.batch, current.words_done, int(following is not None)]
            estimate = at_sync + worker.size * (current.words_done - own_start)
            group.append(Batch(current.tensors, current.pairs, 0, 0, None, estimate))
            current = following
        worker.round, worker.mine = group, mine
        yield group
        steps += length
        rate = (group[-1].words_done - at_sync) / length   # words a step, all workers: the same everywhere
        at_sync = group[-1].words_done
        if not any(s[MORE] for s in group[-1].shares):
            return


def round_length(train, steps: int, words: int, rate: float) -> int:
    """Steps of the next round: --sync-every, fewer where --max-steps ends sooner or where --max-words
    would at the last round's words a step (``rate``, from the figures every worker has after a sync,
    so all agree)."""
    length = train.sync_every
    if train.max_steps:
        length = min(length, train.max_steps - steps)
    if train.max_words and rate > 0:
        length = min(length, math.ceil((train.max_words - words) / rate))
    return max(1, length)
