"""What a chat message says: its text, from the shapes chat APIs send. One reading for every
place that takes such messages — the server's recording (``slowwave.models.chat``) and the
Agents SDK session (``slowwave_client.integrations.openai_agents``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Content parts that carry text: OpenAI's chat ("text") and Responses ("input_text",
# "output_text") APIs, Anthropic's ("text").
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def content_text(content: object) -> str | None:
    """The text of a chat message's ``content``: a string as it is, a list of parts as its
    text parts joined by a new line; ``None`` when there is none."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = [
            part if isinstance(part, str) else part.get("text")
            for part in content
            if isinstance(part, str)
            or (isinstance(part, Mapping) and part.get("type") in TEXT_PARTS)
        ]
        kept = [text for text in texts if isinstance(text, str)]
        return "\n".join(kept) if kept else None
    return None


__all__ = ["TEXT_PARTS", "content_text"]
