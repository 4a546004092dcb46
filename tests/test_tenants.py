"""Tenants and recorded conversations: (tenant, conversation id) names a conversation
everywhere, and a conversation recorded a few messages at a time ends with the episodes it would
have had ingested at once."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import slowwave
from slowwave.models.errors import InvalidConversationId, InvalidTenant
from slowwave.models.ids import new_id
from slowwave.models.settings import Settings
from slowwave.models.tenant import conversation_key, split_key
from slowwave.sql.db import Database
from slowwave.tasks.claim import ClaimPolicy, claim
from tests.fix_episodes import with_settings
from tests.fix_processes import run_cli

T0 = datetime(2025, 3, 4, 18, 0, tzinfo=UTC)


def said(n: int, at: datetime, **extra: Any) -> dict[str, Any]:
    return {
        "message_id": f"m{n}",
        "timestamp": at.isoformat(),
        "speaker": "user" if n % 2 else "assistant",
        "text": f"message {n}",
        **extra,
    }


def episodes(conn: psycopg.Connection, key: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT regexp_replace(external_key, '^.*:', ''), "
        "  ARRAY(SELECT m ->> 'message_id' FROM jsonb_array_elements(messages) m), "
        "  start_at, end_at, surprise "
        "FROM episodic_memory WHERE conversation_id = %s ORDER BY start_at",
        [key],
    ).fetchall()


# minutes after T0: a gap of 30 minutes cuts; three messages at most in an episode
TIMES = [0, 5, 10, 12, 14, 60, 61, 200, 201, 202, 203]


def test_a_conversation_recorded_one_message_at_a_time_ends_with_the_episodes_of_one_ingest(
    db: Database, settings: Settings, conn: psycopg.Connection
) -> None:
    tuned = with_settings(settings, segment_gap_s=1800, segment_max_messages=3)
    messages = [said(n, T0 + timedelta(minutes=m)) for n, m in enumerate(TIMES, start=1)]
    messages[6]["surprise"] = 0.9
    slow, whole = f"slow-{uuid.uuid4().hex[:6]}", f"whole-{uuid.uuid4().hex[:6]}"
    with slowwave.Memory(tuned) as memory:
        reports = [memory.record(slow, [m]) for m in messages]
        once = memory.record(whole, messages)

    assert [r.recorded for r in reports] == [1] * len(messages)
    assert sum(r.episodes_grown for r in reports) == len(messages) - once.episodes_new
    assert episodes(conn, slow) == episodes(conn, whole)
    assert [e[1] for e in episodes(conn, whole)] == [
        ["m1", "m2", "m3"],
        ["m4", "m5"],
        ["m6", "m7"],
        ["m8", "m9", "m10"],
        ["m11"],
    ]
    assert [e[4] for e in episodes(conn, slow)] == [None, None, pytest.approx(0.9), None, None]


def test_a_claimed_episode_never_grows_and_an_open_one_is_not_claimed(
    db: Database, settings: Settings, conn: psycopg.Connection
) -> None:
    name = f"open-{uuid.uuid4().hex[:6]}"
    now = datetime.now(UTC)
    policy = ClaimPolicy.of(settings)
    with slowwave.Memory(settings) as memory:
        memory.record(name, [said(1, T0)])
        claimed = claim(conn, new_id(), policy, conversations=[name], everything=True)
        assert [len(w.chunks) for w in claimed] == [1]
        memory.record(name, [said(2, T0 + timedelta(minutes=1))])  # within the gap: too late
        memory.record(name, [said(3, now - timedelta(minutes=1))])

    assert [e[1] for e in episodes(conn, name)] == [["m1"], ["m2"], ["m3"]]
    second = claim(conn, new_id(), policy, conversations=[name], everything=True)
    # m1 is under the first run's lease; m2 is closed; m3 is younger than the gap: still open
    assert [[m.message_id for e in c for m in e.messages] for w in second for c in w.chunks] == []
    conn.execute(
        "UPDATE episodic_memory SET claimed_until = now() - interval '1 s' "
        "WHERE conversation_id = %s",
        [name],
    )
    third = claim(conn, new_id(), policy, conversations=[name], everything=True)
    taken = [m.message_id for w in third for c in w.chunks for e in c for m in e.messages]
    assert taken == ["m1", "m2"]


def test_two_tenants_with_one_conversation_id_keep_apart_through_record_and_forget(
    db: Database, settings: Settings, conn: psycopg.Connection
) -> None:
    name = f"dana-{uuid.uuid4().hex[:6]}"
    with (
        slowwave.Memory(settings, tenant="acme") as acme,
        slowwave.Memory(settings) as ours,
    ):
        assert acme.record(name, [said(1, T0), said(2, T0)]).recorded == 2
        assert ours.record(name, [said(1, T0)]).recorded == 1  # the same message id, not a dup
        slowwave.forget(
            conversation_id=name, tenant="acme", reason="erasure", by="dpo", settings=settings
        )
        assert len(acme.record(name, [said(3, T0)]).rejected) == 1  # acme's stays forgotten
        assert ours.record(name, [said(3, T0)]).recorded == 1  # ours is not

    assert episodes(conn, conversation_key(name, "acme")) == []
    assert [e[1] for e in episodes(conn, name)] == [["m1", "m3"]]
    assert split_key(conversation_key(name, "acme")) == ("acme", name)


def test_tenant_names_and_conversation_ids_that_could_be_confused_are_refused() -> None:
    for tenant in ("", "Acme", "a/b", "a\x1fb", "-x", "x" * 64):
        with pytest.raises(InvalidTenant):
            conversation_key("dana", tenant)
    for conversation in ("", " ", "a\x1fb", "tab\there", "nul\x00"):
        with pytest.raises(InvalidConversationId):
            conversation_key(conversation, "acme")


@pytest.mark.slow
def test_the_cli_takes_a_tenant_wherever_it_names_a_conversation(tmp_path: Path) -> None:
    source = tmp_path / "chats.jsonl"
    lines = [{**said(1, T0), "conversation_id": "dana"}, {**said(2, T0), "conversation_id": "dana"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    home = tmp_path / "home"
    try:
        for tenant in ("acme", "default"):
            done = run_cli(home, "ingest", str(source), "--tenant", tenant)
            assert done.returncode == 0, done.stderr
        listed = run_cli(home, "db", "status", "--conversations")
        assert "acme/dana" in listed.stdout and "\x1f" not in listed.stdout
        forgot = run_cli(home, "forget", "-c", "dana", "--tenant", "acme", "-r", "erasure")
        assert forgot.returncode == 0, forgot.stderr
        after = run_cli(home, "db", "status", "--conversations")
        assert "acme/dana" not in after.stdout and "dana" in after.stdout
        gone = run_cli(home, "facts", "-c", "dana", "--tenant", "acme")  # as acme names it
        assert gone.returncode == 1 and "no conversation 'dana'" in gone.stderr
        assert gone.stderr.strip().endswith("[not_found]")
        bad = run_cli(home, "facts", "-c", "dana", "--tenant", "Not A Tenant")
        assert bad.returncode == 1 and "tenant 'Not A Tenant'" in bad.stderr
    finally:
        run_cli(home, "db", "stop")
