"""Write-path throughput: slowwave's set-based apply vs the seed's per-row writes vs one COPY.

LoCoMo's gold facts (each session's observations, about 9 a session) are replicated into N
conversations of one episode each (default 10,000 conversations: about 94,000 facts), every
fact a ``new`` action citing its episode. The episodes are loaded and claimed by one run once,
in a seed database; each way then writes the same plans into a fresh copy of it (``CREATE
DATABASE ... TEMPLATE``: the same rows and ids), and only the writes are timed:

- apply:    ``tasks.apply.apply_plans``, as a run applies a step of its chains: up to
            ``APPLY_BATCH_CHUNKS`` chunks of distinct conversations a transaction, each chunk
            all or nothing, every statement once for the batch;
- per_row:  the seed 001 design, one transaction per conversation: per fact one nearest-fact
            query over the conversation's active facts (``ORDER BY embedding <=> v LIMIT 1``)
            and one INSERT (an UPDATE of the nearest on a duplicate), then its episodes
            marked consolidated;
- copy:     the floor: one COPY of the same fact rows, in one transaction, into the same
            indexed table.

Vectors are seeded random unit vectors (no embedder), so the figures are the database's. The
empty tables are left as a migration leaves them, never analysed, as in a new deployment:
analysed while empty, they make each connection's cached foreign-key checks scan
``semantic_memory`` and ``consolidation_chunks`` whole, once per decision-log row.

``speedup_vs_per_row`` = apply facts/s ÷ per-row facts/s (goal: at least 5).
``floor_ratio`` = copy facts/s ÷ apply facts/s: how many times slower apply is than the
floor (goal: at most 1.5). Both row-by-row ways' time is split by statement, BEGIN and COMMIT.

    python -m benchmarks.apply [--quick] [--json] [--conversations N] [--facts-per-conversation K]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast
from unittest import mock
from uuid import UUID

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql as pgsql
from psycopg.abc import Params, Query, QueryNoTemplate
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow
from pydantic import SecretStr

import slowwave.tasks.apply as apply_module
import slowwave.tasks.apply_writes as apply_writes_module
from benchmarks.homes import fresh_home
from benchmarks.report import print_figures
from slowwave import sql
from slowwave.models.category import Category
from slowwave.models.chunk import ChunkToApply
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Vectors
from slowwave.models.episode import Episode
from slowwave.models.fact import said
from slowwave.models.ids import chunk_id, new_id
from slowwave.models.llm.replay import categorize, keywords_of
from slowwave.models.locomo import locomo_key
from slowwave.models.plan import Plan, PlannedAction
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import ConsolidationSettings, Settings
from slowwave.sql.copy import copy_rows
from slowwave.sql.db import Database, migrate
from slowwave.tasks.apply import apply_plans
from slowwave.tasks.apply_writes import FACT_COLUMNS
from slowwave.tasks.claim import ClaimPolicy, claim
from slowwave.tasks.decide import decide
from slowwave.tasks.guard import latest_end
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.locomo import read_locomo
from slowwave.tasks.pipeline import APPLY_BATCH_CHUNKS
from slowwave.tasks.runs import start_run

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
QUICK_CONVERSATIONS = 500
LEASE_S = 24 * 3600  # the claim outlives the slowest way
SEED_DB = "bench_seed"

P = ParamSpec("P")
R = TypeVar("R")

# The seed's per-row write path (seed 001, step 3), on slowwave's table.
NEAREST = """
SELECT id, 1 - (embedding <=> %(vector)s) AS similarity FROM semantic_memory
WHERE conversation_id = %(conversation_id)s AND invalid_at IS NULL
ORDER BY embedding <=> %(vector)s LIMIT 1
"""
INSERT_FACT = """
INSERT INTO semantic_memory (id, conversation_id, category, fact, keywords,
                             source_episodic_ids, valid_at, embedding, created_by_run_id)
VALUES (%(id)s, %(conversation_id)s, %(category)s, %(fact)s, %(keywords)s,
        %(episode_ids)s, %(valid_at)s, %(embedding)s, %(run_id)s)
"""
ADD_EVIDENCE = """
UPDATE semantic_memory SET source_episodic_ids = source_episodic_ids || %(episode_ids)s
WHERE id = %(id)s
"""
MARK_CONSOLIDATED = """
UPDATE episodic_memory
SET consolidated_at = now(), consolidation_run_id = %(run_id)s,
    consolidated_messages = jsonb_array_length(messages), gated = false,
    claimed_by = NULL, claimed_until = NULL
