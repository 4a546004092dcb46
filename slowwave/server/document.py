"""The OpenAPI document is the contract: FastAPI's, with the limits this server was started
with (``SLOWWAVE_SERVE_*``), which no route's annotation can know, so that a client generated
from it, or a test that fuzzes it, sends what the server takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from slowwave.models.settings import Settings

SEARCH = "/v1/conversations/{conversation_id}/search"


def with_limits(app: FastAPI, settings: Settings) -> Callable[[], dict[str, Any]]:
    """``app.openapi``: the document FastAPI builds, once, with the server's limits."""
    build = app.openapi
    serve = settings.serve

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            for parameter in document["paths"][SEARCH]["get"]["parameters"]:
                if parameter["name"] == "query":
                    parameter["schema"]["maxLength"] = serve.max_query_chars
                if parameter["name"] == "k":
                    parameter["schema"]["maximum"] = serve.max_k
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


__all__ = ["with_limits"]
