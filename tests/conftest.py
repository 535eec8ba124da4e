"""pytest's settings for the whole suite."""


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): one test process per core, at most 4. Many tests start TensorFlow in
    processes of their own (a worker each under --workers 2), so more would only trade memory for turns."""
    from embedtune.cores import local_cores   # no TensorFlow: the cores this process may use

    return max(1, min(local_cores(), 4))
