"""Every knob slowwave has, read from the environment (prefix ``SLOWWAVE_``) and ``.env``,
grouped by concern: ``settings.serve.port`` is ``SLOWWAVE_SERVE_PORT``, ``settings.llm.model``
is ``SLOWWAVE_LLM_MODEL``, ``settings.consolidation.chunk_size`` is ``SLOWWAVE_CHUNK_SIZE``.
Every variable keeps the name it had before the settings were grouped.

The settings reference is generated from these classes (``slowwave settings --markdown``) and a
test keeps it in step, so a setting is documented exactly once: here. ``Settings(chunk_size=4)``
and ``settings.evolve(chunk_size=4)`` take a setting by its variable's name (less the prefix),
as the environment does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Self

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from slowwave.models.settings.consolidation import ConsolidationSettings
from slowwave.models.settings.ingest import ExportSettings, IngestSettings
from slowwave.models.settings.orchestration import OrchestrationSettings
from slowwave.models.settings.runtimes import (
    EmbeddingSettings,
    LlamaCppRepack,
    LlamaCppServerKind,
    LlamaCppSettings,
    LLMRuntimeName,
    LlmSettings,
    OpenAISettings,
    RaySettings,
)
from slowwave.models.settings.search import SearchSettings
from slowwave.models.settings.serve import ServeSettings
from slowwave.models.settings.storage import DatabaseSettings

# each group: the attribute of ``Settings`` that holds it, and its class
GROUPS: dict[str, type[BaseSettings]] = {
    "database": DatabaseSettings,
    "consolidation": ConsolidationSettings,
    "orchestration": OrchestrationSettings,
    "serve": ServeSettings,
    "search": SearchSettings,
    "ingest": IngestSettings,
    "export": ExportSettings,
    "llm": LlmSettings,
    "llamacpp": LlamaCppSettings,
    "openai": OpenAISettings,
    "embedding": EmbeddingSettings,
    "ray": RaySettings,
}

# a setting by its variable's name less ``SLOWWAVE_`` (lower case) -> (group, field)
BY_NAME: dict[str, tuple[str, str]] = {
    "database_url": ("database", "url"),
    "pool_max_size": ("database", "pool_max_size"),
    "connect_timeout_s": ("database", "connect_timeout_s"),
    "episode_threshold": ("consolidation", "episode_threshold"),
    "flashbulb_surprise": ("consolidation", "flashbulb_surprise"),
    "chunk_size": ("consolidation", "chunk_size"),
    "chunk_min_tokens": ("consolidation", "chunk_min_tokens"),
    "related_facts_limit": ("consolidation", "related_facts_limit"),
    "gate_min_chars": ("consolidation", "gate_min_chars"),
    "gate_max_surprise": ("consolidation", "gate_max_surprise"),
    "dedupe_threshold": ("consolidation", "dedupe_threshold"),
    "gray_zone_merge": ("consolidation", "gray_zone_merge"),
    "change_check": ("consolidation", "change_check"),
    "second_look": ("consolidation", "second_look"),
    "second_look_messages": ("consolidation", "second_look_messages"),
    "gray_zone_lower": ("consolidation", "gray_zone_lower"),
    "merge_faithfulness": ("consolidation", "merge_faithfulness"),
    "dedupe_candidates": ("consolidation", "dedupe_candidates"),
    "claim_lease_s": ("consolidation", "claim_lease_s"),
    "due_after_s": ("consolidation", "due_after_s"),
    "claim_max_conversations": ("consolidation", "claim_max_conversations"),
    "run_token_budget": ("consolidation", "run_token_budget"),
    "tenant_token_budget": ("consolidation", "tenant_token_budget"),
    "run_call_budget": ("consolidation", "run_call_budget"),
    "tenant_call_budget": ("consolidation", "tenant_call_budget"),
    "max_active_facts": ("consolidation", "max_active_facts"),
    "slots": ("consolidation", "slots"),
    "profiles": ("consolidation", "profiles"),
    "profile_max_tokens": ("consolidation", "profile_max_tokens"),
    "profile_input_tokens": ("consolidation", "profile_input_tokens"),
    "max_attempts": ("consolidation", "max_attempts"),
    "grounding": ("consolidation", "grounding"),
    "check_speaker": ("consolidation", "check_speaker"),
    "hold_ending_share": ("consolidation", "hold_ending_share"),
    "hold_ending_min": ("consolidation", "hold_ending_min"),
    "shard_conversations": ("orchestration", "shard_conversations"),
    "shard_concurrency": ("orchestration", "shard_concurrency"),
    "nightly_timezone": ("orchestration", "nightly_timezone"),
    "metrics_port": ("orchestration", "metrics_port"),
    "prefect_port": ("orchestration", "prefect_port"),
    "serve_host": ("serve", "host"),
    "serve_port": ("serve", "port"),
    "serve_pool_size": ("serve", "pool_size"),
    "serve_pool_wait_s": ("serve", "pool_wait_s"),
    "serve_statement_timeout_ms": ("serve", "statement_timeout_ms"),
    "serve_max_body_bytes": ("serve", "max_body_bytes"),
    "serve_default_conversation": ("serve", "default_conversation"),
    "serve_max_messages": ("serve", "max_messages"),
    "serve_max_query_chars": ("serve", "max_query_chars"),
    "serve_max_k": ("serve", "max_k"),
    "serve_rate_per_s": ("serve", "rate_per_s"),
    "serve_rate_burst": ("serve", "rate_burst"),
    "serve_embed_batch": ("serve", "embed_batch"),
    "rrf_k": ("search", "rrf_k"),
    "search_candidates": ("search", "candidates"),
    "search_diversity": ("search", "diversity"),
    "search_diversity_dominant": ("search", "diversity_dominant"),
    "search_session_weight": ("search", "session_weight"),
    "search_temporal_weight": ("search", "temporal_weight"),
    "search_temporal_before_days": ("search", "temporal_before_days"),
    "search_temporal_after_days": ("search", "temporal_after_days"),
    "search_episode_weight": ("search", "episode_weight"),
    "search_memories": ("search", "memories"),
    "search_memory_tokens": ("search", "memory_tokens"),
    "search_retrievability_weight": ("search", "retrievability_weight"),
    "search_memory_window": ("search", "memory_window"),
    "search_memory_vector_weight": ("search", "memory_vector_weight"),
    "search_rerank": ("search", "rerank"),
    "search_rerank_model": ("search", "rerank_model"),
    "search_rerank_candidates": ("search", "rerank_candidates"),
    "ingest_batch_rows": ("ingest", "batch_rows"),
    "ingest_connections": ("ingest", "connections"),
    "segment_gap_s": ("ingest", "segment_gap_s"),
    "segment_max_messages": ("ingest", "segment_max_messages"),
    "summarize_on_ingest": ("ingest", "summarize_on_ingest"),
    "summary_min_chars": ("ingest", "summary_min_chars"),
    "max_message_chars": ("ingest", "max_message_chars"),
    "export_to": ("export", "to"),
    "export_what": ("export", "what"),
    "llm_runtime": ("llm", "runtime"),
    "llm_model": ("llm", "model"),
    "llm_max_model_len": ("llm", "max_model_len"),
    "llm_max_tokens": ("llm", "max_tokens"),
    "llm_temperature": ("llm", "temperature"),
    "llm_repetition_penalty": ("llm", "repetition_penalty"),
    "llm_dtype": ("llm", "dtype"),
    "llm_memory_fraction": ("llm", "memory_fraction"),
    "llm_kv_cache_gb": ("llm", "kv_cache_gb"),
    "llm_enforce_eager": ("llm", "enforce_eager"),
    "llm_actors_per_node": ("llm", "actors_per_node"),
    "replay_data": ("llm", "replay_data"),
    "llamacpp_threads": ("llamacpp", "threads"),
    "llamacpp_timeout_s": ("llamacpp", "timeout_s"),
    "llamacpp_startup_timeout_s": ("llamacpp", "startup_timeout_s"),
    "llamacpp_server": ("llamacpp", "server"),
    "llamacpp_flash_attn": ("llamacpp", "flash_attn"),
    "llamacpp_server_path": ("llamacpp", "server_path"),
    "llamacpp_repack": ("llamacpp", "repack"),
    "llamacpp_parallel": ("llamacpp", "parallel"),
    "openai_base_url": ("openai", "base_url"),
    "openai_model": ("openai", "model"),
    "openai_api_key": ("openai", "api_key"),
    "openai_concurrency": ("openai", "concurrency"),
    "openai_timeout_s": ("openai", "timeout_s"),
    "openai_max_retries": ("openai", "max_retries"),
    "openai_max_wait_s": ("openai", "max_wait_s"),
    "openai_extra_body": ("openai", "extra_body"),
    "openai_context_tokens": ("openai", "context_tokens"),
    "openai_strict_schema": ("openai", "strict_schema"),
    "openai_schema_dialect": ("openai", "schema_dialect"),
    "embedding_dim": ("embedding", "dim"),
    "embedding_runtime": ("embedding", "runtime"),
    "embedding_model": ("embedding", "model"),
    "embedding_device": ("embedding", "device"),
    "embedding_dtype": ("embedding", "dtype"),
    "embedding_batch_size": ("embedding", "batch_size"),
    "embedding_actors_per_node": ("embedding", "actors_per_node"),
    "embedding_cpus_per_actor": ("embedding", "cpus_per_actor"),
    "ray_address": ("ray", "address"),
    "ray_num_cpus": ("ray", "num_cpus"),
}


class Settings(BaseSettings):
    """slowwave's configuration. Defaults are the embedded, single-machine setup."""

    model_config = SettingsConfigDict(
        env_prefix="SLOWWAVE_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    home: Path = Field(
        default=Path(".slowwave"),
        description="Directory for slowwave's local state: the embedded Postgres data "
        "directory, model caches, reports.",
    )
    database: DatabaseSettings
    consolidation: ConsolidationSettings
    orchestration: OrchestrationSettings
    serve: ServeSettings
    search: SearchSettings
    ingest: IngestSettings
    export: ExportSettings
    llm: LlmSettings
    llamacpp: LlamaCppSettings
    openai: OpenAISettings
    embedding: EmbeddingSettings
    ray: RaySettings

    def __init__(self, **values: Any) -> None:
        """Every group read from the environment, with ``values`` over it: a setting by its
        variable's name less the prefix (``serve_port=8000``), or a group whole."""
        given: dict[str, dict[str, Any]] = {}
        sources = {k: values[k] for k in ("_env_file",) if k in values}  # for every group
        for name in list(values):
            if name in BY_NAME:
                group, field = BY_NAME[name]
                given.setdefault(group, {})[field] = values.pop(name)
        for group, cls in GROUPS.items():
            if not isinstance(values.get(group), cls):
                values[group] = cls(
                    **{**(values.get(group) or {}), **given.get(group, {})}, **sources
                )
        super().__init__(**values)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @property
    def pgdata(self) -> Path:
        """Data directory of the embedded Postgres."""
        return self.home / "pgdata"

    def evolve(self, **changes: Any) -> Self:
        """A copy with ``changes``, each named as ``Settings()`` takes it (``chunk_size=4``),
        validated as the environment would be."""
        groups: dict[str, Any] = {}
        top: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in BY_NAME:
                if name not in type(self).model_fields:
                    raise TypeError(f"no setting {name!r}")
                top[name] = value
                continue
            group, field = BY_NAME[name]
            groups.setdefault(group, {})[field] = value
        update = {
            group: type(getattr(self, group)).model_validate(
                {**getattr(self, group).model_dump(), **fields}
            )
            for group, fields in groups.items()
        }
        return self.model_copy(update={**top, **update})


