"""ingest: one source file → episodes, each conversation whole in one transaction,
idempotently.

Valid messages are streamed in batches into staging tables with COPY, the conversations shared
out over a few connections; rejects go to the rejects report as they are found. Then,
set-wise in SQL: repeated message ids are rejected (first line wins), messages already
ingested are skipped, the rest are segmented into episodes (sessions, time gaps, a size cap)
and inserted with their provenance.
"""

from __future__ import annotations

import json
import queue
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import psycopg
from pydantic import ValidationError

from slowwave import sql
from slowwave.models import faultpoints
from slowwave.models.errors import SourceError
from slowwave.models.ids import conversation_ref
from slowwave.models.settings import Settings
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant, conversation_key
from slowwave.sql.copy import copy_arrow, copy_rows
from slowwave.sql.db import Database
from slowwave.tasks.ingest.columnar import ColumnarSource, read_columnar, staged_table
from slowwave.tasks.ingest.load import FORGOTTEN, load_episodes_counted, refuse_forgotten
from slowwave.tasks.ingest.locomo import read_locomo
from slowwave.tasks.ingest.read import COLUMNS, Batch, read_jsonl, validate
from slowwave.tasks.ingest.rejects import Reject, RejectsReport, report_path
from slowwave.tasks.ingest.sources import (
    RemoteFile,
    SourceFile,
    file_size,
    source_files,
    sources_report_path,
)

Format = Literal["jsonl", "parquet", "csv", "locomo"]
Window = tuple[datetime | None, datetime | None]
Progress = Callable[[int], None]


@dataclass
class IngestReport:
    """What one ingest did."""

    source: str
    format: str
    read: int = 0
    ingested: int = 0
    rejected: int = 0
    episodes: int = 0
    # episodes that went on with this source's messages (a conversation's latest, still open)
    grown: int = 0
    out_of_range: int = 0
    rejects_path: str | None = None
    first_rejects: list[Reject] = field(default_factory=list)

    def add(self, other: IngestReport) -> None:
        """What ``other`` wrote, counted here too (its reads and rejects are counted apart)."""
        self.ingested += other.ingested
        self.episodes += other.episodes
        self.grown += other.grown
        self.out_of_range += other.out_of_range

    def count_rejects(self, rejects: RejectsReport) -> None:
        """What the rejects report holds: how many, the first few, and where (when any)."""
        self.rejected = rejects.count
        self.first_rejects = rejects.first
        self.rejects_path = str(rejects.path) if rejects.count else None


def detect_format(path: SourceFile) -> Format:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".json":
        return "locomo"
    raise SourceError(f"cannot tell the format of {path}; pass --format jsonl|parquet|csv|locomo")


def check_sources(source: str, fmt: Format | None) -> dict[SourceFile, Format]:
    """The source's files, in name order, each checked to be of its format, before the first
    lands (``check_source``)."""
    return {path: check_source(path, fmt) for path in source_files(source)}


def check_source(path: SourceFile, fmt: Format | None) -> Format:
    """The source's format, checked before anything starts: the file is there, and its first
    line is what the format says (a LoCoMo document read as JSONL would be one reject per
    line, and nothing ingested). An object store's file is taken by its suffix."""
    if isinstance(path, RemoteFile):
        fmt = fmt or detect_format(path)
        if fmt == "locomo":
            raise SourceError(f"{path}: a LoCoMo document is read from a local file")
        return fmt
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if not path.is_file():
        raise SourceError(f"{path} is not a file: ingest takes one transcript file")
    fmt = fmt or detect_format(path)
    if fmt in ("parquet", "csv"):
        return fmt
    with path.open("rb") as source:
        first = next((line.strip() for line in source if line.strip()), b"")
    try:
        line = json.loads(first)
    except ValueError:
        line = None
    # a first line that is no message: a LoCoMo document (refused), or a bad line (a reject)
    whole = _document(path) if not isinstance(line, dict) and first[:1] in (b"[", b"{") else None
    if fmt == "jsonl" and (_locomo(line) or _locomo(whole)):
        raise SourceError(f"{path} is a LoCoMo JSON document: pass --format locomo")
    if fmt == "locomo" and isinstance(line, dict) and "text" in line:
        raise SourceError(f"{path} holds a message per line: pass --format jsonl")
    return fmt


