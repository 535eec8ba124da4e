"""embedtune/_adapters/: each private name of another library that embedtune reads (where the library has
no public way) still exists and still does what embedtune uses it for (issue 47.7). A library that
renames or changes one fails here, by name, rather than a run failing, or a check quietly saying nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from train_fixtures import REPO


def test_numba_cache_index_is_the_file_numba_keeps_for_a_cached_kernel():
    """kernels.cache_is_cold looks for it: a numba whose dispatcher is laid out otherwise would make the
    check say nothing, always."""
    from numba import njit

    from embedtune._adapters.numba_private import cache_index
    from embedtune.kernels import common

    index = cache_index(common._started)
    assert isinstance(index, str) and index.endswith(".nbi")
    common.warm_up()   # loads it from the cache, or compiles it and writes the cache
    assert __import__("os").path.exists(index)
    assert cache_index(njit(lambda x: x)) is None   # no cache asked for: no index
    assert cache_index(len) is None


def test_numba_array_without_reference_count_is_the_same_array_written_through():
    """kernels/glove.py's glove_hogwild reads and writes its arguments through it: a numba whose array struct is
    laid out otherwise fails to compile here, and a wrong field would show as other values or lost writes."""
    from numba import njit
    from numba.extending import intrinsic

    from embedtune._adapters.numba_private import without_reference_count

    @intrinsic
    def borrowed(typingctx, array):
        return array(array), lambda context, builder, signature, args: without_reference_count(
            context, builder, array, args[0])

    @njit
    def add_rows(table, rows):
        mine = borrowed(table)
        total = 0.0
        for r in rows:
            row = mine[r]
            row += 1.0
            total += row.sum()
        return total, mine.shape[0], mine.strides[0]

    table = np.arange(12, dtype=np.float64).reshape(4, 3)[:, :2].copy()
    total, n, stride = add_rows(table, np.array([3, 0, 3]))
    assert (n, stride) == (4, 16)
    np.testing.assert_array_equal(table, [[1, 2], [3, 4], [6, 7], [11, 12]])
    assert total == (10 + 11) + (1 + 2) + (11 + 12)


def test_keras_tracking_leaves_what_it_covers_untracked():
    """LazyRows keeps its rows' state in a dict whose variables it adds itself (and builds under the
    decorator): Keras must not collect them as the object's own a second time."""
    keras = pytest.importorskip("keras")
    from embedtune._adapters.keras_private import DotNotTrackScope, no_automatic_dependency_tracking

    class Holder(keras.layers.Layer):
        @no_automatic_dependency_tracking
        def keep(self):
            self.kept = {"v": keras.Variable(1.0, name="kept")}

    for holder in (Holder(), keras.optimizers.SGD()):
        holder.tracked = {"v": keras.Variable(1.0, name="tracked")}
        with DotNotTrackScope():
            holder.untracked = {"v": keras.Variable(1.0, name="untracked")}
        if isinstance(holder, Holder):
            holder.keep()
        names = [variable.name for variable in holder.variables]
        assert "tracked" in names   # Keras's own tracking collects it: what the two switch off
        assert "untracked" not in names and "kept" not in names


def test_keras_optimizers_learning_rate_as_given_and_their_decay_rule():
    """LazyRows shows the schedule the wrapped optimizer was given (not its value now) and decays a rows
    variable by the wrapped optimizer's own exclusions: both read Keras's private members."""
    import keras

    from embedtune._adapters.keras_private import decays_variable, learning_rate_as_given

    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    assert learning_rate_as_given(keras.optimizers.SGD(schedule)) is schedule
    given = learning_rate_as_given(keras.optimizers.Adam(0.25))
    assert isinstance(given, keras.Variable) and float(given.numpy()) == 0.25
    kept, decayed = keras.Variable([1.0], name="kept_bias"), keras.Variable([1.0], name="table")
    adamw = keras.optimizers.AdamW(weight_decay=0.01)
    adamw.exclude_from_weight_decay(var_names=["kept"])
    adamw.build([kept, decayed])
    assert decays_variable(adamw, decayed) and not decays_variable(adamw, kept)


def test_keras_optimizers_step_counter_counts_micro_batches():
    """LazyRows counts the wrapped optimizer's every apply (a micro-batch of gradient accumulation too),
    which Keras's public ``iterations`` divides by the accumulation steps."""
    import keras

    from embedtune._adapters.keras_private import step_counter

    optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    variable = keras.Variable([1.0])
    optimizer.build([variable])
    for _ in range(3):
        optimizer.apply([keras.ops.ones((1,))], [variable])
    assert int(step_counter(optimizer).numpy()) == 3 and int(keras.ops.convert_to_numpy(optimizer.iterations)) == 1


def test_tensorflow_op_determinism_is_read_and_turned_off():
    from embedtune._adapters.tensorflow_private import disable_op_determinism, op_determinism_enabled
    from embedtune._tf import tf

    was = op_determinism_enabled()
    try:
        tf.config.experimental.enable_op_determinism()
        assert op_determinism_enabled() is True
        disable_op_determinism()
        assert op_determinism_enabled() is False
    finally:
        if was:
            tf.config.experimental.enable_op_determinism()


