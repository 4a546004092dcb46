"""A LangGraph agent whose long-term memory is slowwave: it searches memory before it answers
and remembers what the user tells it, across threads and restarts.

    pip install 'slowwave-client[langgraph]' langchain-openai
    slowwave serve &                              # or SLOWWAVE_BASE_URL / SLOWWAVE_API_KEY
    OPENAI_API_KEY=… python examples/langgraph_agent.py sam "I'm allergic to peanuts."
    OPENAI_API_KEY=… python examples/langgraph_agent.py sam "What should I never cook for me?"

Any OpenAI-compatible endpoint serves the model (``OPENAI_BASE_URL``, ``--model``): a local
llama.cpp or vLLM server as well as OpenAI. ``tests/test_integrations.py`` runs ``build_agent``
with a scripted model against a real server.
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.prebuilt import create_react_agent

from slowwave_client import Client
from slowwave_client.integrations.langgraph import memory_tools

PROMPT = (
    "You are a helpful assistant with long-term memory. Before you answer anything about the "
    "user, call search_memory. When the user tells you something about themselves worth "
    "remembering, call add_memory with it."
)


def build_agent(model: BaseChatModel, memory: Client, conversation_id: str) -> Any:
    """A ReAct agent with slowwave's search and record as its tools."""
    return create_react_agent(model, memory_tools(memory, conversation_id), prompt=PROMPT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conversation", help="whose memory: one user, one conversation id")
    parser.add_argument("message", help="what the user says")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    from langchain_openai import ChatOpenAI  # the example's model; any chat model will do

    with Client() as memory:
        agent = build_agent(ChatOpenAI(model=args.model), memory, args.conversation)
        result = agent.invoke({"messages": [{"role": "user", "content": args.message}]})
        print(result["messages"][-1].content)


if __name__ == "__main__":
    main()
