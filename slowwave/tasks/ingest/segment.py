"""Staged rows into episodes: a source's valid rows are staged with COPY, then, set-wise in
SQL, repeated message ids are rejected (first line wins), messages already ingested are
skipped, a forgotten conversation is refused, and the rest are segmented into episodes
(sessions, time gaps, a size cap) and inserted with their provenance; each conversation whole
in one transaction. A source of many conversations is shared out over a few connections
(``tasks.ingest.feeder``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import suppress

import psycopg

from slowwave import sql
from slowwave.models import faultpoints
from slowwave.models.ids import conversation_ref
from slowwave.models.tenant import DEFAULT_TENANT, conversation_key
from slowwave.sql.copy import copy_arrow, copy_rows
from slowwave.sql.db import Database
from slowwave.tasks.ingest.columnar import staged_table
from slowwave.tasks.ingest.feeder import feed_writers
from slowwave.tasks.ingest.load import FORGOTTEN, refuse_forgotten
from slowwave.tasks.ingest.policy import IngestPolicy, Progress, Window, within
from slowwave.tasks.ingest.read import COLUMNS, Batch
from slowwave.tasks.ingest.rejects import Reject, RejectsReport
from slowwave.tasks.ingest.report import IngestReport

# Conversations written in one transaction at most: each is held against a forget with an
# advisory lock until the commit, and a server's lock table has room for a few thousand
# (max_locks_per_transaction × connections). A file with more is written in groups of
# conversations, each group's transaction on its own (a conversation is never split); groups
# written at once share this many between them.
GROUP_CONVERSATIONS = 1000


def stage_and_segment(
    conn: psycopg.Connection,
    batches: Iterable[Batch],
    source: str,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    progress: Progress | None,
    window: Window,
    *,
    db: Database | None = None,
    group: int = GROUP_CONVERSATIONS,
) -> None:
    """Stage a source's valid rows, then write them as episodes: in the same transaction when
    they hold at most ``group`` conversations; otherwise set aside and written ``group``
    conversations a transaction (a stop between two leaves whole conversations in, and a rerun
    adds the rest: message ids make it idempotent). With ``db``, the conversations are shared
    out over ``policy.connections`` of its connections (``feeder.feed_writers``), each share
    written so, in groups of ``GROUP_CONVERSATIONS / connections`` (so that no more
    conversations are held at once than on one). The statement that builds episodes keeps one
    server core busy per writer. Each conversation lands whole; a stop leaves the groups
    committed (a rerun adds the rest)."""
    if db is not None and policy.connections > 1:
        at_once = policy.connections

        def write(
            own: psycopg.Connection, fed: Iterator[Batch]
        ) -> tuple[IngestReport, RejectsReport]:
            mine = IngestReport(source=source, format=report.format)
            found = RejectsReport(None)  # all of them, until the writer is done
            share_group = max(1, GROUP_CONVERSATIONS // at_once)
            stage_and_segment(
                own, fed, source, policy, mine, found, None, window, group=share_group
            )
            return mine, found

        feed_writers(db, conn, batches, at_once, report, rejects, progress, write)
        return
    with conn.transaction():
        conn.execute(sql.statement("ingest_stage"))
        _stage(conn, batches, policy, report, rejects, progress, window)
        conversations = [r[0] for r in conn.execute(sql.statement("ingest_conversations"))]
        whole = len(conversations) <= group
        if whole:
            _segment(conn, conversations, source, policy, report, rejects)
        else:
            conn.execute(sql.statement("ingest_set_aside"))
    if whole:
        faultpoints.reached("ingest.group.committed", conn)
        return
    try:
        for start in range(0, len(conversations), group):
            some = conversations[start : start + group]
            with conn.transaction():
                conn.execute(sql.statement("ingest_stage"))
                conn.execute(sql.statement("ingest_group"), {"conversations": some})
                _segment(conn, some, source, policy, report, rejects)
            faultpoints.reached("ingest.group.committed", conn)
    finally:
        # a stop may cancel this too: the next set-aside on this connection drops them then
        if not conn.broken:
            with suppress(psycopg.errors.QueryCanceled):
                conn.execute("DROP TABLE IF EXISTS pg_temp.slowwave_ingest_aside")


def _stage(
    conn: psycopg.Connection,
    batches: Iterable[Batch],
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    progress: Progress | None,
    window: Window,
) -> None:
    for batch in batches:
        report.read += batch.read
        for reject in batch.rejects:
            rejects.add(reject)
        if batch.table is not None:
            table, outside = staged_table(batch.table, window, policy.tenant)
            report.out_of_range += outside
            if table.num_rows:
                copy_arrow(conn, "slowwave_ingest", COLUMNS, table)
        rows = [r for r in batch.rows if within(r.at, window)]
        report.out_of_range += len(batch.rows) - len(rows)
        if policy.tenant != DEFAULT_TENANT:
            rows = [
                r._replace(conversation_id=conversation_key(r.conversation_id, policy.tenant))
                for r in rows
            ]
        if rows:
            copy_rows(conn, "slowwave_ingest", COLUMNS, rows)
        if progress is not None:
            progress(batch.bytes_read)


def _segment(
    conn: psycopg.Connection,
    conversations: list[str],
    source: str,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
) -> None:
    """The staged messages of ``conversations`` into episodes, in the open transaction."""
    for (line,) in refuse_forgotten(
        conn,
        conversations,
        "ingest_refuse",
        policy.allow_forgotten,
        exclusive=True,
    ):
        rejects.add(Reject(source, int(str(line)), FORGOTTEN))  # no excerpt: no content
    for line, conversation, message, first in conn.execute(
        sql.statement("ingest_duplicates")
    ).fetchall():
        rejects.add(
            Reject(
                source,
                int(line),
                f"duplicate message_id {message!r} in {conversation_ref(conversation)} "
                f"(first on line {first})",
            )
        )
    conn.execute(sql.statement("ingest_tails"))
    made = conn.execute(
        sql.statement("ingest_segment"),
        {
            "gap_s": policy.ingest.segment_gap_s,
            "max_messages": policy.ingest.segment_max_messages,
        },
    ).fetchone()
    episodes, messages, grown = made if made is not None else (0, 0, 0)
    report.episodes += int(episodes)
    report.ingested += int(messages)
    report.grown += int(grown)
