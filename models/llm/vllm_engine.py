"""vLLM, in this process: chat with JSON-schema structured outputs, the whole batch at once.

This is what each Ray actor of the vLLM runtime hosts (``models.actor_pool``); it can also
run directly. All prompts of a batch go to ``LLM.chat`` together so the engine batches them
continuously. A prompt that cannot fit the context is answered with an error up front instead
of failing the whole batch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.llm.base import ConsolidationRequest, ModelAnswer


@dataclass(frozen=True)
class VLLMOptions:
    """Engine and sampling options (from settings; plain data so it pickles to actors)."""

    model: str
    max_model_len: int = 8192
    max_tokens: int = 1024
    temperature: float = 0.0
    repetition_penalty: float = 1.1
    dtype: str = "auto"
    memory_fraction: float = 0.9
    enforce_eager: bool = True
    kv_cache_gb: int = 1


def _on_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


def engine_kwargs(options: VLLMOptions) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": options.model,
        "max_model_len": options.max_model_len,
        "enforce_eager": options.enforce_eager,
        # without any-whitespace, small models fill their token budget with blank space
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
    }
    gpu = _on_gpu()
    dtype = options.dtype
    if dtype == "auto" and not gpu:
        dtype = "float32"  # bf16 on CPUs without AMX falls off oneDNN's fast path
    kwargs["dtype"] = dtype
    if gpu:
        kwargs["gpu_memory_utilization"] = options.memory_fraction
    return kwargs


class VLLMConsolidationEngine:
    """A ``ConsolidationModel`` backed by one vLLM engine."""

    name = "vllm"

    def __init__(self, options: VLLMOptions) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.kv_cache_gb))
        from vllm import LLM

        self.options = options
        self._llm: Any = LLM(**engine_kwargs(options))
        self._tokenizer = self._llm.get_tokenizer()

    def _sampling(self, schema: dict[str, Any]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        return SamplingParams(
            structured_outputs=StructuredOutputsParams(json=schema),
            max_tokens=self.options.max_tokens,
            temperature=self.options.temperature,
            repetition_penalty=self.options.repetition_penalty,
        )

    def prompt_tokens(self, request: ConsolidationRequest) -> int:
        ids = self._tokenizer.apply_chat_template(
            _messages(request), add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict):  # some tokenizers return an encoding
            ids = ids["input_ids"]
        return len(ids)

    def consolidate(self, requests: Sequence[ConsolidationRequest]) -> list[ModelAnswer]:
        answers: dict[str, ModelAnswer] = {}
        fitting: list[ConsolidationRequest] = []
        budget = self.options.max_model_len - self.options.max_tokens
        for request in requests:
            size = self.prompt_tokens(request)
            if size > budget:
                answers[request.chunk_id] = ModelAnswer(
                    request.chunk_id,
                    None,
                    f"prompt of {size} tokens does not fit max_model_len "
                    f"{self.options.max_model_len} minus max_tokens {self.options.max_tokens}; "
                    "lower SLOWWAVE_CHUNK_SIZE or raise SLOWWAVE_LLM_MAX_MODEL_LEN",
                    prompt_tokens=size,
                )
            else:
                fitting.append(request)
        by_schema: dict[str, list[ConsolidationRequest]] = {}
        for request in fitting:
            by_schema.setdefault(repr(request.json_schema), []).append(request)
        for group in by_schema.values():
            outputs = self._llm.chat(
                [_messages(r) for r in group], self._sampling(group[0].json_schema), use_tqdm=False
            )
            for request, output in zip(group, outputs, strict=True):
                answers[request.chunk_id] = _answer(request, output)
        return [answers[r.chunk_id] for r in requests]

    def close(self) -> None:
        self._llm = None


def _messages(request: ConsolidationRequest) -> list[Any]:
    return [
        {"role": "system", "content": request.system},
        {"role": "user", "content": request.user},
    ]


def _answer(request: ConsolidationRequest, output: Any) -> ModelAnswer:
    completion = output.outputs[0]
    prompt_tokens = len(output.prompt_token_ids or [])
    completion_tokens = len(completion.token_ids or [])
    if completion.finish_reason == "length":
        return ModelAnswer(
            request.chunk_id,
            None,
            f"answer cut off at max_tokens ({completion_tokens} tokens)",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
    return ModelAnswer(
        request.chunk_id,
        completion.text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        extra={"finish_reason": completion.finish_reason},
    )
