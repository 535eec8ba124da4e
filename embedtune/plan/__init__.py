"""What a run will do, decided before any training and without TensorFlow.

- ``rules``: word lists, patterns and the freeze rules -> a ``Plan`` of frozen / trainable / new rows.
- ``rows``: a counted corpus -> its new words and their ``Plan`` (the checks train and the dry run share).
- ``run``: ``RunPlan``, a whole run decided but not started (the corpus counted, the rows planned).
- ``dry_run``: the dry run's account of a ``RunPlan``: the settings as resolved and the memory estimate.
"""
