"""slowwave's Python API: the operations of the CLI, for programs that embed slowwave.

    import slowwave

    settings = slowwave.Settings(llm_runtime="replay", replay_data="locomo7.json")
    slowwave.ingest("chats.jsonl", settings=settings)
    summary = slowwave.consolidate(settings=settings)
    slowwave.revert(summary.run_id, reason="prompt bug", by="ops", settings=settings)
    slowwave.forget(conversation_id="conv-26", reason="erasure request", by="dpo")
    slowwave.export("s3://audit/slowwave", what="facts,versions,decisions,runs")

Conversations are a tenant's (``tenant=``, the default tenant when none is named): the same id
in two tenants names two conversations (``slowwave.models.tenant``).

Each call opens the database the settings name (the embedded server by default), migrates it
when needed and closes it. ``backfill`` and ``consolidate`` run here, in this process, with the
models the settings name (or the ones passed); the Prefect flows drive the same run
(``slowwave.flows``). Each is the service's operation (``slowwave.service``) as the operator of
the tenant: the same defaults, checks and errors (``slowwave.errors``) as every other surface.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from uuid import UUID

from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Forgotten, Service
from slowwave.tasks.export import ExportReport
from slowwave.tasks.ingest.formats import Format
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.revert import RevertReport

__all__ = ["backfill", "consolidate", "export", "forget", "ingest", "revert"]


def ingest(
    source: str | Path,
    *,
    format: Format | None = None,
    mapping: Mapping[str, str] | None = None,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
    settings: Settings | None = None,
) -> IngestReport:
    """Transcripts into episodes: validated, idempotent, in event time; every line refused is
    in the report, with its reason. ``source``: a file (JSONL, Parquet, CSV, LoCoMo), a folder,
    a glob or an ``s3://`` URL; ``mapping``: the source's column for a field
    (``{"text": "body"}``). A forgotten conversation's messages are refused unless
    ``allow_forgotten``."""
    with Service.open(settings) as service:
        return service.ingest(
            Caller.operator(tenant),
            source,
            format=format,
            mapping=mapping,
            allow_forgotten=allow_forgotten,
        )


def consolidate(
    *,
    conversations: Sequence[str] | None = None,
    tenant: str = DEFAULT_TENANT,
    kind: str = "manual",
    settings: Settings | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
) -> RunSummary:
    """A whole run here: everything due (with ``conversations``: every pending episode of
    those, the ``tenant``'s), exactly once, recorded like any run. ``model`` and ``embedder``
    default to the settings' (loaded, and closed after); those passed in stay the caller's."""
    with Service.open(settings, embedder) as service:
        return service.consolidate(
            Caller.operator(tenant), conversations=conversations, kind=kind, model=model
        )


def backfill(
    source: str | Path,
    *,
    format: Format | None = None,
    mapping: Mapping[str, str] | None = None,
    conversations: Sequence[str] | None = None,
    allow_forgotten: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
    tenant: str = DEFAULT_TENANT,
    settings: Settings | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
) -> RunSummary:
    """Ingest ``source`` as the ``tenant``'s (its messages from ``since`` to before
    ``until``), write the summaries of episodes that have none, then consolidate every pending
    episode (of ``conversations``, when given): what ``slowwave backfill`` does, here, to the
    same episodes, summaries, facts and decisions."""
    with Service.open(settings, embedder) as service:
        return service.backfill(
            Caller.operator(tenant),
            source,
            format=format,
            mapping=mapping,
            conversations=conversations,
            allow_forgotten=allow_forgotten,
            since=since,
            until=until,
            model=model,
        )


def revert(
    run_id: UUID | str,
    *,
    reason: str,
    by: str,
    cascade: bool = False,
    settings: Settings | None = None,
) -> RevertReport:
    """Undo everything one run applied (with ``cascade``, the runs built on it first)."""
    with Service.open(settings) as service:
        return service.revert(Caller.operator(by=by), run_id, reason=reason, cascade=cascade)


def forget(
    *,
    reason: str,
    by: str,
    conversation_id: str | None = None,
    fact_id: UUID | str | None = None,
    tenant: str = DEFAULT_TENANT,
    purge: bool = True,
    settings: Settings | None = None,
) -> Forgotten:
    """Hard-delete a conversation of the ``tenant`` (or one fact) for a privacy request,
    whatever runs beside it, and leave a tombstone without content; with ``purge`` (the
    default) no byte of it stays in the database's files when this returns."""
    with Service.open(settings) as service:
        return service.forget(
            Caller.operator(tenant, by=by),
            reason=reason,
            conversation_id=conversation_id,
            fact_id=fact_id,
            purge=purge,
        )


def export(
    to: str | Path,
    *,
    what: str | Sequence[str] | None = None,
    since: date | datetime | str | None = None,
    settings: Settings | None = None,
) -> ExportReport:
    """Bring the Parquet export at ``to`` (a folder or ``s3://bucket/prefix``) up to date:
    the partitions (tenant and day) of ``what`` (facts, versions, decisions, runs; episodes
    when named; default ``SLOWWAVE_EXPORT_WHAT``) whose rows changed since it was last
    written, from ``since`` on (a day, a time or a run's id) when given. What ``slowwave
    export`` does."""
    with Service.open(settings) as service:
        return service.export(Caller.operator(), to, what=what, since=since)
