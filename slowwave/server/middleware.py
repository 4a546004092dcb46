"""What every request passes through before a route: the body and NUL guard, the request
metrics, and MCP's key check (pure ASGI: they see every request, MCP's included)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slowwave.models.errors import NulCharacter, SlowwaveError, TooLarge
from slowwave.server.errors import error_response


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
            await _refuse(send, NulCharacter("the path or query holds a NUL character"))
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await _refuse(send, TooLarge(self._too_large()))
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
            await _refuse(send, TooLarge(self._too_large()))

    def _too_large(self) -> str:
        return (
            f"the request body is over {self.max_body_bytes} bytes "
            "(SLOWWAVE_SERVE_MAX_BODY_BYTES): send fewer messages at a time"
        )


class BodyTooLarge(Exception):
    pass


async def _refuse(send: Send, error: SlowwaveError) -> None:
    response = error_response(error)
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


def _route(scope: Scope) -> str:
    """The route's template (``/v1/conversations/{conversation_id}``): never the ids in it."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return str(path)
    return "/mcp" if str(scope.get("path", "")).startswith("/mcp") else "unmatched"


__all__ = ["BodyTooLarge", "Guard", "Measured", "RequestMetrics"]
