"""slowwave's memory as MCP tools (the official SDK): over streamable HTTP on the server's
``/mcp``, and over stdio (``slowwave mcp``) for desktop agents.

The tools are the service's operations (``slowwave.service``) under the names agents know
them by. Over HTTP every request is authenticated as a REST request is, before MCP sees it: no
key or a bad one is a 401 with ``WWW-Authenticate``, for ``initialize`` and ``tools/list`` as
for ``tools/call``; the server is stateless, so ``GET`` (a stream it never sends on) and
``DELETE`` (a session it never keeps) are 405. On stdio the key is ``SLOWWAVE_API_KEY``'s,
checked again at every call (a revoked key stops at once). A tool that fails answers with the
error's code and message, as REST's body carries them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from slowwave import __version__
from slowwave.models.category import Category
from slowwave.models.errors import NothingToAdd, SlowwaveError, Unauthorized
from slowwave.models.settings import Settings
from slowwave.server.auth import Authenticator
from slowwave.server.errors import error_response
from slowwave.service import Caller, Service
from slowwave.service.reads import profile_json

T = TypeVar("T")

INSTRUCTIONS = (
    "slowwave is this agent's long-term memory. Record what is said with add_memory (chat "
    "messages as {role, content}; no id or time needed); the nightly consolidation turns it "
    "into facts, and what was said is found at once. Before answering about the user, call "
    "search_memory (or get_context for a system prompt). A conversation_id names one "
    "conversation (one user, one thread): use the same one every time, or none where the key "
    "or the server names it."
)

# The tools, in the order an agent meets them; tests enumerate them from here.
TOOLS = (
    "search_memory",
    "get_context",
    "list_facts",
    "fact_history",
    "get_profile",
    "conversation_status",
    "add_memory",
    "consolidate_conversation",
    "run_state",
    "forget_conversation",
)


def build_server(service: Callable[[], Service], caller: Callable[[Context], Caller]) -> MCPServer:
    """The MCP server; ``caller`` says who a tool call is (from its context)."""
    server: MCPServer = MCPServer(
        name="slowwave", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    call = Calls(service, caller)
    _reading_tools(server, call)
    _writing_tools(server, call)
    return server


class Calls:
    """How a tool runs its work: on a worker thread, as its caller, a slowwave error answered
    as the tool's error (its code and message, as REST's body carries them)."""

    def __init__(self, service: Callable[[], Service], caller: Callable[[Context], Caller]) -> None:
        self.service = service
        self.caller = caller

    async def __call__(self, ctx: Context, work: Callable[[Service, Caller], T]) -> T:
        def run() -> T:
            return work(self.service(), self.caller(ctx))

        try:
            return await anyio.to_thread.run_sync(run)
        except SlowwaveError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from None


def _reading_tools(server: MCPServer, call: Calls) -> None:
    """search_memory, get_context, list_facts, fact_history, get_profile, conversation_status."""

    @server.tool(
        description="The facts and the episodic memories (what was said, consolidated or not "
        "yet) that best answer a query, with scores and ranks (rerank: order the best by a "
        "cross-encoder; default: the server's setting)."
    )
    async def search_memory(
        query: str,
        ctx: Context,
        conversation_id: str | None = None,
        k: int = 10,
        category: Category | None = None,
        as_of: datetime | None = None,
        memories: int | None = None,
        memory_tokens: int | None = None,
        rerank: bool | None = None,
    ) -> dict[str, Any]:
        answer = await call(
            ctx,
            lambda s, c: s.search(
                c,
                query,
                s.conversation(c, conversation_id),
                k,
                category=category,
                as_of=as_of,
                output="markdown",
                memories=memories,
                memory_tokens=memory_tokens,
                rerank=rerank,
            ),
        )
        return answer.model_dump(mode="json")

    @server.tool(
        description="Guidelines and top identity / preference facts, within a budget (memories: "
        "also the latest episodes' last messages)."
    )
    async def get_context(
        ctx: Context,
        conversation_id: str | None = None,
        budget_tokens: int = 500,
        as_of: datetime | None = None,
        memories: int = 0,
    ) -> str:
        answer = await call(
            ctx,
            lambda s, c: s.context(
                c,
                s.conversation(c, conversation_id),
                budget_tokens,
                as_of=as_of,
                memories=memories,
            ),
        )
        return answer.context

    @server.tool(description="A conversation's active facts, those valid at as_of, or all.")
    async def list_facts(
        ctx: Context,
        conversation_id: str | None = None,
        as_of: datetime | None = None,
        all: bool = False,
    ) -> list[dict[str, Any]]:
        facts = await call(
            ctx,
            lambda s, c: s.facts(
                c, s.conversation(c, conversation_id), as_of=as_of, everything=all
            ),
        )
        return [f.model_dump(mode="json") for f in facts]

    @server.tool(description="Every version of a fact, oldest first.")
    async def fact_history(fact_id: UUID, ctx: Context) -> list[dict[str, Any]]:
        versions = await call(ctx, lambda s, c: s.history(c, fact_id))
        return [v.model_dump(mode="json") for v in versions]

    @server.tool(description="The model-written profile of a conversation's facts.")
    async def get_profile(ctx: Context, conversation_id: str | None = None) -> dict[str, Any]:
        def read(s: Service, c: Caller) -> dict[str, Any]:
            chosen = s.conversation(c, conversation_id)
            return profile_json(s.profile(c, chosen), chosen)

        return await call(ctx, read)

    @server.tool(description="Episodes pending, consolidated and quarantined; facts; last run.")
    async def conversation_status(
        ctx: Context, conversation_id: str | None = None
    ) -> dict[str, Any]:
        status = await call(ctx, lambda s, c: s.status(c, s.conversation(c, conversation_id)))
        return status.model_dump(mode="json")


def _writing_tools(server: MCPServer, call: Calls) -> None:
    """add_memory, consolidate_conversation, run_state, forget_conversation."""

    @server.tool(
        description="Remember what was said: chat messages as {role, content} (OpenAI's or "
        "Anthropic's shape; slowwave's {speaker, text, message_id, timestamp} too), or one "
        "text. No id or time needed: a retry of the same call adds nothing. Found by "
        "search_memory at once; consolidated into facts later."
    )
    async def add_memory(
        ctx: Context,
        messages: list[dict[str, Any]] | None = None,
        text: str | None = None,
        conversation_id: str | None = None,
    ) -> dict[str, Any]:
        said = [*(messages or []), *([{"role": "user", "content": text}] if text else [])]

        def add(s: Service, c: Caller) -> Any:
            if not said:
                raise NothingToAdd("give messages or a text to remember")
            return s.record(c, s.conversation(c, conversation_id), said)

        recorded = await call(ctx, add)
        return recorded.model_dump(mode="json")

    @server.tool(
        description="Consolidate a conversation's pending episodes into facts now, whatever the "
        "nightly triggers say (write keys), what was just said included: the conversation's "
        "open episode is closed at this call, and a message added after it starts the next. "
        "Answers with the run's id at once; run_state follows it."
    )
    async def consolidate_conversation(
        ctx: Context, conversation_id: str | None = None
    ) -> dict[str, Any]:
        started = await call(
            ctx, lambda s, c: s.consolidate_now(c, s.conversation(c, conversation_id))
        )
        return started.model_dump(mode="json")

    @server.tool(
        description="A run this tenant asked for: queued, running or how it ended, with what it "
        "committed and, once ended, what it left undone by reason (left_undone, note)."
    )
    async def run_state(run_id: UUID, ctx: Context) -> dict[str, Any]:
        state = await call(ctx, lambda s, c: s.run_state(c, run_id))
        return state.model_dump(mode="json")

    @server.tool(
        description="Forget a conversation for a privacy request (admin keys only): its rows "
        "deleted, a tombstone kept, and the table files rewritten right after the answer "
        "(purge=false skips that)."
    )
    async def forget_conversation(
        conversation_id: str, reason: str, ctx: Context, purge: bool = True
    ) -> dict[str, Any]:
        answer = await call(
            ctx,
            lambda s, c: s.forget(c, conversation_id=conversation_id, reason=reason, purge=purge),
        )
        return answer.model_dump(mode="json")


class KeyGate:
    """MCP's HTTP requests, authenticated before the SDK sees them (REST's answer to a missing
    or bad key, a rate limit or a busy pool), so that no tool is listed or called for a caller
    that REST would refuse."""

    def __init__(self, app: ASGIApp, auth: Callable[[], Authenticator]) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1") or None

        def check() -> SlowwaveError | None:
            try:
                self.auth().caller(authorization)
            except SlowwaveError as exc:
                return exc
            return None

        refused = await anyio.to_thread.run_sync(check)
        if refused is not None:
            await error_response(refused)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class McpEndpoint:
    """MCP over streamable HTTP as routes of the server's app (``/mcp``), stateless (every
    request stands alone, so replicas need no shared session), answered as JSON: POST only
    (405 with ``Allow: POST`` otherwise), behind ``KeyGate``."""

    def __init__(
        self,
        service: Callable[[], Service],
        auth: Callable[[], Authenticator],
        host: str = "127.0.0.1",
    ) -> None:
        def caller(ctx: Context) -> Caller:
            headers = ctx.headers or {}
            # the gate counted this request against the key's rate already
            return auth().caller(headers.get("authorization"), limited=False)

        self.server = build_server(service, caller)
        # DNS rebinding protection on a loopback address (the SDK's default there)
        starlette = self.server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
        )
        self.routes: list[BaseRoute] = [
            Route(route.path, KeyGate(route.app, auth), methods=["POST"])
            if isinstance(route, Route) and route.path == "/mcp"
            else route
            for route in starlette.routes
        ]

    @asynccontextmanager
    async def lifespan_context(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield


def run_stdio(settings: Settings, key: str) -> None:
    """Serve one agent over stdio as ``key`` allows, until its client closes the pipe."""
    service = Service.started(settings, pool_size=2, background=True, warm=True)
    auth = Authenticator(service)
    try:
        auth.caller(f"Bearer {key}")  # a key that is no key stops here, before any client
        server = build_server(lambda: service, lambda ctx: auth.caller(f"Bearer {key}"))
        anyio.run(server.run_stdio_async)
    except Unauthorized as exc:
        raise StdioRefused(exc.message) from None
    finally:
        service.close()


class StdioRefused(Unauthorized):
    """``slowwave mcp`` cannot serve as the key it was given (unknown, revoked)."""


__all__ = ["TOOLS", "McpEndpoint", "build_server", "run_stdio"]
