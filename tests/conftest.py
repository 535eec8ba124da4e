"""pytest's settings for the whole suite."""


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): one test process per core, at most 4. Many tests start TensorFlow in
    processes of their own (a worker each under --workers 2), so more would only trade memory for turns."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 4))
