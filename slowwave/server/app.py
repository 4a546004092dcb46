"""`slowwave serve`'s application: REST under ``/v1``, MCP under ``/mcp``, probes and metrics.

Stateless: a database pool, the embedding model and per-process limits, nothing else, so that
replicas behind a load balancer serve one database. The nightly flows consolidate; the server
records and reads. Every route calls the service (``slowwave.service``), as the CLI, the MCP
tools and the Python API do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from slowwave import __version__
from slowwave.metrics import DecisionCollector
from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.server import errors, ui
from slowwave.server.auth import Authenticator
from slowwave.server.document import with_limits
from slowwave.server.launch import prefect_launcher
from slowwave.server.middleware import Guard, Measured, RequestMetrics
from slowwave.server.routes import admin, conversations, facts, operations
from slowwave.service import Service


def create_app(
    settings: Settings,
    *,
    auth: bool = True,
    embedder: Embedder | None = None,
    mcp: bool = True,
    host: str = "127.0.0.1",
) -> FastAPI:
    """The server's application. ``auth``: every request needs a key (``slowwave keys``);
    without, every caller is the operator (the CLI allows that on a loopback address only)."""
    registry = CollectorRegistry(auto_describe=False)
    state: dict[str, Any] = {}
    endpoint = None
    if mcp:
        from slowwave.server.mcp import McpEndpoint

        endpoint = McpEndpoint(lambda: state["service"], lambda: state["auth"], host)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # its embedder loaded, and its first forward pass made, before the first request:
        # the first search of a fresh server does not pay for it
        service = Service.started(
            settings,
            embedder,
            pool_size=settings.serve.pool_size,
            pool_wait_s=settings.serve.pool_wait_s,
            statement_timeout_ms=settings.serve.statement_timeout_ms,
            hold=True,
            background=True,
            launcher=prefect_launcher(),
            warm=True,
        )
        db = service.db
        state["service"] = app.state.service = service
        state["auth"] = app.state.auth = Authenticator(service, enabled=auth)
        registry.register(DecisionCollector(db))
        try:
            if endpoint is not None:
                async with endpoint.lifespan_context():
                    yield
            else:
                yield
        finally:
            service.close()

    app = FastAPI(
        title="slowwave",
        version=__version__,
        summary="Memory for conversational agents: record what was said, read what was learned.",
        lifespan=lifespan,
        # each operation named as its function is (search_memory, record_messages): the names
        # the typed clients' methods and a generated client's functions take
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.registry = registry
    errors.install(app)
    app.openapi = with_limits(app, settings)  # type: ignore[method-assign]
    for router in (operations.router, conversations.router, facts.router, admin.router):
        app.include_router(router)
    app.include_router(ui.router())  # the memory browser, /ui (not in the API's document)
    app.mount("/ui/static", ui.static_files(), name="ui-static")
    if endpoint is not None:
        app.router.routes.extend(endpoint.routes)
    app.add_middleware(Measured, metrics=RequestMetrics(registry))
    app.add_middleware(Guard, max_body_bytes=settings.serve.max_body_bytes)
    return app


__all__ = ["create_app"]
