"""The lookup's tensors under the hood: the batch's trainable rows written into the gather of its ids
(``put_rows``), and the replica's own copy of a distributed variable (``local_copy``), so that neither a
step nor a read grows with the table."""

from __future__ import annotations

import keras

from embedtune._tf import tf


def local_copy(variable, device: str | None = None):
    """The tf.Variable behind a Keras variable; for a tf.distribute variable, its copy on ``device``
    (given in a strategy's update) or on this replica's device (in a replica context), and in a
    cross-replica context the distributed variable itself (a write there reaches every copy).

    A distributed variable has no sparse read: tf.gather reads it whole, and a variable that scatters
    write (the rows, their optimizer state) is then copied whole by every read, TensorFlow's
    copy-on-read. A gather from the copy itself reads the rows it names only."""
    value = variable.value if isinstance(variable, keras.Variable) else variable
    if not isinstance(value, tf.distribute.DistributedValues):
        return value
    if device is None:
        if tf.distribute.get_replica_context() is None:
            return value
        device = value.device   # this replica's copy's
    return next((copy for copy in value.distribute_strategy.experimental_local_results(value)
                 if copy.device == device), value)


def put_rows(table, flat, at, moved):
    """``table``'s rows of the ids ``flat`` with the rows at positions ``at`` replaced by ``moved``; the
    gradient reaches ``moved`` (and ``table``'s rows, but for those positions).

    tf.tensor_scatter_nd_update copies the gathered [n, dim] batch before it writes: the largest part of
    what the lookup added to a step (benchmarks/log/keras_rows.md). InplaceUpdate writes into the
    gather's own output instead, which must then be ours alone: a gather from a variable starts from a
    stateful read of its own (ResourceGather, or ReadVariableOp under a strategy), which Grappler never
    merges with another. A gather from a tensor (stateless_call's values) is a stateless op that an equal one
    elsewhere may be merged with, so it is scattered into a copy."""
    if not isinstance(table, tf.Variable):
        return tf.tensor_scatter_nd_update(tf.gather(table, flat), at[:, None], moved)
    return _put_gathered(tf.gather(table, flat), at, moved)


@tf.custom_gradient
def _put_gathered(gathered, at, moved):
    def grad(upstream):
        return (tf.tensor_scatter_nd_update(upstream, at[:, None], tf.zeros_like(moved)), None,
                tf.gather(upstream, at))

    return tf.raw_ops.InplaceUpdate(x=gathered, i=at, v=moved), grad
