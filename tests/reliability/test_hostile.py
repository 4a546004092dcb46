"""Hostile transcripts: a prompt injection obeyed by the model cannot wipe a conversation's
memory or reach another's, and the transcript reader survives any bytes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from slowwave.models.consolidation import FactAction
from slowwave.models.ids import new_id
from slowwave.models.plan import Plan, PlannedAction
from slowwave.models.settings import ConsolidationSettings, Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.guard import hold_reason
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_episodes import with_settings
from tests.reliability.fix_commands import INJECTION, START, CommandModel, HashEmbedder, said

FACTS = [
    "remember: Mira lives in Lisbon near the river.",
    "remember: Mira teaches chemistry at a high school.",
    "remember: Mira has a brother called Tomas.",
    "remember: Mira runs a marathon every spring.",
    "remember: Mira is allergic to peanuts and shellfish.",
]


def run(db: Database, settings: Settings) -> None:
    consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")


def active(conn: psycopg.Connection, conversation: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM semantic_memory WHERE conversation_id = %s AND invalid_at IS NULL",
        (conversation,),
    ).fetchone()
    return int(row[0]) if row else 0


def test_an_obeyed_injection_that_would_end_most_shown_facts_is_held_for_review(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    settings = with_settings(settings, chunk_size=8)
    load_episodes(conn, said("mira", *FACTS) + said("other", *FACTS))
    conn.commit()
    run(db, settings)
    assert active(conn, "mira") == 5 and active(conn, "other") == 5

    load_episodes(conn, said("mira", "remember: Mira adopted a dog.", INJECTION, day=1))
    conn.commit()
    run(db, settings)

    assert active(conn, "mira") == 5 and active(conn, "other") == 5  # nothing ended
    held = conn.execute(
        "SELECT quarantined_at IS NOT NULL, last_error FROM episodic_memory "
        "WHERE conversation_id = 'mira' AND start_at >= %s ORDER BY start_at",
        (START + timedelta(days=1),),
    ).fetchall()
    reason = (
        "held for review: the plan would end 5 of the 5 facts shown (more than 50%; "
        "SLOWWAVE_HOLD_ENDING_SHARE)"
    )
    assert held == [(True, reason), (True, reason)]
    (status, error) = conn.execute(
        "SELECT status, error FROM consolidation_chunks ORDER BY recorded_at DESC LIMIT 1"
    ).fetchone()  # type: ignore[misc]
    assert (status, error) == ("quarantined", reason)


def test_a_plan_that_ends_a_few_shown_facts_is_applied(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    settings = with_settings(settings, chunk_size=8)
    load_episodes(conn, said("mira", *FACTS))
    conn.commit()
    run(db, settings)
    load_episodes(
        conn,
        said(
            "mira",
            "now: Mira lives in Lisbon near the river. => Mira lives in Porto by the sea.",
            "drop: Mira runs a marathon every spring.",
            day=1,
        ),
    )
    conn.commit()
    run(db, settings)
    assert active(conn, "mira") == 4  # one updated (ended and replaced), one invalidated
    (pending,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NULL"
    ).fetchone()  # type: ignore[misc]
    assert pending == 0


def test_the_hold_can_be_lifted_for_a_run_that_an_operator_approved(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    settings = with_settings(settings, chunk_size=8)
    load_episodes(conn, said("mira", *FACTS))
    conn.commit()
    run(db, settings)
    load_episodes(conn, said("mira", INJECTION, day=1))
    conn.commit()
    run(db, with_settings(settings, hold_ending_share=1.0))
    assert active(conn, "mira") == 0


def _plan_ending(n: int) -> Plan:
    plan = Plan(chunk_id=new_id(), conversation_id="c", episode_ids=[new_id()], event_time=START)
    plan.actions = [
        PlannedAction(
            action=FactAction.invalidate,
            proposed=FactAction.invalidate,
            target_id=new_id(),
            episode_ids=plan.episode_ids,
            event_time=START,
        )
        for _ in range(n)
    ]
    return plan


def test_the_hold_takes_plans_ending_more_than_the_share_and_at_least_the_minimum() -> None:
    policy = ConsolidationSettings(hold_ending_share=0.5, hold_ending_min=3)
    assert hold_reason(_plan_ending(1), 1, policy) is None  # an ordinary update of the only fact
    assert hold_reason(_plan_ending(2), 2, policy) is None  # under the minimum
    assert hold_reason(_plan_ending(3), 6, policy) is None  # half is not more than half
    assert hold_reason(_plan_ending(4), 6, policy) is not None
    assert (
        hold_reason(
            _plan_ending(4), 6, ConsolidationSettings(hold_ending_share=1.0, hold_ending_min=3)
        )
        is None
    )  # off


# ── the transcript reader over arbitrary unicode, control characters and bytes ──────────

ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=60)  # surrogates too
LINE = st.one_of(
    st.tuples(ANY_TEXT, ANY_TEXT, st.booleans()),  # speaker, text, written as ASCII JSON
    st.binary(max_size=60).filter(lambda b: b"\n" not in b),
)


def storable(value: str) -> bool:
    """What Postgres text can hold, not blank."""
    if not value.strip() or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@hsettings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines=st.lists(LINE, min_size=1, max_size=30))
@pytest.mark.slow
def test_the_reader_lands_every_storable_message_exactly_and_rejects_the_rest_by_line(
    db: Database, settings: Settings, tmp_path_factory: pytest.TempPathFactory, lines: list[Any]
) -> None:
    conversation = f"any-{new_id()}"
    path = tmp_path_factory.mktemp("any") / "t.jsonl"
    expected: dict[str, str] = {}  # message id → text that must land as is
    blank: set[int] = set()
    with path.open("wb") as out:
        for number, line in enumerate(lines, start=1):
            if isinstance(line, bytes):
                raw = line
                try:
                    if not line.decode("utf-8").strip():  # str.strip: \x1c-\x1f too
                        blank.add(number)
                except UnicodeDecodeError:
                    pass
            else:
                speaker, text, ascii_only = line
                record = {
                    "conversation_id": conversation,
                    "message_id": str(number),
                    "timestamp": (START + timedelta(minutes=number)).isoformat(),
                    "speaker": speaker,
                    "text": text,
                }
                encoded = json.dumps(record, ensure_ascii=ascii_only)
                try:
                    raw = encoded.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: only JSON's escape can say it
                    raw = json.dumps(record).encode()
                if storable(speaker) and storable(text):
                    expected[str(number)] = text
            out.write(raw + b"\n")

    report = ingest(db, path, IngestPolicy.of(settings))  # never raises

    rejected = (
        {json.loads(x)["line"] for x in Path(report.rejects_path).read_text().splitlines()}
        if report.rejects_path
        else set()
    )
    good_lines = {int(m) for m in expected}
    assert rejected == set(range(1, len(lines) + 1)) - good_lines - blank
    with db.connection() as conn:
        landed = dict(
            conn.execute(
                "SELECT m->>'message_id', m->>'text' FROM episodic_memory e, "
                "jsonb_array_elements(e.messages) m WHERE e.conversation_id = %s",
                (conversation,),
            ).fetchall()
        )
    assert landed == expected
    event(f"landed {min(len(landed), 3)}+, rejected {min(len(rejected), 3)}+")
