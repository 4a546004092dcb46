"""`slowwave server`, `deploy` and `worker`: slowwave on a Prefect server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slowwave.cli.common import foreground, one_line_errors
from slowwave.cli.render import errors
from slowwave.models.errors import ServerError
from slowwave.models.processes import (
    LocalServer,
    answers,
    free_port,
    helpers_of,
)
from slowwave.models.settings import Settings, get_settings

# How long a temporary Prefect API may take to answer (10-15 s on two cores).
TEMPORARY_API_STARTUP_S = 120.0


def prefect_env(settings: Settings) -> dict[str, str]:
    """The environment of `prefect` commands started for slowwave: flow runs of what they deploy
    start in the folder the command is run in (its .env, its ./.slowwave)."""
    env = dict(os.environ)
    env.setdefault("PREFECT_API_URL", f"http://127.0.0.1:{settings.orchestration.prefect_port}/api")
    env["SLOWWAVE_WORKING_DIR"] = str(Path.cwd())
    env["SLOWWAVE_NIGHTLY_TIMEZONE"] = settings.orchestration.nightly_timezone
    env.setdefault("SLOWWAVE_HOME", str(settings.home))
    return env


def _prefect(*args: str, settings: Settings, check: bool = True) -> int:
    import subprocess

    command = [sys.executable, "-m", "prefect", *args]
    return subprocess.run(
        command, env=prefect_env(settings), cwd=Path.cwd(), check=check
    ).returncode


@one_line_errors
def server_command() -> None:
    """Run a Prefect server (UI + API) for slowwave, on 127.0.0.1:SLOWWAVE_PREFECT_PORT, until
    Ctrl-C. slowwave's commands in any terminal report to it while it runs; plain `prefect`
    commands need PREFECT_API_URL (printed at start).

    Example: slowwave server"""
    settings = get_settings()
    env = prefect_env(settings)
    env.pop("PREFECT_API_URL", None)
    # in a terminal, Prefect would stop to ask which profile should point at the server:
    # slowwave's commands find it by its port, plain `prefect` ones by the line printed below
    env["PREFECT_CLI_PROMPT"] = "false"
    # with --port the UI still calls 4200; the API port setting moves both
    env["PREFECT_SERVER_API_PORT"] = str(settings.orchestration.prefect_port)
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    if answers(f"{server_url(settings)}/health"):
        raise ServerError(
            f"a Prefect server already answers on port {settings.orchestration.prefect_port}: "
            "use it, or set SLOWWAVE_PREFECT_PORT to run another"
        )
    errors.print(
        f"Prefect UI: http://127.0.0.1:{settings.orchestration.prefect_port}  (Ctrl-C stops it). "
        f"In other terminals: export PREFECT_API_URL={server_url(settings)}",
        highlight=False,
        soft_wrap=True,
    )
    foreground([sys.executable, "-m", "prefect", "server", "start"], env)


@one_line_errors
def deploy_command() -> None:
    """Create the `process` work pool if missing, then deploy slowwave's prefect.yaml (nightly,
    backfill, revert, forget); their runs start in this folder.

    Example: cd /srv/memory && slowwave deploy"""
    from importlib.resources import as_file, files

    settings = get_settings()
    if _prefect("work-pool", "inspect", "process", settings=settings, check=False) != 0:
        _prefect("work-pool", "create", "process", "--type", "process", settings=settings)
    with as_file(files("slowwave") / "prefect.yaml") as deployments:
        _prefect(
            "deploy", "--all", "--no-prompt", "--prefect-file", str(deployments), settings=settings
        )


@one_line_errors
def worker_command() -> None:
    """Serve the `process` work pool: run scheduled and requested slowwave flows, until
    Ctrl-C (the flow runs it started are stopped with it).

    Example: slowwave worker"""
    settings = get_settings()
    foreground(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "process"],
        prefect_env(settings),
    )


def server_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.orchestration.prefect_port}/api"


@contextmanager
def flow_api(settings: Settings) -> Iterator[str]:
    """The Prefect API a flow run in this process reports to, for the block.

    ``PREFECT_API_URL`` when it is set; else `slowwave server` on ``SLOWWAVE_PREFECT_PORT``
    when it answers, so the run shows in the UI the operator started (never a second server
    on its database); else a temporary server of this command's own, in a process group of
    its own (a terminal's Ctrl-C leaves it up to record how the run ended), without its UI,
    stopped by pid when the block ends."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    given = os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()
    if given:
        yield given
        return
    if answers(f"{server_url(settings)}/health"):
        with temporary_settings({PREFECT_API_URL: server_url(settings)}):
            yield server_url(settings)
        return
    port = free_port()
    env = {
        **prefect_env(settings),
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_UI_ENABLED": "false",
    }
    env.pop("PREFECT_API_URL", None)
    log = settings.home / "run" / "prefect-api.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}/api"
    api = LocalServer(
        "the temporary Prefect API",
        [sys.executable, "-m", "prefect", "server", "start", "--no-services"],
        env,
        log,
        f"{url}/health",
        TEMPORARY_API_STARTUP_S,
        registry=helpers_of(settings.home),
    )
    errors.print(
        f"starting a temporary Prefect API for this run (`slowwave server` is not running on "
        f"port {settings.orchestration.prefect_port})",
        highlight=False,
    )
    with api, temporary_settings({PREFECT_API_URL: url}):
        try:
            yield url
        finally:
            drain_to_api()


def drain_to_api(timeout_s: float = 10.0) -> None:
    """Send the log lines and events Prefect still holds before the API they go to stops (as
    Prefect's own test harness does); otherwise they are retried against a closed port, for a
    minute, when this process exits."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout_s)
    EventsWorker.drain_all(timeout=timeout_s)
