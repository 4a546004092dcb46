"""`slowwave search`, `context` and `profile`: what an agent reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from slowwave.cli.common import AsOfOption, TenantOption, one_line_errors
from slowwave.cli.render import errors
from slowwave.models.category import Category
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.service import Caller, Service


class OutputFormat(StrEnum):
    md = "md"
    json = "json"


def no_facts(conversation: str) -> str:
    return (
        f"conversation {conversation!r} has no facts yet: nothing of it consolidated (see "
        "`slowwave db status --conversations`); what was said is in its episodic memories"
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
    memories: Annotated[
        int | None,
        typer.Option(
            "--memories", "-m", min=0, help="Episodic memories beside the facts (0: none)."
        ),
    ] = None,
    memory_tokens: Annotated[
        int | None,
        typer.Option("--memory-tokens", min=16, help="The most tokens of each memory's text."),
    ] = None,
    fused: Annotated[
        bool, typer.Option("--fused", help="json: also facts and memories in one list.")
    ] = False,
    rerank: Annotated[
        bool | None,
        typer.Option(
            "--rerank/--no-rerank",
            help="Order the best by the cross-encoder (default: SLOWWAVE_SEARCH_RERANK).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Hybrid search over one conversation's facts, and the episodic memories beside them
    (what was said, consolidated or not yet).

    Example: slowwave search "where does she work" -c dana -k 5 --format json"""
    if ranker not in ("hybrid", "vector", "fulltext"):
        raise typer.BadParameter("--ranker must be hybrid, vector or fulltext")
    shape = "json" if output is OutputFormat.json else "split" if split_guidelines else "markdown"
    with Service.open() as service:
        answer = service.search(
            Caller.operator(tenant),
            query,
            conversation,
            k,
            category=category,
            as_of=as_of,
            ranker=ranker,  # type: ignore[arg-type]
            output=shape,  # type: ignore[arg-type]
            memories=memories,
            memory_tokens=memory_tokens,
            fused=fused,
            rerank=rerank,
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
    memories: Annotated[
        int,
        typer.Option(
            "--memories", "-m", min=0, help="Also the latest episodes' last messages (0: none)."
        ),
    ] = 0,
) -> None:
    """Guidelines and top identity / preference facts for a system prompt.

    Example: slowwave context -c dana --budget 300"""
    with Service.open() as service:
        block = service.context(
            Caller.operator(tenant), conversation, budget, memories=memories
        ).context
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
    caller = Caller.operator(tenant)
    with Service.open() as service:
        if refresh:
            profile = service.refresh_profile(caller, conversation)
        else:
            profile = service.profile(caller, conversation)
    if as_json:
        typer.echo(profile.model_dump_json())
        return
    if profile.profile is None:
        errors.print(
            f"the profile of {conversation!r} has no text: its facts changed since it was "
            "written (`slowwave profile --refresh` writes it now)",
            highlight=False,
            soft_wrap=True,
        )
        return
    state = "stale: its facts changed since" if profile.stale else "current"
    typer.echo(profile.profile)
    typer.echo(
        f"({profile.facts} facts, ~{profile.tokens} tokens, by {profile.model}, "
        f"{profile.updated_at:%Y-%m-%d %H:%M} UTC, {state})",
        err=True,
    )
