"""A Ray cluster of several nodes on this machine: ``ray start --head`` and ``ray start
--address`` for each further node, every node's processes stopped by pid at the end. Used by
the cluster test and the orchestration benchmark; the caller's environment must carry the
Ray auth token the nodes and the driver share (``shared_token_env``)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slowwave.models.processes import free_port, start_in_own_group, stop_process_tree


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


@contextmanager
def local_ray_cluster(
    nodes: int = 2, cpus_per_node: int = 4, startup_timeout_s: float = 120
) -> Iterator[str]:
    """Start the nodes, yield the head's address; stop them all by pid when done."""
    temp = Path(tempfile.mkdtemp(prefix="sw-ray-"))  # short: Ray's sockets live under it
    env = dict(os.environ)
    port = free_port()
    address = f"127.0.0.1:{port}"
    ray = str(Path(sys.executable).with_name("ray"))
    common = ["--block", "--num-cpus", str(cpus_per_node), "--node-ip-address", "127.0.0.1"]
    common += ["--object-store-memory", str(100 * 2**20), "--disable-usage-stats"]
    head = ["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", str(temp)]
    started = []
    try:
        deadline = time.monotonic() + startup_timeout_s
        for n in range(nodes):
            args = head if n == 0 else ["--address", address]
            log = temp / f"node{n}.log"
            started.append(start_in_own_group([ray, "start", *args, *common], env, log))
            while len(alive_nodes(address)) < n + 1:
                if time.monotonic() > deadline or started[-1].poll() is not None:
                    raise RuntimeError(f"Ray node {n} did not start:\n{log.read_text()[-3000:]}")
                time.sleep(1)
        yield address
    finally:
        survivors = []
        for process in reversed(started):
            survivors += stop_process_tree(process)
        shutil.rmtree(temp, ignore_errors=True)
        if survivors:
            raise RuntimeError(f"Ray processes still running after the cluster: {survivors}")
