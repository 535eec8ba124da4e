"""Keras's attribute tracking, used where Keras has no public way to leave an attribute untracked.

A Keras layer or optimizer tracks what its attributes hold (a dict becomes a TrackedDict and every
variable put in it is collected, and saved, as the object's own); LazyRows keeps its own per-rows state
in a dict whose variables it adds itself, and its ``build`` assigns state Keras must not collect twice."""

from __future__ import annotations

from keras.src.utils.tracking import DotNotTrackScope, no_automatic_dependency_tracking

__all__ = ["DotNotTrackScope", "decays_variable", "learning_rate_as_given", "no_automatic_dependency_tracking",
           "step_counter"]


def learning_rate_as_given(optimizer):
    """The learning rate ``optimizer`` was given (a float variable, a LearningRateSchedule or a callable),
    not its value now: what LazyRows' get_config shows the rows taking. Keras keeps it as ``_learning_rate``;
    its public ``learning_rate`` evaluates a schedule."""
    return optimizer._learning_rate


def step_counter(optimizer):
    """The variable counting ``optimizer``'s every call of apply (micro-batches included): its public
    ``iterations`` is that count divided by ``gradient_accumulation_steps`` when it accumulates."""
    return optimizer._iterations


def decays_variable(optimizer, variable) -> bool:
    """Whether ``optimizer``'s weight decay applies to ``variable`` (its ``exclude_from_weight_decay``
    names and variables honoured), by Keras's own rule, which it keeps private."""
    return optimizer._use_weight_decay(variable)
