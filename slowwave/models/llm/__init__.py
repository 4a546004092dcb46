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
    if settings.llm.runtime == "replay":
        if settings.llm.replay_data is None or not settings.llm.replay_data.is_file():
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file); "
                f"got {settings.llm.replay_data}"
            )
    elif settings.llm.runtime == "llamacpp":
        llamacpp_gguf(settings)  # installed, and the model prepared and verified
    elif settings.llm.runtime == "vllm":
        vllm_options(settings)  # the model directory must exist
        if importlib.util.find_spec("vllm") is None:
            raise RuntimeNotAvailable(
                "the vllm runtime needs vLLM: pip install -e '.[cpu]' (no GPU) or '.[gpu]'"
            )


def load_model(settings: Settings) -> StructuredModel:
    """The runtime named by ``SLOWWAVE_LLM_RUNTIME``."""
    if settings.llm.runtime == "replay":
        from slowwave.models.llm.replay import LoCoMoReplayModel

        if settings.llm.replay_data is None:
            raise RuntimeNotAvailable(
                "the replay runtime needs SLOWWAVE_REPLAY_DATA (a LoCoMo JSON file)"
            )
        return LoCoMoReplayModel(settings.llm.replay_data)
    if settings.llm.runtime == "openai":
        from slowwave.models.llm.openai import OpenAICompatibleModel

        key = settings.openai.api_key.get_secret_value() if settings.openai.api_key else None
        return OpenAICompatibleModel(
            settings.openai.base_url,
            settings.openai.model,
            api_key=key,
            max_tokens=settings.llm.max_tokens,
            temperature=settings.llm.temperature,
            concurrency=settings.openai.concurrency,
            timeout_s=settings.openai.timeout_s,
            max_retries=settings.openai.max_retries,
            max_wait_s=settings.openai.max_wait_s,
            extra_body=settings.openai.extra_body,
            strict=settings.openai.strict_schema,
            context_tokens=settings.openai.context_tokens,
            schema_dialect=settings.openai.schema_dialect,
        )
    if settings.llm.runtime == "llamacpp":
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
