"""`slowwave serve`'s application: REST under ``/v1``, MCP under ``/mcp``, probes and metrics.

Stateless: a database pool, the embedding model and per-process limits, nothing else, so that
replicas behind a load balancer serve one database. The nightly flows consolidate; the server
records and reads.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slowwave import __version__
from slowwave.metrics import DecisionCollector
from slowwave.models.category import Category
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.history import FactVersion
from slowwave.models.keys import ApiKey
from slowwave.models.keys import Scope as KeyScope
from slowwave.models.settings import Settings
from slowwave.server.auth import Authenticator
from slowwave.server.service import ApiError, Caller, MemoryService, Recorded, SearchAnswer, Status
from slowwave.sql.db import Database
from slowwave.sql.db.migrate import pending_migrations

logger = logging.getLogger("slowwave.server")

ConversationId = Annotated[
    str, Path(min_length=1, max_length=500, description="The conversation, as your agent names it.")
]


class RecordRequest(BaseModel):
    """Messages of one conversation, each as a line of a JSONL transcript (without
    ``conversation_id``: the path names it)."""

    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="Each with message_id, timestamp (ISO 8601 with a zone), speaker, text; "
        "optionally session_id and surprise (0 to 1).",
    )


class ContextAnswer(BaseModel):
    conversation_id: str
    context: str


class NewKey(BaseModel):
    key: str = Field(description="Shown this once: only its SHA-256 is kept.")
    record: ApiKey


class KeyRequest(BaseModel):
    scope: KeyScope
    name: str = Field(default="", max_length=200)


async def _service(request: Request) -> MemoryService:  # no I/O: no thread for it
    service: MemoryService = request.app.state.service
    return service


def _caller(request: Request) -> Caller:
    auth: Authenticator = request.app.state.auth
    return auth.caller(request.headers.get("authorization"))


Service = Annotated[MemoryService, Depends(_service)]
Who = Annotated[Caller, Depends(_caller)]


def error_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, **extra}}


def error_response(exc: ApiError) -> JSONResponse:
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(
        error_body(exc.status, exc.code, exc.message), status_code=exc.status, headers=headers
    )


# ── middleware (pure ASGI: they see every request, MCP's included) ───────────
class Guard:
    """Refuses, before any route runs: a body over the limit (413, by Content-Length or as it
    streams), and a path or query string holding a NUL (Postgres text cannot hold one)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path", b"") + b"?" + scope.get("query_string", b"")
        if b"%00" in raw or b"\x00" in raw:
            await _refuse(send, 400, "nul_character", "the path or query holds a NUL character")
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _refuse(send, 413, "body_too_large", self._too_large())
            return
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, bounded, send)
        except BodyTooLarge:
            await _refuse(send, 413, "body_too_large", self._too_large())

    def _too_large(self) -> str:
        return (
            f"the request body is over {self.max_body_bytes} bytes "
            "(SLOWWAVE_SERVE_MAX_BODY_BYTES): send fewer messages at a time"
        )


