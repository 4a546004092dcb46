"""vLLM, in this process: chat with JSON-schema structured outputs, each request streamed.

This is what each Ray actor of the vLLM runtime hosts (``models.workers.pool``); it can also
run directly. Requests go into one ``AsyncLLM`` as they are submitted and come back one by
one as they finish, so the engine batches continuously across conversations. A prompt that
cannot fit the context is answered with an error up front instead of reaching the engine.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.llm.background_loop import BackgroundLoop
from slowwave.models.llm.base import GenerationRequest, ModelAnswer

# vLLM names each socket of its engine by a uuid4 under ``VLLM_RPC_BASE_PATH``
SOCKET_NAME_LEN = 36


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
    # off only to compare schedules on the same prompts (a warm cache favours the later run)
    prefix_caching: bool = True


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
        "enable_prefix_caching": options.prefix_caching,
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


class VLLMEngine:
    """A ``StreamingModel`` backed by one vLLM engine (``AsyncLLM``, on its own event loop).

    Every request submitted goes into the engine at once; the engine batches whatever is in
    flight continuously, so a conversation's next chunk joins the running batch the moment
    it is submitted instead of waiting for a whole batch to drain.
    """

    name = "vllm"

    def __init__(self, options: VLLMOptions) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.kv_cache_gb))
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        kwargs = engine_kwargs(options)
        kwargs["structured_outputs_config"] = StructuredOutputsConfig(
            **kwargs["structured_outputs_config"]
        )
        args = AsyncEngineArgs(**kwargs, disable_log_stats=True)
        self.options = options
        self._ids = itertools.count()
        self._loop = BackgroundLoop("vllm-engine")

        async def start() -> Any:  # on the loop, so the engine's output handler lives there
            return AsyncLLM.from_engine_args(args)

        try:
            self._llm: Any = self._loop.run(start())
        except BaseException:
            self._loop.close()
            raise
        self._tokenizer = self._llm.get_tokenizer()

    def _sampling(self, schema: dict[str, Any], max_tokens: int) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        return SamplingParams(
            structured_outputs=StructuredOutputsParams(json=schema),
            max_tokens=max_tokens,
            temperature=self.options.temperature,
            repetition_penalty=self.options.repetition_penalty,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        ids = self._tokenizer.apply_chat_template(
            _messages(request), add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # some return an encoding
            ids = ids["input_ids"]
        return list(ids)

    def prompt_tokens(self, request: GenerationRequest) -> int:
        return len(self.prompt_ids(request))

    @property
    def alive(self) -> bool:
        """False once the engine has died; it does not come back in this process."""
        return self._llm is not None and not self._llm.errored

    async def answer(self, request: GenerationRequest, ids: list[int]) -> ModelAnswer:
        """One request through the engine; a prompt that cannot fit is answered with an error."""
        from vllm.inputs import TokensPrompt
        from vllm.v1.engine.exceptions import EngineDeadError

        budget = self.options.max_model_len - self.options.max_tokens
        if len(ids) > budget:
            return ModelAnswer(
                request.chunk_id,
                None,
                f"prompt of {len(ids)} tokens does not fit max_model_len "
                f"{self.options.max_model_len} minus max_tokens {self.options.max_tokens}; "
                "lower SLOWWAVE_CHUNK_SIZE or raise SLOWWAVE_LLM_MAX_MODEL_LEN",
                prompt_tokens=len(ids),
            )
        # the engine's own renderer turns the tokens into its input (raw prompts are deprecated)
        (engine_input,) = await self._llm.renderer.render_cmpl_async(
            [TokensPrompt(prompt_token_ids=ids)]
        )
        final = None
        try:
            async for output in self._llm.generate(
                engine_input,
                self._sampling(request.json_schema, request.answer_limit(self.options.max_tokens)),
                request_id=f"{request.chunk_id}-{next(self._ids)}",
            ):
                final = output
        except EngineDeadError as exc:
            raise RuntimeUnreachable(f"the vLLM engine died: {exc}") from exc
        if final is None:
            return ModelAnswer(request.chunk_id, None, "the engine returned no output")
        return _answer(request, final)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        # tokenized here, on the caller's thread, so the engine's loop is never held up by it
        return [self._loop.submit(self.answer(r, self.prompt_ids(r))) for r in requests]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [f.result() for f in self.submit(requests)]

    def close(self) -> None:
        if self._llm is not None:
            llm, self._llm = self._llm, None

            async def stop() -> None:  # the engine's tasks live on the loop: stop it there
                requests = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in requests:  # abort what is in flight while the engine still runs
                    task.cancel()
                await asyncio.gather(*requests, return_exceptions=True)
                llm.shutdown()

            self._loop.run(stop())
        self._loop.close()


def _messages(request: GenerationRequest) -> list[Any]:
    return [
        {"role": "system", "content": request.system},
        {"role": "user", "content": request.user},
    ]


def _answer(request: GenerationRequest, output: Any) -> ModelAnswer:
    completion = output.outputs[0]
    prompt_tokens = len(output.prompt_token_ids or [])
    completion_tokens = len(completion.token_ids or [])
    return ModelAnswer(
        request.chunk_id,
        completion.text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        extra={"finish_reason": completion.finish_reason},
        truncated=completion.finish_reason == "length",
        # the tokens automatic prefix caching served (vLLM's own count)
        cached_tokens=min(int(getattr(output, "num_cached_tokens", 0) or 0), prompt_tokens),
    )
