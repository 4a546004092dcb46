"""Language-model runtimes behind one interface (``base.StructuredModel``), one module each:
``llamacpp_runtime`` (a local llama.cpp server), ``vllm_runtime`` (vLLM engines in Ray actors),
``openai`` (an OpenAI-compatible endpoint), ``replay`` (LoCoMo's gold facts). ``load_model``
picks the one the settings name."""

from __future__ import annotations

import importlib.util

from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, StructuredModel
from slowwave.models.llm.llamacpp_runtime import llamacpp_gguf
from slowwave.models.llm.vllm_runtime import vllm_options
from slowwave.models.settings import Settings

__all__ = [
    "GenerationRequest",
    "ModelAnswer",
    "RuntimeNotAvailable",
    "StructuredModel",
    "load_model",
    "vllm_options",
]


def check_runtime(settings: Settings) -> None:
    """Raise ``RuntimeNotAvailable`` now, without starting anything, when the configured runtime
    lacks what it needs (prepared weights, vLLM installed, replay data), so that a command
    fails in one line before a flow or an engine starts."""
    if settings.llm_runtime == "replay":
        if settings.replay_data is None or not settings.replay_data.is_file():
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file); "
                f"got {settings.replay_data}"
            )
    elif settings.llm_runtime == "llamacpp":
        llamacpp_gguf(settings)  # installed, and the model prepared and verified
    elif settings.llm_runtime == "vllm":
        vllm_options(settings)  # the model directory must exist
        if importlib.util.find_spec("vllm") is None:
            raise RuntimeNotAvailable(
                "the vllm runtime needs vLLM: pip install -e '.[cpu]' (no GPU) or '.[gpu]'"
            )


def load_model(settings: Settings) -> StructuredModel:
    """The runtime named by ``SLOWWAVE_LLM_RUNTIME``."""
    if settings.llm_runtime == "replay":
        from slowwave.models.llm.replay import LoCoMoReplayModel

        if settings.replay_data is None:
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file)"
            )
        return LoCoMoReplayModel(settings.replay_data)
    if settings.llm_runtime == "openai":
        from slowwave.models.llm.openai import OpenAICompatibleModel

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
            schema_dialect=settings.openai_schema_dialect,
        )
    if settings.llm_runtime == "llamacpp":
        from slowwave.models.llm.llamacpp_runtime import LlamaCppModel

        return LlamaCppModel(settings)
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise RuntimeNotAvailable(
            "the vllm runtime needs vLLM: pip install -e '.[cpu]' (no GPU) or '.[gpu]'"
        ) from exc
    from slowwave.models.llm.vllm_runtime import VLLMModel

    return VLLMModel(settings)
