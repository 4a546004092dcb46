"""Settings: shards, schedules and the operator's ports."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class OrchestrationSettings(BaseSettings):
    """How runs are cut into shards and scheduled, and the ports of the operator's servers."""

    model_config = group_config("SLOWWAVE_")

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
    shard_retry_delay_seconds: float = Field(
        default=15.0,
        gt=0,
        description="Wait before a shard that failed on a transient error (a dropped "
        "connection, a restarted database, an engine that crashed) is tried again, doubled "
        "at each of its four retries: 15, 30, 60 and 120 s by default, long enough for a "
        "crashed engine's actor to restart (about 75 s for the CPU model, minutes for a large "
        "model on a GPU).",
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
