"""A Ray cluster of two nodes on this machine for a test, stopped by pid when it ends."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from benchmarks.local_cluster import LocalCluster, local_ray_cluster, shared_token_env


@pytest.fixture
def ray_cluster() -> Iterator[LocalCluster]:
    """Two Ray nodes of 4 CPUs each (node 0 the head, whose ``address`` the flow joins).

    The nodes and this process share one auth token, set for the rest of the process as
    ``models.workers.cluster.ray_module`` sets its own: Ray keeps the auth it read when it was
    first imported, so a later test's private Ray started without the token (taken back after
    this test) had its GCS server refuse to start ("Token authentication is enabled but Ray
    couldn't find an authentication token")."""
    for key, value in shared_token_env().items():
        os.environ.setdefault(key, value)
    with local_ray_cluster(nodes=2, cpus_per_node=4) as cluster:
        yield cluster
