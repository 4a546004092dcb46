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
(``slowwave.flows``). Errors a caller can act on are ``slowwave.SlowwaveError``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from uuid import UUID

from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm import load_model
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings, get_settings
from slowwave.models.tenant import DEFAULT_TENANT, conversation_key
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate as consolidate_run
from slowwave.tasks.export import ExportReport
from slowwave.tasks.export import export as export_to
from slowwave.tasks.forget import ForgetReport, forget_conversation, forget_fact
from slowwave.tasks.ingest.transcripts import Format, IngestPolicy, IngestReport, ingest_source
from slowwave.tasks.revert import RevertReport, revert_run

__all__ = ["backfill", "consolidate", "export", "forget", "ingest", "revert"]


@contextmanager
def database(settings: Settings | None) -> Iterator[Database]:
    """The settings' database, open and migrated, for one call."""
    with Database(settings or get_settings()) as db:
        migrate(db)
        yield db


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
    settings = settings or get_settings()
    with database(settings) as db:
        policy = IngestPolicy.of(settings, allow_forgotten=allow_forgotten, tenant=tenant)
        return ingest_source(db, str(source), policy, fmt=format, mapping=mapping)


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
    default to the settings' (loaded, and closed after)."""
    settings = settings or get_settings()
    own_model, own_embedder = model is None, embedder is None
    model = model or load_model(settings)
    try:
        embedder = embedder or load_embedder(settings)
        keys = (
            [conversation_key(c, tenant) for c in conversations]
            if conversations is not None
            else None
        )
        with database(settings) as db:
            return consolidate_run(db, model, embedder, settings, kind=kind, conversations=keys)
    finally:
        if own_model:
            model.close()
        if own_embedder and embedder is not None:
            embedder.close()


def backfill(
    source: str | Path,
    *,
    format: Format | None = None,
    mapping: Mapping[str, str] | None = None,
    conversations: Sequence[str] | None = None,
    allow_forgotten: bool = False,
    tenant: str = DEFAULT_TENANT,
    settings: Settings | None = None,
    model: StructuredModel | None = None,
    embedder: Embedder | None = None,
) -> RunSummary:
    """Ingest ``source`` as the ``tenant``'s, then consolidate every pending episode (of
    ``conversations``, when given): what ``slowwave backfill`` does, here."""
    ingest(
        source,
        format=format,
        mapping=mapping,
        allow_forgotten=allow_forgotten,
        tenant=tenant,
        settings=settings,
    )
    names = list(conversations) if conversations is not None else None
    return consolidate(
        conversations=names,
        tenant=tenant,
        kind="backfill",
        settings=settings,
        model=model,
        embedder=embedder,
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
    with database(settings) as db, db.connection() as conn:
        return revert_run(conn, UUID(str(run_id)), by=by, reason=reason, cascade=cascade)


def forget(
    *,
    reason: str,
    by: str,
    conversation_id: str | None = None,
    fact_id: UUID | str | None = None,
    tenant: str = DEFAULT_TENANT,
    purge: bool = True,
    settings: Settings | None = None,
) -> ForgetReport:
    """Hard-delete a conversation of the ``tenant`` (or one fact) for a privacy request,
    whatever runs beside it, and leave a tombstone without content."""
    if (conversation_id is None) == (fact_id is None):
        raise ValueError("name a conversation_id or a fact_id, one of them")
    settings = settings or get_settings()
    with database(settings) as db:
        if conversation_id is not None:
            return forget_conversation(
                db,
                conversation_key(conversation_id, tenant),
                home=settings.home,
                by=by,
                reason=reason,
                purge=purge,
            )
        return forget_fact(db, UUID(str(fact_id)), by=by, reason=reason, purge=purge)


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
    settings = settings or get_settings()
    with database(settings) as db:
        if isinstance(since, datetime):
            since = since.isoformat()
        return export_to(db, to, what=what or settings.export_what, since=since)
