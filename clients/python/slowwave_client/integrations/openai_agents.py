"""slowwave in the OpenAI Agents SDK (``pip install 'slowwave-client[openai-agents]'``).

- ``memory_tools(client, conversation_id)``: function tools, ``search_memory`` and
  ``add_memory``, for an agent that recalls and remembers on its own.
- ``SlowwaveSession(conversation_id, client)``: the SDK's session, so that the messages of every
  run (the user's input, the agent's answers) are recorded as messages of the conversation,
  found by search at once and consolidated into facts at night. The history a run is given back
  is kept by another session (``history``, the SDK's in-memory SQLite session by default):
  slowwave is long-term memory, not a transcript store. Clearing or popping the session
  touches that history only; ``Client.forget`` forgets the conversation.

    agent = Agent(name="assistant", tools=memory_tools(client, "sam"))
    await Runner.run(agent, "I'm allergic to peanuts.", session=SlowwaveSession("sam", client))
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from agents import Tool, function_tool
from agents.items import TResponseInputItem
from agents.memory import Session, SessionSettings, SQLiteSession

from slowwave_client.client import AsyncClient
from slowwave_client.errors import NotFound
from slowwave_client.integrations._shared import ADD_DESCRIPTION, SEARCH_DESCRIPTION, answer_text
from slowwave_client.messages import content_text


def memory_tools(client: AsyncClient, conversation_id: str, *, k: int = 10) -> list[Tool]:
    """``search_memory(query)`` and ``add_memory(text)`` over one conversation."""

    @function_tool(name_override="search_memory", description_override=SEARCH_DESCRIPTION)
    async def search_memory(query: str) -> str:
        try:
            answer = await client.search(query, conversation_id, k, memories=k)
        except NotFound:
            return "nothing found"
        return answer_text(answer, limit=k)

    @function_tool(name_override="add_memory", description_override=ADD_DESCRIPTION)
    async def add_memory(text: str) -> str:
        recorded = await client.record(conversation_id, [{"role": "user", "content": text}])
        return "remembered" if recorded.recorded else "already remembered"

    return [search_memory, add_memory]


def as_message(item: TResponseInputItem | Mapping[str, Any]) -> dict[str, Any] | None:
    """A run's item as a message to record: a user's or an agent's message with text; tool
    calls, their outputs and reasoning are not what was said (None)."""
    if not isinstance(item, Mapping):
        return None
    role = item.get("role")
    if item.get("type", "message") != "message" or role not in {"user", "assistant", "system"}:
        return None
    text = content_text(item.get("content"))
    if text is None or not text.strip():
        return None
    given = item.get("id")
    return {
        "role": role,
        "content": text,
        # an id of the SDK's where it has one; else one of its own, so that the same words said
        # again in a later turn are a message of their own
        "message_id": given if isinstance(given, str) and given else f"agents-{uuid.uuid4()}",
    }


class SlowwaveSession:
    """The Agents SDK's ``Session``, recording into a slowwave conversation (see the module)."""

    def __init__(
        self, conversation_id: str, client: AsyncClient, *, history: Session | None = None
    ) -> None:
        self.session_id = conversation_id
        self.session_settings: SessionSettings | None = None
        self.client = client
        self.history: Session = history if history is not None else SQLiteSession(conversation_id)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.history.get_items(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self.history.add_items(items)
        messages = [m for m in map(as_message, items) if m is not None]
        if messages:
            await self.client.record(self.session_id, messages)

    async def pop_item(self) -> TResponseInputItem | None:
        return await self.history.pop_item()

    async def clear_session(self) -> None:
        await self.history.clear_session()


__all__ = ["SlowwaveSession", "as_message", "memory_tools"]
