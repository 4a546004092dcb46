"""A Ray cluster of two nodes on this machine for a test, stopped by pid when it ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.local_cluster import LocalCluster, local_ray_cluster, shared_token_env


@pytest.fixture
def ray_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    """Two Ray nodes of 4 CPUs each (node 0 the head, whose ``address`` the flow joins)."""
    for key, value in shared_token_env().items():
        monkeypatch.setenv(key, value)
    with local_ray_cluster(nodes=2, cpus_per_node=4) as cluster:
        yield cluster
