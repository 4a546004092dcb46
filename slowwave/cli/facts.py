"""`slowwave facts`: a conversation's facts, a fact's versions, undelete."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Annotated, Any

import psycopg
import typer
from rich.table import Column

from slowwave.cli.common import (
    AsOfOption,
    ByOption,
    JsonOption,
    ReasonOption,
    TenantOption,
    connected,
    console,
    emit,
    id_column,
    number_column,
    one_line_errors,
    operator,
    table,
    text_column,
)
from slowwave.models.tenant import DEFAULT_TENANT, conversation_key, shown
from slowwave.tasks.history import fact_history, list_facts, undelete
from slowwave.tasks.ids import resolve, shorten
from slowwave.tasks.search import require_known

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
    conn: psycopg.Connection, facts: list[Any]
) -> tuple[dict[uuid.UUID, str], dict[uuid.UUID, str]]:
    """The facts' short ids and their runs'."""
    runs = shorten(conn, "run", (f.created_by_run_id for f in facts if f.created_by_run_id))
    return shorten(conn, "fact", (f.id for f in facts)), runs


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
    if as_of is not None and as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    with connected() as conn:
        key = conversation_key(conversation, tenant)
        facts = [
            f.model_copy(update={"conversation_id": conversation})
            for f in list_facts(conn, key, as_of=as_of, everything=everything)
        ]
        if not facts:
            require_known(conn, [key])
        short, runs = short_ids(conn, facts) if ids and not as_json else ({}, {})
    scope = "all" if everything else (f"valid at {as_of.isoformat()}" if as_of else "active")
    title = f"{shown(key)}: {len(facts)} fact(s), {scope}"
    emit(
        facts,
        as_json,
        lambda: print_facts(facts, title, ids=short if ids else None, runs=runs, ended=everything),
    )


@app.command("history")
@one_line_errors
def facts_history(
    fact: Annotated[str, typer.Argument(help="Any version's id, or short id (facts --ids).")],
    as_json: JsonOption = False,
) -> None:
    """Every version of a fact, oldest first: what it said, when it held, which run wrote it.

    Example: slowwave facts history 5be01c2"""
    with connected() as conn:
        versions = fact_history(conn, resolve(conn, "fact", fact))
        short, runs = short_ids(conn, versions)
    title = f"{len(versions)} version(s)"
    emit(versions, as_json, lambda: print_facts(versions, title, ids=short, runs=runs, ended=True))


@app.command("undelete")
@one_line_errors
def facts_undelete(
    fact: Annotated[str, typer.Argument(help="The invalidated fact: its id, or short id.")],
    reason: ReasonOption,
    by: ByOption = None,
) -> None:
    """Make an invalidated fact hold again (a successor that replaced it is ended).

    Example: slowwave facts undelete 5be01c2 --reason "invalidated by a misread date"
    """
    with connected() as conn:
        fact_id = resolve(conn, "fact", fact)
        ended = undelete(conn, fact_id, by=operator(by), reason=reason)
    console.print(f"fact {fact_id} holds again; successor(s) ended: {len(ended)}")
