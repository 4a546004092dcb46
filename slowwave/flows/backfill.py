"""The backfill flow: ingest historical transcripts, then consolidate everything pending with
the same machinery as the nightly flow."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from prefect.runtime import flow_run
from prefect.states import State

from slowwave.flows.consolidate import consolidate_run, final_state, reported, start_model
from slowwave.models.ids import conversation_refs
from slowwave.models.llm.base import StructuredModel
from slowwave.models.settings import get_settings
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Service
from slowwave.service.writes import summaries_wanted
from slowwave.tasks.ingest.formats import Format
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.summarize import SummaryReport


@task(name="ingest", cache_policy=NONE)
def ingest_task(
    source: str,
    fmt: Format | None,
    since: datetime | None,
    until: datetime | None,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
    mapping: dict[str, str] | None = None,
) -> IngestReport:
    with Service.open(get_settings()) as service:
        report = service.ingest(
            Caller.operator(tenant),
            source,
            format=fmt,
            mapping=mapping,
            allow_forgotten=allow_forgotten,
            since=since,
            until=until,
        )
    create_table_artifact(
        table=[
            {
                "source": report.source,
                "read": report.read,
                "ingested": report.ingested,
                "rejected": report.rejected,
                "out of range": report.out_of_range,
                "episodes made": report.episodes,
            }
        ],
        key="slowwave-ingest",
        description=f"ingest of {report.source}",
    )
    if report.rejected:
        lines = ["| file | line | reason |", "|---|---|---|"]
        lines += [
            f"| {Path(r.source).name} | {r.line} | {r.reason.replace('|', '/')[:300]} |"
            for r in report.first_rejects
        ]
        create_markdown_artifact(
            markdown=f"# {report.rejected} rejected line(s)\n\nAll of them: "
            f"`{report.rejects_path}`\n\n" + "\n".join(lines),
            key="slowwave-ingest-rejects",
            description="Lines of the source that were not ingested, and why",
        )
    return report


def backfill_run_name() -> str:
    """``backfill sample-chats.jsonl``: the source the run ingests."""
    return f"backfill {Path(str(flow_run.get_parameters().get('source', ''))).name}"


@flow(name="slowwave-backfill", flow_run_name=backfill_run_name, log_prints=True)
def backfill(
    source: str,
    format: Format | None = None,
    conversations: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
    mapping: dict[str, str] | None = None,
) -> State:
    """Ingest ``source`` (messages from ``since`` to before ``until``) as the ``tenant``'s
    conversations, then consolidate (optionally only ``conversations``: their references,
    ``c:…``, or the tenant's ids). Messages of forgotten conversations are refused, unless
    ``allow_forgotten``. ``source``: a file, a folder or a glob; ``mapping``: the source's
    column for a field ({"text": "body"})."""
    if conversations is not None:  # the tenant's ids, by reference from here on
        conversations = conversation_refs(conversations, tenant)
    report = ingest_task(source, format, since, until, allow_forgotten, tenant, mapping)
    print(
        f"ingested {report.ingested} of {report.read} messages into {report.episodes} episodes, "
        f"{report.rejected} rejected"
    )
    settings = get_settings()
    model = start_model(settings)
    written = None
    try:
        if summaries_wanted(settings):
            with reported("writing the summaries of episodes that have none, with the model"):
                written = summarize_task(model, conversations, tenant)
            print(
                f"summaries written for {written.summarized} episodes, {written.failed} failed, "
                f"{written.short} short enough to need none"
            )
        summary = consolidate_run(
            settings, kind="backfill", conversations=conversations, model=model, summaries=written
        )
    finally:
        model.close()
    return final_state(summary, ingest=asdict(report))


@task(name="summarize", cache_policy=NONE)
def summarize_task(
    model: StructuredModel, conversations: list[str] | None, tenant: str = DEFAULT_TENANT
) -> SummaryReport:
    """Summaries for ingested episodes whose source had none, in batches."""
    with Service.open(get_settings()) as service:
        return service.summarize(Caller.operator(tenant), conversations, model=model)
