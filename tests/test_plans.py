"""Every statement slowwave runs, EXPLAINed against tables of realistic size: the index it
relies on is the one the planner picks, or the sequential scan is the one its comment
justifies. An index no statement uses is not in the schema (each insert would pay for it).

The fixture is a database of its own: 400 conversations with 75 facts and 45 episodes each
(30,000 facts with 384-dimensional vectors, 18,000 episodes of which one in ten is pending,
a decision log and chunks to match), analysed as a nightly database would be.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from slowwave import sql
from slowwave.models.settings import Settings
from slowwave.sql.copy import copy_rows
from slowwave.sql.db import Database, migrate
from slowwave.tasks.apply_writes import FACT_COLUMNS
from tests.fix_db import url_for_database

CONVERSATIONS = 400
FACTS_PER_CONVERSATION = 75
EPISODES_PER_CONVERSATION = 45
DIM = 384
T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def big(database: Database, settings: Settings) -> Iterator[psycopg.Connection]:
    """A migrated database of realistic size, dropped afterwards."""
    name = f"plans_{uuid.uuid4().hex[:8]}"
    with database.raw_connection(autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    values = {**settings.model_dump(), "database_url": url_for_database(database.url, name)}
    db = Database(Settings(**values, _env_file=None)).open()
    try:
        migrate(db)
        with db.raw_connection() as conn:
            _fill(conn)
            conn.execute("ANALYZE")
            conn.commit()
            yield conn
    finally:
        db.close()
        with database.raw_connection(autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _fill(conn: psycopg.Connection) -> None:
    rng = np.random.default_rng(7)
    # years of privacy requests: every writer probes the tombstones
    conn.execute(
        "INSERT INTO history_operations (kind, target, done_by, reason, rows) "
        "SELECT 'forget_conversation', slowwave_digest('gone-' || g), 'dpo', 'erasure', '{}' "
        "FROM generate_series(1, 5000) g"
    )
    run = uuid.uuid4()
    conn.execute(
        "INSERT INTO consolidation_runs (id, kind, status) VALUES (%s, 'nightly', 'completed')",
        (run,),
    )
    messages = Jsonb([{"speaker": "user", "text": "a message of ordinary length " * 6}])
    episode_ids: list[uuid.UUID] = []
    with conn.cursor().copy(
        "COPY episodic_memory (id, conversation_id, external_key, messages, surprise, start_at, "
        "end_at, consolidated_at, consolidation_run_id, created_at) FROM STDIN"
    ) as copy:
        for c in range(CONVERSATIONS):
            for e in range(EPISODES_PER_CONVERSATION):
                at = T0 + timedelta(days=e)
                pending = e >= EPISODES_PER_CONVERSATION - 5 and c % 2 == 0
                episode = uuid.uuid4()
                episode_ids.append(episode)
                copy.write_row(
                    (
                        episode,
                        f"conv-{c}",
                        f"k-{c}-{e}",
                        json.dumps(messages.obj),
                        0.5,
                        at,
                        at,
                        None if pending else at,
                        None if pending else run,
                        at,
                    )
                )
    fact_ids: list[uuid.UUID] = []
    rows = []
    for c in range(CONVERSATIONS):
        vectors = rng.standard_normal((FACTS_PER_CONVERSATION, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        for f in range(FACTS_PER_CONVERSATION):
            fact = uuid.uuid4()
            fact_ids.append(fact)
            ended = T0 + timedelta(days=f + 1) if f % 5 == 0 else None
            rows.append(
                (
                    fact,
                    f"conv-{c}",
                    "experience",
                    f"User {c} did thing number {f} with the garden and the bicycle",
                    ["garden", f"thing{f}"],
                    [episode_ids[c * EPISODES_PER_CONVERSATION]],
                    T0 + timedelta(days=f),
                    ended,
                    vectors[f],
                    None,  # supersedes_id
                    run,
                    None,  # slot
                )
            )
    copy_rows(conn, "semantic_memory", FACT_COLUMNS, rows)  # apply's own COPY
    # every episode's messages embedded in windows, as searches leave them
    with conn.cursor().copy(
        "COPY episode_windows (episode_id, messages_from, messages_to, conversation_id, "
        "embedding) FROM STDIN"
    ) as copy:
        for n, episode in enumerate(episode_ids):
            vector = rng.standard_normal(DIM).astype(np.float32)
            vector /= np.linalg.norm(vector)
            text = "[" + ",".join(f"{v:.5f}" for v in vector) + "]"
            copy.write_row((episode, 0, 1, f"conv-{n // EPISODES_PER_CONVERSATION}", text))
    chunk = uuid.uuid4()
    conn.execute(
        "INSERT INTO consolidation_chunks (id, run_id, conversation_id, episode_ids, status) "
        "SELECT gen_random_uuid(), %s, 'conv-' || (g %% %s), ARRAY[gen_random_uuid()], 'applied' "
        "FROM generate_series(1, 4000) g",
        (run, CONVERSATIONS),
    )
    conn.execute(
        "INSERT INTO consolidation_chunks (id, run_id, conversation_id, episode_ids, status) "
        "VALUES (%s, %s, 'conv-0', %s, 'applied')",
        (chunk, run, episode_ids[:3]),
    )
    conn.execute(
        "INSERT INTO decision_log (run_id, conversation_id, chunk_id, proposed_action, action, "
        "fact_id, episode_ids, event_time) "
        "SELECT %s, 'conv-0', c.id, 'new', 'new', %s, ARRAY[]::uuid[], now() "
        "FROM consolidation_chunks c, generate_series(1, 8)",
        (run, fact_ids[0]),
    )
    conn.execute(  # a profile per conversation, and as many of conversations seen long ago
        "INSERT INTO conversation_profiles (conversation_id, profile, facts, tokens, stale) "
        "SELECT 'conv-' || g, repeat('A profile sentence. ', 20), 10, 100, g % 500 = 0 "
        "FROM generate_series(0, 20000) g"
    )


def plan_of(conn: psycopg.Connection, statement: str, params: dict[str, Any]) -> dict[str, Any]:
    """The planner's plan (EXPLAIN, not run) as JSON."""
    row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql.statement(statement)}", params).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def scans(plan: dict[str, Any]) -> set[str]:
    """Every relation access in the plan: 'Index Scan on idx', 'Seq Scan on table', ..."""
    found: set[str] = set()
    node_type = plan.get("Node Type", "")
    if "Index Name" in plan:
        found.add(f"{node_type} on {plan['Index Name']}")
    elif "Scan" in node_type and "Relation Name" in plan:
        found.add(f"{node_type} on {plan['Relation Name']}")
    for child in plan.get("Plans", []):
        found |= scans(child)
    return found


