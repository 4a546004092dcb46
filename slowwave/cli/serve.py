"""`slowwave serve` and `slowwave mcp`: memory for agents in any process or language."""

from __future__ import annotations

import ipaddress
import os
from typing import Annotated

import typer

from slowwave.cli.common import one_line_errors
from slowwave.cli.render import console, errors
from slowwave.models.errors import SlowwaveError
from slowwave.models.settings import get_settings
from slowwave.service import Caller, Service


class ServeRefused(SlowwaveError):
    """The server would run less safe than asked: open on a network, or with no key to use."""


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_serving(service: Service, host: str, no_auth: bool) -> None:
    """Refuse to run open on another address than a loopback one, or with keys on and no key
    that could use it (each caller would be refused)."""
    if no_auth and not loopback(host):
        raise ServeRefused(
            f"--no-auth on {host}: anyone who reaches it could read and forget every "
            "conversation. Bind 127.0.0.1, or make keys (`slowwave keys create`) and drop --no-auth"
        )
    if no_auth:
        return
    keys = service.keys(Caller.operator(), every_tenant=True)
    if not any(k.revoked_at is None for k in keys):
        raise ServeRefused(
            "no API key exists, so every request would be refused: make one with "
            "`slowwave keys create --scope write` (or, on 127.0.0.1 only, pass --no-auth)"
        )


@one_line_errors
def serve_command(
    host: Annotated[
        str | None, typer.Option("--host", help="Address to bind (default: SLOWWAVE_SERVE_HOST).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default: SLOWWAVE_SERVE_PORT).")
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Serve without keys: on a loopback address only."),
    ] = False,
) -> None:
    """Serve memory over HTTP: REST under /v1 and MCP under /mcp, with keys and limits.

    Example: slowwave keys create --scope write && slowwave serve --port 8765"""
    import uvicorn

    from slowwave.server.app import create_app

    settings = get_settings()
    host = host or settings.serve.host
    port = port or settings.serve.port
    with Service.open(settings) as service:  # reached and migrated
        check_serving(service, host, no_auth)
    app = create_app(settings, auth=not no_auth, host=host)
    where = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    console.print(
        f"slowwave serve: {where}/v1 (REST), {where}/mcp (MCP), {where}/docs (OpenAPI)"
        + (" — without keys" if no_auth else ""),
        highlight=False,
    )
    uvicorn.run(app, host=host, port=port, log_level="info", server_header=False)


@one_line_errors
def mcp_command() -> None:
    """Serve memory to one agent over stdio (MCP), as its key in SLOWWAVE_API_KEY allows.

    Example: SLOWWAVE_API_KEY=sw_… slowwave mcp"""
    from slowwave.server.mcp import run_stdio

    key = os.environ.get("SLOWWAVE_API_KEY", "").strip()
    if not key:
        raise ServeRefused(
            "set SLOWWAVE_API_KEY to a key from `slowwave keys create`: its tenant and scope "
            "are what this agent may reach"
        )
    settings = get_settings()
    with Service.open(settings):  # reached and migrated
        pass
    errors.print("slowwave mcp: serving over stdio", highlight=False)
    run_stdio(settings, key)
