"""TensorFlow's private modules and attributes, read where its public API has no way. Nothing here
imports TensorFlow at import time: each function imports what it reads when called (embedtune._tf
imports TensorFlow itself, quietly, first)."""

from __future__ import annotations


def op_determinism_enabled() -> bool:
    """Whether TensorFlow runs its ops deterministically now: the public API only turns it on
    (``tf.config.experimental.enable_op_determinism``); its framework config says and turns it off."""
    from tensorflow.python.framework import config

    return config.is_op_determinism_enabled()


def disable_op_determinism() -> None:
    """Turn TensorFlow's op determinism off (see ``op_determinism_enabled``)."""
    from tensorflow.python.framework import config

    config.disable_op_determinism()


def devices_listed() -> bool:
    """Whether TensorFlow has listed its physical devices in this process (its CUDA probe done): the
    eager context's ``_physical_devices``, None until the first listing."""
    from tensorflow.python.eager import context

    return getattr(context.context(), "_physical_devices", None) is not None


def sharded_variable_class():
    """The class of a ParameterServerStrategy's row-sharded variables (its ``sparse_read`` is what
    ``tf.gather`` calls on one): exported only to Keras, under ``tf.__internal__``."""
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    return ShardedVariable


def fail_scheduled(coordinator, error: BaseException) -> bool:
    """Wake whatever waits on ``coordinator``'s (a ClusterCoordinator's) scheduled calls, a ``join``
    included, with ``error`` raised there; False when no call was in flight (nothing to wake). The
    coordinator has no public way: its cluster's closure queue (``_cluster.closure_queue``) is what
    its ``join`` waits on and what a failed call marks."""
    try:
        coordinator._cluster.closure_queue.mark_failed(error)
    except AssertionError:   # "There is no inflight closures to mark_failed."
        return False
    return True


def result_event(value):
    """The event set when a scheduled call's result (``value``, the coordinator's RemoteValue) is there,
    or None for a value that has none: ``RemoteValue.get`` waits without a limit; this can be waited on
    a while at a time."""
    return getattr(value, "_status_available_event", None)


def configure_coordination(cluster: dict, heartbeat_seconds: float) -> None:
    """Set up TensorFlow's coordination service for the MultiWorkerMirroredStrategy about to be made over
    ``cluster`` (TF_CONFIG's {"chief": [...], "worker": [...]}) as the strategy itself would (its leader,
    its jobs), but declaring a task dead only after ``heartbeat_seconds`` without a heartbeat, not TensorFlow's
    10 s. The strategy keeps a service already configured; its options have no way to set this: the
    eager context's ``configure_coordination_service`` does (ParameterServerStrategy calls it so)."""
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(cluster[job]))
            for job in ("chief", "worker") if job in cluster]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(cluster),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=int(heartbeat_seconds * 1000))


def coordination_heartbeat_seconds() -> float | None:
    """The heartbeat timeout the coordination service is configured with (None: none configured; 0:
    TensorFlow's): ``configure_coordination``'s, read back (tests/test_adapters.py)."""
    from tensorflow.python.eager import context

    config = context.context().coordination_service
    return None if config is None else config.heartbeat_timeout_in_ms / 1000
