"""Keras 3's optimizers' update rules, written per row: what ``update_step`` (keras/src/optimizers/*.py)
computes for a variable, computed for the rows a batch holds only.

A rule takes the gathered rows ``w`` [u, dim], their state rows (one array a slot, same shape), their
merged gradient ``g``, the learning rate and the step count ``t`` (Keras's ``iterations + 1``), and
returns the new rows and state rows; LazyRows gathers and scatters. The operations are Keras's, in
Keras's order, so that a table whose every row is in every batch steps as Keras's optimizer steps it
(tests/test_keras_optimizers.py). A rows no batch holds is neither read nor written: its state does not
decay either (the lazy form: TensorFlow 1's sparse updates did the same).

Rules exist for the optimizers whose update of a row reads only that row, its own state and the step
count. Ftrl, Lamb (a trust ratio over the whole variable), Adafactor (factored moments over rows and
columns), Muon (an orthogonalisation of the whole matrix) and ScheduleFreeAdamW (every row moves toward
an average each step) have none.
"""

from __future__ import annotations

import keras

from embedtune._tf import tf


def _cast(x):
    return tf.cast(x, tf.float32)


class Rule:
    """One Keras optimizer class's update, per row. ``slots``: the state's names and initial value;
    ``scalars``: state shared by all rows (Nadam's product of momentum coefficients)."""

    keras_class = None
    slots: tuple[tuple[str, float], ...] = ()
    scalars: tuple[tuple[str, float], ...] = ()
    options: tuple[str, ...] = ()

    def __init__(self, optimizer):
        self.values = {name: getattr(optimizer, name) for name in self.options}
        for name, value in self.values.items():
            setattr(self, name, value)

    def config(self) -> dict:
        """The hyperparameters taken from the wrapped optimizer, by Keras's names."""
        return {"rule": self.keras_class.__name__, **self.values}

    def slot_names(self) -> list[str]:
        return [name for name, _ in self.slots]

    def step(self, w, state: dict, g, lr, t, scalars: dict):
        """(new rows, new state rows by slot); a shared scalar's new value is set in ``scalars``."""
        raise NotImplementedError


class SGD(Rule):
    keras_class = keras.optimizers.SGD
    options = ("momentum", "nesterov")

    def __init__(self, optimizer):
        super().__init__(optimizer)
        self.slots = (("momentum", 0.0),) if self.momentum != 0 else ()

    def step(self, w, state, g, lr, t, scalars):
        if self.momentum == 0:
            return w - g * lr, {}
        momentum = _cast(self.momentum)
        m = state["momentum"] * momentum - g * lr
        w = w + (m * momentum - g * lr) if self.nesterov else w + m
        return w, {"momentum": m}


class Adagrad(Rule):
    keras_class = keras.optimizers.Adagrad
    options = ("initial_accumulator_value", "epsilon")

    def __init__(self, optimizer):
        super().__init__(optimizer)
        self.slots = (("accumulator", self.initial_accumulator_value),)

    def step(self, w, state, g, lr, t, scalars):
        accumulator = state["accumulator"] + tf.square(g)
        return w - (lr * g) / tf.sqrt(accumulator + self.epsilon), {"accumulator": accumulator}


class Adam(Rule):
    keras_class = keras.optimizers.Adam
    options = ("beta_1", "beta_2", "epsilon", "amsgrad")

    def __init__(self, optimizer):
        super().__init__(optimizer)
        self.slots = (("momentum", 0.0), ("velocity", 0.0)) + ((("velocity_hat", 0.0),) if self.amsgrad else ())

    def step(self, w, state, g, lr, t, scalars):
        beta_1_power = tf.pow(_cast(self.beta_1), t)
        beta_2_power = tf.pow(_cast(self.beta_2), t)
        alpha = lr * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        m = state["momentum"] + (g - state["momentum"]) * (1 - self.beta_1)
        v = state["velocity"] + (tf.square(g) - state["velocity"]) * (1 - self.beta_2)
        out = {"momentum": m, "velocity": v}
        if self.amsgrad:
            v = out["velocity_hat"] = tf.maximum(state["velocity_hat"], v)
        return w - (m * alpha) / (tf.sqrt(v) + self.epsilon), out


class AdamW(Adam):
    keras_class = keras.optimizers.AdamW   # Adam's update; its default weight_decay is the base class's decay


