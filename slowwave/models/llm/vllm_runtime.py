"""The vLLM runtime: engines (``vllm_engine``) in a pool of Ray actors, each request streamed
to the least busy one; chunks are cut with the engine's own tokenizer and context length."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path

from slowwave.models.errors import ModelNotPrepared, RuntimeNotAvailable
from slowwave.models.llm.base import GenerationRequest, ModelAnswer
from slowwave.models.llm.catalog import model_label
from slowwave.models.llm.tokens import model_token_counter
from slowwave.models.llm.vllm_engine import VLLMOptions
from slowwave.models.llm.weights import vllm_model_dir
from slowwave.models.settings import Settings


class VLLMModel:
    """The vLLM runtime: engines in a pool of Ray actors, each request to the least busy one."""

    name = "vllm"

    def __init__(self, settings: Settings) -> None:
        from slowwave.models.llm.vllm_engine import VLLMEngine

        self.name = model_label("vllm", settings.llm.model)
        from slowwave.models.workers.pool import ActorPool

        options = vllm_options(settings)
        self.context_tokens = settings.llm.max_model_len
        self.counter = model_token_counter(Path(options.model))
        self.pool = ActorPool(
            settings,
            partial(VLLMEngine, options),
            actors_per_node=settings.llm.actors_per_node,
            name="vllm",
            streaming=True,
        )

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        return self.pool.submit("submit", requests)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [f.result() for f in self.submit(requests)]

    def count_tokens(self, text: str, /) -> int:
        """Tokens as the engine's own tokenizer counts them."""
        return self.counter(text)

    def close(self) -> None:
        self.pool.close()


def vllm_options(settings: Settings) -> VLLMOptions:
    """The engine options the settings name; the model directory must exist."""
    try:
        model_dir = vllm_model_dir(settings.home, settings.llm.model)
    except ModelNotPrepared as exc:
        raise RuntimeNotAvailable(str(exc)) from None
    return VLLMOptions(
        model=str(model_dir),
        max_model_len=settings.llm.max_model_len,
        max_tokens=settings.llm.max_tokens,
        temperature=settings.llm.temperature,
        repetition_penalty=settings.llm.repetition_penalty,
        dtype=settings.llm.dtype,
        memory_fraction=settings.llm.memory_fraction,
        enforce_eager=settings.llm.enforce_eager,
        kv_cache_gb=settings.llm.kv_cache_gb,
    )
