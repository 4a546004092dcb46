"""Forget on request: no byte of a forgotten conversation stays in any column or under the
home, search finds nothing, and a tombstone without content records the deletion."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from slowwave.models.errors import HistoryError, UnknownConversation
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.forget import digest, forget_conversation, forget_fact
from slowwave.tasks.history import fact_history, list_facts
from slowwave.tasks.ingest.read import validate
from slowwave.tasks.ingest.rejects import Reject, RejectsReport
from slowwave.tasks.search import has_facts, search
from tests.fix_episodes import with_settings
from tests.fix_forget import (
    columns_holding,
    consolidated_secret,
    files_holding,
    new_marker,
    transcript,
)
from tests.reliability.fix_commands import CommandModel, HashEmbedder

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


@pytest.mark.slow
def test_forgetting_a_conversation_leaves_no_byte_of_it_and_a_tombstone_without_content(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    marker = new_marker()
    source = transcript(tmp_path / "chats.jsonl", marker)
    consolidated_secret(db, settings, source)
    with RejectsReport(settings.home / "rejects" / "chats.jsonl.rejects.jsonl") as rejects:
        refused = {"conversation_id": "secret", "timestamp": "later", "text": f"again {marker}"}
        _, reject = validate(refused, 9, str(source), 1000)  # as ingest writes it
        assert reject is not None
        rejects.add(reject)
        rejects.add(Reject(str(source), 10, "malformed JSON", "{oops"))
    conn.execute("ANALYZE")  # as autovacuum does: the planner's samples hold values too
    conn.execute("CHECKPOINT")  # the marker is in the tables' files now, not only in memory
    assert columns_holding(conn, marker) and files_holding(settings.home, marker)
    source.unlink()  # the user's own file, outside the home

    report = forget_conversation(
        db, "secret", home=settings.home, by="dpo", reason="erasure request #12"
    )

    assert report.rows["episodes"] == 1 and report.rows["facts"] == 3
    assert report.reject_lines == 1 and report.purged, report.purge_note
    assert columns_holding(conn, marker) == []
    sampled = conn.execute(
        "SELECT tablename, attname FROM pg_stats WHERE most_common_vals::text ILIKE %s "
        "OR histogram_bounds::text ILIKE %s",
        (f"%{marker}%", f"%{marker}%"),
    ).fetchall()
    assert sampled == []
    conn.execute("CHECKPOINT")
    assert files_holding(settings.home, marker) == []
    assert not has_facts(conn, "secret")
    assert search(conn, HashEmbedder(), marker, "keep") != []  # other conversations stay
    assert all(marker not in h.fact for h in search(conn, HashEmbedder(), marker, "keep"))
    (tombstone,) = conn.execute(
        "SELECT kind, target, done_by, reason, rows FROM history_operations"
    ).fetchall()
    assert tombstone[:4] == ("forget_conversation", digest("secret"), "dpo", "erasure request #12")
    assert tombstone[4]["facts"] == 3 and "secret" not in json.dumps(tombstone[4])
    with pytest.raises(UnknownConversation, match="no conversation") as again:
        forget_conversation(db, "secret", home=settings.home, by="dpo", reason="again")
    assert (again.value.code, again.value.status) == ("not_found", 404)


def test_forgetting_one_fact_closes_its_chain_over_the_gap(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    from slowwave.tasks.ingest.load import load_episodes
    from tests.reliability.fix_commands import said

    one_a_chunk = with_settings(settings, chunk_size=1)
    texts = [
        "remember: Lea lives in a flat in Ghent.",
        "now: Lea lives in a flat in Ghent. => Lea lives on a houseboat in Antwerp.",
        "now: Lea lives on a houseboat in Antwerp. => Lea lives in a cottage near Bruges.",
    ]
    for day, text in enumerate(texts):
        load_episodes(conn, said("lea", text, day=day))
        conn.commit()
        consolidate(db, CommandModel(), HashEmbedder(), one_a_chunk, kind="backfill")
    first, middle, last = fact_history(conn, list_facts(conn, "lea")[0].id)

    report = forget_fact(db, middle.id, by="dpo", reason="asked to", purge=False)

    assert report.rows["facts"] == 1 and report.rows["successors_relinked"] == 1
    assert report.rows["decisions_scrubbed"] == 1
    assert [v.id for v in fact_history(conn, last.id)] == [first.id, last.id]
    (mentions,) = conn.execute(
        "SELECT count(*) FROM decision_log WHERE fact_id = %s OR previous_fact_id = %s "
        "OR proposed_fact = %s",
        (middle.id, middle.id, middle.fact),
    ).fetchone()  # type: ignore[misc]
    assert mentions == 0
    with pytest.raises(HistoryError, match="no fact"):
        forget_fact(db, middle.id, by="dpo", reason="again")


def test_a_reject_line_is_the_conversations_by_its_record_not_by_a_substring() -> None:
    from dataclasses import asdict

    from slowwave.tasks.forget import _names

    record = {"conversation_id": "c10", "message_id": "1", "timestamp": "bad", "text": "hi"}
    _, reject = validate(record, 3, "/data/chat.jsonl", 100)
    assert reject is not None
    line = json.dumps(asdict(reject))
    assert _names(line, "c10")
    assert not _names(line, "c1") and not _names(line, "chat")
    cut = json.dumps({"excerpt": '{"conversation_id": "c10", "text": "' + "x" * 300})
    assert _names(cut, "c10") and not _names(cut, "c1")


def test_a_run_can_still_be_reverted_after_a_fact_it_wrote_into_was_forgotten(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.revert import revert_run
    from tests.reliability.fix_commands import said

    two = with_settings(settings, chunk_size=2)
    load_episodes(conn, said("ana", "remember: Ana lives in Riga.", "remember: Ana lives in Oslo."))
    conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), two, kind="backfill")
    load_episodes(conn, said("ana", "now: Ana lives in Riga. => Ana lives in Oslo.", day=1))
    conn.commit()
    moved = consolidate(db, CommandModel(), HashEmbedder(), two, kind="backfill")
    (oslo,) = conn.execute("SELECT id FROM semantic_memory WHERE fact LIKE '%%Oslo%%'").fetchone()  # type: ignore[misc]

    forget_fact(db, oslo, by="dpo", reason="asked to", purge=False)
    revert_run(conn, moved.run_id, by="ops", reason="wrong move")

    assert conn.execute("SELECT fact, invalid_at IS NULL FROM semantic_memory").fetchall() == [
        ("Ana lives in Riga.", True)
    ]
