"""Ray for slowwave: a private local instance by default, or a cluster by address.

A local Ray gets its own temp dir under the slowwave home, no dashboard, no usage stats, a
token generated for this process (Ray 2.60 turns token auth on and would otherwise write one
under the user's home), and is shut down by whoever started it. Joining a cluster
(``SLOWWAVE_RAY_ADDRESS``) never stops it. ``ray stop`` would kill every Ray process on the
machine, so nothing here calls it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from slowwave.models.llm.vllm_engine import SOCKET_NAME_LEN
from slowwave.models.processes import socket_folder
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


def worker_env(settings: Settings, sockets: Path) -> dict[str, str]:
    """Environment every Ray worker needs: offline models, files kept under the home, a vLLM
    engine's sockets in ``sockets`` (``socket_folder``: under the home where they fit)."""
    home = settings.home
    env = {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "SLOWWAVE_HOME": str(home),
        "VLLM_CACHE_ROOT": str(home / "cache" / "vllm"),
        "VLLM_RPC_BASE_PATH": str(sockets),
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
    for key in ("VLLM_CACHE_ROOT", "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


_users = 0
_started_here = False
# the short folders a Ray started here holds (``socket_folder``), removed when it shuts down
_folders = contextlib.ExitStack()
# Ray puts unix sockets some 66 bytes deep in its temp dir
RAY_SOCKET_DEPTH = 66

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
            _folders.close()


def _start(settings: Settings) -> bool:
    """Initialise Ray; True when a local instance was started (and must be shut down). Its
    temp dir (``home/ray``) and its workers' vLLM sockets (``home/run/vllm``) move to short
    private folders where a deep home would put a unix socket past 107 bytes."""
    ray = ray_module()
    sockets = _folders.enter_context(socket_folder(settings.home / "run" / "vllm", SOCKET_NAME_LEN))
    options: dict[str, Any] = {
        "runtime_env": {"env_vars": worker_env(settings, sockets)},
        "log_to_driver": False,
        "logging_level": "WARNING",
    }
    try:
        if settings.ray.address:
            ray.init(address=settings.ray.address, **options)
            return True  # disconnect when done; the cluster itself keeps running
        temp = _folders.enter_context(socket_folder(settings.home / "ray", RAY_SOCKET_DEPTH))
        ray.init(
            include_dashboard=False,
            _temp_dir=str(temp),
            num_cpus=settings.ray.num_cpus,
            **options,
        )
    except BaseException:
        _folders.close()
        raise
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
