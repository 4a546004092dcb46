"""Settings: ingestion and exports."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class IngestSettings(BaseSettings):
    """Ingestion: batches, connections, segmentation into episodes, summaries, message size."""

    model_config = group_config("SLOWWAVE_")

    batch_rows: int = Field(
        validation_alias=AliasChoices("SLOWWAVE_INGEST_BATCH_ROWS"),
        default=20000,
        ge=1,
        description="Transcript rows read and validated per batch.",
    )
    connections: int = Field(
        validation_alias=AliasChoices("SLOWWAVE_INGEST_CONNECTIONS"),
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
    max_message_chars: int = Field(
        default=20000, ge=1, description="Longer messages are rejected at ingest."
    )


class ExportSettings(BaseSettings):
    """Parquet exports: where, and what."""

    model_config = group_config("SLOWWAVE_EXPORT_")

    to: str | None = Field(
        default=None,
        description="Where the `export` deployment (after each nightly run) and `slowwave "
        "export` without `--to` write Parquet: a folder or an `s3://bucket/prefix` URL "
        "(credentials from the AWS variables, never in the URL).",
    )
    what: str = Field(
        default="facts,versions,decisions,runs",
        description="What the `export` deployment writes: of facts, versions, decisions, runs "
        "and episodes (the conversations' text: only when named).",
    )
