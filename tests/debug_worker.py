"""Test-only hooks of multi-worker runs, kept out of the package: the one-process emulation of N workers
(``Shares``, EMBEDTUNE_DEBUG_SHARES=N), a worker that kills itself before a step (EMBEDTUNE_DEBUG_DIE_AT=
"K:S"), one that stops a while before a step (EMBEDTUNE_DEBUG_STALL_AT="K:S:SECONDS") and one that writes a hash of its tables at the end (EMBEDTUNE_DEBUG_TABLE_HASH=folder).

Run as the command (``python tests/debug_worker.py train ...``): it gives `embedtune` these strategies
(``strategy_from_env``) and starts `--workers`' processes as itself, then runs the CLI as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import numpy as np

from embedtune import distribute
from embedtune.distribute import gathered
from embedtune.corpus import HeldLines, ShareCount, merge_counts
from embedtune.distribute.shares import MORE, CorpusShare, WorkerShare, batch_part, global_words, share_batches
from embedtune.training.batches import Batch, step_groups
from embedtune.training.step import CompiledStep, TensorFlowStep, choose_step
from embedtune.training.strategy import OneProcess

ENV_SHARES = "EMBEDTUNE_DEBUG_SHARES"   # "N": one process trains N workers' shares (Shares)
ENV_DIE_AT = "EMBEDTUNE_DEBUG_DIE_AT"   # "K:S": worker K kills itself with SIGKILL before its step S
# "K:S:SECONDS": worker K stops (SIGSTOP) before its step S for SECONDS, as a process starved that long
ENV_STALL_AT = "EMBEDTUNE_DEBUG_STALL_AT"
ENV_TABLE_HASH = "EMBEDTUNE_DEBUG_TABLE_HASH"   # a folder: each worker writes worker-K.json (its tables' hash)


def counts_digest(counts: Counter, total_words: int, n_lines: int) -> str:
    """A hash of a corpus count, its words' order included."""
    return hashlib.sha256(json.dumps([list(counts.items()), total_words, n_lines]).encode()).hexdigest()


class HeldShares(HeldLines):
    """All ``size`` shares of a corpus's lines held by one process (``Shares``), each share's figures apart
    (one item a share, ``held``) and combined as HeldLines' defaults combine them, in share order: the
    workers' ring all-reduce adds the same terms in an order of its own (the same bits for 2 shares, equal
    up to the order of float64 sums for more). Its ``lines`` are every line, so a figure of them is
    already the whole corpus's (``combine``: as it is)."""

    def __init__(self, corpus, size: int):
        self.corpus, self.size, self.path = corpus, size, corpus.path
        self.held = list(range(size))

    def lines(self):
        return self.corpus.lines()

    def numbered_lines(self):
        return self.corpus.numbered_lines()


