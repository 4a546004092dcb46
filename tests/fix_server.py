"""`slowwave serve` as a real process on 127.0.0.1, stopped (and checked gone) by the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.fix_processes import run_cli, slowwave_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """A running server: its address, home, process and log."""

    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path
    keys: dict[str, str] = field(default_factory=dict)

    def client(self, key: str | None = None, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, **kwargs)  # type: ignore[arg-type]

    @contextmanager
    def browser(self, key: str) -> Iterator[httpx.Client]:
        """The memory browser's session of ``key``, as a sign-in leaves it (its cookie kept)."""
        with httpx.Client(base_url=self.url, timeout=60) as web:
            signed = web.post("/ui/login", data={"key": key, "next": "/ui"})
            assert signed.status_code == 303, signed.text
            yield web

    def stop(self) -> None:
        """Ctrl-C, as an operator stops it; killed by pid if it does not end in 20 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def start_server(home: Path, *args: str, port: int | None = None, **env: str) -> Served:
    port = port or free_port()
    log = home / f"serve-{port}.log"
    home.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "slowwave", "serve", "--port", str(port), *args],
            env=slowwave_env(home, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Served(f"http://127.0.0.1:{port}", home, process, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"slowwave serve exited {process.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"{served.url}/readyz", timeout=2).status_code == 200:
                return served
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    served.stop()
    raise RuntimeError(f"slowwave serve did not get ready: {log.read_text()}")


def make_key(home: Path, tenant: str, scope: str) -> str:
    made = run_cli(home, "keys", "create", "--tenant", tenant, "--scope", scope)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def quarantine_latest(served: Served, conversation: str) -> str:
    """Hold back the conversation's latest episode, as three failed attempts would; its id."""
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database

    with Database(Settings(home=served.home)) as db, db.connection() as conn:
        row = conn.execute(
            "UPDATE episodic_memory SET quarantined_at = now(), attempts = 3, "
            "last_error = 'the model answered with invalid JSON three times' "
            "WHERE id = (SELECT id FROM episodic_memory WHERE conversation_id = %s "
            "ORDER BY start_at DESC LIMIT 1) RETURNING id",
            (conversation,),
        ).fetchone()
    assert row is not None
    return str(row[0])