WHERE id = ANY(%(ids)s)
"""
# What each way wrote, ids and creation times aside: equal digests mean equal rows.
FACT_DIGEST = """
SELECT count(*), md5(string_agg(h, '' ORDER BY h)) FROM (
    SELECT md5(concat_ws('|', conversation_id, category, fact, keywords::text,
                         source_episodic_ids::text, valid_at::text, invalid_at::text,
                         embedding::text, supersedes_id::text, created_by_run_id::text)) AS h
    FROM semantic_memory) f
"""


# ── input: LoCoMo sessions, replicated ──────────────────────────────────────────────────


@dataclass(frozen=True)
class SourceFact:
    """A gold observation as the replay model would propose it."""

    category: Category
    fact: str
    keywords: list[str]


@dataclass(frozen=True)
class Session:
    """One conversation of the benchmark: an episode and the facts it teaches."""

    episode: Episode
    facts: list[SourceFact]


def read_sessions(path: Path) -> list[Session]:
    """LoCoMo's sessions that have observations, with them as facts (categories and keywords
    by the replay model's fixed rules, so the rows look like real output)."""
    facts: dict[str, list[SourceFact]] = defaultdict(list)  # by the episode's external key
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        sample = str(conversation["sample_id"])
        for key, by_speaker in conversation.get("observation", {}).items():
            session = int(key.split("_")[1])
            for speaker, items in by_speaker.items():
                facts[locomo_key(sample, session)] += [
                    SourceFact(categorize(s), s, keywords_of(s, speaker)) for s, _ in items
                ]
    episodes = read_locomo(path, surprise=0.5)
    return [Session(e, facts[e.external_key]) for e in episodes if facts.get(e.external_key)]


def replicate(sessions: Sequence[Session], conversations: int, per: int | None) -> list[Session]:
    """``conversations`` sessions taken in turn, each a conversation of its own
    (``conv-26-s3#0042``) with a fresh episode; ``per`` cycles a session's facts to that many."""
    out = []
    for i in range(conversations):
        source = sessions[i % len(sessions)]
        replica = i // len(sessions)
        number = source.episode.external_key.rsplit("_", 1)[1]
        episode = source.episode.model_copy(
            update={
                "id": new_id(),
                "conversation_id": f"{source.episode.conversation_id}-s{number}#{replica:04d}",
                "external_key": f"{source.episode.external_key}#{replica:04d}",
            }
        )
        facts = [source.facts[k % len(source.facts)] for k in range(per)] if per else source.facts
        out.append(Session(episode, facts))
    return out


def plan_of(run_id: UUID, chunk: Sequence[Episode], facts: Sequence[SourceFact]) -> Plan:
    """The guarded plan a replay answer gives for the chunk: every fact new, citing it."""
    at = latest_end(chunk)
    cited = [chunk[0].id]
    return Plan(
        chunk_id=chunk_id(run_id, (e.part_key for e in chunk)),
        conversation_id=chunk[0].conversation_id,
        episode_ids=[e.id for e in chunk],
        messages_from=[e.messages_from for e in chunk],
        messages_to=[e.messages_to for e in chunk],
        actions=[
            PlannedAction(
                action=FactAction.new,
                proposed=FactAction.new,
                category=f.category,
                fact=f.fact,
                keywords=f.keywords,
                episode_ids=cited,
                event_time=at,
            )
            for f in facts
        ],
        event_time=at,
    )


