"""An OpenAI Agents SDK agent whose long-term memory is slowwave: every run's messages are
recorded through its session, and it searches memory before it answers.

    pip install 'slowwave-client[openai-agents]'
    slowwave serve &                              # or SLOWWAVE_BASE_URL / SLOWWAVE_API_KEY
    OPENAI_API_KEY=… python examples/openai_agents_agent.py sam "I'm allergic to peanuts."
    OPENAI_API_KEY=… python examples/openai_agents_agent.py sam "What should I never eat?"

``--base-url`` points the model at any OpenAI-compatible endpoint (a local llama.cpp or vLLM
server). ``tests/test_integrations.py`` runs ``build_agent`` and ``ask`` with a scripted model
against a real server.
"""

from __future__ import annotations

import argparse
import asyncio

from agents import Agent, Model, Runner

from slowwave_client import AsyncClient
from slowwave_client.integrations.openai_agents import SlowwaveSession, memory_tools

INSTRUCTIONS = (
    "You are a helpful assistant with long-term memory. Before you answer anything about the "
    "user, call search_memory."
)


def build_agent(memory: AsyncClient, conversation_id: str, model: str | Model) -> Agent:
    """An agent with slowwave's search and record as its tools."""
    return Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        tools=memory_tools(memory, conversation_id),
        model=model,
    )


async def ask(agent: Agent, memory: AsyncClient, conversation_id: str, message: str) -> str:
    """One run; its messages are recorded into the conversation by the session."""
    result = await Runner.run(agent, message, session=SlowwaveSession(conversation_id, memory))
    return str(result.final_output)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conversation", help="whose memory: one user, one conversation id")
    parser.add_argument("message", help="what the user says")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of OpenAI")
    args = parser.parse_args()
    model: str | Model = args.model
    if args.base_url:
        from agents import OpenAIChatCompletionsModel
        from openai import AsyncOpenAI

        model = OpenAIChatCompletionsModel(args.model, AsyncOpenAI(base_url=args.base_url))
    async with AsyncClient() as memory:
        agent = build_agent(memory, args.conversation, model)
        print(await ask(agent, memory, args.conversation, args.message))


if __name__ == "__main__":
    asyncio.run(main())
