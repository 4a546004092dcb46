"""``/v1/conversations/{id}``: record messages, read what was learned, forget."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from slowwave.models.category import Category
from slowwave.models.history import FactVersion
from slowwave.server.deps import TEXT_PATTERN, ConversationId, ServiceDep, Who
from slowwave.server.responses import errors
from slowwave.service import ContextAnswer, Forgotten, Recorded, SearchAnswer, Status
from slowwave.service.answers import RunStarted
from slowwave.service.reads import profile_json

router = APIRouter(prefix="/v1/conversations/{conversation_id}")


class RecordRequest(BaseModel):
    """Messages of one conversation, each as a line of a JSONL transcript (without
    ``conversation_id``: the path names it)."""

    messages: list[dict[str, Any]] = Field(
        min_length=1,
        description="Each with message_id, timestamp (ISO 8601 with a zone), speaker, text; "
        "optionally session_id and surprise (0 to 1). Or as chat APIs send them: role and "
        "content (a string, or text parts), with no id and no time — the id is then derived "
        "from the message and its position in the request (a retry adds nothing), the time is "
        "the server's. At most SLOWWAVE_SERVE_MAX_MESSAGES a request (413 beyond). A message "
        "that cannot be recorded is in the answer's `rejected`, with its reason; the others "
        "are recorded.",
    )


@router.post(
    "/messages",
    tags=["record"],
    summary="Record messages; idempotent by message id.",
    responses=errors(401, 403, 413, 422, 429, 503),
)
def record_messages(
    conversation_id: ConversationId, body: RecordRequest, service: ServiceDep, who: Who
) -> Recorded:
    return service.record(who, conversation_id, body.messages)


@router.get(
    "/search",
    tags=["read"],
    summary="The facts that best answer a query.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def search_memory(
    conversation_id: ConversationId,
    service: ServiceDep,
    who: Who,
    # the longest query and the largest k are the server's settings: the document states them
    query: Annotated[str, Query(min_length=1, pattern=TEXT_PATTERN)],
    k: Annotated[int, Query(ge=1)] = 10,
    category: Category | None = None,
    as_of: datetime | None = None,
    format: Literal["json", "markdown"] = "json",
    memories: Annotated[
        int | None,
        Query(ge=0, description="Episodic memories beside the facts (default: the server's)."),
    ] = None,
    memory_tokens: Annotated[
        int | None,
        Query(ge=16, le=100_000, description="The most tokens of each memory's text."),
    ] = None,
    fused: Annotated[
        bool, Query(description="Also facts and memories in one list, best first.")
    ] = False,
    rerank: Annotated[
        bool | None,
        Query(
            description="Put the best candidates in the order a cross-encoder scores them "
            "(default: the server's SLOWWAVE_SEARCH_RERANK); 503 model_not_prepared where the "
            "reranker is not set up."
        ),
    ] = None,
) -> SearchAnswer:
    return service.search(
        who,
        query,
        conversation_id,
        k,
        category=category,
        as_of=as_of,
        output=format,
        memories=memories,
        memory_tokens=memory_tokens,
        fused=fused,
        rerank=rerank,
    )


@router.post(
    "/consolidate",
    tags=["record"],
    status_code=202,
    summary="Consolidate the conversation's pending episodes now, whatever the triggers say.",
    description="What was just said included: the conversation's open episode (its last message "
    "younger than SLOWWAVE_SEGMENT_GAP_S) is closed at this request, and a message recorded "
    "after it starts the next episode. Starts a run at once (a flow run of the nightly "
    "deployment where a Prefect API is configured, else the server's own worker, one run at a "
    "time) and answers with its id; GET /v1/runs/{run_id} follows it, and once it ended says "
    "what it left undone, by reason. Write keys.",
    responses={
        202: {
            "links": {
                "state": {
                    "operationId": "run_state",
                    "parameters": {"run_id": "$response.body#/run_id"},
                }
            }
        },
        **errors(401, 403, 404, 410, 413, 422, 429, 503),
    },
)
def consolidate_now(conversation_id: ConversationId, service: ServiceDep, who: Who) -> RunStarted:
    return service.consolidate_now(who, conversation_id)


@router.get(
    "/context",
    tags=["read"],
    summary="Guidelines and top identity / preference facts within a token budget.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def get_context(
    conversation_id: ConversationId,
    service: ServiceDep,
    who: Who,
    budget_tokens: Annotated[int, Query(ge=1, le=100_000)] = 500,
    as_of: datetime | None = None,
    memories: Annotated[
        int, Query(ge=0, description="The latest episodes' last messages, in the room left.")
    ] = 0,
) -> ContextAnswer:
    return service.context(who, conversation_id, budget_tokens, as_of=as_of, memories=memories)


@router.get(
    "/facts",
    tags=["read"],
    summary="Active facts, those valid at as_of (event time), or all.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def list_facts(
    conversation_id: ConversationId,
    service: ServiceDep,
    who: Who,
    as_of: datetime | None = None,
    all: bool = False,
) -> list[FactVersion]:
    return service.facts(who, conversation_id, as_of=as_of, everything=all)


@router.get(
    "/profile",
    tags=["read"],
    summary="The model-written profile of the conversation's facts.",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def get_profile(conversation_id: ConversationId, service: ServiceDep, who: Who) -> dict[str, Any]:
    return profile_json(service.profile(who, conversation_id), conversation_id)


@router.get(
    "",
    tags=["read"],
    summary="Episodes pending, consolidated and quarantined; last consolidation; facts. A "
    "forgotten conversation answers 410 with when it was forgotten and whether its bytes are "
    "purged yet.",
    responses=errors(401, 403, 404, 410, 422, 429, 503),
)
def conversation_status(conversation_id: ConversationId, service: ServiceDep, who: Who) -> Status:
    return service.status(who, conversation_id)


@router.delete(
    "",
    tags=["admin"],
    summary="Forget a conversation (privacy): hard delete, a tombstone without content, and "
    "the table files rewritten right after the answer (purge=false skips that).",
    responses=errors(401, 403, 404, 422, 429, 503),
)
def forget_conversation(
    conversation_id: ConversationId,
    service: ServiceDep,
    who: Who,
    reason: Annotated[str, Query(min_length=1, max_length=2000, pattern=TEXT_PATTERN)],
    purge: bool = True,
) -> Forgotten:
    return service.forget(who, conversation_id=conversation_id, reason=reason, purge=purge)
