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
    MapOption,
    SourceArgument,
    TenantOption,
    one_line_errors,
)
from slowwave.cli.render import console, errors
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Service
from slowwave.tasks.ingest.columnar import parse_mapping
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.sources import file_size


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
    caller = Caller.operator(tenant)
    checked = Service.check_source(source, fmt)  # before the database starts
    columns = (
        TextColumn("[bold]ingest[/] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Service.open() as service, Progress(*columns, console=errors, transient=True) as bar:
        task = bar.add_task(Path(source).name or source, total=sum(file_size(f) for f in checked))
        report = service.ingest(
            caller,
            source,
            format=fmt,
            mapping=mapping,
            allow_forgotten=allow_forgotten,
            progress=lambda n: bar.advance(task, n),
            checked=checked,
        )
    print_ingest(report)


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
