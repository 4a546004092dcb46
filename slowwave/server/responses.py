"""The error answers a route declares in the OpenAPI document, each with the error schema:
what a generated client needs to know every answer it can get."""

from __future__ import annotations

from typing import Any

from slowwave.server.errors import ErrorBody

WHY = {
    400: "The path or query holds a NUL character.",
    401: "No key, or a key that is not valid (unknown or revoked).",
    403: "The key's scope or tenant does not allow this.",
    404: "No such conversation, fact or key for this key's tenant.",
    410: "The conversation was forgotten: when, and whether its bytes are purged yet.",
    413: "The request is over a limit (messages per request, body bytes).",
    422: "The request is not valid: the message says which field and why.",
    429: "The key made too many requests: retry after `Retry-After` seconds.",
    503: "The database is busy or does not answer: retry after `Retry-After` seconds.",
}

_RETRY = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}
_CHALLENGE = {
    "WWW-Authenticate": {
        "description": "`Bearer`: the scheme a key is sent by.",
        "schema": {"type": "string"},
    }
}
HEADERS = {401: _CHALLENGE, 429: _RETRY, 503: _RETRY}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status with its reason, the error schema (JSON, whatever
    the route's success is) and the headers it carries (400 for a NUL, which the guard refuses on
    every route, is always among them). A route without ``Retry-After`` on 503 (``/readyz``'s
    outdated schema) says so itself."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in sorted({400, *statuses}):
        declared[status] = {"model": ErrorBody, "description": WHY[status]}
        if status in HEADERS:
            declared[status]["headers"] = HEADERS[status]
    return declared


__all__ = ["WHY", "errors"]
