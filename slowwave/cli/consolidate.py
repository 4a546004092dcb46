"""`slowwave backfill` and `slowwave consolidate`: the flows, run here, and their summaries."""

from __future__ import annotations

import os
from typing import Any

import typer
from rich.table import Table

from slowwave.cli.common import (
    AllowForgottenOption,
    ConversationsOption,
    FormatOption,
    MapOption,
    SourceArgument,
    TenantOption,
    one_line_errors,
)
from slowwave.cli.ingest import print_ingest
from slowwave.cli.prefect import flow_api
from slowwave.cli.render import console, errors
from slowwave.models import interrupt
from slowwave.models.ids import conversation_refs
from slowwave.models.llm import check_runtime
from slowwave.models.run import RunSummary
from slowwave.models.settings import get_settings
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant, shown
from slowwave.models.warmup import started_ahead
from slowwave.service import Service
from slowwave.tasks.ingest.columnar import parse_mapping
from slowwave.tasks.ingest.rejects import Reject
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.sources import remote


@one_line_errors
def backfill_command(
    source: SourceArgument,
    fmt: FormatOption = None,
    column_map: MapOption = None,
    conversation: ConversationsOption = None,
    tenant: TenantOption = DEFAULT_TENANT,
    allow_forgotten: AllowForgottenOption = False,
) -> None:
    """Ingest historical transcripts, then consolidate everything pending (the backfill flow).

    Examples: slowwave backfill chats.jsonl | slowwave backfill lake/ --map text=body |
    slowwave backfill locomo10.json -c conv-26"""
    from slowwave.flows.backfill import backfill

    mapping = parse_mapping(column_map)
    Service.check_source(source, fmt)  # before the database, Prefect or a model starts
    preflight()
    settings = get_settings()
    with started_ahead(settings), flow_api(settings):
        state = backfill(
            source=source if remote(source) else os.path.abspath(source),
            format=fmt,
            mapping=mapping or None,
            conversations=references(conversation, tenant),
            allow_forgotten=allow_forgotten,
            tenant=check_tenant(tenant),
            return_state=True,
        )
    print_flow_result(state)


def references(conversations: list[str] | None, tenant: str) -> list[str] | None:
    """The conversations named on the command line, as a flow's parameters carry them."""
    return None if conversations is None else conversation_refs(conversations, tenant)


def preflight() -> None:
    """What a run needs, checked before Prefect or any engine starts, so that an unreachable
    database, a schema of another embedding dimension or a model not set up is one line on
    stderr within seconds, not a traceback from inside a flow."""
    settings = get_settings()
    with Service.open(settings):  # reached and migrated
        pass
    check_runtime(settings)


def print_flow_result(state: Any) -> None:
    """The run's ingest and summary tables, then how it ended: exit 0 only when every chunk
    went through; 130 when the operator interrupted it; 1 otherwise, saying what to do."""
    if interrupt.requested():  # the flow recorded the crash; the run row says interrupted
        raise KeyboardInterrupt
    data = state.result(raise_on_failure=False)
    if isinstance(data, dict):
        if isinstance(data.get("ingest"), dict):
            report = data.pop("ingest")
            rejects = [Reject(**r) for r in report.pop("first_rejects", [])]
            print_ingest(IngestReport(**report, first_rejects=rejects))
        print_summary(RunSummary.model_validate(data))
    if not state.is_completed():
        hint = (
            " (slowwave quarantine list; slowwave runs list)"
            if state.name == "CompletedWithFailures"
            else ""
        )
        errors.print(
            f"[bold red]error:[/] the run ended {state.name}: {state.message}{hint}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def print_summary(summary: RunSummary) -> None:
    table = Table("run " + str(summary.run_id), summary.status, show_lines=False)
    for label, value in summary.counter_rows():
        table.add_row(label, str(value))
    console.print(table)
    for failure in summary.failures[:10]:
        state = "quarantined" if failure.quarantined else "will retry"
        console.print(
            f"  {shown(failure.conversation_id)}: {state}: {failure.reason}", highlight=False
        )


@one_line_errors
def consolidate_command(
    conversation: ConversationsOption = None,
    tenant: TenantOption = DEFAULT_TENANT,
) -> None:
    """Consolidate everything that is due (the nightly flow, run here).

    Examples: slowwave consolidate | slowwave consolidate -c dana -c kenji"""
    from slowwave.flows.consolidate import nightly

    preflight()
    settings = get_settings()
    with started_ahead(settings), flow_api(settings):
        state = nightly(conversations=references(conversation, tenant), return_state=True)
    print_flow_result(state)
