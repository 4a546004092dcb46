"""pair requests: a step's pairs of facts asked about, each chunk's pairs in one short request
and every chunk's request in one ``generate`` call, never a call per fact; what the answers
cost is the asking chunk's (its row and the run's totals agree). The gray zone
(``tasks.gray_zone``) and the change check (``tasks.changes``) ask this way; each reads its
own answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from uuid import UUID

import numpy as np

from slowwave.models.chunk import PreparedChunk
from slowwave.models.llm.base import (
    GenerationRequest,
    ModelAnswer,
    Purpose,
    StructuredModel,
    generate_watched,
)
from slowwave.models.llm.tokens import answer_cap
from slowwave.models.plan import PlannedAction
from slowwave.models.run import RunSummary
from slowwave.tasks.decide import ended_targets


class ChunkPair(Protocol):
    """A pair found in one chunk of the step (its index in the step's prepared chunks)."""

    @property
    def chunk(self) -> int: ...


P = TypeVar("P", bound=ChunkPair)


def ask_by_chunk(
    model: StructuredModel,
    prepared: Sequence[PreparedChunk],
    pairs: Sequence[P],
    *,
    purpose: Purpose,
    system: str,
    render: Callable[[PreparedChunk, Sequence[P]], str],
    schema: Callable[[int], dict[str, Any]],
    limit: int,
    summary: RunSummary,
    per_request: int | None = None,
) -> list[tuple[int, list[P], ModelAnswer]]:
    """Each chunk's first ``limit`` pairs in one request, or in requests of ``per_request``
    pairs (``render`` a request's prompt, ``schema`` its answer for that many pairs), all in
    one call; each request's chunk, the pairs it asked and its answer. The calls are counted
    in ``summary``; each answer's tokens are its chunk's, counted with the chunk's own when
    it is applied."""
    by_chunk: dict[int, list[P]] = {}
    for pair in pairs:
        if len(by_chunk.setdefault(pair.chunk, [])) < limit:
            by_chunk[pair.chunk].append(pair)
    size = per_request or limit
    asked = [
        (c, chunk_pairs[start : start + size])
        for c, chunk_pairs in by_chunk.items()
        for start in range(0, len(chunk_pairs), size)
    ]
    if not asked:
        return []
    requests = [
        GenerationRequest(
            chunk_id=f"{prepared[c].plan.chunk_id}:{purpose.value}:{n}",
            purpose=purpose,
            system=system,
            user=(user := render(prepared[c], shown)),
            json_schema=schema(len(shown)),
            max_tokens=answer_cap(user, len(shown)),
        )
        for n, (c, shown) in enumerate(asked)
    ]
    summary.model_calls += len(requests)
    answers = generate_watched(model, requests)
    for (c, _), answer in zip(asked, answers, strict=True):
        prepared[c].plan.charge(answer)
    return [(c, shown, a) for (c, shown), a in zip(asked, answers, strict=True)]


@dataclass
class Written:
    """The facts of chunks ready for apply that a step pairs with known facts: where each is
    (chunk, action index, row of the chunk's vectors), its vector and its conversation, in the
    order of one nearest-facts query; and the known facts no pair may take (those the plans end
    or act on)."""

    origin: list[tuple[int, int, int]] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)
    excluded: set[UUID] = field(default_factory=set)


def written_facts(
    prepared: Sequence[PreparedChunk], wanted: Callable[[PlannedAction], bool]
) -> Written:
    """The ``wanted`` actions that write a fact, of every chunk neither failed nor held."""
    written = Written()
    for c, item in enumerate(prepared):
        if item.error is not None or item.held is not None:
            continue
        plan = item.plan
        written.excluded |= ended_targets(plan)
        written.excluded |= {a.target_id for a in plan.actions if a.target_id}
        for row, index in enumerate(plan.writing):
            if wanted(plan.actions[index]):
                written.origin.append((c, index, row))
                written.vectors.append(item.vectors[row])
                written.conversations.append(plan.conversation_id)
    return written