class BodyTooLarge(Exception):
    pass


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    response = JSONResponse(error_body(status, code, message), status_code=status)
    await response({"type": "http"}, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


class RequestMetrics:
    """Requests counted and timed by route (its template, never the ids in it) and status."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.count = Counter(
            "slowwave_http_requests",
            "Requests served, by route and status.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "slowwave_http_request_seconds",
            "Time to answer a request, by route and status.",
            ["method", "route", "status"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.count.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)


class Measured:
    """Times every HTTP request into ``RequestMetrics`` (pure ASGI: no task per request)."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            self.metrics.observe(
                scope["method"], _route(scope), status, time.perf_counter() - started
            )


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
    metrics = RequestMetrics(registry)
    state: dict[str, Any] = {}
    mcp_app = None
    if mcp:
        from slowwave.server.mcp import mcp_http_app

        mcp_app = mcp_http_app(lambda: state["service"], lambda: state["auth"], host)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database(
            settings,
            pool_size=settings.serve_pool_size,
            pool_wait_s=settings.serve_pool_wait_s,
            statement_timeout_ms=settings.serve_statement_timeout_ms,
        )
        db.open()
        own_embedder = embedder is None
        model = embedder or load_embedder(settings)
        service = MemoryService(settings, db, model)
        state["service"] = service
        state["auth"] = Authenticator(service, enabled=auth)
        app.state.service = service
        app.state.auth = state["auth"]
        registry.register(DecisionCollector(db))
        try:
            if mcp_app is not None:
                async with mcp_app.lifespan_context():
                    yield
            else:
                yield
        finally:
            service.close()
            if own_embedder:
                model.close()
            db.close()

    app = FastAPI(
        title="slowwave",
        version=__version__,
        summary="Memory for conversational agents: record what was said, read what was learned.",
        lifespan=lifespan,
    )

    # ── errors: one JSON shape ────────────────────────────────────────────────
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            if error.get("type") == "json_invalid":
                reason = (error.get("ctx") or {}).get("error", "not JSON")
                problems.append(f"the body is not valid JSON: {reason}")
                continue
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        message = "; ".join(problems[:10]) or "the request is not valid"
        return JSONResponse(error_body(422, "invalid_request", message), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "invalid_body", 404: "no_route", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error"
        )
        return JSONResponse(
            error_body(exc.status_code, code, str(exc.detail)), status_code=exc.status_code
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        logger.error(
            "incident %s on %s %s: %s", incident, request.method, _route(request.scope), repr(exc)
        )
        logger.debug("incident %s", incident, exc_info=exc)
        return JSONResponse(
            error_body(500, "internal", f"the server failed on this request (incident {incident})"),
            status_code=500,
        )

    # ── probes and metrics ───────────────────────────────────────────────────
    @app.get("/healthz", tags=["operations"], summary="The process answers.")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], summary="The database answers, its schema current.")
    def readyz(service: Service) -> JSONResponse:
        try:
            with service.connection() as conn:
                pending = pending_migrations(conn)
        except ApiError as exc:
            return error_response(exc)
        except Exception as exc:
            return JSONResponse(
                error_body(503, "database_unavailable", f"the database does not answer: {exc}"),
                status_code=503,
            )
        if pending:
            message = f"the schema lacks migrations {', '.join(pending)}: run `slowwave db migrate`"
            return JSONResponse(error_body(503, "schema_outdated", message), status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["operations"], summary="Prometheus text: requests and runs.")
    def prometheus(who: Who) -> PlainTextResponse:
        who.needs(KeyScope.admin)
        return PlainTextResponse(generate_latest(registry).decode())

    # ── record ───────────────────────────────────────────────────────────────
    @app.post(
        "/v1/conversations/{conversation_id}/messages",
        tags=["record"],
        summary="Record messages; idempotent by message id.",
    )
    def record_messages(
        conversation_id: ConversationId, body: RecordRequest, service: Service, who: Who
    ) -> Recorded:
        return service.record(who, conversation_id, body.messages)

    # ── read ─────────────────────────────────────────────────────────────────
    @app.get(
        "/v1/conversations/{conversation_id}/search",
        tags=["read"],
        summary="The facts that best answer a query.",
        response_model_exclude_none=True,
    )
    def search_memory(
        conversation_id: ConversationId,
        service: Service,
        who: Who,
        query: Annotated[str, Query(min_length=1, max_length=100_000)],
        k: Annotated[int, Query(ge=1, le=10_000)] = 10,
        category: Category | None = None,
        as_of: datetime | None = None,
        format: Literal["json", "markdown"] = "json",
    ) -> SearchAnswer:
        return service.search(
            who, conversation_id, query, k=k, category=category, as_of=as_of, output=format
        )

    @app.get(
        "/v1/conversations/{conversation_id}/context",
        tags=["read"],
        summary="Guidelines and top identity / preference facts within a token budget.",
    )
    def get_context(
        conversation_id: ConversationId,
        service: Service,
        who: Who,
        budget_tokens: Annotated[int, Query(ge=1, le=100_000)] = 500,
        as_of: datetime | None = None,
    ) -> ContextAnswer:
        block = service.context(who, conversation_id, budget_tokens, as_of)
        return ContextAnswer(conversation_id=conversation_id, context=block)

    @app.get(
        "/v1/conversations/{conversation_id}/facts",
        tags=["read"],
        summary="Active facts, those valid at as_of (event time), or all.",
    )
    def list_facts(
        conversation_id: ConversationId,
        service: Service,
        who: Who,
        as_of: datetime | None = None,
        all: bool = False,
    ) -> list[FactVersion]:
        return service.facts(who, conversation_id, as_of=as_of, everything=all)

    @app.get("/v1/facts/{fact_id}/history", tags=["read"], summary="Every version of a fact.")
    def fact_history(fact_id: UUID, service: Service, who: Who) -> list[FactVersion]:
        return service.history(who, fact_id)

    @app.get(
        "/v1/conversations/{conversation_id}/profile",
        tags=["read"],
        summary="The model-written profile of the conversation's facts.",
    )
    def get_profile(conversation_id: ConversationId, service: Service, who: Who) -> dict[str, Any]:
        return service.profile(who, conversation_id)

    @app.get(
        "/v1/conversations/{conversation_id}",
        tags=["read"],
        summary="Episodes pending, consolidated and quarantined; last consolidation; facts.",
    )
    def conversation_status(conversation_id: ConversationId, service: Service, who: Who) -> Status:
        return service.status(who, conversation_id)

    # ── admin ────────────────────────────────────────────────────────────────
    @app.delete(
        "/v1/conversations/{conversation_id}",
        tags=["admin"],
        summary="Forget a conversation (privacy): hard delete, a tombstone without content.",
    )
    def forget_conversation(
        conversation_id: ConversationId,
        service: Service,
        who: Who,
        reason: Annotated[str, Query(min_length=1, max_length=2000)],
        purge: bool = False,
    ) -> dict[str, Any]:
        return service.forget(who, conversation_id, reason=reason, purge=purge)

    @app.get("/v1/runs", tags=["admin"], summary="The latest consolidation runs.")
    def list_runs(
        service: Service, who: Who, limit: Annotated[int, Query(ge=1, le=1000)] = 20
    ) -> list[dict[str, Any]]:
        return service.runs(who, limit)

    @app.get("/v1/quarantine", tags=["admin"], summary="The tenant's quarantined episodes.")
    def list_quarantine(service: Service, who: Who) -> list[dict[str, Any]]:
        return service.quarantine(who)

    @app.get("/v1/keys", tags=["admin"], summary="The tenant's keys (never the keys themselves).")
    def list_keys(service: Service, who: Who) -> list[ApiKey]:
        return service.keys(who)

    @app.post("/v1/keys", tags=["admin"], summary="A new key of the tenant, shown once.")
    def create_key(body: KeyRequest, service: Service, who: Who) -> NewKey:
        key, record = service.create_key(who, body.scope, body.name)
        return NewKey(key=key, record=record)

    @app.delete("/v1/keys/{name}", tags=["admin"], summary="Revoke a key of the tenant.")
    def revoke_key(
        name: Annotated[str, Path(min_length=7, max_length=100)], service: Service, who: Who
    ) -> ApiKey:
        return service.revoke_key(who, name)

    if mcp_app is not None:
        app.router.routes.extend(mcp_app.routes)
    app.add_middleware(Measured, metrics=metrics)
    app.add_middleware(Guard, max_body_bytes=settings.serve_max_body_bytes)
    return app


def _route(scope: Scope) -> str:
    """The route's template (``/v1/conversations/{conversation_id}``): never the ids in it."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return str(path)
    return "/mcp" if str(scope.get("path", "")).startswith("/mcp") else "unmatched"
