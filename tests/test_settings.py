"""Settings grouped by concern, with every variable named as it was before the grouping."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from slowwave.models.settings import BY_NAME, Settings, describe_invalid, variables

# Every variable slowwave read before its settings were grouped: none may be renamed.
BEFORE = [
    "HOME",
    "DATABASE_URL",
    "POOL_MAX_SIZE",
    "CONNECT_TIMEOUT_S",
    "EMBEDDING_DIM",
    "EPISODE_THRESHOLD",
    "FLASHBULB_SURPRISE",
    "CHUNK_SIZE",
    "CHUNK_MIN_TOKENS",
    "RELATED_FACTS_LIMIT",
    "GATE_MIN_CHARS",
    "GATE_MAX_SURPRISE",
    "DEDUPE_THRESHOLD",
    "GRAY_ZONE_MERGE",
    "GRAY_ZONE_LOWER",
    "MERGE_FAITHFULNESS",
    "DEDUPE_CANDIDATES",
    "CLAIM_LEASE_S",
    "DUE_AFTER_S",
    "CLAIM_MAX_CONVERSATIONS",
    "MAX_ACTIVE_FACTS",
    "SLOTS",
    "PROFILES",
    "PROFILE_MAX_TOKENS",
    "PROFILE_INPUT_TOKENS",
    "MAX_ATTEMPTS",
    "GROUNDING",
    "CHECK_SPEAKER",
    "HOLD_ENDING_SHARE",
    "HOLD_ENDING_MIN",
    "SHARD_CONVERSATIONS",
    "SHARD_CONCURRENCY",
    "NIGHTLY_TIMEZONE",
    "METRICS_PORT",
    "PREFECT_PORT",
    "SERVE_HOST",
    "SERVE_PORT",
    "SERVE_POOL_SIZE",
    "SERVE_POOL_WAIT_S",
    "SERVE_STATEMENT_TIMEOUT_MS",
    "SERVE_MAX_BODY_BYTES",
    "SERVE_MAX_MESSAGES",
    "SERVE_MAX_QUERY_CHARS",
    "SERVE_MAX_K",
    "SERVE_RATE_PER_S",
    "SERVE_RATE_BURST",
    "SERVE_EMBED_BATCH",
    "RRF_K",
    "SEARCH_CANDIDATES",
    "SEARCH_DIVERSITY",
    "SEARCH_DIVERSITY_DOMINANT",
    "SEARCH_SESSION_WEIGHT",
    "SEARCH_TEMPORAL_WEIGHT",
    "SEARCH_TEMPORAL_BEFORE_DAYS",
    "SEARCH_TEMPORAL_AFTER_DAYS",
    "SEARCH_EPISODE_WEIGHT",
    "INGEST_BATCH_ROWS",
    "INGEST_CONNECTIONS",
    "SEGMENT_GAP_S",
    "SEGMENT_MAX_MESSAGES",
    "SUMMARIZE_ON_INGEST",
    "SUMMARY_MIN_CHARS",
    "EXPORT_TO",
    "EXPORT_WHAT",
    "MAX_MESSAGE_CHARS",
    "LLM_RUNTIME",
    "LLM_MODEL",
    "LLM_MAX_MODEL_LEN",
    "LLM_MAX_TOKENS",
    "LLM_TEMPERATURE",
    "LLM_REPETITION_PENALTY",
    "LLM_DTYPE",
    "LLM_MEMORY_FRACTION",
    "LLM_KV_CACHE_GB",
    "LLM_ENFORCE_EAGER",
    "LLM_ACTORS_PER_NODE",
    "LLAMACPP_THREADS",
    "LLAMACPP_TIMEOUT_S",
    "LLAMACPP_STARTUP_TIMEOUT_S",
    "LLAMACPP_SERVER",
    "LLAMACPP_FLASH_ATTN",
    "LLAMACPP_SERVER_PATH",
    "LLAMACPP_REPACK",
    "LLAMACPP_PARALLEL",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_CONCURRENCY",
    "OPENAI_TIMEOUT_S",
    "OPENAI_MAX_RETRIES",
    "OPENAI_EXTRA_BODY",
    "OPENAI_CONTEXT_TOKENS",
    "OPENAI_STRICT_SCHEMA",
    "OPENAI_SCHEMA_DIALECT",
    "REPLAY_DATA",
    "EMBEDDING_RUNTIME",
    "EMBEDDING_MODEL",
    "EMBEDDING_DEVICE",
    "EMBEDDING_DTYPE",
    "EMBEDDING_BATCH_SIZE",
    "EMBEDDING_ACTORS_PER_NODE",
    "EMBEDDING_CPUS_PER_ACTOR",
    "RAY_ADDRESS",
    "RAY_NUM_CPUS",
]
# Added since, each where its group's others are read.
ADDED = [
    "SEARCH_MEMORIES",
    "SEARCH_MEMORY_TOKENS",
    "SEARCH_RETRIEVABILITY_WEIGHT",
    "SEARCH_MEMORY_WINDOW",
    "SEARCH_MEMORY_VECTOR_WEIGHT",
    "SERVE_DEFAULT_CONVERSATION",
    "CHANGE_CHECK",
    "SECOND_LOOK",
    "SECOND_LOOK_MESSAGES",
    "OPENAI_MAX_WAIT_S",
    "RUN_TOKEN_BUDGET",
    "TENANT_TOKEN_BUDGET",
    "RUN_CALL_BUDGET",
    "TENANT_CALL_BUDGET",
    "SEARCH_RERANK",
    "SEARCH_RERANK_MODEL",
    "SEARCH_RERANK_CANDIDATES",
    "SHARD_RETRY_DELAY_SECONDS",
    "CHUNK_LONE_JOINS",
    "SEARCH_MEMORY_TEMPORAL_WEIGHT",
]


def test_every_variable_keeps_its_name_and_lands_in_its_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    read = {names[0]: place for place, names, _ in variables()}
    assert sorted(read) == sorted(f"SLOWWAVE_{n}" for n in BEFORE + ADDED)
    assert {read[f"SLOWWAVE_{n}"].split(".")[0] for n in ADDED} == {
        "search",
        "serve",
        "consolidation",
        "openai",
        "orchestration",
    }
    monkeypatch.chdir(tmp_path)  # no .env of the checkout's
    monkeypatch.setenv("SLOWWAVE_SERVE_PORT", "9123")
    monkeypatch.setenv("SLOWWAVE_CHUNK_SIZE", "7")
    monkeypatch.setenv("SLOWWAVE_RRF_K", "31")
    monkeypatch.setenv("SLOWWAVE_INGEST_CONNECTIONS", "3")
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@127.0.0.1:1/x")
    settings = Settings()
    assert read["SLOWWAVE_SERVE_PORT"] == "serve.port" and settings.serve.port == 9123
    assert settings.consolidation.chunk_size == 7 and settings.search.rrf_k == 31
    assert settings.ingest.connections == 3
    assert settings.database.url is not None
    assert settings.database.url.get_secret_value() == "postgresql://u@127.0.0.1:1/x"


def test_a_setting_passed_by_name_wins_over_the_environment_and_the_rest_still_read_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLOWWAVE_SERVE_PORT", "9123")
    monkeypatch.setenv("SLOWWAVE_SERVE_MAX_K", "55")
    settings = Settings(serve_port=8000, home=tmp_path)
    assert (settings.serve.port, settings.serve.max_k) == (8000, 55)
    evolved = settings.evolve(chunk_size=3, serve_port=8001)
    assert (evolved.consolidation.chunk_size, evolved.serve.port, evolved.serve.max_k) == (
        3,
        8001,
        55,
    )
    assert settings.consolidation.chunk_size != 3 or settings.serve.port == 8000  # a copy
    with pytest.raises(ValidationError):
        settings.evolve(chunk_size=0)  # validated as the environment would be
    with pytest.raises(TypeError):
        settings.evolve(chunk_sise=3)
    assert set(BY_NAME) == {n.lower() for n in BEFORE + ADDED} - {"home"}


def test_a_bad_value_is_named_by_its_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLOWWAVE_SERVE_PORT", "eighty")
    with pytest.raises(ValidationError) as bad:
        Settings()
    assert describe_invalid(bad.value).startswith("invalid setting SLOWWAVE_SERVE_PORT='eighty'")
    monkeypatch.delenv("SLOWWAVE_SERVE_PORT")
    monkeypatch.setenv("SLOWWAVE_RRF_K", "0")
    with pytest.raises(ValidationError) as low:
        Settings()
    assert describe_invalid(low.value).startswith("invalid setting SLOWWAVE_RRF_K='0'")
