"""`slowwave keys`: the API keys of `slowwave serve` and `slowwave mcp`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Column

from slowwave.cli.common import ByOption, JsonOption, one_line_errors, operator
from slowwave.cli.render import console, emit, errors, table
from slowwave.models.keys import ApiKey, Scope
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Service

app = typer.Typer(
    rich_markup_mode=None,
    help="API keys of the server: create one (shown once), list them, revoke one.",
    no_args_is_help=True,
)


@app.command("create")
@one_line_errors
def keys_create(
    tenant: Annotated[
        str, typer.Option("--tenant", "-t", help="The tenant whose conversations it reaches.")
    ] = DEFAULT_TENANT,
    scope: Annotated[
        Scope, typer.Option("--scope", help="read; write (and read); admin (and write).")
    ] = Scope.read,
    name: Annotated[str, typer.Option("--name", help="A note to tell keys apart.")] = "",
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            "-c",
            help="The conversation its calls that name none are about (an agent's MCP tools).",
        ),
    ] = None,
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a key: it is printed this once, and only its SHA-256 is kept.

    Example: slowwave keys create --tenant acme --scope write --name "support bot"
    """
    with Service.open() as service:
        key, record = service.create_key(
            Caller.operator(tenant, by=operator(by)), scope, name=name, conversation_id=conversation
        )
    if as_json:
        emit({"key": key, **record.model_dump(mode="json")}, True, lambda: None)
        return
    typer.echo(key)  # alone on stdout: KEY=$(slowwave keys create …)
    errors.print(
        f"a {record.scope.value} key of tenant {record.tenant} ({record.prefix}…): keep it now, "
        "it is not shown again",
        highlight=False,
        style="dim",
    )


@app.command("list")
@one_line_errors
def keys_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Only this tenant's keys.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Every key, newest first, named by its first characters (the keys are not kept).

    Example: slowwave keys list --tenant acme"""
    with Service.open() as service:
        keys = service.keys(Caller.operator(tenant or DEFAULT_TENANT), every_tenant=tenant is None)
    emit(keys, as_json, lambda: print_keys(keys))


def print_keys(keys: list[ApiKey]) -> None:
    if not keys:
        console.print("no keys: make one with `slowwave keys create`")
        return
    shown = table(
        Column("key", no_wrap=True),
        Column("tenant", overflow="fold"),
        Column("scope", no_wrap=True),
        Column("name", overflow="fold"),
        Column("conversation", overflow="fold"),
        Column("created (UTC)", no_wrap=True),
        Column("state", no_wrap=True),
    )
    for k in keys:
        state = (
            "revoked"
            if k.revoked_at
            else ("used " + _when(k.last_used_at) if k.last_used_at else "unused")
        )
        shown.add_row(
            k.prefix + "…",
            k.tenant,
            k.scope.value,
            k.name,
            k.conversation_id or "",
            _when(k.created_at),
            state,
        )
    console.print(shown)


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


@app.command("revoke")
@one_line_errors
def keys_revoke(
    key: Annotated[str, typer.Argument(help="The key's id, or its first characters (7 or more).")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Only a key of this tenant.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key: every request with it is refused from now on.

    Example: slowwave keys revoke sw_Ab3dE9x"""
    with Service.open() as service:
        record = service.revoke_key(
            Caller.operator(tenant or DEFAULT_TENANT), key, any_tenant=tenant is None
        )
    emit(
        record,
        as_json,
        lambda: console.print(f"revoked {record.prefix}… ({record.tenant}, {record.scope.value})"),
    )
