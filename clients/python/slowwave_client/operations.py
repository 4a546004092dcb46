"""slowwave's operations as requests, once for both clients: each method of ``Operations``
(``Client``) and ``AsyncOperations`` (``AsyncClient``) builds its ``Call`` here and sends it.

The names and arguments are ``slowwave.Memory``'s (``record``, ``search``, ``context``,
``facts``, ``history``, ``profile``, ``status``) and the service's (``forget``,
``consolidate_now``, ``run_state``); the answers are the server's schemas
(``slowwave_client.types``, generated from its OpenAPI document).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote
from uuid import UUID

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from slowwave_client.types import (
    Category,
    ContextAnswer,
    FactVersion,
    Forgotten,
    Recorded,
    RunStarted,
    RunState,
    SearchAnswer,
    Status,
)

T = TypeVar("T")
Message = Mapping[str, Any]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: method, path (quoted), query, JSON body, and how its answer is read."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def _model(kind: type[T]) -> Callable[[Any], T]:
    adapter = TypeAdapter(kind)
    return adapter.validate_python


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters: None left out, times as ISO 8601, enums as their values."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, bool):
            value = "true" if value else "false"
        out[name] = to_jsonable_python(value)
    return out


def _conversation(conversation_id: str) -> str:
    if not conversation_id:
        raise ValueError("conversation_id: required")
    return "/v1/conversations/" + quote(conversation_id, safe="")


def record(conversation_id: str, messages: Sequence[Message]) -> Call[Recorded]:
    return Call(
        "POST",
        _conversation(conversation_id) + "/messages",
        _model(Recorded),
        body={"messages": to_jsonable_python(list(messages))},
    )


def search(
    query: str,
    conversation_id: str,
    k: int = 10,
    *,
    category: Category | str | None = None,
    as_of: datetime | None = None,
    output: Literal["json", "markdown"] = "json",
    memories: int | None = None,
    memory_tokens: int | None = None,
    fused: bool = False,
    rerank: bool | None = None,
) -> Call[SearchAnswer]:
    return Call(
        "GET",
        _conversation(conversation_id) + "/search",
        _model(SearchAnswer),
        _params(
            query=query,
            k=k,
            category=category,
            as_of=as_of,
            format=output,
            memories=memories,
            memory_tokens=memory_tokens,
            fused=fused or None,
            rerank=rerank,
        ),
    )


def context(
    conversation_id: str,
    budget_tokens: int = 500,
    *,
    as_of: datetime | None = None,
    memories: int = 0,
) -> Call[ContextAnswer]:
    return Call(
        "GET",
        _conversation(conversation_id) + "/context",
        _model(ContextAnswer),
        _params(budget_tokens=budget_tokens, as_of=as_of, memories=memories or None),
    )


def facts(
    conversation_id: str, *, as_of: datetime | None = None, everything: bool = False
) -> Call[list[FactVersion]]:
    return Call(
        "GET",
        _conversation(conversation_id) + "/facts",
        _model(list[FactVersion]),
        _params(as_of=as_of, all=everything or None),
    )


def history(fact_id: UUID | str) -> Call[list[FactVersion]]:
    return Call(
        "GET", f"/v1/facts/{quote(str(fact_id), safe='')}/history", _model(list[FactVersion])
    )


def profile(conversation_id: str) -> Call[dict[str, Any]]:
    return Call("GET", _conversation(conversation_id) + "/profile", _model(dict[str, Any]))


def status(conversation_id: str) -> Call[Status]:
    return Call("GET", _conversation(conversation_id), _model(Status))


def forget(conversation_id: str, *, reason: str, purge: bool = True) -> Call[Forgotten]:
    return Call(
        "DELETE",
        _conversation(conversation_id),
        _model(Forgotten),
        _params(reason=reason, purge=purge),
    )


def consolidate_now(conversation_id: str) -> Call[RunStarted]:
    return Call("POST", _conversation(conversation_id) + "/consolidate", _model(RunStarted))


def run_state(run_id: UUID | str) -> Call[RunState]:
    return Call("GET", f"/v1/runs/{quote(str(run_id), safe='')}", _model(RunState))


class Operations:
    """The operations of a client that sends a ``Call`` and returns its answer."""

    def _send(self, call: Call[T]) -> T:
        raise NotImplementedError

    def record(self, conversation_id: str, messages: Sequence[Message]) -> Recorded:
        """Record messages: slowwave's own (``message_id``, ``timestamp``, ``speaker``,
        ``text``) or as chat APIs send them (``{"role", "content"}``, no id or time needed);
        idempotent: a retry adds nothing."""
        return self._send(record(conversation_id, messages))

    def search(
        self,
        query: str,
        conversation_id: str,
        k: int = 10,
        *,
        category: Category | str | None = None,
        as_of: datetime | None = None,
        output: Literal["json", "markdown"] = "json",
        memories: int | None = None,
        memory_tokens: int | None = None,
        fused: bool = False,
        rerank: bool | None = None,
    ) -> SearchAnswer:
        """The facts and the episodic memories that best answer ``query``."""
        return self._send(
            search(
                query,
                conversation_id,
                k,
                category=category,
                as_of=as_of,
                output=output,
                memories=memories,
                memory_tokens=memory_tokens,
                fused=fused,
                rerank=rerank,
            )
        )

    def context(
        self,
        conversation_id: str,
        budget_tokens: int = 500,
        *,
        as_of: datetime | None = None,
        memories: int = 0,
    ) -> ContextAnswer:
        """Guidelines and the top identity and preference facts, within a token budget."""
        return self._send(context(conversation_id, budget_tokens, as_of=as_of, memories=memories))

    def facts(
        self, conversation_id: str, *, as_of: datetime | None = None, everything: bool = False
    ) -> list[FactVersion]:
        """The active facts, those valid at ``as_of`` (event time), or all of them."""
        return self._send(facts(conversation_id, as_of=as_of, everything=everything))

    def history(self, fact_id: UUID | str) -> list[FactVersion]:
        """Every version of a fact, oldest first."""
        return self._send(history(fact_id))

    def profile(self, conversation_id: str) -> dict[str, Any]:
        """The model-written profile of a conversation's facts."""
        return self._send(profile(conversation_id))

    def status(self, conversation_id: str) -> Status:
        """Episodes pending, consolidated and quarantined; facts; the last run."""
        return self._send(status(conversation_id))

    def forget(self, conversation_id: str, *, reason: str, purge: bool = True) -> Forgotten:
        """Forget a conversation (admin keys): its rows deleted, a tombstone kept."""
        return self._send(forget(conversation_id, reason=reason, purge=purge))

    def consolidate_now(self, conversation_id: str) -> RunStarted:
        """Consolidate the conversation's pending episodes now (write keys): the run's id."""
        return self._send(consolidate_now(conversation_id))

    def run_state(self, run_id: UUID | str) -> RunState:
        """A run this tenant asked for: queued, running or how it ended."""
        return self._send(run_state(run_id))


