"""`slowwave db`: the schema and the state of the database, and the embedded server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Column

from slowwave.cli.common import one_line_errors
from slowwave.cli.render import console, errors, number_column, table
from slowwave.models.embedding import load_embedder
from slowwave.models.settings import get_settings
from slowwave.models.tenant import shown as shown_key
from slowwave.sql.db import Database, migrate
from slowwave.sql.db.embedded import stop_embedded
from slowwave.sql.db.migrate import check_dimension
from slowwave.sql.db.status import COUNTS, DatabaseStatus, read_status
from slowwave.tasks.reembed import BATCH, reembed
from slowwave.tasks.runs import mark_crashed

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    help="Schema and state of the database.",
    no_args_is_help=True,
)


@app.command("migrate")
@one_line_errors
def db_migrate() -> None:
    """Create or upgrade the schema (a no-op when it is current).

    Example: DATABASE_URL=postgresql://app@db/memory slowwave db migrate"""
    with Database(get_settings()) as db:
        report = migrate(db)
        for label in report.applied:
            console.print(f"applied  {label}")
        console.print(
            f"schema current on {db.where()}: {len(report.applied)} applied, "
            f"{len(report.already)} already present, embeddings {report.embedding_dim}-d"
        )


@app.command("status")
@one_line_errors
def db_status(
    conversations: Annotated[
        bool, typer.Option("--conversations", help="Counts per conversation.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Episodes pending / consolidated / quarantined and facts active / invalidated.

    Example: slowwave db status --conversations"""
    with Database(get_settings()) as db, db.raw_connection() as conn:  # migrated or not
        status = read_status(conn, db.where(), per_conversation=conversations)
        if status.migrations_pending == 0:  # runs whose process died are marked crashed
            mark_crashed(conn, get_settings().consolidation.claim_lease_s)
    if as_json:
        typer.echo(status.model_dump_json(indent=2))
    else:
        print_status(status)
    check_dimension(status.embedding_dim, get_settings().embedding.dim)


# `db status`'s column headers, narrow enough for 80 columns (the caption says what they are)
HEADERS = {
    "episodes_pending": "pending",
    "episodes_consolidated": "done",
    "episodes_quarantined": "quar.",
    "facts_active": "facts",
    "facts_invalidated": "ended",
    "facts_active_chars": "chars",
    "facts_active_tokens": "tokens",
}


def print_status(status: DatabaseStatus) -> None:
    console.print(
        f"{status.where}: {status.migrations_applied} migration(s) applied, "
        f"{status.migrations_pending} pending, embeddings {status.embedding_dim or '-'}-d"
    )
    longest = max(
        (len(shown_key(r.conversation_id)) for r in status.conversations or []), default=5
    )
    shown = table(
        Column("conversation", overflow="fold", min_width=min(longest, 24)),
        *[number_column(HEADERS[c]) for c in COUNTS],
    )
    shown.caption = (
        "episodes pending / done / quarantined; facts active / ended; the active facts' "
        "characters and tokens"
    )
    for row in status.conversations or []:
        shown.add_row(shown_key(row.conversation_id), *[str(getattr(row, c)) for c in COUNTS])
    shown.add_row("[bold]total", *[f"[bold]{getattr(status.totals, c)}" for c in COUNTS])
    console.print(shown)
    now = datetime.now(UTC)
    for waiting in status.backlog:
        age = now - waiting.oldest_pending_at
        console.print(
            f"backlog of tenant {waiting.tenant}: {waiting.episodes_pending} episode(s) pending, "
            f"the oldest recorded {_age(age.total_seconds())} ago",
            highlight=False,
        )


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{max(seconds, 0):.0f} s"


@app.command("reembed")
@one_line_errors
def db_reembed(
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Texts embedded and committed at a time.")
    ] = BATCH,
    switch: Annotated[
        bool,
        typer.Option(
            "--switch/--no-switch",
            help="Switch the store to the new vectors when all are written (--no-switch: "
            "leave the switch to a later run; search keeps the old ones).",
        ),
    ] = True,
    restart: Annotated[
        bool,
        typer.Option("--restart", help="Drop a re-embedding to another model under way."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Switch though other slowwave processes are connected."),
    ] = False,
) -> None:
    """Re-embed every fact and episode window with the configured embedding model, then
    switch the store to its vectors (resumable: run it again after a kill).

    Example: SLOWWAVE_EMBEDDING_RUNTIME=onnx SLOWWAVE_EMBEDDING_MODEL=bge-small-en-v1.5
    slowwave db reembed"""
    settings = get_settings()
    model = settings.embedding.model
    columns = (
        TextColumn("[bold]re-embed[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
    )
    with Database(settings) as db:
        migrate(db, check_model=False)  # the store's model is the old one: that is the point
        embedder = load_embedder(settings)
        try:
            with (
                db.raw_connection(autocommit=True) as conn,
                Progress(*columns, console=errors, transient=True) as bar,
            ):
                tasks: dict[str, TaskID] = {}

                def progress(kind: str, done: int, total: int) -> None:
                    if kind not in tasks:
                        tasks[kind] = bar.add_task(kind, total=total)
                    bar.update(tasks[kind], completed=done, total=total)

                report = reembed(
                    conn,
                    embedder,
                    model,
                    batch=batch,
                    restart=restart,
                    switch_to=switch,
                    force=force,
                    progress=progress,
                )
        finally:
            embedder.close()
    if report.previous == model and not (report.facts or report.windows or report.switched):
        console.print(f"the store holds vectors of {model} already: nothing to re-embed")
        return
    went_on = " (going on with the re-embedding under way)" if report.resumed else ""
    console.print(
        f"re-embedded {report.facts} fact(s) and {report.windows} episode window(s) with "
        f"{model} ({report.dim}-d){went_on}",
        highlight=False,
    )
    if report.switched:
        console.print(
            f"switched: the store holds {model}'s vectors now (was {report.previous}); start "
            "servers and workers with these embedding settings",
            highlight=False,
        )
    else:
        console.print(
            f"not switched: search and runs still use {report.previous}'s vectors; run "
            "`slowwave db reembed` again to switch",
            highlight=False,
        )


@app.command("stop")
@one_line_errors
def db_stop(
    force: Annotated[
        bool, typer.Option("--force", help="Stop even while other processes hold it.")
    ] = False,
) -> None:
    """Stop the embedded Postgres (e.g. one left running by a killed process).

    Example: slowwave db stop --force"""
    settings = get_settings()
    if settings.database.url is not None:
        console.print("DATABASE_URL is set: slowwave does not manage that server.")
        return
    if stop_embedded(settings.pgdata, force=force):
        console.print(f"stopped the embedded Postgres in {settings.pgdata}")
    else:
        console.print(f"no embedded Postgres running in {settings.pgdata}")