class Shares(OneProcess):
    """N workers' shares trained in one process: each step's global batch is the N shares' batches
    (B / N units each, padding for a share that has ended) joined (Objective.worker_part, Objective.join),
    stepped as the workers step it: an objective whose batches join through the strict compiled step, so
    the workers' run gives the same bits; any other through TensorFlow's step, which the workers' gathered
    slices match up to the order of float32 sums. Steps, learning rates and positions follow Worker's rules."""

    def __init__(self, size: int):
        self.size = size
        self.parts = self.padding = None

    def count(self, corpus):
        """Worker.count's merge, in one process: each share counted, then merged."""
        if not corpus.shares_lines:
            return corpus.count()
        return merge_counts([ShareCount.from_bytes(corpus.count_share((k, self.size)).to_bytes())
                             for k in range(self.size)])

    def objective_corpus(self, corpus):
        """All the shares, held here (glove reads the whole corpus's pair counts from it, which the
        workers' summed shares make; classify keeps each share's lines apart, as each worker does)."""
        return HeldShares(corpus, self.size) if corpus.shares_lines else corpus

    def split(self, config):
        batch_part(config.train, self.size)
        return config   # the trainer steps over whole global batches

    def settings(self, settings: dict) -> dict:
        return {**settings, "workers": self.size}

    def make_step(self, trainer, words, side, note):
        objective = trainer.objective
        self.parts = [objective.worker_part(k, self.size) for k in range(self.size)]
        self.padding = self.parts[0].padding_batch()
        if gathered.joins_batches(trainer.config.train):   # the workers' step (Worker.make_step)
            return CompiledStep.build(trainer, words, side, deterministic=True)
        # Else the workers' gathered slices can hold the same row: merged, as TensorFlow's step does.
        if objective.distinct_ids:
            return TensorFlowStep(trainer, distinct=False)
        return choose_step(trainer, words, side, note)

    def epoch(self, trainer, corpus, pos, total_words: int) -> Iterator:
        if pos.shares and not any(s[MORE] for s in pos.shares):
            return
        seed = trainer.config.train.seed
        shares = [list(s) for s in pos.shares] if pos.shares else [[0, 0, 0, 1] for _ in range(self.size)]
        own = [share_batches(part, corpus, trainer.local_index, seed, pos.epoch, k, self.size,
                             pos.shares[k] if pos.shares else None, lambda raw: raw)
               for k, part in enumerate(self.parts)]
        current = [next(it, None) for it in own]
        step = 0
        while True:
            following = [next(it, None) if b is not None else None for it, b in zip(own, current)]
            for k, (b, after) in enumerate(zip(current, following)):
                shares[k] = [b.chunk, b.batch, b.words_done, int(after is not None)] if b is not None else [
                    *shares[k][:MORE], 0]
            batch = trainer.objective.join([b.tensors if b is not None else self.padding for b in current])
            step += 1
            positions = [list(s) for s in shares]
            yield Batch(trainer.prepare(batch), batch["pairs"], 0, step, None,
                        global_words(pos.epoch, total_words, positions), positions)
            if not any(s[MORE] for s in shares):
                return
            current = following

    def groups(self, batches, pos, train):
        return step_groups(batches, pos.steps, train)


class CountingShare(WorkerShare):
    """A worker's share that counts the tokens the objective read from it."""

    def __init__(self, corpus, worker):
        super().__init__(corpus, worker)
        self.tokens_read = 0

    def lines(self):
        for tokens in super().lines():
            self.tokens_read += len(tokens)
            yield tokens

    @property
    def fast(self):
        """The compiled reader's share (what id_chunks reads), its tokens counted as they are read."""
        passes = super().fast
        return None if passes is None else _CountedPass(passes, self)


class _CountedPass:
    def __init__(self, passes, share: CountingShare):
        self.passes, self.share, self.table = passes, share, passes.table

    def blocks(self):
        pieces = np.diff(np.asarray(self.table.piece_start, np.int64))   # a raw token's words
        for block in self.passes.blocks():
            self.share.tokens_read += int(pieces[block[0]].sum())
            yield block

    def rows_of(self, index):
        return self.passes.rows_of(index)


