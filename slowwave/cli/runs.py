"""`slowwave runs`: consolidation runs, listed and reverted."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from slowwave.cli.common import (
    ByOption,
    JsonOption,
    ReasonOption,
    connected,
    console,
    emit,
    one_line_errors,
    operator,
)
from slowwave.tasks.history import HistoryError
from slowwave.tasks.revert import check_revertable, list_runs

app = typer.Typer(help="Consolidation runs: list them, revert one.", no_args_is_help=True)


@app.command("list")
@one_line_errors
def runs_list(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The latest consolidation runs, newest first."""
    with connected() as conn:
        runs = list_runs(conn, limit)
    emit(runs, as_json, lambda: print_runs(runs))


def print_runs(runs: list[dict[str, object]]) -> None:
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


@app.command("revert")
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
    with connected() as conn, conn.transaction():
        check_revertable(conn, run_id, cascade=cascade)  # refused: one line, no flow
    state = revert(
        run_id=str(run_id), reason=reason, by=operator(by), cascade=cascade, return_state=True
    )
    result = state.result(raise_on_failure=False)
    if not state.is_completed() or not isinstance(result, dict):
        raise HistoryError(f"the revert flow {state.name}: {state.message}")
    emit(result, as_json, lambda: print_revert(result))


def print_revert(result: dict[str, Any]) -> None:
    table = Table("revert", ", ".join(r[:13] for r in result["runs"]))
    for key, value in result.items():
        if key != "runs":
            table.add_row(key.replace("_", " "), str(value))
    console.print(table)
