"""Export what the memory learned as Parquet, for analysts who audit it with polars or DuckDB.

An export goes to a folder or an object-store URL (``s3://bucket/prefix``), one dataset a
kind of record under it (``facts``, ``versions``, ``decisions``, ``runs``, and ``episodes``
only when asked for), partitioned by tenant and UTC day, hive-style::

    TARGET/versions/tenant=default/day=2026-11-24/part-0.parquet
    TARGET/runs/day=2026-11-24/part-0.parquet            (a run has no tenant)

The day is system time: when a fact was written, a decision recorded, a run started, an
episode ingested. A night's work lands in one partition per tenant, and a backfill of years of
transcripts makes files of a night's size, not one tiny file per day of history.

Incremental, by partition: the export keeps, beside the data (``_slowwave_export.json``), a
fingerprint of each partition's rows (their count and the sum of a hash of each exported row,
computed in Postgres). A later export computes the fingerprints again, in one snapshot with the
rows it reads, and rewrites only the partitions whose rows changed (a fact ended, evidence
added, a run finished) or whose file is gone, removes those with no row left, and writes
nothing at all when nothing changed. A file is whole or absent: it is written aside and moved
into place once written to the end (on an object store, a copy the store makes). The
partitions an export is about to change leave the manifest before it touches them, so one that
stopped half-way leaves them unaccounted for, and the next export writes them again. Only files
named as an export names them are read, moved or removed.

Forget reaches the exports: every export target is registered in the database
(``export_targets``), and a forget rewrites, in each one, the files of the forgotten
conversation's tenant whose rows changed, once the rows are gone. One it cannot reach (a
missing folder, an object store that refuses) is named in its report, nothing is written there,
and the next export of that target rewrites those files. An object store that keeps object
versions keeps the old ones: those are the operator's, like backups.

One export at a time writes to a target (an advisory lock on its name, in the database), and a
forget waits for it; a forget's pass then reads a snapshot taken after the forget committed.

Where the files go and how each lands whole is ``tasks.export_target``; what they hold, and how
they are written from the rows, ``tasks.export_parquet``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as pgsql

from slowwave import sql
from slowwave.models.errors import ExportError
from slowwave.sql.db import Database
from slowwave.tasks.export_parquet import write_partitions
from slowwave.tasks.export_target import FORMAT, PARTITION, Target, partition

logger = logging.getLogger(__name__)

WHATS = ("facts", "versions", "decisions", "runs", "episodes")
DEFAULT_WHAT = ("facts", "versions", "decisions", "runs")
# the kinds whose rows name a conversation: the ones a forget rewrites
CONVERSATIONAL = frozenset({"facts", "versions", "decisions", "episodes"})


def parse_what(what: str | Sequence[str] | None) -> tuple[str, ...]:
    """The kinds asked for (``facts,versions``), in their order; the default leaves episodes
    out: they hold the conversations' text."""
    if what is None:
        return DEFAULT_WHAT
    names = [w.strip() for w in (what.split(",") if isinstance(what, str) else what)]
    unknown = [w for w in names if w not in WHATS]
    if unknown or not names:
        asked = ", ".join(unknown) or "nothing"
        raise ExportError(f"--what: {asked}; choose from {', '.join(WHATS)}")
    return tuple(w for w in WHATS if w in names)


def since_day(conn: psycopg.Connection, text: str | None) -> date | None:
    """The day ``--since`` names: a date or a time (ISO 8601; a time without a zone is UTC),
    or a run (its id or short id), whose start is taken."""
    if text is None or not text.strip():
        return None
    try:  # a date has its dashes: eight digits may be a run's short id
        if "-" not in text.strip()[:5]:
            raise ValueError(text)
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        from slowwave.tasks.ids import resolve

        run = resolve(conn, "run", text.strip())
        row = conn.execute(sql.statement("run_started"), {"id": run}).fetchone()
        if row is None:
            raise ExportError(f"--since: no run {run}") from None
        moment = row[0]
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date()