def setting_default(name: str) -> Any:
    """The default of a setting named by its variable less the prefix (``rrf_k``)."""
    group, field = BY_NAME[name]
    return GROUPS[group].model_fields[field].get_default(call_default_factory=True)


def variables() -> Iterator[tuple[str, tuple[str, ...], FieldInfo]]:
    """Every setting as (where it is, ``serve.port``; its variables; its field), in order."""
    yield "home", ("SLOWWAVE_HOME",), Settings.model_fields["home"]
    for group, cls in GROUPS.items():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            names = (
                tuple(str(c) for c in alias.choices)
                if isinstance(alias, AliasChoices)
                else (f"{prefix}{name}".upper(),)
            )
            yield f"{group}.{name}", names, field


def describe_invalid(exc: ValidationError) -> str:
    """A settings error as one line a user can act on: which variable, what is wrong."""
    parts = []
    where = {place: names[0] for place, names, _ in variables()}
    group = next((g for g, cls in GROUPS.items() if cls.__name__ == exc.title), None)
    for error in exc.errors():
        path = ".".join(str(p) for p in error["loc"])
        place = f"{group}.{path}" if group else path
        aliases = {n for _, names, _ in variables() for n in names}
        name = (
            path
            if path in aliases
            else where.get(place, "SLOWWAVE_" + path.replace(".", "_").upper())
        )
        given = error.get("input")
        shown = f"={given!r}" if isinstance(given, str | int | float) else ""
        parts.append(f"{name}{shown}: {error['msg']}")
    return "invalid setting " + "; ".join(parts)


