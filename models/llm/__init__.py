"""Consolidation model runtimes behind one interface (``base.ConsolidationModel``)."""

from __future__ import annotations

from models.llm.base import ConsolidationModel, ConsolidationRequest, ModelAnswer
from slowwave.settings import Settings

__all__ = ["ConsolidationModel", "ConsolidationRequest", "ModelAnswer", "load_model"]


class RuntimeNotAvailable(RuntimeError):
    """The selected runtime cannot be used on this installation."""


def load_model(settings: Settings) -> ConsolidationModel:
    """The runtime named by ``SLOWWAVE_LLM_RUNTIME``."""
    if settings.llm_runtime == "replay":
        from models.llm.replay import LoCoMoReplayModel

        if settings.replay_data is None:
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file)"
            )
        return LoCoMoReplayModel(settings.replay_data)
    raise RuntimeNotAvailable(f"the {settings.llm_runtime!r} runtime is not available yet")
