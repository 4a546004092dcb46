"""What every command shares: the consoles, the options, one-line errors and how results are
shown. The operations are the service's (``slowwave.service``): a command opens it with
``Service.open()`` (the database opened and migrated) and calls it as the operator."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from functools import wraps
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from slowwave.models.errors import SlowwaveError
from slowwave.tasks.ingest.formats import Format

console = Console()
errors = Console(stderr=True)

SourceArgument = Annotated[
    str,
    typer.Argument(
        help="A transcript file (JSONL, Parquet, CSV) or LoCoMo JSON; a folder (every "
        "transcript file under it); or a glob ('lake/**/*.parquet', quoted)."
    ),
]
FormatOption = Annotated[
    Format | None,
    typer.Option(
        "--format", "-f", help="jsonl, parquet, csv or locomo (default: by each file's suffix)."
    ),
]
MapOption = Annotated[
    str | None,
    typer.Option(
        "--map",
        help="The source's column for a field, as FIELD=COLUMN pairs: "
        "--map text=body,speaker=author,timestamp=sent_at.",
    ),
]
AllowForgottenOption = Annotated[
    bool,
    typer.Option(
        "--allow-forgotten",
        help="Ingest messages of conversations that were forgotten (refused by default, so "
        "that re-running a source does not bring a forgotten conversation back).",
    ),
]
TenantOption = Annotated[
    str,
    typer.Option(
        "--tenant",
        "-t",
        help="Whose conversations: a tenant's name (the same id in two tenants names two "
        "conversations).",
    ),
]
ConversationsOption = Annotated[
    list[str] | None,
    typer.Option("--conversation", "-c", help="Only these conversations (repeatable)."),
]


P = ParamSpec("P")
R = TypeVar("R")

# The exit status after Ctrl-C, as shells report a process ended by SIGINT (128 + 2).
INTERRUPTED = 130


def one_line_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can act on into one line on stderr and exit code 1."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except SlowwaveError as exc:  # the code a program tests, as the server answers it
            errors.print(
                f"[bold red]error:[/] {escape(str(exc))} [dim]\\[{exc.code}][/]",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1) from None
        except FileNotFoundError as exc:
            errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:  # Ctrl-C (models.interrupt): unwound, servers stopped
            errors.print(
                "interrupted: nothing half-applied; a run records it and gives back its claims "
                "(run the command again to go on)",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(INTERRUPTED) from None

    return wrapper


JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
AsOfOption = Annotated[
    datetime | None,
    typer.Option(
        "--as-of",
        metavar="TIME",
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


def emit(data: Any, as_json: bool, show: Callable[[], None]) -> None:
    """A command's result: as JSON (``--json``: dataclasses and pydantic models as their
    fields, ids and times as strings), or shown for a person by ``show``."""
    if not as_json:
        show()
        return
    typer.echo(json.dumps(_jsonable(data), indent=2, default=str))


def _jsonable(data: Any) -> Any:
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json")
    if is_dataclass(data) and not isinstance(data, type):
        return _jsonable(asdict(data))
    if isinstance(data, dict):
        return {str(k): _jsonable(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_jsonable(v) for v in data]
    return data


def table(*columns: Column | str, title: str | None = None) -> Table:
    """A table that fits 80 columns and uses 200: no frame, two spaces between columns, text
    wrapped within its column (never cut with an ellipsis). Ids and numbers go in
    ``id_column`` and ``number_column``: never wrapped, never shrunk below their width."""
    return Table(
        *columns,
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),  # with the frame's blank, two spaces between columns
        title_justify="left",
        caption_justify="left",
    )


def id_column(header: str, width: int = 7) -> Column:
    """A column of (short) ids: whole, whatever the terminal's width, so they can be copied
    into the commands that take them."""
    return Column(header, no_wrap=True, min_width=max(width, len(header)), overflow="ignore")


def number_column(header: str) -> Column:
    return Column(header, no_wrap=True, justify="right", min_width=len(header))


def text_column(header: str, *, ratio: int = 1) -> Column:
    """Free text (a fact, an error): takes the room left, wrapped, folded inside long words."""
    return Column(header, ratio=ratio, overflow="fold")
