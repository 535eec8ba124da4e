"""Tables sharded by rows over parameter servers (tf.distribute.experimental.ParameterServerStrategy).

What the project's Trainer needs to run with its tables and their optimizer state as ShardedVariables
(docs/scale-out.md, section 4): a partitioner that splits the tables by rows and leaves small variables
whole, and a ``ShardedVariable.sparse_read`` (what ``tf.gather`` calls) that returns the rows in the ids'
order and takes ids of any shape. Built under ``strategy.scope()``, the Trainer is otherwise unchanged:
its scatter_* updates on a ShardedVariable split the slices by shard themselves.

What is not here (docs/scale-out.md): batches made on the workers (tf.data), asynchronous steps,
checkpoints of a sharded run; the coordinator schedules prepared batches (tests/ps_sharded_table.py).
"""

from __future__ import annotations

from collections.abc import Callable

# Variables with fewer rows stay whole: the step's tf.random.Generator state (shape [3]) may not be
# sharded, and a split of a few rows saves nothing.
MIN_SHARDED_ROWS = 64


def row_partitioner(shards: int, min_rows: int = MIN_SHARDED_ROWS) -> Callable:
    """A ``variable_partitioner`` for ParameterServerStrategy: ``shards`` shards of rows for a
    variable of at least ``min_rows`` rows (a table, its optimizer state: each accumulator is
    created like its table, so its shards sit on the same servers as its rows), one otherwise."""

    def partition(shape, dtype):
        rank = shape.rank or 0
        if rank == 0:
            return []
        return [shards if shape[0] is not None and shape[0] >= min_rows else 1] + [1] * (rank - 1)

    return partition


def _sparse_read(self, indices, name=None):
    """Rows ``indices`` (any shape) of a ShardedVariable, in their order: [*indices.shape, *row shape].

    TensorFlow 2.21's own splits the ids by shard and concatenates each shard's rows shard after shard,
    dropping the ids' order: its rows are wrong unless the ids are sorted (118 of a batch's 256 word
    rows were, max error 3.6, tests/ps_sharded_table.py). ``embedding_lookup`` puts the rows back in
    order (dynamic_stitch), with the "div" strategy that matches the shards' layout (larger first, as
    FixedShardsPartitioner makes them), and takes ids of any shape, where TensorFlow's refuses all but
    1-D ids: per-pair negatives' [B, 1 + K] context ids are gathered as they are, with no reshape in
    the Trainer.
    """
    from embedtune._tf import tf

    return tf.nn.embedding_lookup(self.variables, indices, name=name)


def fix_sparse_read() -> None:
    """Make ``tf.gather`` on every ShardedVariable return rows in the ids' order, for ids of any shape
    (``_sparse_read``). Idempotent; call before the first step is traced."""
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    ShardedVariable.sparse_read = _sparse_read


def parameter_server_strategy(resolver, shards: int, min_rows: int = MIN_SHARDED_ROWS):
    """A ParameterServerStrategy over ``resolver``'s cluster whose tables (variables of ``min_rows``
    rows or more) are split by rows into ``shards`` shards, with ``fix_sparse_read`` applied."""
    from embedtune._tf import tf

    fix_sparse_read()
    return tf.distribute.experimental.ParameterServerStrategy(
        resolver, variable_partitioner=row_partitioner(shards, min_rows))
