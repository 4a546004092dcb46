"""Probes and metrics: ``/healthz``, ``/readyz``, ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry, generate_latest

from slowwave.metrics import BacklogCollector
from slowwave.models.errors import MigrationError, SlowwaveError
from slowwave.models.keys import Scope as KeyScope
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.server.deps import ServiceDep, Who
from slowwave.server.errors import ErrorBody, error_response
from slowwave.server.responses import errors
from slowwave.sql.db.migrate import pending_migrations

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process answers.", responses=errors())
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The database answers, its schema current.",
    responses={
        200: {"content": {"application/json": {"example": {"status": "ready"}}}},
        **errors(),
        503: {
            "model": ErrorBody,
            "description": "The database is busy or down (with `Retry-After`), or its schema "
            "is not migrated.",
        },
    },
)
def readyz(service: ServiceDep) -> JSONResponse:
    try:
        with service.connection() as conn:
            pending = pending_migrations(conn)
    except SlowwaveError as exc:
        return error_response(exc)
    if pending:
        message = f"the schema lacks migrations {', '.join(pending)}: run `slowwave db migrate`"
        return error_response(MigrationError(message))
    return JSONResponse({"status": "ready"})


@router.get(
    "/metrics",
    summary="Prometheus text: requests, runs and the backlog (a key's own tenant's; the default "
    "tenant's admin key: every tenant's).",
    # Response: the errors stay JSON in the document, as they are on the wire
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **errors(401, 403, 429, 503),
    },
)
def prometheus(request: Request, service: ServiceDep, who: Who) -> PlainTextResponse:
    who.needs(KeyScope.admin)
    registry: CollectorRegistry = request.app.state.registry
    backlog = CollectorRegistry(auto_describe=False)
    backlog.register(
        BacklogCollector(service.db, None if who.tenant == DEFAULT_TENANT else who.tenant)
    )
    return PlainTextResponse(generate_latest(registry).decode() + generate_latest(backlog).decode())
