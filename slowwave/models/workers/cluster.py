"""Ray for slowwave: a private local instance by default, or a cluster by address.

A local Ray gets its own temp dir under the slowwave home, no dashboard, no usage stats, a
token generated for this process (Ray 2.60 turns token auth on and would otherwise write one
under the user's home), and is shut down by whoever started it. Joining a cluster
(``SLOWWAVE_RAY_ADDRESS``) never stops it. ``ray stop`` would kill every Ray process on the
machine, so nothing here calls it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from slowwave.models.settings import Settings


def ray_module(settings: Settings | None = None) -> Any:
    """Ray, imported as slowwave needs it. Ray reads its auth and telemetry options when it is
    first imported, so the first import decides: joining a cluster (``settings.ray.address``,
    from the environment or ``.env`` alike) leaves auth to the cluster; a private local Ray
    gets a token of this process's own, and nothing is written under ~/.ray."""
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
        if settings is None or not settings.ray.address:
            os.environ.setdefault("RAY_AUTH_MODE", "token")
            os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    import ray

    return ray


def worker_env(settings: Settings) -> dict[str, str]:
    """Environment every Ray worker needs: offline models, files kept under the home."""
    home = settings.home
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "SLOWWAVE_HOME": str(home),
        "VLLM_CACHE_ROOT": str(home / "cache" / "vllm"),
        "VLLM_RPC_BASE_PATH": str(home / "run" / "vllm"),
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(settings.llm.kv_cache_gb),
        "TMPDIR": str(home / "tmp"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    if not settings.ray.address:
        env["VLLM_HOST_IP"] = "127.0.0.1"
    for key in ("PREFECT_API_URL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES"):
        if key in os.environ:
            env[key] = os.environ[key]
    for key in ("VLLM_CACHE_ROOT", "VLLM_RPC_BASE_PATH", "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


_users = 0
_started_here = False
_private_temp: Path | None = None
# Ray puts unix sockets ~65 characters deep in its temp dir; AF_UNIX paths end at 107
_MAX_TEMP_LEN = 40


def _temp_dir(settings: Settings) -> Path:
    """``home/ray``, or a private short folder (removed at shutdown) when that is too long."""
    global _private_temp
    preferred = settings.home / "ray"
    if len(str(preferred)) <= _MAX_TEMP_LEN:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    _private_temp = Path(tempfile.mkdtemp(prefix="slowwave-ray-"))
    return _private_temp


_lock = threading.Lock()


def acquire_ray(settings: Settings) -> None:
    """One more user of Ray in this process; Ray is started for the first one if need be."""
    global _users, _started_here
    with _lock:
        if _users == 0 and not ray_module(settings).is_initialized():
            _started_here = _start(settings)
        _users += 1


def release_ray() -> None:
    """One user fewer; the last one shuts down a Ray that this process started."""
    global _users, _started_here
    with _lock:
        _users = max(_users - 1, 0)
        if _users == 0 and _started_here:
            ray_module().shutdown()
            _started_here = False
            global _private_temp
            if _private_temp is not None:
                shutil.rmtree(_private_temp, ignore_errors=True)
                _private_temp = None


def _start(settings: Settings) -> bool:
    """Initialise Ray; True when a local instance was started (and must be shut down)."""
    ray = ray_module()
    options: dict[str, Any] = {
        "runtime_env": {"env_vars": worker_env(settings)},
        "log_to_driver": False,
        "logging_level": "WARNING",
    }
    if settings.ray.address:
        ray.init(address=settings.ray.address, **options)
        return True  # disconnect when done; the cluster itself keeps running
    temp = _temp_dir(settings)
    ray.init(
        include_dashboard=False,
        _temp_dir=str(temp),
        num_cpus=settings.ray.num_cpus,
        **options,
    )
    return True


def cluster_shape() -> tuple[int, int]:
    """(alive nodes, GPUs in the cluster)."""
    ray = ray_module()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    gpus = int(ray.cluster_resources().get("GPU", 0))
    return max(len(nodes), 1), gpus


def current_node() -> str:
    """Where this code runs: the Ray node's id when this process is part of a Ray cluster (a
    driver that joined one, or one of its workers), else the host's name."""
    if "ray" in sys.modules and ray_module().is_initialized():
        return str(ray_module().get_runtime_context().get_node_id())
    return socket.gethostname()


def node_addresses() -> list[str]:
    """The addresses of the cluster's alive nodes (Ray must be initialised)."""
    return [str(n["NodeManagerAddress"]) for n in ray_module().nodes() if n.get("Alive")]
