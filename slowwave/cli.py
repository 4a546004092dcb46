"""The ``slowwave`` command line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from slowwave.db import Database, DatabaseUnavailable, MigrationError, migrate
from slowwave.db.embedded import EmbeddedPostgresError, stop_embedded
from slowwave.db.status import COUNTS, read_status
from slowwave.settings import Settings, get_settings
from slowwave.settings_doc import settings_markdown, sync_readme

app = typer.Typer(
    name="slowwave",
    help="Consolidate agents' episodic memory into semantic memory, on Postgres + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Schema and state of the database.", no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console()
errors = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")

EXPECTED_ERRORS: tuple[type[Exception], ...] = (
    DatabaseUnavailable,
    MigrationError,
    EmbeddedPostgresError,
)


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
    if as_json:
        typer.echo(status.model_dump_json(indent=2))
        return
    console.print(
        f"{status.where}: {status.migrations_applied} migration(s) applied, "
        f"{status.migrations_pending} pending, embeddings {status.embedding_dim or '-'}-d"
    )
    table = Table("conversation", *[c.replace("_", " ") for c in COUNTS])
    for row in status.conversations or []:
        table.add_row(row.conversation_id, *[str(getattr(row, c)) for c in COUNTS])
    table.add_row("[bold]total", *[f"[bold]{getattr(status.totals, c)}" for c in COUNTS])
    console.print(table)


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


def main() -> None:  # pragma: no cover - console entry point
    app()
