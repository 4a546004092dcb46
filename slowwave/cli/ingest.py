"""`slowwave ingest`: a transcript into episodes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from slowwave.cli.common import (
    AllowForgottenOption,
    FormatOption,
    MapOption,
    SourceArgument,
    TenantOption,
    console,
    ensure_migrated,
    errors,
    one_line_errors,
    open_database,
)
from slowwave.models.settings import Settings, get_settings
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant
from slowwave.tasks.ingest.columnar import parse_mapping
from slowwave.tasks.ingest.sources import SourceFile, file_size
from slowwave.tasks.ingest.transcripts import (
    Format,
    IngestPolicy,
    IngestReport,
    check_sources,
    ingest_source,
)


@one_line_errors
def ingest_command(
    source: SourceArgument,
    fmt: FormatOption = None,
    column_map: MapOption = None,
    allow_forgotten: AllowForgottenOption = False,
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Turn transcripts into episodes: validated, idempotent, in event time.

    Examples: slowwave ingest chats.jsonl | slowwave ingest lake/ --map text=body |
    slowwave ingest 'lake/2023-*.parquet' | slowwave ingest locomo10.json --format locomo"""
    mapping = parse_mapping(column_map)
    checked = check_sources(source, fmt)  # before the database starts
    report = run_ingest(
        source,
        fmt,
        allow_forgotten=allow_forgotten,
        tenant=check_tenant(tenant),
        mapping=mapping,
        checked=checked,
    )
    print_ingest(report)


def run_ingest(
    source: str | Path,
    fmt: Format | None,
    settings: Settings | None = None,
    *,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
    mapping: dict[str, str] | None = None,
    checked: Mapping[SourceFile, Format] | None = None,
) -> IngestReport:
    """Ingest with a progress bar of the bytes of every file (``checked``: the files and
    their formats, when already listed)."""
    settings = settings or get_settings()
    with open_database(settings) as db:
        ensure_migrated(db)
        columns = (
            TextColumn("[bold]ingest[/] {task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=errors, transient=True) as bar:
            total = sum(file_size(f) for f in checked) if checked is not None else None
            task = bar.add_task(Path(str(source)).name or str(source), total=total)
            return ingest_source(
                db,
                str(source),
                IngestPolicy.of(settings, allow_forgotten=allow_forgotten, tenant=tenant),
                fmt=fmt,
                progress=lambda n: bar.advance(task, n),
                mapping=mapping,
                checked=checked,
            )


def print_ingest(report: IngestReport) -> None:
    table = Table("source", "format", "read", "ingested", "rejected", "episodes made")
    table.add_row(
        report.source,
        report.format,
        str(report.read),
        str(report.ingested),
        str(report.rejected),
        str(report.episodes),
    )
    console.print(table)
    if report.rejects_path:
        for reject in report.first_rejects[:5]:
            where = f"{reject.source} " if reject.source != report.source else ""
            console.print(f"  {where}line {reject.line}: {reject.reason}", highlight=False)
        console.print(f"all {report.rejected} rejects: {report.rejects_path}", highlight=False)
