"""`slowwave forget`: hard-delete a conversation or a fact for a privacy request."""

from __future__ import annotations

from typing import Annotated

import typer

from slowwave.cli.common import (
    ByOption,
    JsonOption,
    ReasonOption,
    TenantOption,
    one_line_errors,
    operator,
)
from slowwave.cli.render import console, emit
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Forgotten, Service


@one_line_errors
def forget_command(
    reason: ReasonOption,
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Forget this conversation.")
    ] = None,
    tenant: TenantOption = DEFAULT_TENANT,
    fact: Annotated[
        str | None, typer.Option("--fact", help="Forget this fact: its id, or short id.")
    ] = None,
    by: ByOption = None,
    no_purge: Annotated[
        bool, typer.Option("--no-purge", help="Skip rewriting the tables (VACUUM FULL).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Hard-delete a conversation or a fact for a privacy request, and leave a tombstone.

    Runs here, not through Prefect, so that the id is not kept with a flow run's parameters
    (the forget deployment is there for the UI).

    Examples: slowwave forget -c dana -r "erasure request #4411" |
    slowwave forget --fact 5be01c2 -r "wrong person"
    """
    if (conversation is None) == (fact is None):
        raise typer.BadParameter("name --conversation or --fact, one of them")
    with Service.open() as service:
        report = service.forget(
            Caller.operator(tenant, by=operator(by)),
            reason=reason,
            conversation_id=conversation,
            fact_id=fact,
            purge=not no_purge,
        )
    emit(report, as_json, lambda: print_forgotten(report))


# what a forget's purge state means to the operator who ran it here
PURGE_SHOWN = {
    "done": "files rewritten: yes",
    "skipped": "files rewritten: no (--no-purge)",
    "queued": "files rewritten: after this answer",
}


def print_forgotten(report: Forgotten) -> None:
    console.print(f"{report.kind}: {sum(report.rows.values())} row(s) removed", highlight=False)
    for table_name, count in report.rows.items():
        console.print(f"  {table_name}: {count}", highlight=False)
    if report.reject_lines:
        console.print(f"  reject lines under the home: {report.reject_lines}", highlight=False)
    if report.export_files:
        console.print(f"  export files rewritten: {report.export_files}", highlight=False)
    if report.export_notes:
        console.print(
            f"[bold yellow]warning:[/] {report.export_notes} export(s) could not be rewritten "
            "(the warnings on stderr name them)",
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        PURGE_SHOWN.get(report.purge, f"files rewritten: no ({report.purge_note})"),
        highlight=False,
    )
