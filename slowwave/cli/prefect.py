"""`slowwave server`, `deploy` and `worker`: slowwave on a Prefect server."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from slowwave.models.settings import Settings, get_settings


def prefect_env(settings: Settings) -> dict[str, str]:
    """The environment of `prefect` commands started for slowwave: flow runs of what they deploy
    start in the folder the command is run in (its .env, its ./.slowwave)."""
    env = dict(os.environ)
    env.setdefault("PREFECT_API_URL", f"http://127.0.0.1:{settings.prefect_port}/api")
    env["SLOWWAVE_WORKING_DIR"] = str(Path.cwd())
    env["SLOWWAVE_NIGHTLY_TIMEZONE"] = settings.nightly_timezone
    env.setdefault("SLOWWAVE_HOME", str(settings.home))
    return env


def _prefect(*args: str, settings: Settings, check: bool = True) -> int:
    import subprocess
    import sys

    command = [sys.executable, "-m", "prefect", *args]
    return subprocess.run(
        command, env=prefect_env(settings), cwd=Path.cwd(), check=check
    ).returncode


def server_command() -> None:
    """Run a Prefect server (UI + API) for slowwave, on SLOWWAVE_PREFECT_PORT."""
    import subprocess
    import sys

    settings = get_settings()
    env = prefect_env(settings)
    env.pop("PREFECT_API_URL", None)
    # with --port the UI still calls 4200; the API port setting moves both
    env["PREFECT_SERVER_API_PORT"] = str(settings.prefect_port)
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    raise typer.Exit(subprocess.call([sys.executable, "-m", "prefect", "server", "start"], env=env))


def deploy_command() -> None:
    """Create the `process` work pool if missing, then deploy slowwave's prefect.yaml (nightly,
    backfill, revert, forget); their runs start in this folder."""
    from importlib.resources import as_file, files

    settings = get_settings()
    if _prefect("work-pool", "inspect", "process", settings=settings, check=False) != 0:
        _prefect("work-pool", "create", "process", "--type", "process", settings=settings)
    with as_file(files("slowwave") / "prefect.yaml") as deployments:
        _prefect(
            "deploy", "--all", "--no-prompt", "--prefect-file", str(deployments), settings=settings
        )


def worker_command() -> None:
    """Serve the `process` work pool: run scheduled and requested slowwave flows."""
    settings = get_settings()
    raise typer.Exit(
        _prefect("worker", "start", "--pool", "process", settings=settings, check=False)
    )
