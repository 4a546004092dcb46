"""What every command shares: the options, one-line errors and who an operator is (how results
are shown: ``slowwave.cli.render``). The operations are the service's (``slowwave.service``):
a command opens it with ``Service.open()`` (the database opened and migrated) and calls it as the
operator."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Annotated, ParamSpec, TypeVar

import typer
from rich.markup import escape

from slowwave.cli.render import errors
from slowwave.models.errors import SlowwaveError
from slowwave.models.processes import run_in_foreground
from slowwave.tasks.ingest.formats import Format

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


def foreground(command: list[str], env: dict[str, str]) -> None:
    """A server or worker until it ends (its status) or Ctrl-C (130, after it stopped); ended
    with this command however this command ends (``models.processes.run_in_foreground``)."""
    try:
        status = run_in_foreground(command, env)
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
    raise typer.Exit(status)


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
