"""``/v1/facts/{id}``: a fact's versions."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from slowwave.models.history import FactVersion
from slowwave.server.deps import ServiceDep, Who
from slowwave.server.responses import errors

router = APIRouter(prefix="/v1/facts")


@router.get(
    "/{fact_id}/history",
    tags=["read"],
    summary="Every version of a fact.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def fact_history(fact_id: UUID, service: ServiceDep, who: Who) -> list[FactVersion]:
    return service.history(who, fact_id)
