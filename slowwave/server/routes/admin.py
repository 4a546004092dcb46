"""``/v1/runs``, ``/v1/quarantine``, ``/v1/keys``: the operator's views and the tenant's keys."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from slowwave.models.keys import ApiKey
from slowwave.models.keys import Scope as KeyScope
from slowwave.server.deps import ServiceDep, Who
from slowwave.server.responses import errors
from slowwave.service import NewKey

router = APIRouter(prefix="/v1", tags=["admin"])


class KeyRequest(BaseModel):
    scope: KeyScope
    name: str = Field(default="", max_length=200)


@router.get(
    "/runs",
    summary="The latest consolidation runs.",
    responses=errors(401, 403, 422, 429, 503),
)
def list_runs(
    service: ServiceDep, who: Who, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> list[dict[str, Any]]:
    return service.runs(who, limit)


@router.get(
    "/quarantine",
    summary="The tenant's quarantined episodes.",
    responses=errors(401, 403, 429, 503),
)
def list_quarantine(service: ServiceDep, who: Who) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json") for e in service.quarantined(who)]


@router.get(
    "/keys",
    summary="The tenant's keys (never the keys themselves).",
    responses=errors(401, 403, 429, 503),
)
def list_keys(service: ServiceDep, who: Who) -> list[ApiKey]:
    return service.keys(who)


@router.post(
    "/keys",
    summary="A new key of the tenant, shown once.",
    responses=errors(401, 403, 422, 429, 503),
)
def create_key(body: KeyRequest, service: ServiceDep, who: Who) -> NewKey:
    key, record = service.create_key(who, body.scope, body.name)
    return NewKey(key=key, record=record)


@router.delete(
    "/keys/{name}",
    summary="Revoke a key of the tenant.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def revoke_key(
    name: Annotated[str, Path(min_length=7, max_length=100)], service: ServiceDep, who: Who
) -> ApiKey:
    return service.revoke_key(who, name)
