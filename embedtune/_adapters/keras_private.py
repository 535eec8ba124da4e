"""Keras's attribute tracking, used where Keras has no public way to leave an attribute untracked.

A Keras layer or optimizer tracks what its attributes hold (a dict becomes a TrackedDict and every
variable put in it is collected, and saved, as the object's own); LazyRows keeps its own per-rows state
in a dict whose variables it adds itself, and its ``build`` assigns state Keras must not collect twice."""

from __future__ import annotations

from keras.src.utils.tracking import DotNotTrackScope, no_automatic_dependency_tracking

__all__ = ["DotNotTrackScope", "no_automatic_dependency_tracking"]
