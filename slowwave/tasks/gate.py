"""gate (seed 000): low-information episodes are consolidated without a model call."""

from __future__ import annotations

from slowwave.models.episode import Episode
from slowwave.models.settings import ConsolidationSettings


def gated(episode: Episode, settings: ConsolidationSettings) -> bool:
    """Short and unsurprising (under ``gate_min_chars``, surprise under ``gate_max_surprise``):
    nothing durable to learn, not worth a model call."""
    surprise = episode.surprise
    return (
        episode.text_length < settings.gate_min_chars
        and surprise is not None  # scored when its chunk opens, before the gate
        and surprise < settings.gate_max_surprise
    )