class AsyncOperations:
    """``Operations`` as coroutines."""

    def _send(self, call: Call[T]) -> Awaitable[T]:
        raise NotImplementedError

    async def record(self, conversation_id: str, messages: Sequence[Message]) -> Recorded:
        """``Client.record``."""
        return await self._send(record(conversation_id, messages))

    async def search(
        self,
        query: str,
        conversation_id: str,
        k: int = 10,
        *,
        category: Category | str | None = None,
        as_of: datetime | None = None,
        output: Literal["json", "markdown"] = "json",
        memories: int | None = None,
        memory_tokens: int | None = None,
        fused: bool = False,
        rerank: bool | None = None,
    ) -> SearchAnswer:
        """``Client.search``."""
        return await self._send(
            search(
                query,
                conversation_id,
                k,
                category=category,
                as_of=as_of,
                output=output,
                memories=memories,
                memory_tokens=memory_tokens,
                fused=fused,
                rerank=rerank,
            )
        )

    async def context(
        self,
        conversation_id: str,
        budget_tokens: int = 500,
        *,
        as_of: datetime | None = None,
        memories: int = 0,
    ) -> ContextAnswer:
        """``Client.context``."""
        return await self._send(
            context(conversation_id, budget_tokens, as_of=as_of, memories=memories)
        )

    async def facts(
        self, conversation_id: str, *, as_of: datetime | None = None, everything: bool = False
    ) -> list[FactVersion]:
        """``Client.facts``."""
        return await self._send(facts(conversation_id, as_of=as_of, everything=everything))

    async def history(self, fact_id: UUID | str) -> list[FactVersion]:
        """``Client.history``."""
        return await self._send(history(fact_id))

    async def profile(self, conversation_id: str) -> dict[str, Any]:
        """``Client.profile``."""
        return await self._send(profile(conversation_id))

    async def status(self, conversation_id: str) -> Status:
        """``Client.status``."""
        return await self._send(status(conversation_id))

    async def forget(self, conversation_id: str, *, reason: str, purge: bool = True) -> Forgotten:
        """``Client.forget``."""
        return await self._send(forget(conversation_id, reason=reason, purge=purge))

    async def consolidate_now(self, conversation_id: str) -> RunStarted:
        """``Client.consolidate_now``."""
        return await self._send(consolidate_now(conversation_id))

    async def run_state(self, run_id: UUID | str) -> RunState:
        """``Client.run_state``."""
        return await self._send(run_state(run_id))