# A file whose first line is no message is read whole to tell a JSON document from JSONL
# with a bad first line, up to this size (LoCoMo's files are a few MB).
DOCUMENT_MAX_BYTES = 256 * 1024 * 1024


def _document(path: Path) -> Any:
    if path.stat().st_size > DOCUMENT_MAX_BYTES:
        return None
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        return None


def _locomo(value: Any) -> bool:
    """A LoCoMo document, or one of its samples: conversations under ``conversation``."""
    if isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, dict) and "conversation" in value and "text" not in value


@dataclass(frozen=True)
class IngestPolicy:
    """The settings ingest uses: batches, limits, segmentation, and where reports go."""

    home: Path
    batch_rows: int
    max_message_chars: int
    segment_gap_s: int
    segment_max_messages: int
    # a forgotten conversation's messages are refused unless the operator says otherwise
    allow_forgotten: bool = False
    # whose conversations the source's are (``models.tenant``)
    tenant: str = DEFAULT_TENANT
    # connections a file's conversations are shared out over (``stage_and_segment``), taken
    # from the pool: at most one fewer than it has, so that one stays for the rest
    connections: int = 1

    @classmethod
    def of(
        cls, settings: Settings, *, allow_forgotten: bool = False, tenant: str = DEFAULT_TENANT
    ) -> IngestPolicy:
        return cls(
            home=settings.home,
            batch_rows=settings.ingest.batch_rows,
            max_message_chars=settings.ingest.max_message_chars,
            segment_gap_s=settings.ingest.segment_gap_s,
            segment_max_messages=settings.ingest.segment_max_messages,
            allow_forgotten=allow_forgotten,
            tenant=check_tenant(tenant),
            connections=max(
                1, min(settings.ingest.connections, settings.database.pool_max_size - 1)
            ),
        )


def ingest(
    db: Database,
    path: Path,
    policy: IngestPolicy,
    *,
    fmt: Format | None = None,
    progress: Progress | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    mapping: Mapping[str, str] | None = None,
) -> IngestReport:
    """Ingest ``path``; every valid message lands, every invalid one is reported.

    ``since`` / ``until`` keep only messages in that event-time range (LoCoMo: sessions);
    ``mapping`` names the source's column for a canonical field (``columnar.parse_mapping``).
    """
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    fmt = check_source(path, fmt)
    report = IngestReport(source=str(path), format=fmt)
    with RejectsReport(report_path(path, policy.home)) as rejects, db.connection() as conn:
        _ingest_file(
            db, conn, path, fmt, policy, report, rejects, progress, (since, until), mapping
        )
        report.count_rejects(rejects)
    return report


def ingest_source(
    db: Database,
    source: str,
    policy: IngestPolicy,
    *,
    fmt: Format | None = None,
    progress: Progress | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    mapping: Mapping[str, str] | None = None,
    checked: Mapping[SourceFile, Format] | None = None,
) -> IngestReport:
    """Ingest every file of ``source``: a file, a folder, or a glob (``sources``); ``checked``:
    its files and their formats, as ``check_sources`` found them already. Each file
    is committed before the next, in name order, so a run stopped half-way resumes where it stopped
    (message ids make a file already in idempotent) and a second run adds nothing. One rejects
    report holds the rejects of all of them, each with its file."""
    formats = dict(checked) if checked is not None else check_sources(source, fmt)
    files = list(formats)
    if len(files) == 1 and files[0] == Path(source):
        return ingest(
            db,
            files[0],
            policy,
            fmt=formats[files[0]],
            progress=progress,
            since=since,
            until=until,
            mapping=mapping,
        )
    shown = ", ".join(sorted(set(formats.values())))
    report = IngestReport(source=source, format=shown)
    rejects_at = sources_report_path(source, policy.home)
    with RejectsReport(rejects_at) as rejects, db.connection() as conn:
        for path, file_format in formats.items():
            _ingest_file(
                db,
                conn,
                path,
                file_format,
                policy,
                report,
                rejects,
                progress,
                (since, until),
                mapping,
            )
            faultpoints.reached("ingest.file.committed", conn)
        report.count_rejects(rejects)
    return report


