"""Every error as one JSON shape, mapped in one place: a ``SlowwaveError`` answers with its
status and code (``Retry-After`` where it says when to retry, ``WWW-Authenticate`` on 401); a
request FastAPI could not parse is 422; a method the path does not take is 405 with ``Allow``
(every method of the path); anything else is a 500 with an incident id in the log, never a
traceback on the wire."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import Scope

from slowwave.models.errors import (
    InternalError,
    InvalidBody,
    InvalidRequest,
    MethodNotAllowed,
    NoRoute,
    SlowwaveError,
)

logger = logging.getLogger("slowwave.server")


class ErrorDetail(BaseModel):
    status: int = Field(description="The HTTP status, again.")
    code: str = Field(description="Stable: what a program tests (`slowwave.errors`).")
    message: str = Field(description="What happened and what to do, for a person.")


class ErrorBody(BaseModel):
    """Every answer that is not a success."""

    error: ErrorDetail


def error_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, **extra}}


def error_response(exc: SlowwaveError) -> JSONResponse:
    headers = {}
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after_s)))
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(
        error_body(exc.status, exc.code, exc.message, **(exc.details or {})),
        status_code=exc.status,
        headers=headers,
    )


def route_of(request: Request) -> str:
    path = getattr(request.scope.get("route"), "path", None)
    return str(path) if path else "unmatched"


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route takes on this path (FastAPI has a route per method and path:
    the one that answers 405 knows only its own)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                methods |= route.methods
    return sorted(methods)


# what Starlette's own refusals are, by status (any other: its status, code ``error``)
_HTTP_ERRORS: dict[int, type[SlowwaveError]] = {
    400: InvalidBody,
    404: NoRoute,
    405: MethodNotAllowed,
}


def install(app: FastAPI) -> None:
    """The app's exception handlers."""

    @app.exception_handler(SlowwaveError)
    async def slowwave_error(request: Request, exc: SlowwaveError) -> JSONResponse:
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
        return error_response(InvalidRequest(message))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cls = _HTTP_ERRORS.get(exc.status_code, SlowwaveError)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            methods = allowed_methods(app, request.scope)
            if methods:
                headers["Allow"] = ", ".join(methods)
        return JSONResponse(
            error_body(exc.status_code, cls.code, str(exc.detail)),
            status_code=exc.status_code,
            headers=headers,
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        logger.error(
            "incident %s on %s %s: %s", incident, request.method, route_of(request), repr(exc)
        )
        logger.debug("incident %s", incident, exc_info=exc)
        return error_response(
            InternalError(f"the server failed on this request (incident {incident})")
        )


__all__ = [
    "ErrorBody",
    "allowed_methods",
    "error_body",
    "error_response",
    "install",
]