def unit_vectors(plans: Sequence[Plan], dim: int, seed: int = 7) -> list[Vectors]:
    """One seeded random unit vector per fact: deterministic, no embedder to time."""
    rng = np.random.default_rng(seed)
    out = []
    for plan in plans:
        vectors = rng.standard_normal((len(plan.actions), dim), dtype=np.float32)
        out.append(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    return out


# ── databases: one seed, a fresh copy per way ───────────────────────────────────────────


def connect(url: str) -> psycopg.Connection[TupleRow]:
    """An autocommit connection as slowwave's pool hands out: units of work are explicit."""
    conn = psycopg.Connection.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def seed_database(
    admin: psycopg.Connection[TupleRow], settings: Settings, sessions: Sequence[Session]
) -> tuple[UUID, list[Plan]]:
    """Migrate, load and claim the episodes once, for one run: (the run, its plans)."""
    admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(SEED_DB)))
    url = make_conninfo(admin.info.dsn, dbname=SEED_DB)
    with Database(settings.evolve(database_url=SecretStr(url))) as db:
        migrate(db)
    with connect(url) as conn:
        load_episodes(conn, (s.episode for s in sessions))
        run_id = start_run(conn, kind="benchmark").run_id
        claiming = settings.evolve(
            episode_threshold=1,
            flashbulb_surprise=1.0,
            due_after_s=0,
            claim_lease_s=LEASE_S,
            claim_max_conversations=len(sessions),
            chunk_size=8,
        )
        policy = ClaimPolicy.of(claiming)
        facts = {s.episode.conversation_id: s.facts for s in sessions}
        plans = []
        for work in claim(conn, run_id, policy, everything=True):
            (chunk,) = work.chunks  # one episode a conversation: one chunk
            plans.append(plan_of(run_id, chunk, facts[work.conversation_id]))
        # a deployment's episodes have statistics; the empty tables are left as migrated
        conn.execute("ANALYZE episodic_memory")
    return run_id, plans


@contextmanager
def fresh_copy(admin: psycopg.Connection[TupleRow], name: str) -> Iterator[str]:
    """A copy of the seed database, checkpointed so no flush of the copy lands in the
    timing; dropped afterwards."""
    admin.execute(
        pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            pgsql.Identifier(name), pgsql.Identifier(SEED_DB)
        )
    )
    admin.execute("CHECKPOINT")
    try:
        yield make_conninfo(admin.info.dsn, dbname=name)
    finally:
        admin.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))


def fact_digest(url: str) -> tuple[int, str]:
    """(rows, digest) of what a way wrote to semantic memory."""
    with connect(url) as conn:
        row = conn.execute(FACT_DIGEST).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


# ── timing ──────────────────────────────────────────────────────────────────────────────


@dataclass
class Clock:
    """Seconds spent per named part of a write path."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start


_STATEMENT_NAMES = {
    **{sql.statement(p.stem): p.stem for p in sql.statements_dir().glob("*.sql")},
    NEAREST: "nearest fact (per row)",
    INSERT_FACT: "INSERT fact (per row)",
    ADD_EVIDENCE: "UPDATE duplicate (per row)",
    MARK_CONSOLIDATED: "mark consolidated (per row)",
}


class TimedConnection(psycopg.Connection[TupleRow]):
    """A connection that adds each statement's time (by its file's or constant's name), and
    BEGIN's and COMMIT's, to ``clock``: apply's statements are timed without touching apply."""

    clock: Clock

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> psycopg.Cursor[TupleRow]:
        name = _STATEMENT_NAMES.get(query, "other") if isinstance(query, str) else "other"
        with self.clock.timing(name):
            return super().execute(
                cast(QueryNoTemplate, query), params, prepare=prepare, binary=binary
            )

    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[psycopg.Transaction]:
        start = time.perf_counter()
        with super().transaction(savepoint_name, force_rollback) as tx:
            self.clock.seconds["BEGIN"] += time.perf_counter() - start
            yield tx
            start = time.perf_counter()
        self.clock.seconds["COMMIT"] += time.perf_counter() - start


def timed_connection(url: str, clock: Clock) -> TimedConnection:
    """Both row-by-row ways write through one of these: the same connection, the same cost."""
    conn = TimedConnection.connect(url, autocommit=True)
    conn.clock = Clock()  # registering the vector type is no part of a way
    register_vector(conn)
    conn.clock = clock
    return conn


