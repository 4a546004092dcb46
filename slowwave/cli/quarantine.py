"""`slowwave quarantine`: episodes set aside after repeated failures."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Annotated

import typer
from rich.table import Column

from slowwave.cli.common import ConversationsOption, JsonOption, TenantOption, one_line_errors
from slowwave.cli.render import console, emit, id_column, number_column, table, text_column
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Service
from slowwave.tasks.quarantine import QuarantinedEpisode

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    help="Episodes set aside after repeated failures: list them, release them.",
    no_args_is_help=True,
)


@app.command("list")
@one_line_errors
def quarantine_list(
    conversation: ConversationsOption = None,
    tenant: TenantOption = DEFAULT_TENANT,
    as_json: JsonOption = False,
) -> None:
    """The tenant's quarantined episodes with their attempts and last error, oldest first.

    Example: slowwave quarantine list -c dana"""
    caller = Caller.operator(tenant)
    with Service.open() as service:
        episodes = service.quarantined(caller, conversation)
        short = service.short_ids(caller, "episode", (e.id for e in episodes))
    emit(episodes, as_json, lambda: print_quarantined(episodes, short))


def print_quarantined(episodes: list[QuarantinedEpisode], short: dict[uuid.UUID, str]) -> None:
    if not episodes:
        console.print("no quarantined episodes")
        return
    shown = table(
        Column("conversation", overflow="fold"),
        id_column("episode"),
        number_column("tries"),
        Column("since (UTC)", no_wrap=True),
        text_column("last error", ratio=2),
    )
    for e in episodes:
        shown.add_row(
            e.conversation_id,
            short[e.id],
            str(e.attempts),
            e.quarantined_at.astimezone(UTC).strftime("%m-%d %H:%M"),
            e.last_error or "",
        )
    console.print(shown)


@app.command("release")
@one_line_errors
def quarantine_release(
    reason: Annotated[
        str, typer.Option("--reason", "-r", help="Who asked and why (kept in the decision log).")
    ],
    conversation: ConversationsOption = None,
    tenant: TenantOption = DEFAULT_TENANT,
    episode: Annotated[
        list[str] | None,
        typer.Option("--episode", "-e", help="Only these episodes: ids or short ids."),
    ] = None,
    release_all: Annotated[
        bool,
        typer.Option("--all", help="Every quarantined episode of the tenant's conversations."),
    ] = False,
) -> None:
    """Give quarantined episodes back to pending, attempts reset; the next run takes them.

    Examples: slowwave quarantine release -c dana -r "prompt fixed" |
    slowwave quarantine release -e 1c9a0e4 -r "model upgraded"
    """
    if not (conversation or episode or release_all):
        raise typer.BadParameter("name --conversation or --episode, or say --all")
    with Service.open() as service:
        released = service.release(
            Caller.operator(tenant), reason=reason, conversations=conversation, episodes=episode
        )
    total = sum(released.values())
    console.print(f"released {total} episode(s) in {len(released)} conversation(s)")
    for conversation_id, count in released.items():
        console.print(f"  {conversation_id}: {count}", highlight=False)
