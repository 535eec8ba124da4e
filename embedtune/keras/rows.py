"""``LazyRows``: a Keras optimizer wrapper that steps an embedtune.keras.Embedding's trainable rows lazily,
by the rule of the optimizer it wraps, and hands every other variable to that optimizer.

A rows gradient (the lookup's ``tf.IndexedSlices``, the batch's trainable rows only) is summed over the
replicas of a tf.distribute strategy, its repeated rows merged (``merge_rows``: one update a row, the
same whatever the order) and, with ``clip_norm``, each merged row capped. Then, as Keras's
BaseOptimizer orders a step (keras/src/optimizers/base_optimizer.py): the wrapped optimizer's clipping
(``clipnorm`` on the rows' gradient, ``clipvalue``, ``global_clipnorm`` over the rows' and the other
variables' gradients together), its decoupled ``weight_decay`` (``w -= w * wd * lr``), its update rule
(embedtune/keras/rules.py) on the batch's rows and their state only, the layer's constraint on those rows;
with ``gradient_accumulation_steps`` k the slices are summed over k micro-batches and the rows that any
of them held step once, on the sum / k; with ``use_ema`` an average of the rows is kept as Keras keeps
one of every variable. Rows no batch held are neither read nor written: they keep their bits and do not
decay.

``rows="sgd"|"adagrad"|"adam"`` steps the rows by embedtune train's own lazy optimizers instead
(embedtune/training/optimizers.py, embedtune train's learning rates), as before the rule was taken.

A dense rows gradient (a regulariser on the layer adds one for every row) steps every row.
"""

from __future__ import annotations


import keras

from embedtune._adapters.keras_private import (DotNotTrackScope, decays_variable, learning_rate_as_given,
                                               no_automatic_dependency_tracking, step_counter)
from embedtune._tf import tf
from embedtune.config.keys import FLOAT32_MAX, Range
from embedtune.keras import _project as project
from embedtune.keras import rules
from embedtune.keras.layer import layer_of
from embedtune.keras.lookup import local_copy

DECAY_TO = ("zero", "start")
# The strategies whose replicas LazyRows sums before its step (every replica then holds the same rows).
STRATEGIES = ("_DefaultDistributionStrategy", "OneDeviceStrategy", "MirroredStrategy", "MultiWorkerMirroredStrategy",
              "CollectiveAllReduceStrategy")


def is_lazy_rows(optimizer) -> bool:
    """Whether ``optimizer`` is a LazyRows, or wraps one (mixed_float16's LossScaleOptimizer)."""
    while optimizer is not None:
        if isinstance(optimizer, LazyRows):
            return True
        optimizer = getattr(optimizer, "inner_optimizer", None)
    return False


def _number(name: str, value, low_open: bool = False):
    """A finite float >= 0 (> 0 with ``low_open``), else EmbedtuneError naming the option: the declaration's
    range check every other entry point uses (embedtune.config.keys)."""
    problem = Range(0.0, FLOAT32_MAX, low_open=low_open).problem(value)
    if problem:
        raise project.EmbedtuneError(f"LazyRows: {name} {problem}")
    return float(value)


