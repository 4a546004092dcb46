"""LoCoMo's records as slowwave's: a turn is a message, a session is an episode.

Kept with the records because two layers read the data set the same way: ingest (LoCoMo files
→ episodes) and the replay runtime (which recognises the sessions a prompt shows by their
turns, as a real model reads the prompt, and answers with their gold observations).
"""

from __future__ import annotations

import re
from typing import Any

from slowwave.models.episode import Message

# an image's caption as a message carries it; a fact copied from such a message drops it
IMAGE_CAPTION = re.compile(r"\s*\[image: [^\]]*\]")


def locomo_key(sample_id: str, session: int) -> str:
    """The external key of a LoCoMo session's episode."""
    return f"locomo:{sample_id}:session_{session}"


def locomo_message(turn: dict[str, Any]) -> Message:
    """A dialogue turn; an image turn keeps its caption as text (``[image: …]``)."""
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]".strip()
    return Message(speaker=str(turn["speaker"]), text=text, message_id=turn.get("dia_id"))
