"""`slowwave facts`: a conversation's facts, a fact's versions, undelete."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from slowwave.cli.common import (
    AsOfOption,
    ByOption,
    JsonOption,
    ReasonOption,
    connected,
    console,
    emit,
    one_line_errors,
    operator,
)
from slowwave.tasks.history import fact_history, list_facts, undelete

app = typer.Typer(
    help="A conversation's facts, a fact's versions, undelete.", invoke_without_command=True
)


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


@app.callback()
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
    with connected() as conn:
        facts = list_facts(conn, conversation, as_of=as_of, everything=everything)
    scope = "all" if everything else (f"valid at {as_of.isoformat()}" if as_of else "active")
    title = f"{conversation}: {len(facts)} fact(s), {scope}"
    emit(facts, as_json, lambda: print_facts(facts, title, ids=ids, ended=everything))


@app.command("history")
@one_line_errors
def facts_history(
    fact_id: Annotated[uuid.UUID, typer.Argument(help="Any version's id.")],
    as_json: JsonOption = False,
) -> None:
    """Every version of a fact, oldest first: what it said, when it held, which run wrote it."""
    with connected() as conn:
        versions = fact_history(conn, fact_id)
    title = f"{len(versions)} version(s)"
    emit(versions, as_json, lambda: print_facts(versions, title, ids=True, ended=True))


@app.command("undelete")
@one_line_errors
def facts_undelete(
    fact_id: Annotated[uuid.UUID, typer.Argument(help="The invalidated fact.")],
    reason: ReasonOption,
    by: ByOption = None,
) -> None:
    """Make an invalidated fact hold again (a successor that replaced it is ended)."""
    with connected() as conn:
        ended = undelete(conn, fact_id, by=operator(by), reason=reason)
    console.print(f"fact {fact_id} holds again; successor(s) ended: {len(ended)}")
