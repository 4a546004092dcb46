"""`slowwave forget`: hard-delete a conversation or a fact for a privacy request."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Annotated

import typer

from slowwave.cli.common import (
    ByOption,
    JsonOption,
    ReasonOption,
    TenantOption,
    console,
    one_line_errors,
    open_database,
    operator,
)
from slowwave.models.settings import get_settings
from slowwave.models.tenant import DEFAULT_TENANT, conversation_key
from slowwave.sql.db import Database, migrate
from slowwave.tasks.forget import ForgetReport, forget_conversation, forget_fact
from slowwave.tasks.ids import resolve


def fact_id(db: Database, fact: str | None) -> uuid.UUID:
    assert fact is not None
    with db.connection() as conn:
        return resolve(conn, "fact", fact)


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
    settings = get_settings()
    with open_database(settings) as db:
        migrate(db)
        report: ForgetReport = (
            forget_conversation(
                db,
                conversation_key(conversation, tenant),
                home=settings.home,
                by=operator(by),
                reason=reason,
                purge=not no_purge,
            )
            if conversation is not None
            else forget_fact(
                db, fact_id(db, fact), by=operator(by), reason=reason, purge=not no_purge
            )
        )
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    console.print(f"{report.kind}: {sum(report.rows.values())} row(s) removed", highlight=False)
    for table_name, count in report.rows.items():
        console.print(f"  {table_name}: {count}", highlight=False)
    if report.reject_lines:
        console.print(f"  reject lines under the home: {report.reject_lines}", highlight=False)
    if report.export_files:
        console.print(f"  export files rewritten: {report.export_files}", highlight=False)
    for note in report.export_notes:
        console.print(f"[bold yellow]warning:[/] export {note}", highlight=False, soft_wrap=True)
    console.print(
        "files rewritten: yes" if report.purged else f"files rewritten: no ({report.purge_note})",
        highlight=False,
    )
