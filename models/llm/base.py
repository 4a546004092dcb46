"""The one interface every consolidation runtime implements: prompts in, answers out, as a batch.

Runtimes return the model's raw text; parsing and validation happen once, in the calibrate
and guard stages, so every runtime is held to the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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
