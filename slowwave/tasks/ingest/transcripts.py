"""ingest: one source file, or every file of a source, → episodes, each conversation whole in
one transaction, idempotently.

Each file's format is checked first (``formats``); valid messages are streamed in batches
(``read``, ``columnar``) into staging tables with COPY, the conversations shared out over a few
connections (``feeder``); rejects go to the rejects report as they are found. Then, set-wise in
SQL (``segment``): repeated message ids are rejected (first line wins), messages already
ingested are skipped, the rest are segmented into episodes (sessions, time gaps, a size cap)
and inserted with their provenance. A LoCoMo document is read whole (``locomo``); an agent's
recorded messages take the same path (``record``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path

import psycopg

from slowwave.models import faultpoints
from slowwave.sql.db import Database
from slowwave.tasks.ingest.columnar import ColumnarSource, read_columnar
from slowwave.tasks.ingest.formats import Format, check_sources
from slowwave.tasks.ingest.locomo import ingest_locomo
from slowwave.tasks.ingest.policy import IngestPolicy, Progress, Window
from slowwave.tasks.ingest.read import Batch, read_jsonl
from slowwave.tasks.ingest.rejects import RejectsReport, report_path
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.segment import stage_and_segment
from slowwave.tasks.ingest.sources import SourceFile, file_size, sources_report_path


def ingest(
    db: Database,
    source: str | Path,
    policy: IngestPolicy,
    *,
    fmt: Format | None = None,
    progress: Progress | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    mapping: Mapping[str, str] | None = None,
    checked: Mapping[SourceFile, Format] | None = None,
) -> IngestReport:
    """Ingest every file of ``source``: a file, a folder, or a glob (``sources``); every valid
    message lands, every invalid one is reported. ``checked``: its files and their formats, as
    ``check_sources`` found them already. Each file is committed before the next, in name order,
    so a run stopped half-way resumes where it stopped (message ids make a file already in
    idempotent) and a second run adds nothing. One rejects report holds the rejects of all of
    them, each with its file (of a single file, beside it as ``report_path`` names it).

    ``since`` / ``until`` keep only messages in that event-time range (LoCoMo: sessions);
    ``mapping`` names the source's column for a canonical field (``columnar.parse_mapping``).
    """
    formats = dict(checked) if checked is not None else check_sources(str(source), fmt)
    (first, *others) = formats
    if not others and first == Path(source):
        report = IngestReport(source=str(source), format=formats[first])
        rejects_at = report_path(first, policy.home)
    else:
        report = IngestReport(source=str(source), format=", ".join(sorted(set(formats.values()))))
        rejects_at = sources_report_path(str(source), policy.home)
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
        ingest_locomo(conn, path, policy, report, rejects, window)
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


def _read(
    path: SourceFile, fmt: Format, policy: IngestPolicy, mapping: Mapping[str, str], size: int
) -> Iterator[Batch]:
    limits = policy.ingest
    if fmt == "parquet" or fmt == "csv":
        source = ColumnarSource(str(path), fmt, mapping)
        return read_columnar(source, limits.batch_rows, limits.max_message_chars, size)
    return read_jsonl(path, limits.batch_rows, limits.max_message_chars, mapping)
