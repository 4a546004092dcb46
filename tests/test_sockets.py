"""A server started for a home deep in the file system still binds its unix sockets. An
AF_UNIX path ends at 107 bytes, and vLLM names each socket of its engine by a uuid4 under
``VLLM_RPC_BASE_PATH``: under a home of some 70 characters or more it failed to start
("ipc path ... is longer than 107 characters")."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from slowwave.models.llm.vllm_engine import SOCKET_NAME_LEN, VLLMOptions
from slowwave.models.llm.vllm_server import server_env
from slowwave.models.processes import SOCKET_PATH_MAX, socket_folder
from slowwave.models.settings import Settings
from slowwave.models.workers.cluster import acquire_ray, ray_module, release_ray


def _binds(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
    path.unlink()


def test_a_vllm_server_under_a_deep_home_binds_its_sockets_in_a_short_folder_removed_after(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / ("deep" * 20) / "run" / "vllm-server"
    with socket_folder(workdir, SOCKET_NAME_LEN) as sockets:
        env = server_env(VLLMOptions(model="m"), workdir, sockets)
        where = Path(env["VLLM_RPC_BASE_PATH"]) / str(uuid.uuid4())
        assert len(os.fsencode(where)) <= SOCKET_PATH_MAX
        _binds(where)
        assert env["VLLM_CACHE_ROOT"] == str(workdir / "cache")  # the caches stay in the home
    assert not sockets.exists()
    assert workdir.is_dir()


def test_a_home_whose_socket_paths_fit_keeps_its_sockets(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="sw-", dir="/tmp"))
    try:
        with socket_folder(short, SOCKET_NAME_LEN) as sockets:
            assert sockets == short
            _binds(sockets / str(uuid.uuid4()))
        assert short.is_dir()  # the home's own folder is not removed
    finally:
        short.rmdir()


@pytest.mark.slow
def test_a_local_ray_under_a_deep_home_gives_its_workers_short_socket_folders_removed_at_shutdown(
    tmp_path: Path,
) -> None:
    """Ray's own sockets and a Ray worker's vLLM engine sockets under a home of 80-odd
    characters: each folder is short enough to bind in, on the worker, and gone after."""
    home = tmp_path / ("deep" * 20)
    settings = Settings(home=home, database_url=None, _env_file=None)
    ray = ray_module(settings)
    if ray.is_initialized():
        pytest.skip("this process already has a Ray of another test")

    @ray.remote(num_cpus=0)
    def bind_a_vllm_socket() -> str:
        folder = Path(os.environ["VLLM_RPC_BASE_PATH"])
        _binds(folder / str(uuid.uuid4()))
        return str(folder)

    acquire_ray(settings)
    try:
        sockets = Path(ray.get(bind_a_vllm_socket.remote(), timeout=120))
        temp = Path(ray.get_runtime_context().get_temp_dir())
    finally:
        release_ray()
    assert len(os.fsencode(sockets)) + 1 + SOCKET_NAME_LEN <= SOCKET_PATH_MAX
    assert not str(sockets).startswith(str(home))
    assert not sockets.exists() and not temp.exists()
    assert not (home / "run" / "vllm").exists() and not (home / "ray").exists()
