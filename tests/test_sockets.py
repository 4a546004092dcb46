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

from slowwave.models.llm.vllm_engine import VLLMOptions
from slowwave.models.llm.vllm_server import SOCKET_NAME_LEN, server_env
from slowwave.models.processes import SOCKET_PATH_MAX, socket_folder


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
