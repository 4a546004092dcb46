"""`slowwave search`, `context` and `profile`: what an agent reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from slowwave.cli.common import (
    AsOfOption,
    TenantOption,
    errors,
    one_line_errors,
    open_database,
)
from slowwave.memory import Memory
from slowwave.models.category import Category
from slowwave.models.errors import HistoryError
from slowwave.models.settings import get_settings
from slowwave.models.tenant import DEFAULT_TENANT, conversation_key
from slowwave.tasks.search import has_facts


class OutputFormat(StrEnum):
    md = "md"
    json = "json"


def no_facts(conversation: str) -> str:
    return (
        f"conversation {conversation!r} has no facts yet: nothing of it consolidated (see "
        "`slowwave db status --conversations`)"
    )


@one_line_errors
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    tenant: TenantOption = DEFAULT_TENANT,
    k: Annotated[int, typer.Option("-k", help="How many facts.")] = 10,
    category: Annotated[
        Category | None, typer.Option("--category", help="Only this category.")
    ] = None,
    as_of: AsOfOption = None,
    ranker: Annotated[str, typer.Option("--ranker", help="hybrid, vector or fulltext.")] = "hybrid",
    output: Annotated[OutputFormat, typer.Option("--format", help="md or json.")] = OutputFormat.md,
    split_guidelines: Annotated[
        bool,
        typer.Option("--split-guidelines", help="md as Known Facts / Behavioral Guidelines."),
    ] = False,
) -> None:
    """Hybrid search over one conversation's facts.

    Example: slowwave search "where does she work" -c dana -k 5 --format json"""
    if ranker not in ("hybrid", "vector", "fulltext"):
        raise typer.BadParameter("--ranker must be hybrid, vector or fulltext")
    shape = "json" if output is OutputFormat.json else "split" if split_guidelines else "markdown"
    with Memory(get_settings(), tenant=tenant) as memory:
        answer = memory.search(
            query,
            conversation,
            k,
            category=category,
            as_of=as_of,
            ranker=ranker,  # type: ignore[arg-type]
            output=shape,  # type: ignore[arg-type]
        )
    if output is OutputFormat.json:
        typer.echo(answer.model_dump_json(indent=2))
    else:
        typer.echo(answer.markdown or "")
    if not answer.hits:
        errors.print(no_facts(conversation), highlight=False, soft_wrap=True)


@one_line_errors
def context_command(
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    tenant: TenantOption = DEFAULT_TENANT,
    budget: Annotated[int, typer.Option("--budget", help="Token budget.")] = 500,
) -> None:
    """Guidelines and top identity / preference facts for a system prompt.

    Example: slowwave context -c dana --budget 300"""
    with Memory(get_settings(), tenant=tenant) as memory:
        block = memory.context(conversation, budget).context
    typer.echo(block)
    if not block.strip():
        errors.print(no_facts(conversation), highlight=False, soft_wrap=True)


@one_line_errors
def profile_command(
    conversation: Annotated[str, typer.Option("--conversation", "-c", help="Conversation id.")],
    tenant: TenantOption = DEFAULT_TENANT,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Write it now with the configured model.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The stored row as JSON.")] = False,
) -> None:
    """The model-written profile of a conversation's active facts.

    Example: slowwave profile -c dana --refresh"""
    settings = get_settings()
    if refresh:
        from slowwave.models.llm import load_model
        from slowwave.tasks.profile import ProfilePolicy, refresh_profiles

        with open_database(settings) as db, db.connection() as conn:
            if not has_facts(conn, conversation_key(conversation, tenant)):
                raise HistoryError(f"conversation {conversation!r} has no facts")
            model = load_model(settings)
            try:
                report = refresh_profiles(
                    conn,
                    model,
                    [conversation_key(conversation, tenant)],
                    ProfilePolicy.of(settings),
                )
            finally:
                model.close()
        if report.failed:
            raise HistoryError(f"the model did not write a profile of {conversation!r}")
    with Memory(settings, tenant=tenant) as memory:
        profile = memory.profile(conversation)
    if profile.profile is None:
        raise HistoryError(
            f"no profile of {conversation!r} yet: set SLOWWAVE_PROFILES=true for runs to write "
            "them, or run `slowwave profile --refresh`"
        )
    if as_json:
        typer.echo(profile.model_dump_json())
        return
    state = "stale: its facts changed since" if profile.stale else "current"
    typer.echo(profile.profile)
    typer.echo(
        f"({profile.facts} facts, ~{profile.tokens} tokens, by {profile.model}, "
        f"{profile.updated_at:%Y-%m-%d %H:%M} UTC, {state})",
        err=True,
    )
