"""The one interface every consolidation runtime implements: prompts in, answers out, as a batch.

Runtimes return the model's raw text; parsing and validation happen once, in the calibrate
and guard stages, so every runtime is held to the same rules.

Runtimes backed by a serving engine also stream (``StreamingModel``): each request is started
at once and its answer handed back as soon as it is done, so the scheduler can send a
conversation's next chunk while other conversations' answers are still being generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from models.llm.tokens import TokenCounter, estimate_tokens


class RuntimeUnreachable(ConnectionError):
    """The runtime cannot answer anything now (its engine died, its endpoint is down).

    Transient: the run is retried and no chunk is charged an attempt for it.
    """


@dataclass(frozen=True)
class ConsolidationRequest:
    """One model call: the prompt for a chunk of a conversation's episodes."""

    chunk_id: str
    system: str
    user: str
    json_schema: dict[str, Any]
    # external keys of the chunk's episodes, in prompt order (E1, E2, ...): lets a replay
    # runtime find its recorded answer; real models ignore them
    episode_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelAnswer:
    """A runtime's answer to one request: raw text, or why there is none."""

    chunk_id: str
    text: str | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ConsolidationModel(Protocol):
    """Gives consolidation answers for a batch of prompts (submitted together)."""

    name: str

    def consolidate(self, requests: Sequence[ConsolidationRequest]) -> list[ModelAnswer]:
        """One answer per request, in order. Failures are answers with ``error`` set."""
        ...

    def close(self) -> None:
        """Release engines, actors, connections."""
        ...


@runtime_checkable
class BoundedModel(Protocol):
    """A runtime that knows its context window (prompt + answer) and counts tokens as its
    engine does: chunks are cut to fit it."""

    context_tokens: int

    def count_tokens(self, text: str, /) -> int: ...


def prompt_limits(model: object) -> tuple[int | None, TokenCounter]:
    """The runtime's context length and token counter; (None, the estimate) for a runtime
    with no context limit (the replay model, test doubles)."""
    if isinstance(model, BoundedModel):
        return model.context_tokens, model.count_tokens
    return None, estimate_tokens


@runtime_checkable
class StreamingModel(ConsolidationModel, Protocol):
    """A runtime that answers each request as soon as it is done, not the batch at once."""

    def submit(self, requests: Sequence[ConsolidationRequest]) -> list[Future[ModelAnswer]]:
        """Start every request now; one future per request, in order."""
        ...


def submit(
    model: ConsolidationModel, requests: Sequence[ConsolidationRequest]
) -> list[Future[ModelAnswer]]:
    """One future per request: streamed by a ``StreamingModel``, else the batch answered now.

    A runtime that fails as a whole fails every future with its exception.
    """
    if isinstance(model, StreamingModel):
        return model.submit(requests)
    futures: list[Future[ModelAnswer]] = [Future() for _ in requests]
    if not requests:
        return futures
    try:
        answers = {a.chunk_id: a for a in model.consolidate(requests)}
    except Exception as exc:
        for future in futures:
            future.set_exception(exc)
        return futures
    for request, future in zip(requests, futures, strict=True):
        answer = answers.get(request.chunk_id)
        future.set_result(
            answer or ModelAnswer(request.chunk_id, None, "runtime returned no answer for it")
        )
    return futures
