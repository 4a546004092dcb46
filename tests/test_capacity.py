"""A capacity cap per conversation: over it, the unused and least corroborated facts are
retired (invalidated with the reason `evicted`), never deleted; `db status` shows the sizes."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from slowwave.memory import Memory
from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.sql.db.status import read_status
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.revert import revert_run
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact

FACTS = {
    "e1": ["User keeps bees on the roof", "User plays the cello on Sundays"],
    "e2": ["User is learning Icelandic", "User collects antique maps"],
    "e3": ["User runs marathons in autumn", "User restores old motorcycles"],
}


def _says(texts: list[str]) -> Callable[[object], ConsolidationOutput]:
    return lambda request: ConsolidationOutput(facts=[fact(t, "interest") for t in texts])


def _active(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT fact FROM semantic_memory WHERE conversation_id = 'cap' AND invalid_at IS NULL"
    ).fetchall()
    return {r[0] for r in rows}


@pytest.mark.slow
def test_a_conversation_over_its_cap_retires_its_unused_facts_and_keeps_what_was_retrieved(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    capped = with_settings(settings, max_active_facts=3, chunk_size=1)
    model = ScriptedModel({k: _says(v) for k, v in FACTS.items()})
    add(
        conn,
        make_episode("cap", "e1", "Bees on the roof, cello on Sundays.", at(2025, 3, 1)),
        make_episode("cap", "e2", "Icelandic lessons; a map from 1790.", at(2025, 3, 2)),
    )
    first = consolidate(db, model, embedder, capped, kind="backfill")
    assert first.facts_inserted == 4 and first.facts_evicted == 1
    assert len(_active(conn)) == 3
    kept = sorted(_active(conn))[0]
    memory = Memory(capped, embedder=embedder)
    try:  # an agent is served one of the facts: retrieval is recorded
        assert kept in [h.fact for h in memory.search(kept, "cap", k=1).hits]
    finally:
        memory.close()

    add(conn, make_episode("cap", "e3", "A marathon, and a 1962 motorcycle.", at(2025, 3, 3)))
    second = consolidate(db, model, embedder, capped, kind="backfill")

    assert second.facts_inserted == 2 and second.facts_evicted == 2
    assert _active(conn) == {kept, *FACTS["e3"]}, "the retrieved fact and the newest stay"
    (rows, evicted) = conn.execute(
        "SELECT (SELECT count(*) FROM semantic_memory WHERE conversation_id = 'cap'), "
        "(SELECT count(*) FROM decision_log WHERE reason = 'evicted' AND action = 'invalidate')"
    ).fetchone()  # type: ignore[misc]
    assert rows == 6 and evicted == 3, "retired by invalidation, never deleted"
    status = read_status(conn, "test", per_conversation=True)
    (row,) = [c for c in status.conversations or [] if c.conversation_id == "cap"]
    assert row.facts_active == 3 and row.facts_invalidated == 3
    assert row.facts_active_chars == sum(len(f) for f in _active(conn))
    assert row.facts_active_tokens >= row.facts_active_chars // 4

    revert_run(conn, second.run_id, by="test", reason="the cap was a trial")
    assert len(_active(conn)) == 3 and kept in _active(conn), "a revert restores the evicted"
