"""What a run leaves in the database, without what differs between two correct runs (ids,
run ids, clock times of the system), and the invariants that hold after any run."""

from __future__ import annotations

from typing import Any

import psycopg

KEYS = "array(SELECT external_key FROM episodic_memory e WHERE e.id = ANY({ids}) ORDER BY 1)"

OUTCOME = {
    "facts": f"""
        SELECT f.conversation_id, f.category, f.fact, f.keywords,
               {KEYS.format(ids="f.source_episodic_ids")}, f.valid_at, f.invalid_at,
               s.fact, (f.embedding IS NOT NULL)
        FROM semantic_memory f LEFT JOIN semantic_memory s ON s.id = f.supersedes_id""",
    "episodes": """
        SELECT external_key, consolidated_at IS NOT NULL, quarantined_at IS NOT NULL, gated,
               attempts, last_error, claimed_by IS NOT NULL, consolidated_messages
        FROM episodic_memory""",
    "decisions": f"""
        SELECT d.conversation_id, d.proposed_action, d.action, f.fact, p.fact,
               round(d.similarity::numeric, 4), {KEYS.format(ids="d.episode_ids")},
               d.event_time, d.reason, d.proposed_fact
        FROM decision_log d
        LEFT JOIN semantic_memory f ON f.id = d.fact_id
        LEFT JOIN semantic_memory p ON p.id = d.previous_fact_id""",
    "chunks": f"""
        SELECT conversation_id, {KEYS.format(ids="episode_ids")}, status, error
        FROM consolidation_chunks WHERE status <> 'conflict'""",
}


def outcome(conn: psycopg.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's content that a correct run determines, as sorted rows."""
    return {
        name: sorted(conn.execute(query).fetchall(), key=repr) for name, query in OUTCOME.items()
    }


# Each query returns the rows that break an invariant: none may come back.
INVARIANTS = {
    "an episode consolidated by no applied chunk, or by more than one": """
        SELECT e.external_key, count(c.id)
        FROM episodic_memory e
        LEFT JOIN consolidation_chunks c ON c.status = 'applied' AND e.id = ANY(c.episode_ids)
        WHERE e.consolidated_at IS NOT NULL
        GROUP BY e.external_key HAVING count(c.id) <> 1""",
    "an episode left pending or claimed": """
        SELECT external_key FROM episodic_memory
        WHERE (consolidated_at IS NULL AND quarantined_at IS NULL) OR claimed_by IS NOT NULL""",
    "a duplicate active fact": """
        SELECT conversation_id, fact FROM semantic_memory WHERE invalid_at IS NULL
        GROUP BY conversation_id, fact HAVING count(*) > 1""",
    "a decision about a fact that does not exist": """
        SELECT d.id FROM decision_log d
        WHERE (d.fact_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM semantic_memory f WHERE f.id = d.fact_id))
           OR (d.previous_fact_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM semantic_memory f WHERE f.id = d.previous_fact_id))""",
    "a fact citing an episode that does not exist": """
        SELECT f.id FROM semantic_memory f
        WHERE EXISTS (SELECT 1 FROM unnest(f.source_episodic_ids) AS e(id)
                      WHERE NOT EXISTS (SELECT 1 FROM episodic_memory x WHERE x.id = e.id))""",
    "a decision of a chunk that was not applied": """
        SELECT d.id FROM decision_log d
        WHERE d.action IN ('new', 'reinforce', 'update', 'invalidate', 'merge', 'rejected')
          AND NOT EXISTS (SELECT 1 FROM consolidation_chunks c
                          WHERE c.id = d.chunk_id AND c.status = 'applied')""",
    "a fact written by no recorded run, or by a chunk that was not applied": """
        SELECT f.id FROM semantic_memory f
        WHERE NOT EXISTS (SELECT 1 FROM consolidation_runs r WHERE r.id = f.created_by_run_id)
           OR NOT EXISTS (SELECT 1 FROM decision_log d WHERE d.fact_id = f.id)""",
    "a chunk or an episode of a run that is not recorded": """
        SELECT c.id FROM consolidation_chunks c
        WHERE NOT EXISTS (SELECT 1 FROM consolidation_runs r WHERE r.id = c.run_id)
        UNION ALL
        SELECT e.id FROM episodic_memory e WHERE e.consolidation_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM consolidation_runs r
                          WHERE r.id = e.consolidation_run_id)""",
    "a run still marked running": "SELECT id FROM consolidation_runs WHERE status = 'running'",
}


def broken_invariants(conn: psycopg.Connection) -> dict[str, list[tuple[Any, ...]]]:
    found = {name: conn.execute(query).fetchall() for name, query in INVARIANTS.items()}
    return {name: rows for name, rows in found.items() if rows}


def duplicate_facts(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM semantic_memory "
        "WHERE invalid_at IS NULL GROUP BY conversation_id, fact) d"
    ).fetchone()
    return int(row[0]) if row else 0


def lost_episodes(conn: psycopg.Connection) -> int:
    """Episodes neither consolidated nor quarantined after every run ended."""
    row = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NULL "
        "AND quarantined_at IS NULL"
    ).fetchone()
    return int(row[0]) if row else 0