def _ingest_file(
    db: Database,
    conn: psycopg.Connection,
    path: SourceFile,
    fmt: Format,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    progress: Progress | None,
    window: Window,
    mapping: Mapping[str, str] | None,
) -> None:
    if fmt == "locomo":
        assert isinstance(path, Path), "check_source refuses a remote LoCoMo document"
        _ingest_locomo(conn, path, policy, report, rejects, window)
        return
    size, done = file_size(path), 0
    batches = _read(path, fmt, policy, mapping or {}, size)

    def advance(read: int) -> None:  # the file's bytes, never more, whatever the reader says
        nonlocal done
        step = max(0, min(read, size - done))
        done += step
        if progress is not None and step:
            progress(step)

    stage_and_segment(conn, batches, str(path), policy, report, rejects, advance, window, db=db)
    advance(size - done)


def record(
    db: Database,
    conversation_id: str,
    messages: Iterable[Mapping[str, Any]],
    policy: IngestPolicy,
) -> IngestReport:
    """Messages an agent records in the policy's tenant, through the path a source file takes:
    each validated (the transcript schema, the size limit), then staged, repeated message ids
    rejected, messages already recorded skipped, a forgotten conversation refused, and the rest
    segmented into episodes in event time, in one transaction. The report holds every reject,
    by position in ``messages`` (1 = the first); nothing is written beside."""
    source = f"recorded {conversation_ref(conversation_key(conversation_id, policy.tenant))}"
    batch = Batch()
    for line, message in enumerate(messages, start=1):
        batch.read += 1
        fields = {**message, "conversation_id": conversation_id}
        row, reject = validate(fields, line, source, policy.max_message_chars)
        if row is not None:
            batch.rows.append(row)
        elif reject is not None:
            batch.rejects.append(reject)
    report = IngestReport(source=source, format="record")
    with RejectsReport(None) as rejects, db.connection() as conn:
        stage_and_segment(conn, [batch], source, policy, report, rejects, None, (None, None))
        report.count_rejects(rejects)
    return report


