"""The OpenAPI document is the contract: FastAPI's, with the limits this server was started
with (``SLOWWAVE_SERVE_*``), which no route's annotation can know, so that a client generated
from it, or a test that fuzzes it, sends what the server takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from slowwave.models.settings import Settings

SEARCH = "/v1/conversations/{conversation_id}/search"
CONTEXT = "/v1/conversations/{conversation_id}/context"


def _at_most(schema: dict[str, Any], maximum: int) -> None:
    """An integer's maximum, in a schema that may also admit null (``anyOf``)."""
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            option["maximum"] = maximum


def with_limits(app: FastAPI, settings: Settings) -> Callable[[], dict[str, Any]]:
    """``app.openapi``: the document FastAPI builds, once, with the server's limits."""
    build = app.openapi
    serve = settings.serve

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            for path in (SEARCH, CONTEXT):
                for parameter in document["paths"][path]["get"]["parameters"]:
                    if parameter["name"] == "query":
                        parameter["schema"]["maxLength"] = serve.max_query_chars
                    if parameter["name"] in ("k", "memories"):
                        _at_most(parameter["schema"], serve.max_k)
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


__all__ = ["with_limits"]
