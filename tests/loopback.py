"""A parameter-server cluster on this machine's free ports, for tests/test_ps.py and
benchmarks/ps_speed.py (the library only reads TF_CONFIG; it never makes a cluster up)."""

from __future__ import annotations

from embedtune.distribute.launch import free_ports


def loopback_cluster(ps: int, workers: int) -> dict:
    """TF_CONFIG's "cluster" of one chief, ``ps`` parameter servers and ``workers`` workers, all on localhost."""
    hosts = [f"localhost:{port}" for port in free_ports(1 + ps + workers)]
    return {"chief": hosts[:1], "ps": hosts[1:1 + ps], "worker": hosts[1 + ps:]}