def _read(
    path: SourceFile, fmt: Format, policy: IngestPolicy, mapping: Mapping[str, str], size: int
) -> Iterator[Batch]:
    if fmt == "parquet" or fmt == "csv":
        source = ColumnarSource(str(path), fmt, mapping)
        return read_columnar(source, policy.batch_rows, policy.max_message_chars, size)
    return read_jsonl(path, policy.batch_rows, policy.max_message_chars, mapping)


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
    out over ``policy.connections`` of its connections, each share written so
    (``_stage_and_segment_at_once``)."""
    if db is not None and policy.connections > 1:
        _stage_and_segment_at_once(
            db, conn, batches, source, policy, report, rejects, progress, window
        )
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
        if not conn.broken:
            conn.execute("DROP TABLE IF EXISTS slowwave_ingest_aside")


# what a writer is fed after its last share: the source is read, its rows staged
_DONE = Batch()
# a writer told to give its source up (the reader failed or was interrupted): its staging
# transaction rolls back
_ABANDON = Batch()


class _Abandoned(Exception):
    pass


def _stage_and_segment_at_once(
    db: Database,
    conn: psycopg.Connection,
    batches: Iterable[Batch],
    source: str,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    progress: Progress | None,
    window: Window,
) -> None:
    """The source's conversations split by a hash of their id over ``policy.connections``
    connections (``conn`` and more of ``db``'s), each a writer of its own: its share staged
    as the batches are read, then written as ``stage_and_segment`` writes a source on one
    connection, in groups of ``GROUP_CONVERSATIONS / connections`` (so that no more
    conversations are held at once than on one). The statement that builds episodes keeps one
    server core busy per writer, and no conversation is ever on two of them: their locks,
    tails and message ids never meet. Each conversation lands whole; a stop leaves the groups
    committed (a rerun adds the rest). The first failure, or an interrupt, stops every writer:
    what is under way is cancelled and rolled back."""
    at_once = policy.connections
    feeds: list[queue.Queue[Batch]] = [queue.Queue(maxsize=2) for _ in range(at_once)]
    counting = threading.Lock()
    working: list[psycopg.Connection] = []

    def write(part: int) -> None:
        with ExitStack() as stack:
            own = conn if part == 0 else stack.enter_context(db.connection())
            with counting:
                working.append(own)
            try:
                mine = IngestReport(source=source, format=report.format)
                found = RejectsReport(None)  # all of them, until the writer is done
                group = max(1, GROUP_CONVERSATIONS // at_once)
                fed = _fed(feeds[part])
                stage_and_segment(own, fed, source, policy, mine, found, None, window, group=group)
                with counting:
                    report.add(mine)
                    for reject in found.first:
                        rejects.add(reject)
            finally:
                with counting:  # back to the pool: never cancelled for another's sake
                    working.remove(own)

    with ThreadPoolExecutor(at_once, thread_name_prefix="slowwave-ingest") as pool:
        writers = [pool.submit(write, part) for part in range(at_once)]
        try:
            for batch in batches:
                with counting:
                    report.read += batch.read
                    for reject in batch.rejects:
                        rejects.add(reject)
                for feed, share in zip(feeds, _split(batch, at_once), strict=True):
                    _feed(feed, share, writers)
                if progress is not None:
                    progress(batch.bytes_read)
            for feed in feeds:
                _feed(feed, _DONE, writers)
            for writer in as_completed(writers):
                writer.result()
        except BaseException:
            with counting:
                for own in working:
                    own.cancel_safe()
            for feed in feeds:  # a writer waiting for rows gives its source up
                with suppress(queue.Empty):
                    while True:
                        feed.get_nowait()
                feed.put_nowait(_ABANDON)
            wait(writers)
            raise


def _feed(feed: queue.Queue[Batch], share: Batch, writers: list[Future[None]]) -> None:
    """A writer's next share of rows (or ``_DONE``), waiting while it is busy with earlier
    ones; a writer that failed meanwhile raises its error here."""
    while True:
        try:
            feed.put(share, timeout=0.2)
            return
        except queue.Full:
            for writer in writers:
                if writer.done():
                    writer.result()


def _fed(feed: queue.Queue[Batch]) -> Iterator[Batch]:
    """A writer's shares, as the reader feeds them."""
    while (batch := feed.get()) is not _DONE:
        if batch is _ABANDON:
            raise _Abandoned
        yield batch


def _split(batch: Batch, parts: int) -> list[Batch]:
    """A batch's valid rows, by conversation, into ``parts`` shares (the read count, rejects
    and bytes stay with the reader)."""
    shares = [Batch() for _ in range(parts)]
    for row in batch.rows:
        shares[zlib.crc32(row.conversation_id.encode()) % parts].rows.append(row)
    if batch.table is not None:
        import polars as pl
        import pyarrow.compute as pc

        part = (pl.Series(batch.table["conversation_id"]).hash(seed=0) % parts).to_arrow()
        for index, share in enumerate(shares):
            share.table = batch.table.filter(pc.equal(part, index))
    return shares


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
        rows = [r for r in batch.rows if _within(r.at, window)]
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
            "gap_s": policy.segment_gap_s,
            "max_messages": policy.segment_max_messages,
        },
    ).fetchone()
    episodes, messages, grown = made if made is not None else (0, 0, 0)
    report.episodes += int(episodes)
    report.ingested += int(messages)
    report.grown += int(grown)


def _ingest_locomo(
    conn: psycopg.Connection,
    path: Path,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    window: Window,
) -> None:
    try:
        read = read_locomo(path, on_error=rejects.add)
        episodes = list(read)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        rejects.add(Reject(str(path), 0, f"not a LoCoMo JSON file: {exc}"))
        return
    except ValidationError as exc:  # pragma: no cover - read_locomo reports per session
        rejects.add(Reject(str(path), 0, f"invalid LoCoMo data: {exc}"))
        return
    messages = sum(len(e.messages) for e in episodes)
    kept = [e for e in episodes if _within(e.end_at, window)]
    if policy.tenant != DEFAULT_TENANT:
        kept = [e.in_tenant(policy.tenant) for e in kept]
    report.read += messages
    report.out_of_range += messages - sum(len(e.messages) for e in kept)
    made, ingested = load_episodes_counted(
        conn,
        kept,
        allow_forgotten=policy.allow_forgotten,
        on_refused=lambda conversation, messages: rejects.add(
            Reject(
                str(path),
                0,
                f"{messages} message(s) of {conversation_ref(conversation)}: {FORGOTTEN}",
            )
        ),
    )
    report.episodes += made
    report.ingested += ingested


def _within(at: datetime, window: Window) -> bool:
    since, until = window
    return (since is None or at >= since) and (until is None or at < until)
