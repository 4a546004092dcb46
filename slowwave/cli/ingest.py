"""`slowwave ingest`: a transcript into episodes."""

from __future__ import annotations

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
from slowwave.tasks.ingest.transcripts import (
    Format,
    IngestPolicy,
    IngestReport,
    check_source,
    ingest,
)


@one_line_errors
def ingest_command(
    path: SourceArgument,
    fmt: FormatOption = None,
    allow_forgotten: AllowForgottenOption = False,
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Turn a transcript into episodes: validated, idempotent, in event time.

    Examples: slowwave ingest chats.jsonl | slowwave ingest locomo10.json --format locomo"""
    fmt = check_source(path, fmt)  # before the database starts
    report = run_ingest(path, fmt, allow_forgotten=allow_forgotten, tenant=check_tenant(tenant))
    print_ingest(report)


def run_ingest(
    path: Path,
    fmt: Format | None,
    settings: Settings | None = None,
    *,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
) -> IngestReport:
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
            task = bar.add_task(path.name, total=path.stat().st_size if path.is_file() else None)
            return ingest(
                db,
                path,
                IngestPolicy.of(settings, allow_forgotten=allow_forgotten, tenant=tenant),
                fmt=fmt,
                progress=lambda n: bar.advance(task, n),
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
            console.print(f"  line {reject.line}: {reject.reason}", highlight=False)
        console.print(f"all {report.rejected} rejects: {report.rejects_path}", highlight=False)
