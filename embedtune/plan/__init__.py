"""What a run will do, decided before any training and without TensorFlow.

- ``rules``: word lists, patterns and the freeze rules -> a ``Plan`` of frozen / trainable / new rows.
- ``run``: ``RunPlan``, a whole run decided but not started (the corpus counted, the rows planned).
"""
