"""`slowwave facts`: a conversation's facts, a fact's versions, undelete."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer
from rich.table import Column

from slowwave.cli.common import (
    AsOfOption,
    ByOption,
    JsonOption,
    ReasonOption,
    TenantOption,
    one_line_errors,
    operator,
)
from slowwave.cli.render import console, emit, id_column, number_column, table, text_column
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.models.tenant import shown as shown_key
from slowwave.service import Caller, Service

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    help="A conversation's facts, a fact's versions, undelete.",
    invoke_without_command=True,
)


def print_facts(
    facts: list[Any],
    title: str,
    *,
    ids: dict[uuid.UUID, str] | None = None,
    runs: dict[uuid.UUID, str] | None = None,
    ended: bool = False,
) -> None:
    """Category, fact, event-time validity and how many episodes evidence it; with ``ids``
    (short ids by id) also what `facts history` and `facts undelete` take: the short id, the
    version and the run that wrote it."""
    columns: list[Column] = [Column("category", no_wrap=True), text_column("fact")]
    columns += [Column("valid from", no_wrap=True)]
    columns += [Column("until", no_wrap=True)] if ended else []
    columns += [number_column("src")]
    if ids is not None:
        columns = [id_column("id"), number_column("v"), *columns, id_column("run")]
    shown = table(*columns, title=title)
    for f in facts:
        row = [f.category, f.fact, f.valid_at.date().isoformat()]
        row += [f.invalid_at.date().isoformat() if f.invalid_at else ""] if ended else []
        row += [str(len(f.source_episodic_ids))]
        if ids is not None:
            run = (runs or {}).get(f.created_by_run_id, "") if f.created_by_run_id else ""
            row = [ids[f.id], str(f.version or ""), *row, run]
        shown.add_row(*row)
    console.print(shown)


def short_ids(
    service: Service, caller: Caller, facts: list[Any]
) -> tuple[dict[uuid.UUID, str], dict[uuid.UUID, str]]:
    """The facts' short ids and their runs'."""
    runs = service.short_ids(
        caller, "run", (f.created_by_run_id for f in facts if f.created_by_run_id)
    )
    return service.short_ids(caller, "fact", (f.id for f in facts)), runs


@app.callback()
@one_line_errors
def facts_command(
    ctx: typer.Context,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Conversation id.")
    ] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_of: AsOfOption = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Every fact it ever had, every version.")
    ] = False,
    ids: Annotated[
        bool, typer.Option("--ids", help="Also the ids, versions and runs (for history).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A conversation's facts: active ones, those valid at --as-of, or --all.

    Examples: slowwave facts -c dana --ids | slowwave facts -c dana --as-of 2023-06-01"""
    if ctx.invoked_subcommand is not None:
        return
    if conversation is None:
        raise typer.BadParameter("name a conversation: slowwave facts -c ID")
    caller = Caller.operator(tenant)
    with Service.open() as service:
        facts = service.facts(caller, conversation, as_of=as_of, everything=everything)
        short, runs = short_ids(service, caller, facts) if ids and not as_json else ({}, {})
    scope = "all" if everything else (f"valid at {as_of.isoformat()}" if as_of else "active")
    title = f"{shown_key(caller.key(conversation))}: {len(facts)} fact(s), {scope}"
    emit(
        facts,
        as_json,
        lambda: print_facts(facts, title, ids=short if ids else None, runs=runs, ended=everything),
    )


@app.command("history")
@one_line_errors
def facts_history(
    fact: Annotated[str, typer.Argument(help="Any version's id, or short id (facts --ids).")],
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
) -> None:
    """Every version of a fact, oldest first: what it said, when it held, which run wrote it.

    Example: slowwave facts history 5be01c2"""
    caller = Caller.operator(tenant)
    with Service.open() as service:
        versions = service.history(caller, fact)
        short, runs = short_ids(service, caller, versions)
    title = f"{len(versions)} version(s)"
    emit(versions, as_json, lambda: print_facts(versions, title, ids=short, runs=runs, ended=True))


@app.command("undelete")
@one_line_errors
def facts_undelete(
    fact: Annotated[str, typer.Argument(help="The invalidated fact: its id, or short id.")],
    reason: ReasonOption,
    tenant: TenantOption = DEFAULT_TENANT,
    by: ByOption = None,
) -> None:
    """Make an invalidated fact hold again (a successor that replaced it is ended).

    Example: slowwave facts undelete 5be01c2 --reason "invalidated by a misread date"
    """
    with Service.open() as service:
        done = service.undelete(Caller.operator(tenant, by=operator(by)), fact, reason=reason)
    console.print(
        f"fact {done.fact_id} holds again; successor(s) ended: {len(done.successors_ended)}"
    )
