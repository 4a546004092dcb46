"""The llama.cpp runtime: a llama.cpp server (``llama-cpp-python[server]``) that slowwave starts
on 127.0.0.1 for the run and stops by pid, spoken to through the OpenAI-compatible client.

On a machine without a GPU it runs the same Q4 GGUF that vLLM's CPU build would have to
dequantise, natively and several times faster (``benchmarks/llm_batching.py``). The server runs
one request at a time, so the client sends one at a time with a timeout sized for a chunk;
structured output comes from the server's JSON-schema grammar with the full schema (its length
bounds keep a small model's answer short). Tokens are counted with the GGUF's own vocabulary,
loaded alone (no weights) in this process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from slowwave.models.llm.base import GenerationRequest, ModelAnswer, RuntimeNotAvailable
from slowwave.models.llm.catalog import model_label
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.llm.tokens import TokenCounter
from slowwave.models.llm.weights import ModelNotPrepared, gguf_path
from slowwave.models.processes import LocalServer, free_port
from slowwave.models.settings import Settings

SERVED_NAME = "slowwave"
INSTALL_HINT = (
    "the llamacpp runtime needs llama.cpp: pip install -e '.[llamacpp]' (it compiles for a few "
    "minutes), or set SLOWWAVE_LLM_RUNTIME=vllm"
)


def llamacpp_gguf(settings: Settings) -> Path:
    """The verified GGUF the settings name; ``RuntimeNotAvailable`` when it cannot be used."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeNotAvailable(INSTALL_HINT)
    try:
        return gguf_path(settings.home, settings.llm_model)
    except ModelNotPrepared as exc:
        raise RuntimeNotAvailable(str(exc)) from None


def server_command(settings: Settings, gguf: Path, port: int) -> list[str]:
    threads = settings.llamacpp_threads or len(os.sched_getaffinity(0))
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(settings.llm_max_model_len),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]


def llamacpp_server(
    settings: Settings, port: int | None = None, gguf: Path | None = None
) -> tuple[LocalServer, str]:
    """The server for the configured model (not started) and its ``/v1`` base URL; ``gguf``:
    the model's file when the caller has already verified it."""
    gguf = gguf or llamacpp_gguf(settings)
    port = port or free_port()
    workdir = settings.home / "run" / "llamacpp"
    workdir.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    server = LocalServer(
        "llama.cpp server",
        server_command(settings, gguf, port),
        {**os.environ, "HF_HUB_OFFLINE": "1"},
        workdir / "server.log",
        f"{base}/v1/models",
        settings.llamacpp_startup_timeout_s,
        # on SIGTERM its HTTP server waits for the answer being generated (a minute on a CPU)
        # even when no one will read it (an interrupted run): it has nothing to save
        stop_grace_s=1.0,
    )
    return server, f"{base}/v1"


class GGUFTokenCounter:
    """Tokens as the GGUF's own vocabulary counts them (the vocabulary only, no weights)."""

    def __init__(self, gguf: Path) -> None:
        from llama_cpp import Llama

        self.vocab = Llama(str(gguf), vocab_only=True, verbose=False)

    def __call__(self, text: str, /) -> int:
        return len(self.vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class LlamaCppModel:
    """A ``StreamingModel`` backed by a llama.cpp server this object starts and stops."""

    name = "llamacpp"

    def __init__(self, settings: Settings) -> None:
        self.name = model_label("llamacpp", settings.llm_model)
        gguf = llamacpp_gguf(settings)
        self.context_tokens = settings.llm_max_model_len
        self.counter: TokenCounter = GGUFTokenCounter(gguf)
        self.server, base_url = llamacpp_server(settings, gguf=gguf)
        self.server.start()
        self.client = OpenAICompatibleModel(
            base_url,
            SERVED_NAME,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
            concurrency=1,  # the server answers one request at a time
            timeout_s=settings.llamacpp_timeout_s,
            max_retries=1,  # a timed-out answer is still being generated: never queue a second
            extra_body=self.sampling(settings),
            strict=False,
            context_tokens=settings.llm_max_model_len,
            schema_dialect="json_object",
        )

    def __reduce__(self) -> Any:
        raise TypeError(
            "the llama.cpp runtime serves from the machine that started it and cannot be sent "
            "to a Ray worker: on a Ray cluster (SLOWWAVE_RAY_ADDRESS) use the vllm or openai "
            "runtime (`slowwave models serve --engine llamacpp` on one machine serves the "
            "openai runtime)"
        )

    @staticmethod
    def sampling(settings: Settings) -> dict[str, Any]:
        return {"repeat_penalty": settings.llm_repetition_penalty}

    def count_tokens(self, text: str, /) -> int:
        return self.counter(text)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        return self.client.submit(requests)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return self.client.generate(requests)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.server.stop()
