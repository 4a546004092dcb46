"""Consolidation model runtimes behind one interface (``base.ConsolidationModel``)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING

from models.llm.base import ConsolidationModel, ConsolidationRequest, ModelAnswer
from models.llm.tokens import model_token_counter
from models.settings import Settings

if TYPE_CHECKING:
    from models.llm.vllm_engine import VLLMOptions

__all__ = [
    "ConsolidationModel",
    "ConsolidationRequest",
    "ModelAnswer",
    "RuntimeNotAvailable",
    "load_model",
]


class RuntimeNotAvailable(RuntimeError):
    """The selected runtime cannot be used on this installation."""


class RayModel:
    """The vLLM runtime: engines in a pool of Ray actors, each request to the least busy one."""

    name = "vllm"

    def __init__(self, settings: Settings) -> None:
        from models.llm.vllm_engine import VLLMConsolidationEngine
        from models.workers.pool import ActorPool

        options = vllm_options(settings)
        self.context_tokens = settings.llm_max_model_len
        self.counter = model_token_counter(settings.llm_model_dir)
        self.pool = ActorPool(
            settings,
            partial(VLLMConsolidationEngine, options),
            actors_per_node=settings.llm_actors_per_node,
            name="vllm",
            streaming=True,
        )

    def submit(self, requests: Sequence[ConsolidationRequest]) -> list[Future[ModelAnswer]]:
        return self.pool.submit("submit", requests)

    def consolidate(self, requests: Sequence[ConsolidationRequest]) -> list[ModelAnswer]:
        return [f.result() for f in self.submit(requests)]

    def count_tokens(self, text: str, /) -> int:
        """Tokens as the engine's own tokenizer counts them."""
        return self.counter(text)

    def close(self) -> None:
        self.pool.close()


def vllm_options(settings: Settings) -> VLLMOptions:
    from models.llm.vllm_engine import VLLMOptions

    model_dir = settings.llm_model_dir
    if not (model_dir / "config.json").is_file():
        raise RuntimeNotAvailable(
            f"no model at {model_dir}: run `slowwave models setup` for the default CPU model, "
            "or set SLOWWAVE_LLM_MODEL to a local model directory"
        )
    return VLLMOptions(
        model=str(model_dir),
        max_model_len=settings.llm_max_model_len,
        max_tokens=settings.llm_max_tokens,
        temperature=settings.llm_temperature,
        repetition_penalty=settings.llm_repetition_penalty,
        dtype=settings.llm_dtype,
        memory_fraction=settings.llm_memory_fraction,
        enforce_eager=settings.llm_enforce_eager,
        kv_cache_gb=settings.llm_kv_cache_gb,
    )


def load_model(settings: Settings) -> ConsolidationModel:
    """The runtime named by ``SLOWWAVE_LLM_RUNTIME``."""
    if settings.llm_runtime == "replay":
        from models.llm.replay import LoCoMoReplayModel

        if settings.replay_data is None:
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file)"
            )
        return LoCoMoReplayModel(settings.replay_data)
    if settings.llm_runtime == "openai":
        from models.llm.openai import OpenAICompatibleModel

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAICompatibleModel(
            settings.openai_base_url,
            settings.openai_model,
            api_key=key,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
            concurrency=settings.openai_concurrency,
            timeout_s=settings.openai_timeout_s,
            max_retries=settings.openai_max_retries,
            extra_body=settings.openai_extra_body,
            strict=settings.openai_strict_schema,
            context_tokens=settings.openai_context_tokens,
        )
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise RuntimeNotAvailable(
            "the vllm runtime needs vLLM: pip install -e '.[cpu]' (no GPU) or '.[gpu]'"
        ) from exc
    return RayModel(settings)
