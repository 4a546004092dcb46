"""evidence: the episode an uncited action is attributed to (issue: never all of them).

An answer should cite the episodes that evidence each item; when one cites none, the guard
marks it uncited. Dating it at the end of the chunk and crediting every episode of the chunk
would be wrong by months in a long chunk (a move mentioned in March, in a chunk running
January to August, would hold from August with eight sources). Instead, once the vectors exist,
the action is attributed to the chunk episode whose gist is most similar to its sentence, and
dated at that episode's end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slowwave.models.embedding.base import Vectors
from slowwave.models.episode import Episode
from slowwave.models.plan import Plan

ATTRIBUTED = "cited no episode: attributed to the most similar episode of the chunk"


def attribute_evidence(
    plan: Plan,
    episodes: Sequence[Episode],
    episode_vectors: Vectors,
    written: Vectors,
    uncited: Vectors,
) -> None:
    """Give each uncited action of ``plan`` its most similar episode as evidence (in place).

    :param written: the vectors of the plan's writing actions, in action order.
    :param uncited: the vectors of its uncited non-writing actions with a sentence
        (``tasks.embed.uncited_texts``), in action order.
    """
    if not episodes:
        return
    written_rows = iter(written)
    uncited_rows = iter(uncited)
    for action in plan.actions:
        vector: np.ndarray | None = None
        if action.writes_fact:
            vector = next(written_rows)
        elif not action.cited and action.fact:
            vector = next(uncited_rows)
        if action.cited:
            continue
        best = int(np.argmax(episode_vectors @ vector)) if vector is not None else -1
        episode = episodes[best]
        action.episode_ids = [episode.id]
        action.event_time = episode.end_at
        action.add_reason(ATTRIBUTED)
