"""`slowwave export`: what the memory learned, as Parquet partitioned by tenant and day."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column

from slowwave.cli.common import JsonOption, one_line_errors
from slowwave.cli.render import console, emit, number_column, table
from slowwave.service import Caller, Service
from slowwave.tasks.export import WHATS, ExportReport


def print_report(report: ExportReport) -> None:
    shown = table(
        Column("what", no_wrap=True),
        number_column("partitions"),
        number_column("rewritten"),
        number_column("removed"),
        number_column("rows written"),
        title=f"export to {report.target}"
        + (f", from {report.since.isoformat()} on" if report.since else ""),
    )
    for name, kind in report.kinds.items():
        shown.add_row(
            name, str(kind.partitions), str(kind.written), str(kind.removed), str(kind.rows_written)
        )
    console.print(shown)
    if not report.files_changed:
        console.print("nothing changed since the last export: no file written", highlight=False)


@one_line_errors
def export_command(
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="DIR|URL",
            help="A folder or s3://bucket/prefix (default: SLOWWAVE_EXPORT_TO).",
        ),
    ] = None,
    what: Annotated[
        str | None,
        typer.Option(
            "--what",
            metavar="KINDS",
            help=f"Comma-separated, of: {', '.join(WHATS)} "
            "(default: SLOWWAVE_EXPORT_WHAT, everything but episodes).",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="RUN|TIME",
            help="Only the partitions from this day on (UTC): a date (with its dashes), a "
            "time, or a run's id.",
        ),
    ] = None,
    drop: Annotated[
        bool,
        typer.Option(
            "--drop",
            help="Stop reaching the export at --to: a forget no longer rewrites it (its files "
            "stay).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write facts, their versions, the decision log and the runs as Parquet, partitioned by
    tenant and day; only the partitions that changed since the last export are rewritten.

    Examples: slowwave export --to ./lake | slowwave export --to s3://audit/slowwave --since
    2026-11-01 | slowwave export --to ./lake --what facts,episodes"""
    with Service.open() as service:
        if drop:
            target = service.drop_export(Caller.operator(), to)
            console.print(f"a forget no longer reaches {target}; its files stay", highlight=False)
            return
        report = service.export(Caller.operator(), to, what=what, since=since)
    emit(report, as_json, lambda: print_report(report))
