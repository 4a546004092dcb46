"""A Ray cluster of several nodes on this machine: ``ray start --head`` and ``ray start
--address`` for each further node, every node's processes stopped by pid at the end. Used by
the cluster test and the orchestration benchmark; the caller's environment must carry the
Ray auth token the nodes and the driver share (``shared_token_env``)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slowwave.models.processes import (
    free_port,
    start_in_own_group,
    stop_pid_tree,
    stop_process_tree,
)


def shared_token_env() -> dict[str, str]:
    """The variables that make the nodes and every driver share one auth token (Ray reads them
    when it is first imported: a token this process already uses is kept)."""
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def alive_nodes(address: str) -> list[str]:
    """The ids of the cluster's alive nodes, as a fresh driver sees them (in a child process:
    this process's Ray, if any, is left alone)."""
    probe = (
        f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
        "log_to_driver=False); "
        "print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive'])); ray.shutdown()"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    lines = done.stdout.strip().splitlines()
    return lines[-1].split() if done.returncode == 0 and lines else []


class LocalCluster:
    """Ray nodes on this machine, each a ``ray start --block`` process group: node 0 the head
    (``address``), the others joined to it. A node can be stopped (as a lost machine: SIGKILL
    to its processes, or SIGTERM) and another started in its place."""

    def __init__(self, cpus_per_node: int, startup_timeout_s: float) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="sw-ray-"))  # short: Ray's sockets live under it
        self.address = f"127.0.0.1:{free_port()}"
        self.cpus_per_node = cpus_per_node
        self.startup_timeout_s = startup_timeout_s
        self.nodes: list[subprocess.Popen[bytes]] = []

    def start_node(self) -> int:
        """Start one more node (the head first) and wait until the cluster counts it; its
        index."""
        n = len(self.nodes)
        ray = str(Path(sys.executable).with_name("ray"))
        common = ["--block", "--num-cpus", str(self.cpus_per_node)]
        common += ["--node-ip-address", "127.0.0.1", "--object-store-memory", str(100 * 2**20)]
        common += ["--disable-usage-stats"]
        port = self.address.rsplit(":", 1)[1]
        head = ["--head", "--port", port, "--include-dashboard=false", "--temp-dir", str(self.temp)]
        args = head if n == 0 else ["--address", self.address]
        log = self.temp / f"node{n}.log"
        self.nodes.append(start_in_own_group([ray, "start", *args, *common], dict(os.environ), log))
        alive = sum(process.poll() is None for process in self.nodes)
        deadline = time.monotonic() + self.startup_timeout_s
        while len(alive_nodes(self.address)) < alive:
            if time.monotonic() > deadline or self.nodes[-1].poll() is not None:
                raise RuntimeError(f"Ray node {n} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        return n

    def kill_node(self, n: int) -> None:
        """Node ``n`` lost as a machine is: every process of it killed at once (SIGKILL)."""
        stop_pid_tree(self.nodes[n].pid, timeout_s=0, first=signal.SIGKILL)
        self.nodes[n].wait(timeout=10)

    def stop(self) -> list[int]:
        """Every node stopped, the last started first; the pids that survived (none)."""
        survivors = []
        for process in reversed(self.nodes):
            if process.poll() is None:
                survivors += stop_process_tree(process, timeout_s=10)
        shutil.rmtree(self.temp, ignore_errors=True)
        return survivors


@contextmanager
def local_ray_cluster(
    nodes: int = 2, cpus_per_node: int = 4, startup_timeout_s: float = 120
) -> Iterator[LocalCluster]:
    """Start the nodes, yield the cluster; stop them all by pid when done."""
    cluster = LocalCluster(cpus_per_node, startup_timeout_s)
    try:
        for _ in range(nodes):
            cluster.start_node()
        yield cluster
    finally:
        survivors = cluster.stop()
        if survivors:
            raise RuntimeError(f"Ray processes still running after the cluster: {survivors}")
