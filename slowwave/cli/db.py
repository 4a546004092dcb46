"""`slowwave db`: the schema and the state of the database, and the embedded server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Column

from slowwave.cli.common import one_line_errors
from slowwave.cli.render import console, number_column, table
from slowwave.models.settings import get_settings
from slowwave.models.tenant import shown as shown_key
from slowwave.sql.db import Database, migrate
from slowwave.sql.db.embedded import stop_embedded
from slowwave.sql.db.migrate import check_dimension
from slowwave.sql.db.status import COUNTS, DatabaseStatus, read_status
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