def params(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": uuid.uuid4(),
        "threshold": 3,
        "flashbulb": 0.85,
        "due_after_s": 604800,
        "open_s": 1800,
        "quiet_s": None,
        "everything": False,
        "lease_s": 3600,
        "max_conversations": 10000,
        "conversations": None,
        "taken": [],
        "shard": 0,
    }
    return {**base, **overrides}


VECTOR = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)


def _some(conn: psycopg.Connection, query: str) -> list[Any]:
    return [r[0] for r in conn.execute(query).fetchall()]


def cases(conn: psycopg.Connection) -> dict[str, tuple[dict[str, Any], set[str]]]:
    """Statement → (realistic parameters, the accesses its plan must contain)."""
    latest = "Bitmap Index Scan on episodic_memory_latest_idx"  # a conversation's episodes
    staged = conn.execute("SELECT to_regclass('pg_temp.slowwave_ingest')").fetchone()
    if staged is None or staged[0] is None:  # a record's staging, as ingest_tails reads it
        conn.execute(sql.statement("ingest_stage"))
        conn.execute(
            "INSERT INTO slowwave_ingest (line, conversation_id, message_id, at, speaker, text) "
            "VALUES (1, 'conv-3', 'x', now(), 'a', 'b')"
        )
        conn.execute("ANALYZE slowwave_ingest")
    episodes = _some(conn, "SELECT id FROM episodic_memory ORDER BY id LIMIT 3")
    facts = _some(conn, "SELECT id FROM semantic_memory WHERE conversation_id = 'conv-0' LIMIT 3")
    chunk = _some(conn, "SELECT id FROM consolidation_chunks WHERE conversation_id = 'conv-0'")[0]
    search = {
        "conversation_id": "conv-3",
        "category": None,
        "as_of": None,
        "query": "garden bicycle",
        "vector": VECTOR,
        "use_fulltext": True,
        "use_vector": True,
        "candidates": 100,
        "rrf_k": 60,
        "time_from": None,
        "time_to": None,
        "temporal_weight": 0.0,
        "diversity": 0.3,
        "diversity_dominant": 0.9,
        "episode_weight": 0.0,
        "session_weight": 1.0,
        "k": 10,
    }
    pending = "Bitmap Index Scan on episodic_memory_pending_idx"
    active = "Bitmap Index Scan on semantic_memory_active_idx"
    claimed = "Index Scan on episodic_memory_claimed_idx"
    counted = {
        "Seq Scan on consolidation_chunks",
        "Seq Scan on decision_log",
        "Seq Scan on episodic_memory",
    }
    return {
        "claim": (params(), {pending}),
        "claim_left_pending": (params(), {pending}),
        "due_count": (params(), {pending}),
        "episodes_close": (
            {"conversations": ["conv-0"], "open_s": 1800},
            {"Index Scan on episodic_memory_pending_idx"},
        ),
        "claim_give_back_split": (
            {"conversations": ["conv-0", "conv-1"], "run_id": uuid.uuid4(), "shard": 0},
            {"Bitmap Index Scan on episodic_memory_pending_idx"},
        ),
        "renew_leases": (params(), {claimed}),
        "release": ({"run_ids": [uuid.uuid4(), uuid.uuid4()]}, {claimed}),
        "record_failure": (
            {"ids": episodes, "reason": "x", "max_attempts": 3, "run_id": uuid.uuid4()},
            {claimed},
        ),
        "quarantine": (
            {"run_id": uuid.uuid4(), "ids": episodes, "reasons": ["a", "b", "c"]},
            {claimed},
        ),
        "apply_lock_episodes": (
            {
                "ids": episodes,
                "messages_from": [0, 0, 0],
                "conversations": ["conv-0"] * 3,
                "run_id": uuid.uuid4(),
            },
            {claimed},
        ),
        "apply_lock_targets": (
            {"ids": facts, "conversations": ["conv-0"] * 3},
            {"Index Scan on semantic_memory_pkey"},
        ),
        "apply_slot_holders": (
            {"conversations": ["conv-0", "conv-1"], "slots": ["identity:location:user"] * 2},
            {"Index Scan on semantic_memory_one_active_per_slot"},
        ),
        "apply_dedupe": (
            {
                "vectors": [VECTOR, VECTOR],
                "conversations": ["conv-3", "conv-4"],
                "said": ["user 3 did thing number 7", "user 4 likes tea"],
                "excluded": [],
                "candidates": 5,
                "threshold": 0.95,
            },
            {active},
        ),
        "gray_zone_nearest": (
            {
                "vectors": [VECTOR, VECTOR],
                "conversations": ["conv-3", "conv-4"],
                "excluded": [],
                "lower": 0.2,
                "upper": 0.95,
            },
            {active},
        ),
        "change_nearest": (
            {
                "vectors": [VECTOR, VECTOR],
                "conversations": ["conv-3", "conv-4"],
                "candidates": 3,
                "excluded": [],
                "lower": 0.2,
            },
            {active},
        ),
        "profile_changed": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on decision_log", "Index Only Scan on conversation_profiles_stale_idx"},
        ),
        "profile_facts": ({"conversations": ["conv-3", "conv-4"]}, {active}),
        "revert_profiles_stale": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on decision_log", "Index Scan on conversation_profiles_pkey"},
        ),
        "apply_invalidate": (
            {"conversations": ["conv-0"] * 3, "fact_ids": facts, "times": [T0] * 3},
            {"Index Scan on semantic_memory_pkey"},
        ),
        "apply_evict": (
            {
                "conversations": ["conv-0", "conv-1"],
                "chunk_ids": [uuid.uuid4(), uuid.uuid4()],
                "times": [T0, T0],
                "cap": 3,
                "run_id": uuid.uuid4(),
            },
            {active},
        ),
        "record_retrieval": ({"ids": facts}, {"Index Scan on semantic_memory_pkey"}),
        # the fixture's log holds one run: a run's rows are all of it (as for the reverts)
        "decision_similarity": (
            {"run_id": uuid.uuid4(), "bounds": [0.5, 0.9, 1.0]},
            {"Seq Scan on decision_log"},
        ),
        "apply_reinforce": (
            {"conversations": ["conv-0"] * 3, "fact_ids": facts, "episode_ids": episodes},
            {"Index Scan on semantic_memory_pkey"},
        ),
        "apply_mark_consolidated": (
            {"run_id": uuid.uuid4(), "gated": [], "ids": episodes, "messages_to": [None] * 3},
            {"Index Scan on episodic_memory_pkey"},
        ),
        "apply_read_back": (
            {"chunk_ids": [chunk, uuid.uuid4()]},
            {
                "Index Scan on consolidation_chunks_pkey",
                "Bitmap Index Scan on decision_log_chunk_idx",
            },
        ),
        "related_facts": (
            {"conversations": ["conv-3", "conv-3"], "vectors": [VECTOR, VECTOR], "limit": 20},
            {active},
        ),
        "search": (search, {active}),
        "search as of a time": (
            {**search, "as_of": T0 + timedelta(days=30)},
            {"Bitmap Index Scan on semantic_memory_validity_idx"},
        ),
        # the temporal channel and the transcripts of the scope's episodes (by primary key)
        "search as of now, with the temporal and episode channels": (
            {
                **search,
                "time_from": T0,
                "time_to": T0 + timedelta(days=30),
                "temporal_weight": 2.0,
                "episode_weight": 1.0,
            },
            {active, "Index Scan on episodic_memory_pkey"},
        ),
        # episodic memories: a conversation's episodes by its index, their windows by theirs
        "search_episodes": (
            {
                "conversation_id": "conv-3",
                "query": "an ordinary message",
                "as_of": None,
                "candidates": 100,
                "rrf_k": 10,
                "vector": VECTOR,
                "vector_weight": 1.0,
                "time_from": None,
                "time_to": None,
                "temporal_weight": 0.0,
            },
            {latest, "Bitmap Index Scan on episode_windows_conversation_idx"},
        ),
        "search_episodes as of a time": (
            {
                "conversation_id": "conv-3",
                "query": "an ordinary message",
                "as_of": T0 + timedelta(days=10),
                "candidates": 100,
                "rrf_k": 10,
                "vector": VECTOR,
                "vector_weight": 1.0,
                "time_from": None,
                "time_to": None,
                "temporal_weight": 0.0,
            },
            {latest, "Index Scan on episode_windows_pkey"},
        ),
        # a query that names a time: the temporal channel reads the same windows and episodes
        "search_episodes naming a time": (
            {
                "conversation_id": "conv-3",
                "query": "an ordinary message two weeks ago",
                "as_of": None,
                "candidates": 100,
                "rrf_k": 10,
                "vector": VECTOR,
                "vector_weight": 1.0,
                "time_from": T0,
                "time_to": T0 + timedelta(days=21),
                "temporal_weight": 1.0,
            },
            {latest, "Bitmap Index Scan on episode_windows_conversation_idx"},
        ),
        # the backlog per tenant: the pending episodes only, by their partial index
        "backlog": ({}, {"Bitmap Index Scan on episodic_memory_pending_idx"}),
        "episodes_latest": (
            {"conversation_id": "conv-3", "as_of": None, "limit": 3},
            {"Index Scan on episodic_memory_latest_idx"},
        ),
        "episode_windows_missing": (
            {"conversation_id": "conv-3", "window": 8},
            {latest, "Index Scan on episode_windows_pkey"},
        ),
        "episode_windows_write": (
            {
                "episodes": episodes,
                "froms": [0, 0, 0],
                "tos": [1, 1, 1],
                "embeddings": [VECTOR] * 3,
            },
            {"Index Scan on episodic_memory_pkey"},
        ),
        # a re-embedding (`slowwave db reembed`): a walk down each table's key, a batch at a
        # time, written back by key; counted whole twice a re-embedding, for its progress
        "reembed_facts_missing": (
            {"after": facts[0], "limit": 256},
            {"Index Scan on semantic_memory_pkey"},
        ),
        "reembed_facts_write": (
            {"ids": facts, "embeddings": [VECTOR] * len(facts)},
            {"Index Scan on semantic_memory_pkey"},
        ),
        "reembed_windows_missing": (
            {"after_episode": episodes[0], "after_from": 0, "limit": 256},
            {"Index Scan on episode_windows_pkey", "Index Scan on episodic_memory_pkey"},
        ),
        "reembed_windows_write": (
            {
                "episodes": episodes,
                "froms": [0, 0, 0],
                "tos": [1, 1, 1],
                "embeddings": [VECTOR] * 3,
            },
            {"Index Scan on episode_windows_pkey"},
        ),
        "reembed_progress": ({}, {"Seq Scan on semantic_memory", "Seq Scan on episode_windows"}),
        "episode_reviews_lock": ({"ids": episodes}, {"Bitmap Index Scan on episodic_memory_pkey"}),
        "episode_reviews_write": (
            {
                "ids": episodes,
                "stability": [1.0] * 3,
                "difficulty": [5.0] * 3,
                "state": [2] * 3,
                "step": [None] * 3,
                "at": [T0] * 3,
            },
            {"Index Scan on episodic_memory_pkey"},
        ),
        "context": (
            {"conversation_id": "conv-3", "categories": ["guideline", "identity"], "as_of": None},
            {"Index Scan on semantic_memory_active_idx"},
        ),
        "summarize_pending": (
            {"conversations": None, "batch": 64, "offset": 0, "min_chars": 600},
            {"Index Scan on episodic_memory_pending_idx"},
        ),
        "summarize_short": (
            {"conversations": None, "min_chars": 600},
            {"Bitmap Index Scan on episodic_memory_pending_idx"},
        ),
        "episode_surprise": (
            {"ids": episodes, "novelties": [0.1, 0.5, 1.0]},
            {"Index Scan on episodic_memory_pkey"},
        ),
        "summarize_write": (
            {"ids": episodes, "summaries": ["a", "b", "c"]},
            {"Index Scan on episodic_memory_pkey"},
        ),
        # counts over whole tables: a sequential scan is the cheapest way to read them all
        "status": ({}, {"Seq Scan on episodic_memory", "Seq Scan on semantic_memory"}),
        "conversation_facts": (
            {"conversation_id": "nobody"},
            {"Index Only Scan on semantic_memory_validity_idx"},
        ),
        "quarantine_list": (
            {"conversations": None, "tenant": None, "limit": 1000},
            {"Index Scan on episodic_memory_quarantined_idx"},
        ),
        "quarantine_release": (
            {"conversations": ["conv-3"], "episodes": None, "reason": "ops"},
            {"Index Scan on episodic_memory_quarantined_idx"},
        ),
        "fact_history": (
            {"id": facts[0]},
            {"Index Scan on semantic_memory_pkey", "Index Scan on semantic_memory_supersedes_idx"},
        ),
        "facts_list": (
            {"conversation_id": "conv-3", "as_of": None, "all": False},
            {"Bitmap Index Scan on semantic_memory_active_idx"},
        ),
        "fact_undelete": (
            {"id": facts[0], "reason": "ops: x"},
            {"Index Scan on semantic_memory_pkey", "Index Scan on semantic_memory_supersedes_idx"},
        ),
        # an operator's revert, rare: a run's chunks, decisions and facts are scanned for (an
        # index per run on three tables would cost every insert for a rare repair)
        # (runs: a row per night, read whole)
        "run_status": ({"run_id": uuid.uuid4()}, {"Seq Scan on consolidation_runs"}),
        # a budgeted run sums its chunks before each step (consolidation_chunks_run_idx where
        # the table is large; here, as for the counted runs, it is read whole)
        "run_spending": ({"run": uuid.uuid4()}, {"Seq Scan on consolidation_chunks"}),
        # a run still marked running is counted from what it committed (migration 0026); a
        # list reads the newest runs by their start, not every run (migration 0027)
        "runs_list": ({"limit": 20}, {"Index Scan on consolidation_runs_started_idx"} | counted),
        "runs_show": ({"run_id": uuid.uuid4()}, {"Seq Scan on consolidation_runs"} | counted),
        # short ids typed or printed: facts and episodes by their index; runs read whole
        "short_ids": (
            {"prefixes": ["5be01c2", "0a9f"], "kind": "fact", "limit": 2},
            {"Index Scan on semantic_memory_short_id"},
        ),
        "short_ids as of episodes": (
            {"prefixes": ["5be01c2"], "kind": "episode", "limit": 2},
            {"Index Scan on episodic_memory_short_id"},
        ),
        # slowwave serve: a conversation looked up by its key, a key by its SHA-256
        "conversation_exists": (
            {"conversation_id": "conv-3"},
            {"Index Only Scan on episodic_memory_latest_idx"},
        ),
        "conversation_status": (
            {"conversation_id": "conv-3"},
            {"Bitmap Index Scan on episodic_memory_latest_idx"},
        ),
        # the memory browser: a page of conversations (a loose scan of the episodes' index), a
        # fact's decisions and its source episodes
        "conversations_list": (
            {"lo": "", "after": None, "tenant": "default", "prefix": "conv", "limit": 51},
            {
                "Index Only Scan on episodic_memory_latest_idx",
                "Bitmap Index Scan on episodic_memory_latest_idx",
                "Bitmap Index Scan on semantic_memory_active_idx",
                "Seq Scan on consolidation_chunks",
            },
        ),
        "fact_decisions": ({"ids": [uuid.uuid4()]}, {"Seq Scan on decision_log"}),
        "episodes_by_id": (
            {"ids": [uuid.uuid4()], "conversation_id": "conv-3"},
            {"Index Scan on episodic_memory_pkey"},
        ),
        # (keys: a row per key, read whole while they are few; by the unique SHA-256 after)
        "keys_authenticate": ({"digest": b"0" * 32}, {"Seq Scan on api_keys"}),
        "keys_list": ({"tenant": "acme"}, {"Seq Scan on api_keys"}),
        "keys_revoke": (
            {"name": "sw_abcdefg", "digest": b"0" * 32, "tenant": None},
            {"Seq Scan on api_keys"},
        ),
        # a record's staged messages, and the latest episode of each of their conversations
        "ingest_tails": (
            {},
            {"Bitmap Index Scan on episodic_memory_latest_idx", "Seq Scan on slowwave_ingest"},
        ),
        "conversations_unknown": (
            {"ids": ["conv-3", "nobody"]},
            {
                "Index Only Scan on episodic_memory_pending_idx",
                "Index Only Scan on episodic_memory_quarantined_idx",
                "Index Only Scan on semantic_memory_validity_idx",
            },
        ),
        "revert_dependents": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on consolidation_runs", "Seq Scan on consolidation_chunks"},
        ),
        "revert_restore_ended": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on decision_log", "Index Scan on semantic_memory_pkey"},
        ),
        "revert_provenance": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on consolidation_chunks", "Seq Scan on semantic_memory"},
        ),
        "revert_facts": ({"run_id": uuid.uuid4()}, {"Seq Scan on semantic_memory"}),
        "revert_episodes": (
            {"run_id": uuid.uuid4()},
            {
                "Seq Scan on consolidation_chunks",
                "Seq Scan on decision_log",
                "Index Scan on episodic_memory_pkey",
            },
        ),
        "revert_shared_episodes": (
            {"run_id": uuid.uuid4()},
            {"Seq Scan on consolidation_chunks", "Seq Scan on consolidation_runs"},
        ),
        "revert_records": (
            {"run_id": uuid.uuid4()},
            {
                "Seq Scan on decision_log",
                "Seq Scan on consolidation_chunks",
                "Seq Scan on consolidation_runs",
                "Seq Scan on semantic_memory",
            },
        ),
        # forget, on request: rare, and followed by a rewrite of every table (VACUUM FULL)
        # that costs more than any scan; an index per conversation on each table would cost
        # every insert for it
        "forget_conversation": (
            {"conversation_id": "conv-3"},
            {
                "Bitmap Index Scan on semantic_memory_validity_idx",
                "Seq Scan on consolidation_chunks",
                "Seq Scan on consolidation_runs",
                "Seq Scan on decision_log",
                "Bitmap Index Scan on episodic_memory_latest_idx",
                "Seq Scan on ingested_messages",
            },
        ),
        "forget_fact": (
            {"id": facts[0], "known": []},
            {
                "Index Scan on semantic_memory_pkey",
                "Index Scan on semantic_memory_supersedes_idx",
                "Seq Scan on decision_log",
            },
        ),
        # forget in flight (migration 0018): the locks read no table; the tombstones are
        # probed by target in every writing transaction
        "hold_conversations": ({"conversations": ["conv-3", "conv-4"], "exclusive": False}, set()),
        "lock_conversations": ({"conversations": ["conv-3"]}, set()),
        # a conversation's GET after a forget: its tombstone by target
        "conversation_tombstone": (
            {"conversation_id": "conv-3"},
            {"Index Scan on history_operations_forgotten"},
        ),
        # after a purge, the tombstones it purged: the operations are a row per forget or
        # revert, read whole
        "tombstones_purged": ({"began": datetime.now(UTC)}, {"Seq Scan on history_operations"}),
        "forgotten_among": (
            {"conversations": ["conv-3", "conv-4"]},
            {"Index Only Scan on history_operations_forgotten"},
        ),
        "fact_successors": (
            {"id": facts[0]},
            {"Index Scan on semantic_memory_pkey", "Index Scan on semantic_memory_supersedes_idx"},
        ),
        "facts_existing": ({"ids": facts[:3]}, {"Index Scan on semantic_memory_pkey"}),
        # the forget deployment's reference back to an id: every id hashed, on request only
        "conversation_by_digest": (
            {"prefix": "3f2a9b0c1d2e"},
            {"Seq Scan on episodic_memory", "Seq Scan on semantic_memory"},
        ),
        # a revert, on request: its runs' chunks scanned like the other revert statements
        "revert_conversations": ({"runs": [uuid.uuid4()]}, {"Seq Scan on consolidation_chunks"}),
        "revert_take_back": (
            {"conversations": ["conv-3"]},
            {"Index Scan on episodic_memory_claimed_idx"},
        ),
        # one row per run, read at a run's start; each running run's lease probed by index
        "runs_running": ({}, {"Seq Scan on consolidation_runs", claimed}),
        # one row per run, every run: the metrics read them all, never the decision log
        "metrics_runs": ({}, {"Seq Scan on consolidation_runs"}),
        # only after a crash, once per crashed run: what it recorded is counted by scanning
        # (an index per run on the three tables would cost every insert for a rare repair)
        "runs_mark_crashed": (
            {"ids": [uuid.uuid4()], "reason": "died"},
            {
                "Seq Scan on consolidation_chunks",
                "Seq Scan on decision_log",
                "Seq Scan on episodic_memory",
                "Seq Scan on consolidation_runs",
            },
        ),
    }