# ``SLOWWAVE_*`` variables that are not settings: what ``slowwave deploy`` hands its flow runs,
# and the test suite's own switches.
# SLOWWAVE_API_KEY: the key `slowwave mcp` and the clients present (a secret, never a setting
# that is shown); SLOWWAVE_BASE_URL: where the clients (slowwave_client) find a server
NOT_SETTINGS = frozenset({"SLOWWAVE_WORKING_DIR", "SLOWWAVE_API_KEY", "SLOWWAVE_BASE_URL"})
NOT_SETTINGS_PREFIXES = ("SLOWWAVE_REQUIRE_", "SLOWWAVE_TEST_")


def unknown_variables(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """The ``SLOWWAVE_*`` names among ``names`` that no setting reads (a typo is otherwise
    ignored without a word), each with the closest setting's variable, if one is close."""
    import difflib

    known = {name.upper() for _, names, _ in variables() for name in names}
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


__all__ = [
    "BY_NAME",
    "GROUPS",
    "ConsolidationSettings",
    "DatabaseSettings",
    "EmbeddingSettings",
    "ExportSettings",
    "IngestSettings",
    "LLMRuntimeName",
    "LlamaCppRepack",
    "LlamaCppServerKind",
    "LlamaCppSettings",
    "LlmSettings",
    "OpenAISettings",
    "OrchestrationSettings",
    "RaySettings",
    "SearchSettings",
    "ServeSettings",
    "Settings",
    "describe_invalid",
    "environment_names",
    "get_settings",
    "setting_default",
    "unknown_variables",
    "variables",
]
