"""Messages as chat APIs send them (``{role, content}``, no id, no time) are recorded as
slowwave's own, a retry adds nothing, and a call that names no conversation is about its
key's or the server's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import slowwave
import slowwave.errors
from slowwave.models.chat import DERIVED_ID_PREFIX, as_transcript
from slowwave.models.keys import Scope
from slowwave.models.settings import Settings
from slowwave.service import Caller
from slowwave.sql.db import Database

NOW = datetime(2026, 3, 4, 18, 0, tzinfo=UTC)

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "name": "Dana", "content": "I'm moving to Manchester."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Congratulations!"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "output_text", "text": "When do you go?"},
        ],
    },
]


def test_a_chat_message_becomes_a_transcript_line_with_what_is_absent_filled_in() -> None:
    system, user, assistant = as_transcript("dana", CHAT, NOW)
    assert (user["speaker"], user["text"]) == ("Dana", "I'm moving to Manchester.")
    assert (system["speaker"], assistant["speaker"]) == ("system", "assistant")
    assert assistant["text"] == "Congratulations!\nWhen do you go?"  # the image has no text
    times = [datetime.fromisoformat(m["timestamp"]) for m in (system, user, assistant)]
    assert times == sorted(times) and len(set(times)) == 3 and times[0] == NOW  # order kept
    assert all(m["message_id"].startswith(DERIVED_ID_PREFIX) for m in (system, user, assistant))


def test_a_derived_id_is_the_same_for_a_retry_and_differs_by_position_and_conversation() -> None:
    first = [m["message_id"] for m in as_transcript("dana", CHAT, NOW)]
    later = [m["message_id"] for m in as_transcript("dana", CHAT, datetime.now(UTC))]
    assert first == later and len(set(first)) == 3
    assert as_transcript("mia", CHAT, NOW)[0]["message_id"] != first[0]
    assert as_transcript("dana", CHAT[1:], NOW)[0]["message_id"] != first[1]  # another place


def test_a_value_that_is_given_is_never_changed_and_a_bad_one_is_left_to_be_refused() -> None:
    given: list[Any] = [
        {"message_id": 7, "timestamp": "2025-01-01T00:00:00Z", "speaker": "Mia", "text": "hi"},
        {"id": "msg_abc", "role": "user", "content": "from an agents SDK"},
        {"role": "user", "content": None},  # a tool call's message: no text
        "not a message",
    ]
    kept, sdk, empty, odd = as_transcript("dana", given, NOW)
    assert kept == given[0]
    assert sdk["message_id"] == "msg_abc" and sdk["text"] == "from an agents SDK"
    assert "text" not in empty
    assert odd == "not a message"


@pytest.mark.slow
def test_chat_messages_are_recorded_once_and_a_bad_one_is_rejected_with_its_reason(
    db: Database, settings: Settings
) -> None:
    with slowwave.Memory(settings) as memory:
        first = memory.record("dana", [*CHAT, {"role": "user", "content": None}])
        again = memory.record("dana", CHAT)
        answer = memory.search("where is Dana moving?", "dana", memories=3)
    assert (first.recorded, [r.index for r in first.rejected]) == (3, [3])
    assert "text" in first.rejected[0].reason
    assert (again.recorded, again.already_recorded) == (0, 3)
    (memory_hit,) = answer.memories
    assert "Dana: I'm moving to Manchester." in memory_hit.text


def test_a_call_that_names_no_conversation_is_about_its_keys_then_the_servers_default(
    tmp_path: Any,
) -> None:
    bare = Settings(home=tmp_path)
    default = bare.evolve(serve_default_conversation="front-desk")
    agent = Caller("acme", Scope.write, "key sw_test… (acme)", "dana")
    anyone = Caller("acme", Scope.write, "key sw_other… (acme)")
    for settings, caller, given, expected in (
        (default, agent, "mia", "mia"),  # named: that one
        (default, agent, None, "dana"),  # the key's
        (default, anyone, None, "front-desk"),  # the server's
    ):
        memory = slowwave.Memory(settings, database=Database(settings))
        assert memory.service.conversation(caller, given) == expected
    memory = slowwave.Memory(bare, database=Database(bare))
    with pytest.raises(slowwave.errors.InvalidRequest, match="conversation_id: required") as exc:
        memory.service.conversation(anyone, None)
    assert exc.value.code == "conversation_required"
