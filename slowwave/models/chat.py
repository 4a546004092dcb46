"""Messages as chat APIs send them, made transcript lines (``models.transcript``) for recording.

An agent knows what was said, not a message id: OpenAI's and Anthropic's messages are
``{"role", "content"}``, the content a string or a list of parts (``{"type": "text", "text"}``).
Recording takes them beside slowwave's own lines, filling in only what is absent:

- ``speaker``: the message's ``speaker``, else its ``name`` (a participant's, in OpenAI's
  messages), else its ``role``;
- ``text``: the message's ``text``, else its content's text (the text parts joined by a new
  line; image, audio and tool parts have none);
- ``timestamp``: the server's clock at the call, a microsecond apart per message so that the
  order sent is the order kept;
- ``message_id``: the message's ``message_id`` or ``id``, else one derived from the
  conversation, the message's position in the call, its speaker and its text — so a retry of
  the same call adds nothing. Two equal messages at the same position of two calls (a "yes"
  sent alone twice) are then one message: a caller whose conversation repeats itself sends ids.

A value that is present is never changed: a bad one is rejected with its reason, as a
transcript line's is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from slowwave_client.messages import content_text

DERIVED_ID_PREFIX = "auto-"


def derived_id(conversation_id: str, position: int, speaker: object, text: object) -> str:
    """A message id made from what the message is and where it stands in its call."""
    digest = hashlib.sha256(
        "\x1f".join((conversation_id, str(position), str(speaker), str(text))).encode()
    ).hexdigest()
    return DERIVED_ID_PREFIX + digest[:32]


def as_transcript(
    conversation_id: str, messages: Sequence[Mapping[str, Any]], now: datetime
) -> list[Any]:
    """``messages`` with what a transcript line needs filled in (see the module); anything
    that is not a mapping is passed on, to be rejected with its reason."""
    lines: list[Any] = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            lines.append(message)
            continue
        line = dict(message)
        if "speaker" not in line:
            named = line.get("name")
            line["speaker"] = named if isinstance(named, str) and named else line.get("role")
            if line["speaker"] is None:
                del line["speaker"]
        if "text" not in line and "content" in line:
            text = content_text(line["content"])
            if text is not None:
                line["text"] = text
        if "timestamp" not in line:
            line["timestamp"] = (now + timedelta(microseconds=position)).isoformat()
        if "message_id" not in line:
            given = line.get("id")
            line["message_id"] = (
                given
                if isinstance(given, str | int) and not isinstance(given, bool) and str(given)
                else derived_id(conversation_id, position, line.get("speaker"), line.get("text"))
            )
        lines.append(line)
    return lines
