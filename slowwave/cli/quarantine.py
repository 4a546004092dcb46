"""`slowwave quarantine`: episodes set aside after repeated failures."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer
from rich.table import Table

from slowwave.cli.common import (
    ConversationsOption,
    JsonOption,
    connected,
    console,
    emit,
    one_line_errors,
)
from slowwave.tasks.quarantine import QuarantinedEpisode, list_quarantined, release

app = typer.Typer(
    help="Episodes set aside after repeated failures: list them, release them.",
    no_args_is_help=True,
)


@app.command("list")
@one_line_errors
def quarantine_list(
    conversation: ConversationsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Quarantined episodes with their attempts and last error, oldest first."""
    with connected() as conn:
        episodes = list_quarantined(conn, conversations=conversation)
    emit(episodes, as_json, lambda: print_quarantined(episodes))


def print_quarantined(episodes: list[QuarantinedEpisode]) -> None:
    if not episodes:
        console.print("no quarantined episodes")
        return
    table = Table("conversation", "episode", "attempts", "quarantined at", "last error")
    for e in episodes:
        table.add_row(
            e.conversation_id,
            e.external_key,
            str(e.attempts),
            e.quarantined_at.isoformat(timespec="seconds"),
            (e.last_error or "")[:200],
        )
    console.print(table)


@app.command("release")
@one_line_errors
def quarantine_release(
    reason: Annotated[
        str, typer.Option("--reason", "-r", help="Who asked and why (kept in the decision log).")
    ],
    conversation: ConversationsOption = None,
    episode: Annotated[
        list[uuid.UUID] | None, typer.Option("--episode", "-e", help="Only these episode ids.")
    ] = None,
    release_all: Annotated[
        bool, typer.Option("--all", help="Every quarantined episode of every conversation.")
    ] = False,
) -> None:
    """Give quarantined episodes back to pending, attempts reset; the next run takes them."""
    if not (conversation or episode or release_all):
        raise typer.BadParameter("name --conversation or --episode, or say --all")
    with connected() as conn:
        released = release(conn, reason, conversations=conversation, episodes=episode)
    total = sum(released.values())
    console.print(f"released {total} episode(s) in {len(released)} conversation(s)")
    for conversation_id, count in released.items():
        console.print(f"  {conversation_id}: {count}", highlight=False)