# Statements that scan nothing worth an index: single-row inserts and updates by primary key,
# the DDL of a staging table, and the ingest statements, which read one source's staging
# table whole (tests/test_ingest.py measures them).
NOT_PLANNED = {
    "history_operation",
    "keys_create",  # an insert of one row
    "run_start",
    "run_finish",
    "ingest_stage",
    "load_stage",
    "ingest_segment",
    "ingest_duplicates",
    "load_insert",
    "ingest_conversations",  # the staged rows' distinct conversations
    "ingest_set_aside",  # a temporary table of the session's
    "ingest_group",  # from that table, by its index
    "ingest_refuse",
    "load_conversations",
    "load_refuse",
    "profile_read",  # by primary key
    "profile_write",  # an upsert of the run's profiles by primary key
    "old_snapshots",  # pg_stat_activity, a view of the server's sessions, not a table
    "wal_segments_last",  # the server's WAL folder, not a table
    "run_started",  # by primary key
    # an export reads whole tables by design (set-based, one scan a kind), partitioned as read
    "export_versions",
    "export_decisions",
    "export_runs",
    "export_episodes",
    "export_register",  # an upsert of one row by primary key
    "export_targets",  # the few export targets, all of them
    "export_unregister",  # one row by primary key
    # the memory browser's sessions: one row by primary key, the expired of a small table
    "ui_session_create",
    "ui_session_read",
    "ui_session_delete",
}