@keras.saving.register_keras_serializable(package="embedtune")
class LazyRows(keras.optimizers.Optimizer):
    """Steps embedtune.keras.Embedding rows lazily by ``optimizer``'s rule; ``optimizer`` steps every other
    variable.

    optimizer : a Keras optimizer (an instance, a name, or its config). Its class gives the rows' rule
        (SGD, Adagrad, Adam, AdamW, RMSprop, Adamax, Nadam, Lion, Adadelta, with their hyperparameters),
        its learning rate (a schedule too, on its own step count) theirs, and its weight_decay,
        clipnorm, clipvalue, global_clipnorm, use_ema, gradient_accumulation_steps and loss_scale_factor
        reach the rows with Keras's meaning
    rows : None (the rule of ``optimizer``), or "sgd", "adagrad", "adam": embedtune train's own
    learning_rate : the rows' own (a float or a Keras schedule; default: ``optimizer``'s, or with ``rows``
        embedtune train's for it)
    clip_norm : cap on each merged row gradient's L2 norm per step, before the optimizer's clipping (0: none)
    weight_decay : the rows' own decoupled decay (default: ``optimizer``'s); decay_to : "zero" (Keras's) or
        "start" (toward the row's starting, pretrained vector)
    """

    def __init__(self, optimizer, rows: str | None = None, learning_rate=None, clip_norm: float = 0.0,
                 weight_decay: float | None = None, decay_to: str = "zero", name: str = "lazy_rows", **kwargs):
        if kwargs:
            raise project.EmbedtuneError(f"LazyRows takes no {', '.join(sorted(kwargs))}: set Keras's optimizer "
                                         "options on the optimizer it wraps (they reach the rows), and the rows' "
                                         "own as LazyRows' (rows, learning_rate, clip_norm, weight_decay, decay_to)")
        if optimizer is None:
            raise project.EmbedtuneError("LazyRows: optimizer is None: give the Keras optimizer it wraps "
                                         "(e.g. keras.optimizers.Adam(1e-3), or 'adam')")
        if rows is not None and rows not in project.OPTIMIZERS:
            raise project.EmbedtuneError(f"LazyRows: rows {rows!r} is not one of {', '.join(project.OPTIMIZERS)} "
                                         "(or None: the wrapped optimizer's rule)")
        if decay_to not in DECAY_TO:
            raise project.EmbedtuneError(f"LazyRows: decay_to {decay_to!r} is not one of {', '.join(DECAY_TO)}")
        clip_norm = _number("clip_norm", clip_norm)
        if weight_decay is not None:
            weight_decay = _number("weight_decay", weight_decay)
        if learning_rate is not None and not callable(learning_rate):
            learning_rate = _number("learning_rate", learning_rate, low_open=True)
        try:
            inner = keras.optimizers.get(optimizer)
        except (ValueError, TypeError) as e:
            raise project.EmbedtuneError(f"LazyRows: optimizer {optimizer!r} is not a Keras optimizer ({e})") from None
        if isinstance(inner, keras.optimizers.LossScaleOptimizer):
            raise project.EmbedtuneError("LazyRows: the optimizer it wraps is a LossScaleOptimizer: wrap it the other "
                                         "way, LossScaleOptimizer(LazyRows(optimizer)) (model.compile does so under "
                                         "mixed_float16)")
        rule = None if rows is not None else rules.rule_for(inner)
        if rows is None and rule is None:
            raise project.EmbedtuneError(f"LazyRows: {type(inner).__name__} has no lazy form (its update of a row reads "
                                         f"more than that row); the optimizers with one: {rules.lazy_names()}; or "
                                         "pass rows='sgd', 'adagrad' or 'adam' for embedtune's own")
        if inner.gradient_accumulation_steps and inner.global_clipnorm:
            raise project.EmbedtuneError("LazyRows: global_clipnorm with gradient_accumulation_steps is not supported "
                                         "(the norm would need the accumulated gradients of every variable): use "
                                         "clipnorm")
        if learning_rate is None and rows is not None:
            learning_rate = project.DEFAULT_LR[rows]   # embedtune train's for its own optimizer
        super().__init__(learning_rate=learning_rate if learning_rate is not None else 0.0, name=name)
        self._own_lr = learning_rate is not None
        self.inner_optimizer = inner
        self.rows, self.rule = rows, rule
        self.clip_norm, self.row_decay, self.decay_to = clip_norm, weight_decay, decay_to
        with DotNotTrackScope():   # its variables are tracked as they are made
            self._state = {}   # a rows variable's key -> its state: "slots", "scalars", "own", "average", ...

    # --- what the rows take ----------------------------------------------------------------------------
    @property
    def learning_rate(self):
        """The rows' learning rate now (the wrapped optimizer's unless LazyRows has its own)."""
        return self._get_current_learning_rate() if self._own_lr else self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        if getattr(self, "_own_lr", True):
            keras.optimizers.Optimizer.learning_rate.fset(self, value)
        else:
            self.inner_optimizer.learning_rate = value

    @property
    def iterations(self):
        return self.inner_optimizer.iterations

    def scale_loss(self, loss):
        return self.inner_optimizer.scale_loss(loss)

    def rows_config(self) -> dict:
        """What the rows are stepped with: the rule and its hyperparameters, and the wrapped optimizer's
        options that reach them, by Keras's names."""
        inner = self.inner_optimizer
        rule = self.rule.config() if self.rule is not None else {"rule": f"embedtune {self.rows}"}
        lr = self._learning_rate if self._own_lr else learning_rate_as_given(inner)
        if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
            lr = keras.optimizers.schedules.serialize(lr)
        elif not callable(lr) or isinstance(lr, keras.Variable):
            lr = float(keras.ops.convert_to_numpy(lr))
        else:
            lr = repr(lr)
        taken = {key: getattr(inner, key) for key in ("clipnorm", "clipvalue", "global_clipnorm", "use_ema",
                                                      "ema_momentum", "ema_overwrite_frequency",
                                                      "gradient_accumulation_steps", "loss_scale_factor")}
        decay = self.row_decay if self.row_decay is not None else inner.weight_decay
        return {**rule, "learning_rate": lr, "weight_decay": decay, "decay_to": self.decay_to,
                "clip_norm": self.clip_norm, **taken}

    # --- building ----------------------------------------------------------------------------------------
    @no_automatic_dependency_tracking
    def build(self, var_list):
        var_list = list(var_list)
        self._check_strategy()
        others = []
        for variable in var_list:
            if layer_of(variable) is None:
                others.append(variable)
            else:
                self._build_rows(variable)
        self.inner_optimizer.build(others)
        super().build(var_list)

    def _check_strategy(self) -> None:
        strategy = tf.distribute.get_strategy()
        kind = type(strategy).__name__
        if kind.endswith("V1"):
            kind = kind[:-2]
        if kind not in STRATEGIES:
            raise project.EmbedtuneError(f"LazyRows cannot step rows under {kind}: it sums the replicas' row "
                                         "gradients under MirroredStrategy, MultiWorkerMirroredStrategy and "
                                         "OneDeviceStrategy")
        if strategy.num_replicas_in_sync > 1 and self.inner_optimizer.gradient_accumulation_steps:
            raise project.EmbedtuneError("LazyRows: gradient_accumulation_steps under a strategy with replicas is not "
                                         "supported (Keras's own accumulation calls merge_call inside a cond there, "
                                         "which TensorFlow refuses)")
        if strategy.num_replicas_in_sync > 1 and self.inner_optimizer.global_clipnorm:
            raise project.EmbedtuneError("LazyRows: global_clipnorm under a strategy with replicas is not supported "
                                         "(Keras clips each replica's gradients by that replica's norm; the rows' are "
                                         "summed first): use clipnorm")

    def _build_rows(self, variable) -> None:
        """The rows' state as this optimizer's own variables (saved with it): the rule's slots (or embedtune's
        lazy optimizer's), the average (use_ema), the accumulated gradient and the rows it holds
        (gradient_accumulation_steps)."""
        layer = layer_of(variable)
        layer.stepped_by_lazy_rows()
        inner = self.inner_optimizer
        prefix = variable.path.replace("/", "_")
        shape = tuple(variable.shape)
        state = {"layer": layer}

        def add(name, value, shape=shape, dtype="float32"):
            return self.add_variable(shape=shape, dtype=dtype, name=f"{prefix}_{name}",
                                     initializer=keras.initializers.Constant(value) if not callable(value) else value)

        if self.rule is None:
            start = project.OPTIMIZERS[self.rows].initial_state(shape)
            state["own"] = {key: add(key, _constant(value), value.shape, str(value.dtype))
                            for key, value in start.items()}
        else:
            state["slots"] = {name: add(name, value) for name, value in self.rule.slots}
            state["scalars"] = {name: add(name, value, ()) for name, value in self.rule.scalars}
        if inner.use_ema:
            state["average"] = add("average", 0.0)
        if inner.gradient_accumulation_steps:
            state["accumulated"] = add("gradient_accumulator", 0.0)
            state["held"] = add("held", 0.0, shape[:1])   # 1.0 where an accumulated micro-batch held the row
        self._state[self._var_key(variable)] = state

    @property
    def variables(self):
        return self._variables[:] + self.inner_optimizer.variables

    # --- a step ------------------------------------------------------------------------------------------
    def apply(self, grads, trainable_variables=None):
        if trainable_variables is None:
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
        pairs = list(zip(grads, trainable_variables))
        rows = [(g, v) for g, v in pairs if self._var_key(v) in self._state]
        others = [(g, v) for g, v in pairs if self._var_key(v) not in self._state]
        inner = self.inner_optimizer
        with keras.name_scope(self.name, caller=self):
            # Read before the wrapped optimizer's step moves its step count: the rows step on the same one.
            lr = tf.cast(self.learning_rate, tf.float32)
            count = tf.convert_to_tensor(step_counter(inner))
            steps = inner.gradient_accumulation_steps
            t = tf.cast((count // steps if steps else count) + 1, tf.float32)
            merged = self._merged([(g, v) for g, v in rows if g is not None])
            scale = None
            if inner.global_clipnorm and not steps:
                scale = self._global_scale([values for _, values in merged], [g for g, _ in others if g is not None])
            for (indices, values), (_, variable) in zip(merged, [(g, v) for g, v in rows if g is not None]):
                self._on_replicas(variable, self._update, indices, values, lr, t, count, scale)
            if inner.use_ema:
                for _, variable in rows:
                    self._on_replicas(variable, self._average, count)
            if any(g is not None for g, _ in others):
                self._inner_apply(others, scale)
            else:   # the wrapped optimizer's step count moves with every step, as if it had stepped
                step_counter(inner).assign_add(1)
        self._iterations.assign_add(1)

    def _merged(self, rows):
        """Each rows gradient as (distinct rows, their summed slices), unscaled, over every replica."""
        slices = []
        for grad, variable in rows:
            if not isinstance(grad, tf.IndexedSlices):   # a regulariser's term reaches every row
                grad = tf.IndexedSlices(grad, tf.range(tf.shape(grad)[0]))
            values = tf.cast(grad.values, variable.dtype)
            if self.inner_optimizer.loss_scale_factor is not None:
                values = values / self.inner_optimizer.loss_scale_factor
            slices.append(tf.IndexedSlices(values, grad.indices, grad.dense_shape))
        replica = tf.distribute.get_replica_context()
        if slices and replica is not None and replica.num_replicas_in_sync > 1:
            # every replica then steps the same rows by the same gradient: the whole batch's
            slices = [_all_gathered(replica, grad, variable.shape[0]) for grad, (_, variable) in zip(slices, rows)]
        out = []
        for grad in slices:
            indices, values = project.merge_rows(grad)
            out.append((indices, project.cap_rows(values, self.clip_norm)))
        return out

    def _global_scale(self, rows_values, other_grads):
        """Keras's global_clipnorm factor over the rows' gradients and every other variable's together."""
        factor = self.inner_optimizer.loss_scale_factor
        squares = [tf.reduce_sum(tf.square(v)) for v in rows_values]
        for g in other_grads:
            g = tf.convert_to_tensor(g)
            g = tf.cast(g, tf.float32) / factor if factor is not None else tf.cast(g, tf.float32)
            squares.append(tf.reduce_sum(tf.square(g)))
        norm = tf.sqrt(tf.reduce_sum(tf.stack(squares)))
        clip = self.inner_optimizer.global_clipnorm
        return clip * tf.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)   # keras's clip_by_global_norm

    def _inner_apply(self, others, scale) -> None:
        inner = self.inner_optimizer
        if scale is None:
            inner.apply([g for g, _ in others], [v for _, v in others])
            return
        grads = [g if g is None else g * tf.cast(scale, g.dtype) for g, _ in others]
        clip, inner.global_clipnorm = inner.global_clipnorm, None   # the norm counted the rows: scaled above
        try:
            inner.apply(grads, [v for _, v in others])
        finally:
            inner.global_clipnorm = clip

    def _on_replicas(self, variable, fn, *args) -> None:
        """``fn(variable, local, *args)`` on each replica's copy of ``variable``, as Keras's TensorFlow
        optimizer updates a variable under a strategy; ``local`` gives the tf.Variable that ``fn`` reads and
        writes for a Keras variable (``variable``, its state): that device's copy (lookup.local_copy)."""
        if not tf.distribute.has_strategy() or tf.distribute.in_cross_replica_context():
            fn(variable, local_copy, *args)
            return

        def merged(distribution, *values):
            def on_device(copy, *a):
                fn(variable, lambda v: local_copy(v, copy.device), *a)

            distribution.extended.update(variable.value, on_device, args=values, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(merged, tf.distribute.get_strategy(), *args)

    def _update(self, variable, local, indices, values, lr, t, count, scale) -> None:
        state = self._state[self._var_key(variable)]
        steps = self.inner_optimizer.gradient_accumulation_steps
        if not steps:
            self._step(variable, local, state, indices, values, lr, t, scale)
            return
        accumulated, held = local(state["accumulated"]), local(state["held"])
        accumulated.scatter_add(tf.IndexedSlices(values, indices))
        held.scatter_update(tf.IndexedSlices(tf.ones_like(indices, tf.float32), indices))

        def step():
            at = tf.cast(tf.reshape(tf.where(tf.convert_to_tensor(held) > 0), [-1]), indices.dtype)
            self._step(variable, local, state, at, tf.gather(accumulated, at) / steps, lr, t, scale)
            accumulated.scatter_update(tf.IndexedSlices(tf.zeros_like(tf.gather(accumulated, at)), at))
            held.scatter_update(tf.IndexedSlices(tf.zeros_like(at, tf.float32), at))
            return tf.constant(True)

        tf.cond((count + 1) % steps == 0, step, lambda: tf.constant(False))

    def _step(self, variable, local, state, indices, g, lr, t, scale) -> None:
        """One step of the rows ``indices`` of ``variable`` by their gradient ``g``: clip, decay, rule, constraint."""
        inner = self.inner_optimizer
        if inner.clipnorm:
            g = tf.clip_by_norm(g, inner.clipnorm)   # the rows' whole gradient: its other rows are zeros
        elif scale is not None:
            g = g * scale
        elif inner.clipvalue:
            g = tf.clip_by_value(g, -inner.clipvalue, inner.clipvalue)
        table = local(variable)
        w = tf.gather(table, indices)
        decay = self.row_decay if self.row_decay is not None else (
            inner.weight_decay if decays_variable(inner, variable) else None)
        if decay:
            w = self._decayed(w, state["layer"], indices, lr, decay)
        if self.rule is None:
            if decay:
                table.scatter_update(tf.IndexedSlices(w, indices))
            own = {key: local(v) for key, v in state["own"].items()}
            project.make_optimizer(self.rows, table, state=own).apply(indices, g, lr)
        else:
            slots = {name: tf.gather(local(v), indices) for name, v in state["slots"].items()}
            scalars = {name: tf.convert_to_tensor(local(v)) for name, v in state["scalars"].items()}
            w, slots = self.rule.step(w, slots, g, lr, t, scalars)
            for name, value in slots.items():
                local(state["slots"][name]).scatter_update(tf.IndexedSlices(value, indices))
            for name, value in scalars.items():
                local(state["scalars"][name]).assign(value)
            table.scatter_update(tf.IndexedSlices(w, indices))
        if variable.constraint is not None:   # on the rows just stepped (a row-wise constraint)
            table.scatter_update(tf.IndexedSlices(variable.constraint(tf.gather(table, indices)), indices))

    def _decayed(self, w, layer, indices, lr, decay):
        """Decoupled decay of the rows a step holds, before their update (as Keras orders it): Keras's
        ``w - w * wd * lr``; embedtune's own rows (``rows=``) and ``decay_to="start"`` as before."""
        if self.decay_to == "start":
            start = tf.gather(layer.table.value, tf.gather(layer.row_ids.value, indices))
            return w - (w - start) * (lr * decay)
        if self.rule is None:
            return w - w * (lr * decay)
        return w - w * tf.cast(decay, w.dtype) * lr

    def _average(self, variable, local, count) -> None:
        """Keras's moving average (use_ema) of the whole rows variable, every step (T x d, not V x d). Written
        ``a + (1 - m) * (w - a)``: a row that has not moved keeps its bits (Keras's ``m * a + (1 - m) * w``
        can be one ulp off it)."""
        inner = self.inner_optimizer
        average, rows = local(self._state[self._var_key(variable)]["average"]), local(variable)
        steps = inner.gradient_accumulation_steps
        iterations = count // steps if steps else count
        momentum = tf.cast(tf.not_equal(iterations, 0), tf.float32) * inner.ema_momentum
        average.assign(average + (1 - momentum) * (rows - average))
        if inner.ema_overwrite_frequency:
            tf.cond((iterations + 1) % inner.ema_overwrite_frequency == 0,
                    lambda: tf.group(rows.assign(average)), lambda: tf.group())

    def finalize_variable_values(self, var_list):
        var_list = list(var_list)
        if self.inner_optimizer.use_ema:
            for variable in var_list:
                state = self._state.get(self._var_key(variable))
                if state is not None:
                    variable.assign(state["average"])
        self.inner_optimizer.finalize_variable_values([v for v in var_list if self._var_key(v) not in self._state])

    # --- saving ------------------------------------------------------------------------------------------
    def get_config(self):
        lr = None
        if self._own_lr:
            lr = self._learning_rate
            if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
                lr = keras.optimizers.schedules.serialize(lr)
            else:
                lr = float(keras.ops.convert_to_numpy(lr))
            if self.rows is not None and lr == project.DEFAULT_LR[self.rows]:
                lr = None
        return {"name": self.name, "optimizer": keras.optimizers.serialize(self.inner_optimizer), "rows": self.rows,
                "learning_rate": lr, "clip_norm": self.clip_norm, "weight_decay": self.row_decay,
                "decay_to": self.decay_to, "rows_take": self.rows_config()}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config.pop("rows_take", None)   # derived from the optimizer: for reading only
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = keras.optimizers.schedules.deserialize(config["learning_rate"])
        config["optimizer"] = keras.optimizers.deserialize(config["optimizer"], custom_objects=custom_objects)
        return cls(**config)


def _all_gathered(replica, grad: tf.IndexedSlices, n_rows: int) -> tf.IndexedSlices:
    """Every replica's slices of ``grad``, in replica order: what ``all_reduce(SUM)`` of IndexedSlices
    gives, in one all-gather. all_reduce gathers the indices and the values apart, each after a gather of
    its lengths and a branch on them; here the indices ride as one more column of the values (a float32
    holds an integer below 2**24 exactly), so one gather of the lengths and one of the data serve."""
    if grad.values.dtype != tf.float32 or n_rows >= 2 ** 24:
        return replica.all_reduce(tf.distribute.ReduceOp.SUM, grad)
    packed = tf.concat([grad.values, tf.cast(grad.indices, tf.float32)[:, None]], axis=1)
    every = replica.all_gather(packed, axis=0)
    return tf.IndexedSlices(every[:, :-1], tf.cast(every[:, -1], grad.indices.dtype), grad.dense_shape)


def _constant(value):
    def initializer(shape, dtype=None):
        return tf.constant(value, dtype=dtype)

    return initializer
