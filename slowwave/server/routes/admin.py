"""``/v1/runs``, ``/v1/quarantine``, ``/v1/keys``: the operator's views and the tenant's keys."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from slowwave.models.keys import ApiKey
from slowwave.models.keys import Scope as KeyScope
from slowwave.server.deps import CONVERSATION_ID_PATTERN, NO_NUL_PATTERN, ServiceDep, Who
from slowwave.server.responses import errors
from slowwave.service import NewKey
from slowwave.service.answers import RunState
from slowwave.tasks.quarantine import QuarantinedEpisode
from slowwave.tasks.revert import RunRow

router = APIRouter(prefix="/v1", tags=["admin"])

# What DELETE /v1/keys/{name} takes from a key's record: its id (a key's `name` is a label).
_REVOKE = "#/paths/~1v1~1keys~1{name}/delete"


def _revokes(where: str) -> dict[str, Any]:
    return {
        "revoke": {
            "operationRef": _REVOKE,
            "parameters": {"name": f"$response.body#{where}"},
            "description": "Revoke the key by its id.",
        }
    }


class KeyRequest(BaseModel):
    scope: KeyScope
    name: str = Field(
        default="", max_length=200, pattern=NO_NUL_PATTERN, description="A label, for people."
    )
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=CONVERSATION_ID_PATTERN,
        description="The conversation the key's calls that name none are about (an MCP "
        "client's add_memory and search_memory; no control characters, not only whitespace).",
    )


@router.get(
    "/runs",
    summary="The latest consolidation runs.",
    responses=errors(401, 403, 422, 429, 503),
)
def list_runs(
    service: ServiceDep, who: Who, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> list[RunRow]:
    return service.runs(who, limit)


@router.get(
    "/runs/{run_id}",
    summary="A run the key's tenant asked for: queued, running or how it ended.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def run_state(run_id: UUID, service: ServiceDep, who: Who) -> RunState:
    return service.run_state(who, run_id)


@router.get(
    "/quarantine",
    summary="The tenant's quarantined episodes.",
    responses=errors(401, 403, 429, 503),
)
def list_quarantine(service: ServiceDep, who: Who) -> list[QuarantinedEpisode]:
    return service.quarantined(who)


@router.get(
    "/keys",
    summary="The tenant's keys (never the keys themselves), newest first.",
    responses={200: {"links": _revokes("/0/id")}, **errors(401, 403, 429, 503)},
)
def list_keys(service: ServiceDep, who: Who) -> list[ApiKey]:
    return service.keys(who)


@router.post(
    "/keys",
    summary="A new key of the tenant, shown once.",
    responses={200: {"links": _revokes("/record/id")}, **errors(401, 403, 413, 422, 429, 503)},
)
def create_key(body: KeyRequest, service: ServiceDep, who: Who) -> NewKey:
    key, record = service.create_key(who, body.scope, body.name, body.conversation_id)
    return NewKey(key=key, record=record)


@router.delete(
    "/keys/{name}",
    summary="Revoke a key of the tenant.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def revoke_key(
    name: Annotated[
        str,
        Path(
            min_length=7,
            max_length=100,
            pattern=NO_NUL_PATTERN,
            description="The key's id, the key, or at least 7 characters of its prefix.",
        ),
    ],
    service: ServiceDep,
    who: Who,
) -> ApiKey:
    return service.revoke_key(who, name)