def statement_of(case: str) -> str:
    """The statement a case plans: its name less what it varies (" as of a time", " naming a
    time")."""
    return case.split(" as of")[0].split(" naming")[0]


@pytest.mark.slow
def test_every_statement_uses_the_index_it_relies_on_at_realistic_size(
    big: psycopg.Connection,
) -> None:
    wrong = {}
    for name, (values, expected) in cases(big).items():
        statement = statement_of(name)
        found = scans(plan_of(big, statement, values))
        unexpected_seq = {s for s in found if s.startswith("Seq Scan") and s not in expected}
        if not expected <= found or unexpected_seq:
            wrong[name] = sorted(found)
    assert wrong == {}, "\n".join(f"{n}: {a}" for n, a in wrong.items())


def test_every_statement_file_is_planned_or_said_why_not(big: psycopg.Connection) -> None:
    planned = {statement_of(name) for name in cases(big)}
    files = {path.stem for path in sql.statements_dir().glob("*.sql")}
    assert files == planned | NOT_PLANNED


def test_every_index_in_the_schema_is_used_by_a_statement(big: psycopg.Connection) -> None:
    used = set()
    for name, (values, _) in cases(big).items():
        for access in scans(plan_of(big, statement_of(name), values)):
            used.add(access.rsplit(" on ", 1)[1])
    indexes = set(
        _some(
            big,
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
            "AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'",
        )
    )
    assert indexes - used == set()
