"""`slowwave quarantine`: episodes set aside after repeated failures."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Annotated

import typer
from rich.table import Column

from slowwave.cli.common import (
    ConversationsOption,
    JsonOption,
    TenantOption,
    connected,
    console,
    emit,
    id_column,
    keys,
    number_column,
    one_line_errors,
    table,
    text_column,
)
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.models.tenant import shown as shown_key
from slowwave.tasks.ids import resolve, shorten
from slowwave.tasks.quarantine import QuarantinedEpisode, list_quarantined, release
from slowwave.tasks.search import require_known

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
    """Quarantined episodes with their attempts and last error, oldest first.

    Example: slowwave quarantine list -c dana"""
    named = keys(conversation, tenant)
    with connected() as conn:
        if named:
            require_known(conn, named)
        episodes = list_quarantined(conn, conversations=named)
        short = shorten(conn, "episode", (e.id for e in episodes))
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
            shown_key(e.conversation_id),
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
        bool, typer.Option("--all", help="Every quarantined episode of every conversation.")
    ] = False,
) -> None:
    """Give quarantined episodes back to pending, attempts reset; the next run takes them.

    Examples: slowwave quarantine release -c dana -r "prompt fixed" |
    slowwave quarantine release -e 1c9a0e4 -r "model upgraded"
    """
    if not (conversation or episode or release_all):
        raise typer.BadParameter("name --conversation or --episode, or say --all")
    named = keys(conversation, tenant)
    with connected() as conn:
        if named:
            require_known(conn, named)
        episodes = [resolve(conn, "episode", e) for e in episode] if episode else None
        released = release(conn, reason, conversations=named, episodes=episodes)
    total = sum(released.values())
    console.print(f"released {total} episode(s) in {len(released)} conversation(s)")
    for conversation_id, count in released.items():
        console.print(f"  {shown_key(conversation_id)}: {count}", highlight=False)