class RMSprop(Rule):
    keras_class = keras.optimizers.RMSprop
    options = ("rho", "momentum", "epsilon", "centered")

    def __init__(self, optimizer):
        super().__init__(optimizer)
        self.slots = ((("velocity", 0.0),) + ((("momentum", 0.0),) if self.momentum > 0 else ())
                      + ((("average_gradient", 0.0),) if self.centered else ()))

    def step(self, w, state, g, lr, t, scalars):
        rho = self.rho
        velocity = rho * state["velocity"] + (1 - rho) * tf.square(g)
        out = {"velocity": velocity}
        if self.centered:
            average = out["average_gradient"] = rho * state["average_gradient"] + (1 - rho) * g
            denominator = velocity - tf.square(average) + self.epsilon
        else:
            denominator = velocity + self.epsilon
        increment = (lr * g) / tf.sqrt(denominator)
        if self.momentum > 0:
            momentum = out["momentum"] = self.momentum * state["momentum"] + increment
            return w - momentum, out
        return w - increment, out


class Adamax(Rule):
    keras_class = keras.optimizers.Adamax
    options = ("beta_1", "beta_2", "epsilon")
    slots = (("momentum", 0.0), ("norm", 0.0))

    def step(self, w, state, g, lr, t, scalars):
        beta_1_power = tf.pow(_cast(self.beta_1), t)
        m = state["momentum"] + (g - state["momentum"]) * (1 - self.beta_1)
        u = tf.maximum(self.beta_2 * state["norm"], tf.abs(g))
        return w - (lr * m) / ((1 - beta_1_power) * (u + self.epsilon)), {"momentum": m, "norm": u}


class Nadam(Rule):
    keras_class = keras.optimizers.Nadam
    options = ("beta_1", "beta_2", "epsilon")
    slots = (("momentum", 0.0), ("velocity", 0.0))
    scalars = (("u_product", 1.0),)

    def step(self, w, state, g, lr, t, scalars):
        decay, beta_1, beta_2 = _cast(0.96), _cast(self.beta_1), _cast(self.beta_2)
        # Keras's _backend_update_step advances the product once a step, before every variable's update
        u_product_t = scalars["u_product"] * self.beta_1 * (1.0 - 0.5 * tf.pow(decay, t))
        u_t = beta_1 * (1.0 - 0.5 * tf.pow(decay, t))
        u_t_1 = beta_1 * (1.0 - 0.5 * tf.pow(decay, t + 1))
        u_product_t_1 = u_product_t * u_t_1
        beta_2_power = tf.pow(beta_2, t)
        m = state["momentum"] + (g - state["momentum"]) * (1 - beta_1)
        v = state["velocity"] + (tf.square(g) - state["velocity"]) * (1 - beta_2)
        m_hat = (u_t_1 * m) / (1 - u_product_t_1) + ((1 - u_t) * g) / (1 - u_product_t)
        v_hat = v / (1 - beta_2_power)
        scalars["u_product"] = u_product_t
        return w - (m_hat * lr) / (tf.sqrt(v_hat) + self.epsilon), {"momentum": m, "velocity": v}


class Lion(Rule):
    keras_class = keras.optimizers.Lion
    options = ("beta_1", "beta_2")
    slots = (("momentum", 0.0),)

    def step(self, w, state, g, lr, t, scalars):
        beta_1, beta_2 = _cast(self.beta_1), _cast(self.beta_2)
        m = state["momentum"]
        w = w - lr * tf.sign(m * beta_1 + g * (1.0 - beta_1))
        return w, {"momentum": m * beta_2 + g * (1.0 - beta_2)}


class Adadelta(Rule):
    keras_class = keras.optimizers.Adadelta
    options = ("rho", "epsilon")
    slots = (("accumulated_grad", 0.0), ("accumulated_delta_var", 0.0))

    def step(self, w, state, g, lr, t, scalars):
        rho = self.rho

        def rms(x):
            return tf.sqrt(x + self.epsilon)

        accumulated_grad = rho * state["accumulated_grad"] + (1 - rho) * tf.square(g)
        delta = -((rms(state["accumulated_delta_var"]) * g) / rms(accumulated_grad))
        accumulated_delta = rho * state["accumulated_delta_var"] + (1 - rho) * tf.square(delta)
        return w + lr * delta, {"accumulated_grad": accumulated_grad, "accumulated_delta_var": accumulated_delta}


RULES = {rule.keras_class: rule for rule in (SGD, Adagrad, Adam, AdamW, RMSprop, Adamax, Nadam, Lion, Adadelta)}


def rule_for(optimizer) -> Rule | None:
    """The rule of ``optimizer``'s exact class (a subclass may change update_step: it has none), or None."""
    rule = RULES.get(type(optimizer))
    return rule(optimizer) if rule is not None else None


def lazy_names() -> str:
    return ", ".join(cls.__name__ for cls in RULES)
