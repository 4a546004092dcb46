"""gate (seed 000): low-information episodes are consolidated without a model call."""

from __future__ import annotations

from collections.abc import Sequence

from models.episode import Episode
from models.settings import Settings


def is_gated(episode: Episode, settings: Settings) -> bool:
    """Short and unsurprising: nothing durable to learn, not worth a model call."""
    return (
        episode.text_length < settings.gate_min_chars
        and episode.surprise < settings.gate_max_surprise
    )


def split_gated(
    episodes: Sequence[Episode], settings: Settings
) -> tuple[list[Episode], list[Episode]]:
    """(episodes for the model, episodes skipped by the gate), each in input order."""
    kept = [e for e in episodes if not is_gated(e, settings)]
    skipped = [e for e in episodes if is_gated(e, settings)]
    return kept, skipped