@dataclass
class KindReport:
    """What an export did to one kind's dataset."""

    partitions: int = 0  # partitions it now holds (within --since)
    written: int = 0  # partitions rewritten
    removed: int = 0  # partitions (files) removed: no row left
    rows_written: int = 0


@dataclass
class ExportReport:
    """What an export did, by kind."""

    target: str
    since: date | None = None
    kinds: dict[str, KindReport] = field(default_factory=dict)

    @property
    def files_changed(self) -> int:
        return sum(k.written + k.removed for k in self.kinds.values())


def export(
    db: Database,
    to: str | Path,
    *,
    what: str | Sequence[str] | None = None,
    since: date | str | None = None,
) -> ExportReport:
    """Bring the export at ``to`` up to date: every partition of the kinds in ``what`` (from
    the day ``since`` on, when given: a day, or what ``since_day`` reads) whose rows changed
    since it was last written."""
    target = Target.of(to)
    kinds = parse_what(what)
    with db.connection() as conn:
        if isinstance(since, str):
            since = since_day(conn, since)
        # registered first: a forget from now on reaches it, waiting for this export's lock
        conn.execute(sql.statement("export_register"), {"target": target.url, "what": list(kinds)})
        try:
            with _target_lock(conn, target):
                return _export(conn, target, kinds, since=since, tenant=None)
        except OSError as exc:  # the folder or the object store refused
            raise ExportError(f"export to {target.url}: {' '.join(str(exc).split())}") from exc


def drop_target(db: Database, to: str | Path) -> bool:
    """Stop reaching an export: a forget no longer rewrites it (its files stay as they are).
    Whether it was registered."""
    target = Target.of(to)
    with db.connection() as conn:
        return (
            conn.execute(sql.statement("export_unregister"), {"target": target.url}).fetchone()
            is not None
        )


def forget_from_exports(db: Database, conversation_key: str) -> tuple[int, list[str]]:
    """After a forget committed: in every registered export, rewrite (or remove) the files of
    the conversation's tenant whose rows changed, so no file holds the forgotten rows; only
    files the export holds (a partition it never wrote stays unwritten). Returns the files
    rewritten or removed, and a note per export it could not reach: the forget stands, and
    the next export of that target rewrites the same files."""
    from slowwave.models.tenant import tenant_of

    tenant = tenant_of(conversation_key)
    changed, notes = 0, []
    with db.connection() as conn:
        rows = conn.execute(sql.statement("export_targets")).fetchall()
        for url, exported in rows:
            kinds = tuple(k for k in WHATS if k in exported and k in CONVERSATIONAL)
            if not kinds:
                continue
            try:
                target = Target.of(url)
                with _target_lock(conn, target):
                    report = _export(conn, target, kinds, since=None, tenant=tenant, erasing=True)
            except Exception as exc:  # the forget stands: what it could not reach is named
                note = f"{url}: not rewritten ({' '.join(str(exc).split())[:300]})"
                logger.warning("forget: export %s", note, exc_info=not isinstance(exc, OSError))
                notes.append(note)
                continue
            changed += report.files_changed
    return changed, notes


class _target_lock:
    """The target's advisory lock, held by this session until the export is done; waited
    for however long another export takes (no statement timeout: a server's pool has one)."""

    def __init__(self, conn: psycopg.Connection, target: Target) -> None:
        self.conn, self.key = conn, f"slowwave.export:{target.url}"

    def __enter__(self) -> None:
        with self.conn.transaction():  # a session's lock: it outlives this transaction
            self.conn.execute("SET LOCAL statement_timeout = 0")
            self.conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (self.key,))

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (self.key,))


