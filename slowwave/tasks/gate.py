"""gate (seed 000): low-information episodes are consolidated without a model call."""

from __future__ import annotations

from dataclasses import dataclass

from slowwave.models.episode import Episode
from slowwave.models.settings import Settings


@dataclass(frozen=True)
class GatePolicy:
    """An episode shorter than ``min_chars`` with surprise below ``max_surprise`` is gated."""

    min_chars: int
    max_surprise: float

    @classmethod
    def of(cls, settings: Settings) -> GatePolicy:
        return cls(settings.consolidation.gate_min_chars, settings.consolidation.gate_max_surprise)

    def gates(self, episode: Episode) -> bool:
        """Short and unsurprising: nothing durable to learn, not worth a model call."""
        surprise = episode.surprise
        return (
            episode.text_length < self.min_chars
            and surprise is not None  # scored when its chunk opens, before the gate
            and surprise < self.max_surprise
        )
