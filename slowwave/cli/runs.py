"""`slowwave runs`: consolidation runs, listed, shown and reverted. What they show of a run is
what it committed (a run killed with SIGKILL included): a run whose process died is marked
crashed before they show it."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Annotated, Any

import typer
from rich.table import Column

from slowwave.cli.common import ByOption, JsonOption, ReasonOption, one_line_errors, operator
from slowwave.cli.prefect import flow_api
from slowwave.cli.render import console, emit, id_column, number_column, table
from slowwave.models.errors import Conflict
from slowwave.models.run import RUN_COUNTS
from slowwave.models.settings import get_settings
from slowwave.service import Caller, Service
from slowwave.tasks.revert import RunRow

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    help="Consolidation runs: list them, show one, revert one.",
    no_args_is_help=True,
)


@app.command("list")
@one_line_errors
def runs_list(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """The latest consolidation runs, newest first (short ids: `runs revert` takes them).

    Example: slowwave runs list -n 5"""
    caller = Caller.operator()
    with Service.open() as service:
        runs = service.runs(caller, limit)
        short = service.short_ids(caller, "run", (r.id for r in runs))
    emit(runs, as_json, lambda: print_runs(runs, short))


@app.command("show")
@one_line_errors
def runs_show(
    run: Annotated[str, typer.Argument(help="The run: its id, or short id.")],
    as_json: JsonOption = False,
) -> None:
    """One run: its status, what it committed and the process that ran it.

    Example: slowwave runs show 3f9c2a1"""
    with Service.open() as service:
        shown = service.run(Caller.operator(), run)
    emit(shown, as_json, lambda: print_run(shown))


def print_run(run: dict[str, Any]) -> None:
    shown = table(Column("run " + str(run["id"]), no_wrap=True), Column(str(run["status"])))
    for key in ("kind", "started_at", "finished_at", "host", "pid", "flow_run_id"):
        value = run[key]
        if key.endswith("_at") and value is not None:
            value = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        shown.add_row(key.replace("_", " "), "" if value is None else str(value))
    for key in RUN_COUNTS:
        shown.add_row(key.replace("_", " "), str(run[key]))
    for reason, n in run["left_undone"].items():
        shown.add_row(f"left undone: {reason.replace('_', ' ')}", str(n))
    if run["error"]:
        shown.add_row("error", str(run["error"]))
    console.print(shown)
    if run["note"]:
        console.print(run["note"], highlight=False)


# how `runs list` names a status in its narrow column
STATUS_SHORT = {"completed_with_failures": "failures"}


def print_runs(runs: list[RunRow], short: dict[uuid.UUID, str]) -> None:
    shown = table(
        id_column("run"),
        Column("kind", no_wrap=True),
        Column("status", no_wrap=True),
        Column("started (UTC)", no_wrap=True),
        number_column("conv."),
        number_column("episodes"),
        number_column("new"),
        number_column("upd."),
        number_column("inv."),
    )
    for r in runs:
        shown.add_row(
            short[r.id],
            str(r.kind),
            STATUS_SHORT.get(str(r.status), str(r.status)),
            r.started_at.astimezone(UTC).strftime("%m-%d %H:%M"),
            str(r.conversations),
            str(r.episodes_consolidated),
            str(r.facts_inserted),
            str(r.facts_updated),
            str(r.facts_invalidated),
        )
    console.print(shown)
    if any(r.status == "completed_with_failures" for r in runs):
        console.print("failures: completed, some chunks failed (slowwave quarantine list)")


@app.command("revert")
@one_line_errors
def runs_revert(
    run: Annotated[str, typer.Argument(help="The run to undo: its id, or short id.")],
    reason: ReasonOption,
    cascade: Annotated[
        bool, typer.Option("--cascade", help="Revert the runs built on it first, newest first.")
    ] = False,
    by: ByOption = None,
    as_json: JsonOption = False,
) -> None:
    """Undo everything a run applied, in one transaction: the revert flow, run here, so that
    it shows in the Prefect UI with its artifact like one started from the deployment.

    Example: slowwave runs revert 3f9c2a1 --reason "model mis-read dates" --cascade"""
    from slowwave.flows.history import revert

    who = operator(by)
    with Service.open() as service:  # refused: one line, no flow
        run_id = service.revertable(Caller.operator(by=who), run, reason=reason, cascade=cascade)
    with flow_api(get_settings()):
        state = revert(
            run_id=str(run_id), reason=reason, by=who, cascade=cascade, return_state=True
        )
    result = state.result(raise_on_failure=False)
    if not state.is_completed() or not isinstance(result, dict):
        raise Conflict(f"the revert flow {state.name}: {state.message}")
    emit(result, as_json, lambda: print_revert(result))


def print_revert(result: dict[str, Any]) -> None:
    shown = table(Column("reverted", no_wrap=True), number_column("rows"))
    for key, value in result.items():
        if key != "runs":
            shown.add_row(key.replace("_", " "), str(value))
    for run_id in result["runs"]:
        console.print(f"run {run_id} reverted", highlight=False)
    console.print(shown)
