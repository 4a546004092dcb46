"""Forget on request (privacy): hard-delete a conversation or one fact, and everything that
holds its text, then leave a tombstone: what kind, when, who and why, how many rows of each
table, and the SHA-256 of the id, never content (``history_operations``).

Deleted rows stay in the server's files until they are rewritten: with ``purge`` (the
default) the tables are rewritten (``VACUUM FULL``) and, where the role may, the write-ahead
log that recorded the rows is switched and checkpointed away with segment recycling off. On a
managed server whose role may not, the report says so: the provider's backups and WAL
archives are the operator's to handle.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

import sql
from sql.db import Database
from tasks.history import HistoryError

logger = logging.getLogger(__name__)

# Every table a forget deletes from or rewrites.
PURGED = (
    "episodic_memory",
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


def digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def forget_conversation(
    db: Database, conversation_id: str, *, home: Path, by: str, reason: str, purge: bool = True
) -> ForgetReport:
    """Delete the conversation everywhere slowwave keeps it, rejects files under ``home``
    included."""
    _needs_reason(reason)
    report = ForgetReport("forget_conversation", digest(conversation_id))
    with db.connection() as conn, conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(
                sql.statement("forget_conversation"), {"conversation_id": conversation_id}
            ).fetchone()
        report.rows = {k: int(v) for k, v in (row or {}).items()}
        if not report.rows.get("episodes") and not report.rows.get("facts"):
            raise HistoryError(f"no conversation {conversation_id!r} to forget")
        _tombstone(conn, report, by, reason)
    report.reject_lines = _forget_rejects(home, conversation_id)  # once the rows are gone
    if purge:
        _purge(db, report)
    return report


def forget_fact(
    db: Database, fact_id: UUID, *, by: str, reason: str, purge: bool = True
) -> ForgetReport:
    """Delete one fact and the decisions about it; its chain closes over the gap."""
    _needs_reason(reason)
    report = ForgetReport("forget_fact", digest(str(fact_id)))
    with db.connection() as conn, conn.transaction():
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(sql.statement("forget_fact"), {"id": fact_id}).fetchone()
        report.rows = {k: int(v) for k, v in (row or {}).items()}
        if not report.rows.get("facts"):
            raise HistoryError(f"no fact {fact_id}")
        _tombstone(conn, report, by, reason)
    if purge:
        _purge(db, report)
    return report


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


def _purge(db: Database, report: ForgetReport) -> None:
    """Rewrite the tables so no deleted tuple stays in their files, then move the WAL on."""
    with db.connection() as conn:  # autocommit: VACUUM cannot run in a transaction
        try:
            conn.execute(f"VACUUM (FULL) {', '.join(PURGED)}")
            # the planner's statistics sample column values: sample what is left, then rewrite
            # the catalog that kept the old samples
            conn.execute(f"ANALYZE {', '.join(PURGED)}")
        except psycopg.errors.InsufficientPrivilege as exc:
            report.purge_note = f"tables not rewritten: {exc}"
            return
        try:
            conn.execute("VACUUM (FULL) pg_catalog.pg_statistic")
            conn.execute("ALTER SYSTEM SET wal_recycle = off")
            conn.execute("SELECT pg_reload_conf()")
            for _ in range(2):
                conn.execute("SELECT pg_switch_wal()")
                conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege as exc:
            report.purge_note = (
                "tables rewritten; the statistics catalog and the write-ahead log are the "
                "server's to rewrite and rotate "
                f"(this role may not: {' '.join(str(exc).split())})"
            )
            logger.warning("forget: %s", report.purge_note)
        else:
            report.purged = True
