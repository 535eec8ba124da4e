"""Which rows a run's output has and which of them train, decided before any training and without TensorFlow
(the dry run built on it: embedtune/dryrun/).

- ``rules``: word lists, patterns and the freeze rules -> a ``Plan`` of frozen / trainable / new rows.
- ``patterns``: a --freeze-pattern or --train-pattern matched over the words, bounded in time (SIGALRM).
- ``choose``: which words get a row: a ``--new-words`` file's, corpus words seen ``--min-count`` times.
- ``rows``: a counted corpus -> its new words and their ``Plan`` (the checks train and the dry run share).
"""
