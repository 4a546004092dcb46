"""slowwave as LangGraph's and LangChain's long-term memory (``pip install
'slowwave-client[langgraph]'``).

Two ways in, over one ``slowwave_client.Client``:

- ``memory_tools(client, conversation_id)``: LangChain tools, ``search_memory`` and
  ``add_memory``, for an agent that decides when to remember and recall (any tool-calling
  model, ``create_react_agent``).
- ``SlowwaveStore(client)``: a LangGraph store (``graph.compile(store=…)``, a node's ``store``
  argument) where a namespace's last part is the conversation: ``put`` records a message
  (the key its id, ``value["content"]`` its text, ``value.get("role", "user")`` its speaker) and
  ``search`` is slowwave's search — facts and episodic memories, each a ``SearchItem`` whose
  value says its ``kind``; without a query, the conversation's active facts.

    store = SlowwaveStore(Client())
    store.put(("memories", "sam"), "m1", {"content": "I'm allergic to peanuts."})
    items = store.search(("memories", "sam"), query="what should Sam avoid?")

slowwave keeps what was said and what it learned, not documents by key: ``get``, ``delete``
and ``list_namespaces`` are refused with what to do instead (``Client.forget`` forgets a
conversation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import (
    BaseStore,
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from slowwave_client.client import Client
from slowwave_client.errors import NotFound
from slowwave_client.integrations._shared import ADD_DESCRIPTION, SEARCH_DESCRIPTION, answer_text


def memory_tools(client: Client, conversation_id: str, *, k: int = 10) -> list[BaseTool]:
    """``search_memory(query)`` and ``add_memory(text)`` over one conversation."""

    def search_memory(query: str) -> str:
        try:
            answer = client.search(query, conversation_id, k, memories=k)
        except NotFound:
            return "nothing found"
        return answer_text(answer, limit=k)

    def add_memory(text: str) -> str:
        recorded = client.record(conversation_id, [{"role": "user", "content": text}])
        return "remembered" if recorded.recorded else "already remembered"

    return [
        StructuredTool.from_function(search_memory, description=SEARCH_DESCRIPTION),
        StructuredTool.from_function(add_memory, description=ADD_DESCRIPTION),
    ]


def last_part(namespace: tuple[str, ...]) -> str:
    """The conversation a namespace names: its last part (``("memories", "sam")`` → sam)."""
    if not namespace or not namespace[-1]:
        raise ValueError("a namespace names its conversation last, as ('memories', 'sam')")
    return namespace[-1]


class SlowwaveStore(BaseStore):
    """A LangGraph store over slowwave (see the module); ``conversation_of`` maps a namespace
    to its conversation (its last part by default)."""

    def __init__(
        self,
        client: Client,
        *,
        conversation_of: Callable[[tuple[str, ...]], str] = last_part,
    ) -> None:
        self.client = client
        self.conversation_of = conversation_of

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, GetOp):
            raise NotImplementedError(
                "slowwave keeps what was said, not documents by key: search the namespace"
            )
        if isinstance(op, ListNamespacesOp):
            raise NotImplementedError("slowwave lists no namespaces: each names a conversation")
        raise NotImplementedError(f"{type(op).__name__} is not an operation slowwave has")

    def _put(self, op: PutOp) -> None:
        conversation = self.conversation_of(op.namespace)
        if op.value is None:
            raise NotImplementedError(
                "slowwave does not delete one message: forget the conversation "
                f"({conversation!r}) with Client.forget"
            )
        value = dict(op.value)
        text = value.get("content", value.get("text"))
        message = {
            "message_id": op.key,
            "speaker": str(value.get("role") or value.get("speaker") or "user"),
            "text": text if isinstance(text, str) else _as_text(value),
            "timestamp": datetime.now(UTC).isoformat(),
        }
        self.client.record(conversation, [message])

    def _search(self, op: SearchOp) -> list[SearchItem]:
        conversation = self.conversation_of(op.namespace_prefix)
        wanted = op.limit + op.offset
        now = datetime.now(UTC)
        try:
            if op.query is None:
                facts = self.client.facts(conversation)
                items = [
                    SearchItem(
                        op.namespace_prefix,
                        str(f.id),
                        {"kind": "fact", "content": f.fact, "category": f.category.value},
                        f.valid_at,
                        f.valid_at,
                    )
                    for f in facts
                ]
                return items[op.offset : wanted]
            answer = self.client.search(op.query, conversation, wanted, memories=wanted)
        except NotFound:
            return []
        items = [
            SearchItem(
                op.namespace_prefix,
                str(hit.id),
                {"kind": "fact", "content": hit.fact, "category": hit.category.value},
                hit.valid_at,
                hit.valid_at,
                hit.score,
            )
            for hit in answer.hits
        ]
        items += [
            SearchItem(
                op.namespace_prefix,
                str(memory.id),
                {"kind": "memory", "content": memory.text, "pending": memory.pending},
                memory.start_at,
                memory.end_at or now,
                memory.score,
            )
            for memory in answer.memories or []
        ]
        items.sort(key=lambda item: -(item.score or 0.0))
        return items[op.offset : wanted]


def _as_text(value: dict[str, Any]) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


__all__ = ["SlowwaveStore", "last_part", "memory_tools"]