def debug_worker(cluster, threads):
    """A Worker with the debug hooks the environment asks for (a worker of the gathered step through TensorFlow
    imports it)."""
    from embedtune.distribute.strategy import GatheredStep, Worker

    class DyingStep(GatheredStep):
        def one(self, batch, lr):
            worker = self.worker
            worker.steps += 1
            worker.before_step()
            return super().one(batch, lr)

    class DebugWorker(Worker):
        def __init__(self, cluster, threads=None):
            super().__init__(cluster, threads)
            die = os.environ.get(ENV_DIE_AT, "")
            self.die_at = int(die.split(":")[1]) if die and int(die.split(":")[0]) == self.index else None
            stall = os.environ.get(ENV_STALL_AT, "").split(":")
            self.stall_at = (int(stall[1]), float(stall[2])) if len(stall) == 3 and int(stall[0]) == self.index else None
            self.steps = 0
            self.counted = self.own_tokens = self.counted_whole = self.share = None

        def before_step(self):
            """The hooks asked for at this step: SIGKILL (die_at), or a stop of a few seconds (stall_at: a
            child sends SIGCONT then, once)."""
            if self.die_at is not None and self.steps >= self.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.stall_at is not None and self.steps >= self.stall_at[0]:
                seconds, self.stall_at = self.stall_at[1], None
                subprocess.Popen([sys.executable, "-c", f"import os, signal, time; time.sleep({seconds}); "
                                  f"os.kill({os.getpid()}, signal.SIGCONT)"], start_new_session=True)
                os.kill(os.getpid(), signal.SIGSTOP)

        def count(self, corpus):
            self.counted_whole = corpus.counted
            self.counted = super().count(corpus)
            return self.counted

        def count_share(self, corpus):
            part = super().count_share(corpus)
            self.own_tokens = sum(part.counts.values())
            return part

        def objective_corpus(self, corpus):
            self.share = CountingShare(corpus, self) if corpus.shares_lines else None
            return self.share if self.share is not None else corpus

        def make_step(self, trainer, words, side, note):
            step = super().make_step(trainer, words, side, note)
            if self.sync_every or self.joins:   # averaging: a round a call of the step; joined batches: a step
                run = step.run

                def dying_run(batches, lrs):
                    self.steps += len(batches)
                    self.before_step()
                    return run(batches, lrs)

                step.run = dying_run
                return step
            self.step = DyingStep(trainer, self)
            return self.step

        def finish(self, trainer):
            folder = os.environ.get(ENV_TABLE_HASH)
            if not folder:
                return
            digest = hashlib.sha256()
            if self.step is not None and self.step.compiled:
                # The compiled step's own tables and optimizer state: reading the variables would import
                # TensorFlow, which an averaging worker otherwise never does (distribute/mesh.py).
                tables = dict(self.step.arrays())
            else:
                tables = {"trainable": trainer.trainable, "side": trainer.side, "rng": trainer.tf_rng.state}
                for side, opt in (("word", trainer.word_opt), ("side", trainer.side_opt)):
                    tables.update({f"{side}_{name}": var for name, var in opt.variables().items()})
            for name, var in sorted(tables.items()):
                digest.update(name.encode())
                digest.update(np.ascontiguousarray(var if isinstance(var, np.ndarray) else var.numpy()).tobytes())
            with open(os.path.join(folder, f"worker-{self.index}.json"), "w") as f:
                json.dump({"worker": self.index, "steps": self.steps, "sha256": digest.hexdigest(),
                           "counts": counts_digest(*self.counted), "own_tokens": self.own_tokens,
                           "counted_whole": self.counted_whole,
                           # every pass begun over the corpus's lines, by share ("None": the whole corpus)
                           "reads": ({str(share): n for share, n in self.share.corpus.reads.items()}
                                     if self.share else None),
                           "objective_tokens": self.share and self.share.tokens_read,
                           "tensorflow": "tensorflow" in sys.modules}, f)

    return DebugWorker(cluster, threads)


def strategy_from_env():
    """distribute.strategy_from_env with the debug hooks: the emulation, or a debug worker."""
    shares = os.environ.get(ENV_SHARES)
    if shares and int(shares) > 1:
        return Shares(int(shares))
    cluster = distribute.cluster_from_env()
    if cluster is None:
        return None
    threads = os.environ.get(distribute.ENV_THREADS)
    return debug_worker(cluster, int(threads) if threads else None)


def worker_command(argv: list[str]) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), *argv]


__all__ = ["CorpusShare", "Shares", "counts_digest", "strategy_from_env"]

if __name__ == "__main__":
    distribute.strategy_from_env = strategy_from_env
    distribute.worker_command = worker_command
    from embedtune.cli.main import main

    main()
