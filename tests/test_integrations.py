"""The agent frameworks' own loops, each driven by a scripted model (no hosted model, no
network), against a real ``slowwave serve``: what the first run records comes back into the
second run's context. The agents are the ones in ``examples/``."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

from slowwave_client import AsyncClient, Client
from tests.fix_server import Served, start_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ALLERGY = "I'm allergic to peanuts, please remember that."


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples_{name}", ROOT / "examples" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("integrations"), "--no-auth")  # loopback
    try:
        yield server
    finally:
        server.stop()


# ── LangGraph ─────────────────────────────────────────────────────────────────────────────


def scripted_chat_model(*replies: Any) -> Any:
    """A LangChain chat model that answers with ``replies`` in turn and keeps what it was
    shown."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import BaseMessage
    from pydantic import Field

    class Scripted(FakeMessagesListChatModel):
        shown: list[list[BaseMessage]] = Field(default_factory=list)

        def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            self.shown.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    return Scripted(responses=list(replies))


def test_a_langgraph_agent_remembers_in_one_run_and_recalls_in_the_next(served: Served) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    agent_example = example("langgraph_agent.py")
    first = scripted_chat_model(
        AIMessage("", tool_calls=[{"name": "add_memory", "args": {"text": ALLERGY}, "id": "c1"}]),
        AIMessage("Noted: no peanuts."),
    )
    second = scripted_chat_model(
        AIMessage(
            "",
            tool_calls=[
                {"name": "search_memory", "args": {"query": "what food to avoid"}, "id": "c2"}
            ],
        ),
        AIMessage("You should avoid peanuts."),
    )
    with Client(base_url=served.url) as memory:
        agent = agent_example.build_agent(first, memory, "lg-sam")
        agent.invoke({"messages": [{"role": "user", "content": ALLERGY}]})
        assert memory.status("lg-sam").episodes_pending == 1  # the tool recorded it
        # a second run: a new agent, a new thread, nothing of the first in its messages
        agent = agent_example.build_agent(second, memory, "lg-sam")
        out = agent.invoke({"messages": [{"role": "user", "content": "What can't I eat?"}]})
    recalled = [m for m in second.shown[-1] if isinstance(m, ToolMessage)]
    assert recalled and "peanuts" in str(recalled[0].content), second.shown[-1]
    assert out["messages"][-1].content == "You should avoid peanuts."


def test_a_langgraph_store_puts_messages_and_its_search_is_slowwaves(served: Served) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.store.base import BaseStore

    from slowwave_client.integrations.langgraph import SlowwaveStore

    class State(MessagesState):
        recalled: list[str]

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        said = state["messages"][-1]
        store.put(("memories", "lg-store"), said.id or "m1", {"content": said.content})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        query = state["messages"][-1].content
        assert isinstance(query, str), query
        found = store.search(("memories", "lg-store"), query=query)
        return {"recalled": [item.value["content"] for item in found]}

    with Client(base_url=served.url) as memory:
        store = SlowwaveStore(memory)
        for node in (remember, recall):
            graph = StateGraph(State).add_node(node).add_edge(START, node.__name__)
            app = graph.add_edge(node.__name__, END).compile(store=store)
            asked = {"remember": ALLERGY, "recall": "which nuts are a problem?"}[node.__name__]
            # LangGraph types the input as the state itself, though it runs it through the
            # state's reducers (add_messages takes a message as a dict)
            out = app.invoke(  # type: ignore[call-overload]
                {"messages": [{"role": "user", "content": asked}], "recalled": []}
            )
        with pytest.raises(NotImplementedError, match="search the namespace"):
            store.get(("memories", "lg-store"), "m1")
        assert store.search(("memories", "nobody"), query="x") == []
    assert any("peanuts" in text for text in out["recalled"]), out["recalled"]


# ── OpenAI Agents SDK ─────────────────────────────────────────────────────────────────────


def scripted_agents_model(*outputs: list[Any]) -> Any:
    """An Agents SDK model that answers each call with the next of ``outputs`` and keeps the
    input it was given."""
    from agents import Model, ModelResponse, Usage

    class Scripted(Model):
        def __init__(self) -> None:
            self.inputs: list[Any] = []
            self.left = list(outputs)

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            self.inputs.append(kwargs["input"] if "input" in kwargs else args[1])
            return ModelResponse(output=self.left.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("a scripted model does not stream")

    return Scripted()


def said_by_assistant(text: str, n: int) -> Any:
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    return ResponseOutputMessage(
        id=f"msg_{n}",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
    )


def tool_call(name: str, arguments: dict[str, str], n: int) -> Any:
    from openai.types.responses import ResponseFunctionToolCall

    return ResponseFunctionToolCall(
        id=f"fc_{n}",
        call_id=f"call_{n}",
        name=name,
        arguments=json.dumps(arguments),
        type="function_call",
        status="completed",
    )


def test_an_openai_agents_run_is_recorded_by_its_session_and_recalled_in_the_next(
    served: Served,
) -> None:
    agents_example = example("openai_agents_agent.py")
    first = scripted_agents_model([said_by_assistant("Noted: no peanuts.", 1)])
    second = scripted_agents_model(
        [tool_call("search_memory", {"query": "food to avoid"}, 2)],
        [said_by_assistant("Avoid peanuts.", 3)],
    )

    async def runs() -> tuple[str, str, Any]:
        async with AsyncClient(base_url=served.url) as memory:
            agent = agents_example.build_agent(memory, "oa-sam", first)
            one = await agents_example.ask(agent, memory, "oa-sam", ALLERGY)
            agent = agents_example.build_agent(memory, "oa-sam", second)
            two = await agents_example.ask(agent, memory, "oa-sam", "What can't I eat?")
            status = await memory.status("oa-sam")
        return one, two, status

    one, two, status = anyio.run(runs)
    assert (one, two) == ("Noted: no peanuts.", "Avoid peanuts.")
    # the first run's two messages and the second's two, recorded through the session
    assert status.episodes_pending >= 1
    tool_outputs = [
        item
        for item in second.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert tool_outputs and "peanuts" in str(tool_outputs[0]["output"]), second.inputs[-1]
    assert "Noted: no peanuts." in str(tool_outputs[0]["output"])  # the agent's answer too


def test_a_runs_tool_calls_are_not_recorded_as_what_was_said() -> None:
    from slowwave_client.integrations.openai_agents import as_message

    assert as_message({"role": "user", "content": "hi"})["content"] == "hi"  # type: ignore[index]
    assert as_message(tool_call("search_memory", {"query": "x"}, 9).model_dump()) is None
    assert as_message({"type": "function_call_output", "call_id": "c", "output": "x"}) is None
    spoken = as_message(said_by_assistant("Hello.", 4).model_dump())
    assert spoken == {"role": "assistant", "content": "Hello.", "message_id": "msg_4"}


def test_no_integration_is_imported_by_the_client_or_the_server() -> None:
    import subprocess

    probe = (
        "import sys, slowwave, slowwave_client, slowwave.server.app, slowwave.cli; "
        "print(sorted(m for m in ('langgraph', 'langchain_core', 'agents') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    assert loaded == "[]"