def test_tensorflow_says_its_devices_are_listed():
    """embedtune._tf probes the devices quietly unless they are: an attribute renamed would read False."""
    from embedtune._adapters.tensorflow_private import devices_listed
    from embedtune._tf import tf

    tf.config.list_physical_devices()
    assert devices_listed() is True


def test_tensorflow_keeps_a_coordination_service_configured_before_the_strategy():
    """distribute/collectives.py sets a launched worker's heartbeat timeout so: a strategy that configured its
    own would put TensorFlow's 10 s back, and a worker stalled that long would end the run again. In a
    process of its own: the configuration is the process's."""
    code = """
import json, os
from embedtune.distribute import free_ports
cluster = {"worker": [f"localhost:{free_ports(1)[0]}"]}
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
from embedtune._adapters.tensorflow_private import configure_coordination, coordination_heartbeat_seconds
from embedtune._tf import tf
assert coordination_heartbeat_seconds() is None
configure_coordination(cluster, 123)
tf.distribute.MultiWorkerMirroredStrategy()
print(coordination_heartbeat_seconds())
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "123.0", run.stdout


def test_tensorflow_sharded_variable_is_the_one_exported_to_keras():
    from embedtune._adapters.tensorflow_private import sharded_variable_class
    from embedtune._tf import tf

    sharded = sharded_variable_class()
    assert sharded is tf.__internal__.distribute.ShardedVariable
    assert callable(getattr(sharded, "sparse_read", None))


def test_tensorflow_coordinator_wakes_a_join_with_the_error():
    """distribute/ps.py's watch: a server gone wakes the chief's join with PeerGone, not an hour's wait."""
    import inspect

    from tensorflow.python.distribute.coordinator import cluster_coordinator as coordinator_module

    from embedtune._adapters.tensorflow_private import fail_scheduled

    # A real coordinator needs a cluster: its layout is read from its source, the queue's behaviour run.
    assert "self._cluster = Cluster(" in inspect.getsource(coordinator_module.ClusterCoordinator.__init__)
    assert "self.closure_queue = _CoordinatedClosureQueue()" in inspect.getsource(coordinator_module.Cluster.__init__)
    queue = coordinator_module._CoordinatedClosureQueue()
    coordinator = types.SimpleNamespace(_cluster=types.SimpleNamespace(closure_queue=queue))
    assert fail_scheduled(coordinator, RuntimeError("gone")) is False   # nothing in flight: nothing to wake
    queue.inflight_closure_count = 1   # a call scheduled and not done
    errors = []

    def join():
        try:
            queue.wait()
        except RuntimeError as err:
            errors.append(str(err))

    waiting = threading.Thread(target=join)
    waiting.start()
    assert fail_scheduled(coordinator, RuntimeError("gone")) is True
    waiting.join(10)
    assert not waiting.is_alive() and errors == ["gone"]


def test_tensorflow_remote_value_has_an_event_set_with_its_result():
    from tensorflow.python.distribute.coordinator import values

    from embedtune._adapters.tensorflow_private import result_event
    from embedtune._tf import tf

    assert issubclass(values.RemoteValueImpl, tf.distribute.coordinator.RemoteValue)
    value = values.RemoteValueImpl(None, None)
    event = result_event(value)
    assert isinstance(event, threading.Event) and not event.is_set()
    value._set_values(())   # what the coordinator does when the call's result comes
    assert event.is_set()
    assert result_event(object()) is None


def test_numpy_hugepage_advice_is_switched_and_given_back():
    from embedtune._adapters.numpy_private import set_hugepage_advice

    if int(np.__version__.split(".")[0]) >= 2:   # the name read first: a numpy 2 without it falls through
        from numpy._core import multiarray
        assert callable(getattr(multiarray, "_set_madvise_hugepage", None))
    previous = set_hugepage_advice(False)
    try:
        assert set_hugepage_advice(True) is False
        assert set_hugepage_advice(False) is True
    finally:
        set_hugepage_advice(previous)


def test_python_says_the_import_lock_is_held():
    """cli/main.py's signal handlers wait while importlib holds it, around its module-lock bookkeeping."""
    import _imp
    import importlib._bootstrap

    from embedtune._adapters.python_private import import_lock_held

    names = importlib._bootstrap._get_module_lock.__code__.co_names
    assert {"_imp", "acquire_lock", "release_lock"} <= set(names)   # the bookkeeping the handlers wait out
    assert import_lock_held() is False
    _imp.acquire_lock()
    try:
        assert import_lock_held() is True
    finally:
        _imp.release_lock()


def test_python_runs_the_exit_handlers_once():
    """cli/main.py exit_now runs them, then ends the process without the interpreter's teardown: each
    handler runs, last registered first, and not again at the interpreter's own exit."""
    code = ("import atexit\nfrom embedtune._adapters.python_private import run_exit_handlers\n"
            "atexit.register(print, 'first registered')\natexit.register(print, 'last registered')\n"
            "run_exit_handlers()\nprint('after')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (done.returncode, done.stdout) == (0, "last registered\nfirst registered\nafter\n")
