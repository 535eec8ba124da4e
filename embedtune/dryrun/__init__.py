"""The dry run: what a training run will do and take, decided without TensorFlow and without training.

- ``runplan``: ``RunPlan``, a whole run decided but not started (the corpus counted, the rows planned, how
  the new words will start).
- ``estimate``: the dry run's account of a ``RunPlan``: the settings as resolved and the memory estimate.

It sits above the training package (it asks the step where it runs and the checkpoints' folder whether a
resume can start) and below ``embedtune.run``, which calls it for ``--dry-run``.
"""
