"""``LazyRows``: a Keras optimizer that steps an embedtune.keras.Embedding's trainable rows as
``embedtune train`` steps its own, and hands every other variable to the user's optimizer.

A rows gradient (the lookup's ``tf.IndexedSlices``, the batch's trainable rows only) is stepped as the
project's step does (embedtune/training/step.py): repeated rows merged (``merge_rows``), each
merged row capped (``cap_rows``), then the lazy sgd / adagrad / adam of embedtune/training/optimizers.py,
whose state covers the trainable rows only and moves only for the rows the batch holds. Decoupled weight
decay (AdamW's ``w -= lr * decay * w``, before the update as Keras applies it) touches only those rows
too, toward zero or toward each row's start.

A dense rows gradient (a regulariser on the layer adds one for every row) steps every row.
"""

from __future__ import annotations

import keras

from embedtune._tf import tf
from embedtune.keras import _project as project
from embedtune.keras.layer import layer_of

DECAY_TO = ("zero", "start")


def is_lazy_rows(optimizer) -> bool:
    """Whether ``optimizer`` is a LazyRows, or wraps one (mixed_float16's LossScaleOptimizer)."""
    while optimizer is not None:
        if isinstance(optimizer, LazyRows):
            return True
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return False


@keras.saving.register_keras_serializable(package="embedtune")
class LazyRows(keras.optimizers.Optimizer):
    """Steps embedtune.keras.Embedding rows lazily; ``optimizer`` steps every other variable.

    optimizer : a Keras optimizer (an instance, a name, or its config) for the rest of the model
    rows : "sgd", "adagrad" or "adam" (embedtune's lazy optimizers, Keras's defaults for their constants)
    learning_rate : the rows' (a float or a Keras schedule; default: embedtune train's for ``rows``)
    clip_norm : cap on each merged row gradient's L2 norm per step (0: none)
    weight_decay : decoupled decay of the rows a batch holds, lr * weight_decay a step (0: none)
    decay_to : "zero" (AdamW's) or "start" (toward the row's starting vector: the pretrained one)
    """

    def __init__(self, optimizer, rows: str = "adam", learning_rate=None, clip_norm: float = 0.0,
                 weight_decay: float = 0.0, decay_to: str = "zero", name: str = "lazy_rows", **kwargs):
        if kwargs:
            raise project.EmbedtuneError(f"LazyRows takes no {', '.join(sorted(kwargs))}: set Keras's optimizer "
                                         "options on the inner optimizer, and the rows' as LazyRows' own "
                                         "(rows, learning_rate, clip_norm, weight_decay, decay_to)")
        if rows not in project.OPTIMIZERS:
            raise project.EmbedtuneError(f"rows {rows!r} is not one of {', '.join(project.OPTIMIZERS)}")
        if decay_to not in DECAY_TO:
            raise project.EmbedtuneError(f"decay_to {decay_to!r} is not one of {', '.join(DECAY_TO)}")
        for key, value in (("clip_norm", clip_norm), ("weight_decay", weight_decay)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise project.EmbedtuneError(f"{key} must be a number >= 0, got {value!r}")
        # The rows' learning rate when none is given: embedtune train's default for the optimizer.
        super().__init__(learning_rate=project.DEFAULT_LR[rows] if learning_rate is None else learning_rate,
                         name=name)
        self.inner_optimizer = keras.optimizers.get(optimizer)
        self.rows = rows
        self.clip_norm, self.row_decay, self.decay_to = float(clip_norm), float(weight_decay), decay_to
        self._lazy = {}   # a rows variable's key -> embedtune's lazy optimizer over it

    @keras.src.utils.tracking.no_automatic_dependency_tracking
    def build(self, var_list):
        var_list = list(var_list)
        others = []
        for variable in var_list:
            if layer_of(variable) is None:
                others.append(variable)
            else:
                self._build_rows(variable)
        self.inner_optimizer.build(others)
        super().build(var_list)

    def _build_rows(self, variable) -> None:
        """The lazy optimizer's state for one rows variable, as this optimizer's own variables (saved with
        it), from the values embedtune's optimizers start from."""
        layer = layer_of(variable)
        layer.stepped_by_lazy_rows()
        start = project.OPTIMIZERS[self.rows].initial_state(tuple(variable.shape))
        prefix = variable.path.replace("/", "_")
        state = {key: self.add_variable(shape=value.shape, dtype=str(value.dtype), name=f"{prefix}_{key}",
                                        initializer=_constant(value))
                 for key, value in start.items()}
        self._lazy[self._var_key(variable)] = project.make_optimizer(
            self.rows, variable.value, state={key: v.value for key, v in state.items()})

    @property
    def variables(self):
        return self._variables[:] + self.inner_optimizer.variables

    def apply(self, grads, trainable_variables=None):
        if trainable_variables is None:
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
        pairs = list(zip(grads, trainable_variables))
        rows = [(g, v) for g, v in pairs if self._var_key(v) in self._lazy]
        others = [(g, v) for g, v in pairs if self._var_key(v) not in self._lazy]
        if others:
            self.inner_optimizer.apply([g for g, _ in others], [v for _, v in others])
        with keras.name_scope(self.name, caller=self):
            lr = tf.cast(self.learning_rate, tf.float32)
            for grad, variable in rows:
                if grad is not None:
                    self._step_rows(grad, variable, lr)
        self._iterations.assign_add(1)

    def _step_rows(self, grad, variable, lr) -> None:
        """One lazy step of a rows variable: embedtune train's step (training/step.py) on its slices."""
        layer = layer_of(variable)
        if not isinstance(grad, tf.IndexedSlices):   # a regulariser's term reaches every row
            grad = tf.IndexedSlices(grad, tf.range(tf.shape(grad)[0]))
        if grad.values.dtype != variable.dtype:
            grad = tf.IndexedSlices(tf.cast(grad.values, variable.dtype), grad.indices)
        rows, merged = project.merge_rows(grad)
        merged = project.cap_rows(merged, self.clip_norm)
        table = variable.value
        if self.row_decay:
            self._decay(table, layer, rows, lr)
        self._lazy[self._var_key(variable)].apply(rows, merged, lr)
        if variable.constraint is not None:   # on the rows just stepped (a row-wise constraint)
            table.scatter_update(tf.IndexedSlices(variable.constraint(tf.gather(table, rows)), rows))

    def _decay(self, table, layer, rows, lr) -> None:
        """Decoupled decay of the rows a batch holds, before their update (as Keras orders it)."""
        rate = lr * self.row_decay
        moved = tf.gather(table, rows)
        if self.decay_to == "zero":
            decayed = moved - moved * rate
        else:
            start = tf.gather(layer.table.value, tf.gather(layer.row_ids.value, rows))
            decayed = moved - (moved - start) * rate
        table.scatter_update(tf.IndexedSlices(decayed, rows))

    def finalize_variable_values(self, var_list):
        self.inner_optimizer.finalize_variable_values([v for v in var_list if self._var_key(v) not in self._lazy])

    def get_config(self):
        lr = self._learning_rate
        if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
            lr = keras.optimizers.schedules.serialize(lr)
        else:
            lr = float(keras.ops.convert_to_numpy(lr))
        return {"name": self.name, "optimizer": keras.optimizers.serialize(self.inner_optimizer), "rows": self.rows,
                "learning_rate": lr, "clip_norm": self.clip_norm, "weight_decay": self.row_decay,
                "decay_to": self.decay_to}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = keras.optimizers.schedules.deserialize(config["learning_rate"])
        config["optimizer"] = keras.optimizers.deserialize(config["optimizer"], custom_objects=custom_objects)
        return cls(**config)


def _constant(value):
    def initializer(shape, dtype=None):
        return tf.constant(value, dtype=dtype)

    return initializer