def _export(
    conn: psycopg.Connection,
    target: Target,
    kinds: Sequence[str],
    *,
    since: date | None,
    tenant: str | None,
    erasing: bool = False,
) -> ExportReport:
    """``erasing``: a forget's pass, which writes only where an export is (its manifest)."""
    report = ExportReport(target.url, since=since)
    manifest = target.read_manifest()
    if erasing and not manifest:
        raise ExportError("no export here (no manifest): nothing written")
    # a manifest of another layout, or a key that is no partition's, is not trusted
    known: dict[str, Any] = {
        k: v
        for k, v in (manifest.get("partitions") or {}).items()
        if manifest.get("format") == FORMAT and PARTITION.fullmatch(k)
    }
    target.clear_aside()
    with conn.transaction():
        # one snapshot for the fingerprints and the rows, taken after the lock
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SET LOCAL statement_timeout = 0")
        # a row's text (its fingerprint) must not change with the session's settings
        conn.execute("SET LOCAL TimeZone = 'UTC'")
        conn.execute("SET LOCAL DateStyle = 'ISO'")
        conn.execute("SET LOCAL extra_float_digits = 1")
        for name in kinds:
            report.kinds[name] = _export_kind(conn, target, name, known, since, tenant, erasing)
    target.clear_aside()
    return report


def _scope(since: date | None, tenant: str | None) -> tuple[pgsql.Composable, dict[str, Any]]:
    """The WHERE over a kind's rows (``q``) for --since and a forget's tenant."""
    where: list[pgsql.Composable] = [pgsql.SQL("true")]
    if since is not None:
        where.append(pgsql.SQL("q.day >= %(since)s"))
    if tenant is not None:
        where.append(pgsql.SQL("q.tenant = %(tenant)s"))
    return pgsql.SQL(" AND ").join(where), {"since": since, "tenant": tenant}


def _export_kind(
    conn: psycopg.Connection,
    target: Target,
    name: str,
    known: dict[str, Any],
    since: date | None,
    tenant: str | None,
    erasing: bool,
) -> KindReport:
    """One kind's partitions brought up to date. Those about to change leave the manifest
    first (it is written before and after): an export stopped half-way leaves them
    unaccounted for, and the next one writes them again."""
    report = KindReport()
    # the facts that hold now are the versions not ended
    rows_sql: pgsql.Composable = pgsql.SQL(
        sql.statement(f"export_{'versions' if name == 'facts' else name}")
    )
    if name == "facts":
        rows_sql = pgsql.SQL("SELECT * FROM ({rows}) v WHERE v.invalid_at IS NULL").format(
            rows=rows_sql
        )
    where, params = _scope(since, tenant)
    fingerprints = conn.execute(
        pgsql.SQL(
            "SELECT q.tenant, q.day, count(*), sum(hashtextextended(q::text, 0))::text "
            "FROM ({rows}) q WHERE {where} GROUP BY q.tenant, q.day"
        ).format(rows=rows_sql, where=where),
        params,
    ).fetchall()
    now = {partition(name, t, d): {"rows": n, "fingerprint": f} for t, d, n, f in fingerprints}
    report.partitions = len(now)
    prefix = name if tenant is None else f"{name}/tenant={tenant}"
    present = target.files(prefix)
    held = present | {k for k in known if k.startswith(prefix + "/")}
    # a partition whose rows changed, or whose file is gone; a forget's pass only where the
    # export holds the partition
    stale = [
        (t, d)
        for t, d, *_ in fingerprints
        if (known.get(k := partition(name, t, d)) != now[k] or k not in present)
        and (k in held or not erasing)
    ]
    gone = sorted(k for k in held - set(now) if _in_scope(k, since))
    if not stale and not gone:
        return report
    for key in [*gone, *(partition(name, t, d) for t, d in stale)]:
        known.pop(key, None)
    target.write_manifest(known)
    for key in gone:
        if target.exists(key):
            target.delete(key)
            report.removed += 1
    if stale:
        report.rows_written = write_partitions(conn, target, name, rows_sql, stale)
        report.written = len(stale)
        for t, d in stale:
            known[partition(name, t, d)] = now[partition(name, t, d)]
    target.write_manifest(known)
    return report


def _in_scope(relative: str, since: date | None) -> bool:
    if since is None:
        return True
    day = next((p[4:] for p in relative.split("/") if p.startswith("day=")), "")
    return day >= since.isoformat()
