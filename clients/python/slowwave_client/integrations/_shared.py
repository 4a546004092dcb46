"""What the integrations say to a model: a search's answer as text, and the tools' words."""

from __future__ import annotations

from slowwave_client.types import SearchAnswer

SEARCH_DESCRIPTION = (
    "Search long-term memory: the facts learned about the user and what was said in earlier "
    "conversations (episodic memories), best first. Use before answering about the user."
)
ADD_DESCRIPTION = (
    "Remember something the user said, for later conversations: one message, in the user's "
    "words or as a short statement."
)


def answer_text(answer: SearchAnswer, *, limit: int = 10) -> str:
    """Facts and memories as lines a model reads: ``fact (category): …``,
    ``memory (when): …``; ``nothing found`` when there is nothing."""
    lines = [f"fact ({hit.category.value}): {hit.fact}" for hit in answer.hits[:limit]]
    for memory in (answer.memories or [])[: max(limit - len(lines), 0)]:
        lines.append(f"memory ({memory.start_at:%Y-%m-%d}): {memory.text}")
    return "\n".join(lines) if lines else "nothing found"