def timed(clock: Clock, name: str, fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, its time added to ``clock`` (apply's Python decisions, patched in)."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with clock.timing(name):
            return fn(*args, **kwargs)

    return wrapper


def timed_copy(clock: Clock) -> Callable[..., None]:
    """``copy_rows``, its time added to ``clock`` by table (apply's two COPYs, patched in)."""

    def copy(conn: psycopg.Connection, table: str, columns: Any, rows: Any) -> None:
        with clock.timing(f"COPY {table}"):
            copy_rows(conn, table, columns, rows)

    return copy


@dataclass
class WayTiming:
    """One way's write time, per chunk too (does it slow down as the table grows?)."""

    seconds: float
    per_chunk: list[float]

    def ms_per_chunk(self, tenth: int) -> float:
        """Mean milliseconds per chunk over the first (0) or the last (9) tenth of chunks."""
        size = max(1, len(self.per_chunk) // 10)
        part = self.per_chunk[:size] if tenth == 0 else self.per_chunk[-size:]
        return round(1000 * sum(part) / len(part), 3)


def run_chunks(
    apply_many: Callable[[Sequence[tuple[Plan, Vectors]]], None],
    plans: Sequence[Plan],
    vectors: Sequence[Vectors],
    batch: int = 1,
) -> WayTiming:
    """The plans through ``apply_many``, ``batch`` at a time, timed whole and per chunk (a
    batch's time shared by its chunks)."""
    per_chunk: list[float] = []
    items = list(zip(plans, vectors, strict=True))
    start = time.perf_counter()
    for first in range(0, len(items), batch):
        chunk = items[first : first + batch]
        begun = time.perf_counter()
        apply_many(chunk)
        per_chunk += [(time.perf_counter() - begun) / len(chunk)] * len(chunk)
    return WayTiming(time.perf_counter() - start, per_chunk)


# ── the three ways ──────────────────────────────────────────────────────────────────────


def way_apply(
    url: str,
    plans: Sequence[Plan],
    vectors: Sequence[Vectors],
    run_id: UUID,
    policy: ConsolidationSettings,
) -> tuple[WayTiming, Clock, list[str]]:
    """slowwave's apply, its time split by statement; then EXPLAIN ANALYZE of its dedupe
    statement for a chunk at the final size (its facts, now written, are their own
    duplicates)."""
    clock = Clock()
    with (
        timed_connection(url, clock) as conn,
        mock.patch.object(apply_writes_module, "copy_rows", timed_copy(clock)),
        mock.patch.object(apply_module, "decide", timed(clock, "decide (Python)", decide)),
    ):

        def apply_many(items: Sequence[tuple[Plan, Vectors]]) -> None:
            chunks = [ChunkToApply(plan, vecs, "replay") for plan, vecs in items]
            for (plan, _), result in zip(
                items, apply_plans(conn, chunks, run_id, policy), strict=True
            ):
                if not result.applied or result.inserted != len(plan.actions):
                    raise RuntimeError(f"chunk {plan.chunk_id} not applied as planned: {result}")

        timing = run_chunks(apply_many, plans, vectors, APPLY_BATCH_CHUNKS)
        conn.clock = Clock()
        middle = len(plans) // 2
        dedupe_plan = explain(
            conn,
            sql.statement("apply_dedupe"),
            dedupe_params(plans[middle], vectors[middle], policy),
        )
    return timing, clock, dedupe_plan


def dedupe_params(plan: Plan, vectors: Vectors, policy: ConsolidationSettings) -> dict[str, Any]:
    """The parameters apply gives its dedupe statement for ``plan`` (tasks.apply)."""
    return {
        "vectors": list(vectors),
        "conversations": [plan.conversation_id] * len(vectors),
        "said": [said(plan.actions[i].fact or "") for i in plan.writing],
        "excluded": [],
        "candidates": policy.dedupe_candidates,
        "threshold": policy.dedupe_threshold,
    }


def explain(conn: psycopg.Connection[TupleRow], query: str, params: dict[str, Any]) -> list[str]:
    """The plan the server runs ``query`` with, with its actual times."""
    rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS)\n{query}", params).fetchall()
    return [str(r[0]) for r in rows]


def per_row_apply(
    conn: psycopg.Connection[TupleRow],
    plan: Plan,
    vectors: Vectors,
    run_id: UUID,
    threshold: float,
) -> None:
    """The seed's write of one conversation, in one transaction: per fact its nearest
    active fact; a duplicate gets the evidence, anything else is inserted."""
    with conn.transaction():
        for action, vector in zip(plan.actions, vectors, strict=True):
            if action.action is not FactAction.new:
                raise ValueError(f"the per-row reference writes new facts only, not {action}")
            params = {"vector": vector, "conversation_id": plan.conversation_id}
            nearest = conn.execute(NEAREST, params).fetchone()
            if nearest is not None and nearest[1] >= threshold:
                conn.execute(ADD_EVIDENCE, {"id": nearest[0], "episode_ids": action.episode_ids})
                continue
            conn.execute(
                INSERT_FACT,
                {
                    "id": new_id(),
                    "conversation_id": plan.conversation_id,
                    "category": str(action.category),
                    "fact": action.fact,
                    "keywords": action.keywords,
                    "episode_ids": action.episode_ids,
                    "valid_at": action.event_time,
                    "embedding": vector,
                    "run_id": run_id,
                },
            )
        conn.execute(MARK_CONSOLIDATED, {"ids": plan.episode_ids, "run_id": run_id})


def way_per_row(
    url: str,
    plans: Sequence[Plan],
    vectors: Sequence[Vectors],
    run_id: UUID,
    policy: ConsolidationSettings,
) -> tuple[WayTiming, Clock, list[str]]:
    """The seed's per-row writes, split by statement; then EXPLAIN ANALYZE of its nearest-fact
    query at the final size."""
    clock = Clock()
    with timed_connection(url, clock) as conn:

        def apply_one(items: Sequence[tuple[Plan, Vectors]]) -> None:
            for plan, vecs in items:  # one at a time: a batch of one
                per_row_apply(conn, plan, vecs, run_id, policy.dedupe_threshold)

        timing = run_chunks(apply_one, plans, vectors)
        conn.clock = Clock()
        middle = len(plans) // 2
        params = {"vector": vectors[middle][0], "conversation_id": plans[middle].conversation_id}
        return timing, clock, explain(conn, NEAREST, params)


def way_copy(url: str, plans: Sequence[Plan], vectors: Sequence[Vectors], run_id: UUID) -> float:
    """The floor: the same fact rows in one COPY and one transaction (rows built untimed)."""
    rows = [
        (
            new_id(),
            plan.conversation_id,
            str(action.category),
            action.fact,
            action.keywords,
            action.episode_ids,
            action.event_time,
            None,
            vector,
            None,
            run_id,
            None,
        )
        for plan, vecs in zip(plans, vectors, strict=True)
        for action, vector in zip(plan.actions, vecs, strict=True)
    ]
    with connect(url) as conn:
        start = time.perf_counter()
        with conn.transaction():
            copy_rows(conn, "semantic_memory", FACT_COLUMNS, rows)
        return time.perf_counter() - start


# ── the run and its report ──────────────────────────────────────────────────────────


@dataclass
class Way:
    """One row-by-row way's outcome: its timing, split by part."""

    timing: WayTiming
    clock: Clock

    def parts(self) -> dict[str, float]:
        """Seconds per part, largest first; what no part timed is the Python around them
        (building rows and parameters, the plan's properties, the loop)."""
        parts = dict(sorted(self.clock.seconds.items(), key=lambda kv: -kv[1]))
        parts["rest (Python)"] = self.timing.seconds - sum(parts.values())
        return {name: round(seconds, 3) for name, seconds in parts.items()}


@dataclass
class Results:
    """What the three ways did, on the same plans."""

    conversations: int
    plans: list[Plan]
    setup_s: float
    applied: Way
    per_row: Way
    copy_s: float
    digests: dict[str, tuple[int, str]]
    explains: dict[str, list[str]]
    postgres: dict[str, str]


def run(data: Path, conversations: int, per: int | None) -> Results:
    """Seed once, then each way on a fresh copy of the seed; one embedded server throughout
    (stopped on the way out)."""
    wall = time.perf_counter()
    sessions = replicate(read_sessions(data), conversations, per)
    digests: dict[str, tuple[int, str]] = {}
    explains: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="slowwave-apply-") as home:
        settings = Settings(home=fresh_home(home), _env_file=None)
        policy = settings.consolidation
        with (
            Database(settings) as server,
            psycopg.Connection.connect(server.url, autocommit=True) as admin,
        ):
            run_id, plans = seed_database(admin, settings, sessions)
            vectors = unit_vectors(plans, settings.embedding.dim)
            setup_s = time.perf_counter() - wall
            with fresh_copy(admin, "bench_apply") as url:
                timing, clock, explains["apply_dedupe"] = way_apply(
                    url, plans, vectors, run_id, policy
                )
                applied = Way(timing, clock)
                digests["apply"] = fact_digest(url)
            with fresh_copy(admin, "bench_per_row") as url:
                timing, clock, explains["per-row nearest fact"] = way_per_row(
                    url, plans, vectors, run_id, policy
                )
                per_row = Way(timing, clock)
                digests["per_row"] = fact_digest(url)
            with fresh_copy(admin, "bench_copy") as url:
                copy_s = way_copy(url, plans, vectors, run_id)
                digests["copy"] = fact_digest(url)
            postgres = server_settings(admin)
    return Results(
        conversations, plans, setup_s, applied, per_row, copy_s, digests, explains, postgres
    )


def figures_of(results: Results) -> dict[str, Any]:
    """The figures, ratios and goals; ``floor_ratio`` is copy's rate over apply's."""
    facts = sum(len(p.actions) for p in results.plans)
    applied, per_row = results.applied.timing, results.per_row.timing
    apply_rate = facts / applied.seconds
    per_row_rate = facts / per_row.seconds
    copy_rate = facts / results.copy_s
    speedup, floor_ratio = apply_rate / per_row_rate, copy_rate / apply_rate
    return {
        "conversations": results.conversations,
        "chunks": len(results.plans),
        "facts": facts,
        "apply_s": round(applied.seconds, 2),
        "per_row_s": round(per_row.seconds, 2),
        "copy_s": round(results.copy_s, 2),
        "apply_facts_per_s": round(apply_rate),
        "per_row_facts_per_s": round(per_row_rate),
        "copy_facts_per_s": round(copy_rate),
        "speedup_vs_per_row": round(speedup, 2),
        "floor_ratio": round(floor_ratio, 2),
        "goal_speedup_vs_per_row_at_least_5": speedup >= 5,
        "goal_floor_ratio_at_most_1_5": floor_ratio <= 1.5,
        "apply_ms_per_chunk_first_tenth": applied.ms_per_chunk(0),
        "apply_ms_per_chunk_last_tenth": applied.ms_per_chunk(9),
        "per_row_ms_per_chunk_first_tenth": per_row.ms_per_chunk(0),
        "per_row_ms_per_chunk_last_tenth": per_row.ms_per_chunk(9),
        "apply_time_s": results.applied.parts(),
        "per_row_time_s": results.per_row.parts(),
        "same_fact_rows": len({digest for _, digest in results.digests.values()}) == 1,
        "rows_written": {way: rows for way, (rows, _) in results.digests.items()},
        "setup_s": round(results.setup_s, 1),
        "postgres": results.postgres,
    }


_VECTOR_LITERAL = re.compile(r"'\[[^\]]*\]'::vector")
VECTOR_ELIDED = "'[...]'::vector"


def print_details(results: Results) -> None:
    """Where each row-by-row way's time goes, and the plans of their similarity queries."""
    chunks = len(results.plans)
    for name, way in (("apply", results.applied), ("per_row", results.per_row)):
        total = way.timing.seconds
        print(f"where {name}'s {total:.2f} s go ({chunks} chunks):")
        for part, seconds in way.parts().items():
            print(
                f"  {part:<28} {seconds:9.3f} s {100 * seconds / total:5.1f} % "
                f"{1000 * seconds / chunks:8.3f} ms/chunk"
            )
    for name, lines in results.explains.items():
        print(f"EXPLAIN ANALYZE {name}, one chunk's query at the final size:")
        for line in lines:
            print(f"  {_VECTOR_LITERAL.sub(VECTOR_ELIDED, line)}")


def server_settings(admin: psycopg.Connection[TupleRow]) -> dict[str, str]:
    """The server settings that decide a write's cost (fsync'd commits above all)."""
    names = ("server_version", "shared_buffers", "fsync", "synchronous_commit", "wal_level")
    rows = admin.execute(
        "SELECT name, current_setting(name) FROM unnest(%s::text[]) AS name", [list(names)]
    ).fetchall()
    return {str(name): str(value) for name, value in rows}


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument(
        "--facts-per-conversation",
        type=int,
        default=None,
        help="cycle each session's facts to this many (default: the session's own, ~9)",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CONVERSATIONS} conversations")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not args.data.is_file():
        parser.error(f"LoCoMo data not found at {args.data}")
    conversations = QUICK_CONVERSATIONS if args.quick else args.conversations

    start = time.perf_counter()
    results = run(args.data, conversations, args.facts_per_conversation)
    figures = figures_of(results)
    figures["wall_s"] = round(time.perf_counter() - start, 1)
    print_details(results)
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()
