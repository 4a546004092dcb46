"""Forget on request (privacy): hard-delete a conversation or one fact, and everything that
holds its text, then leave a tombstone: what kind, when, who and why, how many rows of each
table, and the SHA-256 of the id, never content (``history_operations``).

A forget wins over the work in flight by construction: it holds its conversation exclusively
(``lock_conversations``) before it deletes, so it waits only for a transaction already open on
the conversation (an apply, an ingest), and deletes what that transaction committed. Every
writer holds the conversations it writes about shared (``hold_conversations``) and reads the
tombstones after the lock: a conversation forgotten meanwhile is dropped, nothing more is
written about it. Ingest refuses a forgotten conversation's messages unless told otherwise.

Once the rows are gone, every Parquet export slowwave wrote (``export_targets``) has its
partitions of the conversation's tenant brought up to date (``tasks.export``): no export file
holds the conversation any more. One that cannot be reached is named in the report.

Deleted rows stay in the server's files until they are rewritten: with ``purge`` (the
default) the tables are rewritten (``VACUUM FULL``) and, where the role may, the write-ahead
log that recorded the rows is switched and checkpointed away with segment recycling off. On a
managed server whose role may not, the report says so: the provider's backups and WAL
archives are the operator's to handle.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import psycopg
import psycopg.errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from tenacity import retry, retry_if_exception_type, stop_after_attempt

from slowwave import sql
from slowwave.models.errors import HistoryError, UnknownConversation, UnknownFact
from slowwave.models.ids import digest
from slowwave.models.tenant import conversation_of, tenant_of
from slowwave.sql.db import Database
from slowwave.tasks.export import forget_from_exports

logger = logging.getLogger(__name__)

# Every table a forget deletes from or rewrites.
PURGED = (
    "episodic_memory",
    "episode_windows",
    "ingested_messages",
    "semantic_memory",
    "decision_log",
    "consolidation_chunks",
    "consolidation_runs",
    "conversation_profiles",
)


@dataclass
class ForgetReport:
    """What a forget removed: rows per table, reject lines, and whether the files were purged."""

    kind: str
    target_sha256: str
    rows: dict[str, int] = field(default_factory=dict)
    reject_lines: int = 0
    purged: bool = False
    purge_note: str | None = None
    export_files: int = 0  # Parquet files of slowwave's exports rewritten or removed
    export_notes: list[str] = field(default_factory=list)  # exports it could not reach


__all__ = [
    "PURGED",
    "ForgetReport",
    "Purge",
    "conversation_by_ref",
    "digest",
    "forget_conversation",
    "forget_fact",
    "forgotten_among",
    "hold_conversations",
    "lock_conversations",
    "purge_files",
    "resolve_conversations",
]


def hold_conversations(
    conn: psycopg.Connection, conversation_ids: Iterable[str], *, exclusive: bool = False
) -> set[str]:
    """First thing in a transaction that writes about these conversations: hold them against a
    forget or a revert until it ends, and return those already forgotten, about which it must
    write nothing. ``exclusive``: against every other writer too (an ingest, which may grow a
    conversation's latest episode; a claim skips a conversation held so)."""
    ids = sorted(set(conversation_ids))
    if not ids:
        return set()
    conn.execute(
        sql.statement("hold_conversations"), {"conversations": ids, "exclusive": exclusive}
    )
    return forgotten_among(conn, ids)  # a snapshot taken after the lock


def forgotten_among(conn: psycopg.Connection, conversation_ids: Iterable[str]) -> set[str]:
    """Which of these conversations a tombstone says were forgotten."""
    ids = sorted(set(conversation_ids))
    if not ids:
        return set()
    rows = conn.execute(sql.statement("forgotten_among"), {"conversations": ids}).fetchall()
    return {r[0] for r in rows}


# A forget or a revert that Postgres picked to break a deadlock (it held a conversation while
# waiting for a row another operation on other conversations held) was rolled back whole: it
# is done again, at most three times.
retry_on_deadlock = retry(
    retry=retry_if_exception_type(psycopg.errors.DeadlockDetected),
    stop=stop_after_attempt(3),
    reraise=True,
)

_REF = re.compile(r"^(?:c:)?([0-9a-f]{12,64})$")


def conversation_by_ref(conn: psycopg.Connection, ref: str) -> str:
    """The conversation a reference names (``c:`` and 12 or more hex digits of the id's
    SHA-256, as artifacts and log lines show it, or the whole SHA-256): how the forget
    deployment is told what to forget without Prefect keeping the id."""
    match = _REF.match(ref.strip().lower())
    if match is None:
        raise HistoryError(
            "name the conversation by its reference (c: and at least 12 hex digits, as "
            "slowwave's artifacts show it) or the SHA-256 of its id, never the id itself: "
            "Prefect keeps a flow run's parameters"
        )
    rows = conn.execute(
        sql.statement("conversation_by_digest"), {"prefix": match.group(1)}
    ).fetchall()
    if not rows:
        raise UnknownConversation(f"no conversation {ref!r}")
    if len(rows) > 1:
        raise HistoryError(f"{ref!r} names more than one conversation: give more digits")
    return str(rows[0][0])


def resolve_conversations(conn: psycopg.Connection, names: Iterable[str]) -> list[str]:
    """Conversations as a flow's parameters name them: a reference (``c:…``) is turned back
    into its id, anything else is taken as an id. A reference that names no conversation (or
    more than one) is left out, with a warning. The CLI passes references, so that Prefect,
    which keeps every flow run's parameters, keeps no conversation id."""
    ids = []
    for name in names:
        if not name.startswith("c:"):
            ids.append(name)
            continue
        try:
            ids.append(conversation_by_ref(conn, name))
        except HistoryError as exc:
            logger.warning("left out %s: %s", name, exc)
    return ids


def lock_conversations(conn: psycopg.Connection, conversation_ids: Iterable[str]) -> None:
    """Inside a forget's or a revert's transaction, before it reads or deletes: take the
    conversations from every writer. Waits for the transactions already open on them (never for
    a claim's lease), however long the database is busy: no lock or statement timeout."""
    conn.execute("SET LOCAL lock_timeout = 0")
    conn.execute("SET LOCAL statement_timeout = 0")
    conn.execute(
        sql.statement("lock_conversations"), {"conversations": sorted(set(conversation_ids))}
    )


def forget_conversation(
    db: Database, conversation_id: str, *, home: Path, by: str, reason: str, purge: bool = True
) -> ForgetReport:
    """Delete the conversation everywhere slowwave keeps it, rejects files under ``home``
    included."""
    _needs_reason(reason)
    report = ForgetReport("forget_conversation", digest(conversation_id))
    _delete_conversation(db, conversation_id, report, by, reason)
    # once the rows are gone; a reject line names the conversation by its id in its tenant
    report.reject_lines = _forget_rejects(home, conversation_of(conversation_id))
    report.export_files, report.export_notes = forget_from_exports(db, conversation_id)
    if purge:
        _purge(db, report)
    return report


DELETE_PASSES = 5


@retry_on_deadlock
def _delete_conversation(
    db: Database, conversation_id: str, report: ForgetReport, by: str, reason: str
) -> None:
    with db.connection() as conn, conn.transaction():
        lock_conversations(conn, [conversation_id])  # what an open apply commits is seen below
        report.rows = {}
        for _ in range(DELETE_PASSES):
            # One statement sees one snapshot: a writer that does not hold the conversation (an
            # operator's quarantine release) and commits while the statement waits for its
            # rows is seen by the next pass. Done when a pass finds nothing more.
            with conn.cursor(row_factory=dict_row) as cur:
                row = cur.execute(
                    sql.statement("forget_conversation"), {"conversation_id": conversation_id}
                ).fetchone()
            found = {k: int(v) for k, v in (row or {}).items()}
            report.rows = {k: report.rows.get(k, 0) + v for k, v in found.items()}
            if not any(found.values()):
                break
        if not report.rows.get("episodes") and not report.rows.get("facts"):
            raise UnknownConversation(f"no conversation {conversation_id!r} to forget")
        _tombstone(conn, report, by, reason)


def forget_fact(
    db: Database,
    fact_id: UUID,
    *,
    by: str,
    reason: str,
    purge: bool = True,
    tenant: str | None = None,
) -> ForgetReport:
    """Delete one fact and the decisions about it; its chain closes over the gap. A fact that
    a run in flight wrote from it (an update or a merge committed while the forget waited for
    that run's transaction) is forgotten with it: it was derived from what is forgotten."""
    _needs_reason(reason)
    report = ForgetReport("forget_fact", digest(str(fact_id)))
    conversation = _delete_fact(db, fact_id, report, by, reason, tenant)
    report.export_files, report.export_notes = forget_from_exports(db, conversation)
    if purge:
        _purge(db, report)
    return report


@retry_on_deadlock
def _delete_fact(
    db: Database, fact_id: UUID, report: ForgetReport, by: str, reason: str, tenant: str | None
) -> str:
    """Returns the fact's conversation. A fact of another ``tenant`` (when named) is no fact."""
    with db.connection() as conn, conn.transaction():
        found = conn.execute(sql.statement("fact_successors"), {"id": fact_id}).fetchone()
        if found is None or (tenant is not None and tenant_of(found[0]) != tenant):
            raise UnknownFact(f"no fact {fact_id}")
        conversation, known = found
        lock_conversations(conn, [conversation])
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(
                sql.statement("forget_fact"), {"id": fact_id, "known": list(known)}
            ).fetchone()
        report.rows = {k: int(v) for k, v in (row or {}).items()}
        if not report.rows.get("facts"):
            raise UnknownFact(f"no fact {fact_id}")
        _tombstone(conn, report, by, reason)
    return str(conversation)


def _needs_reason(reason: str) -> None:
    if not reason.strip():
        raise HistoryError("a forget needs a reason (--reason): the tombstone keeps it")


def _tombstone(conn: psycopg.Connection, report: ForgetReport, by: str, reason: str) -> None:
    conn.execute(
        sql.statement("history_operation"),
        {
            "kind": report.kind,
            "target": report.target_sha256,
            "by": by,
            "reason": reason,
            "rows": Jsonb({**report.rows, "reject_lines": report.reject_lines}),
        },
    )


def _forget_rejects(home: Path, conversation_id: str) -> int:
    """Remove the conversation's lines from the rejects reports kept under ``home``."""
    removed = 0
    for path in sorted((home / "rejects").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if not _names(line, conversation_id)]
        if len(kept) != len(lines):
            removed += len(lines) - len(kept)
            path.write_text("".join(kept), encoding="utf-8")
    return removed


def _names(line: str, conversation_id: str) -> bool:
    """Whether a reject line is the conversation's: its excerpt is a record of it (JSON when
    the line was not valid JSON, Python's repr of the record when its fields were refused).
    An excerpt that names no conversation (a message too long: its text only) cannot be
    attributed and stays."""
    try:
        excerpt = json.loads(line).get("excerpt", "")
    except (ValueError, AttributeError):
        return False
    for parse in (json.loads, ast.literal_eval):
        try:
            record = parse(excerpt)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(record, dict):
            return bool(record.get("conversation_id") == conversation_id)
    # a line cut at 200 characters parses as neither: its quoted id still names it
    quoted = (json.dumps(conversation_id), repr(conversation_id))
    return any(f"conversation_id{sep}{q}" in excerpt for q in quoted for sep in ('": ', "': "))


# How long a purge waits for transactions that began before the forget committed.
OLD_SNAPSHOTS_WAIT_S = 120.0


def _old_snapshots_gone(conn: psycopg.Connection) -> bool:
    """Wait until no other session of this database is in a transaction that began before now
    (the forget has committed): none can still see the deleted rows."""
    now = conn.execute("SELECT clock_timestamp()").fetchone()
    deadline = time.monotonic() + OLD_SNAPSHOTS_WAIT_S
    while time.monotonic() < deadline:
        row = conn.execute(sql.statement("old_snapshots"), {"since": now[0] if now else None})
        if not (row.fetchone() or (0,))[0]:
            return True
        time.sleep(0.05)
    return False


# At most this many WAL segments are written past (max_wal_size's default holds 64).
MAX_WAL_SEGMENTS = 1024


def _rotate_wal(conn: psycopg.Connection) -> None:
    """Move the write-ahead log past every segment file that exists now, then checkpoint, so
    that each is removed, not kept.

    With recycling on, a checkpoint renames an old segment to a future name, its bytes intact,
    and the log later overwrites only what it writes into it; recycling is turned off first
    (a checkpoint makes the checkpointer read the setting). A future segment recycled before
    then is passed too: a switch moves on only from a segment the log wrote into, so each step
    writes a small record first."""
    conn.execute("ALTER SYSTEM SET wal_recycle = off")
    conn.execute("SELECT pg_reload_conf()")
    conn.execute("CHECKPOINT")  # the checkpointer reloads before it runs a requested one
    row = conn.execute(sql.statement("wal_segments_last")).fetchone()
    last = str(row[0]) if row and row[0] else ""
    for _ in range(MAX_WAL_SEGMENTS):
        conn.execute("SELECT pg_logical_emit_message(false, 'slowwave.forget', 'rotate')")
        current = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        if current is None or str(current[0]) >= last:
            break
    for _ in range(2):
        conn.execute("SELECT pg_logical_emit_message(false, 'slowwave.forget', 'rotate')")
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")


@dataclass
class Purge:
    """How a purge ended: ``purged`` when every file is rewritten and the log moved on, else
    ``note`` says what stays."""

    purged: bool = False
    note: str | None = None


def purge_files(db: Database) -> Purge:
    """Rewrite the tables so no deleted tuple stays in their files, then move the WAL on, and
    mark every forget done before it began as purged (``history_operations.purged_at``).

    A rewrite keeps a deleted row that some transaction may still see: one that began before
    the forget committed (a run's statement on other conversations, say). The purge first waits
    for those to end, bounded; one still open then is named in the note, and the tombstones
    stay unpurged until a later purge."""
    outcome = Purge()
    with db.connection() as conn:  # autocommit: VACUUM cannot run in a transaction
        began = conn.execute("SELECT clock_timestamp()").fetchone()
        if not _old_snapshots_gone(conn):
            outcome.note = (
                "a transaction that began before the forget was still open after "
                f"{OLD_SNAPSHOTS_WAIT_S:.0f} s: rows it could see may stay in the files until the "
                "next purge (slowwave forget again, or VACUUM FULL)"
            )
            logger.warning("forget: %s", outcome.note)
        try:
            conn.execute(f"VACUUM (FULL) {', '.join(PURGED)}")
            # the planner's statistics sample column values: sample what is left, then rewrite
            # the catalog that kept the old samples
            conn.execute(f"ANALYZE {', '.join(PURGED)}")
        except psycopg.errors.InsufficientPrivilege as exc:
            outcome.note = f"tables not rewritten: {exc}"
            return outcome
        try:
            conn.execute("VACUUM (FULL) pg_catalog.pg_statistic")
            _rotate_wal(conn)
        except psycopg.errors.InsufficientPrivilege as exc:
            outcome.note = (
                "tables rewritten; the statistics catalog and the write-ahead log are the "
                "server's to rewrite and rotate "
                f"(this role may not: {' '.join(str(exc).split())})"
            )
            logger.warning("forget: %s", outcome.note)
            return outcome
        if outcome.note is None:
            outcome.purged = True
            conn.execute(sql.statement("tombstones_purged"), {"began": began[0] if began else None})
    return outcome


def _purge(db: Database, report: ForgetReport) -> None:
    outcome = purge_files(db)
    report.purged, report.purge_note = outcome.purged, outcome.note
