"""Settings: `slowwave serve` and `slowwave mcp`."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class ServeSettings(BaseSettings):
    """`slowwave serve` and `slowwave mcp`: address, limits, pool."""

    model_config = group_config("SLOWWAVE_SERVE_")

    host: str = Field(
        default="127.0.0.1",
        description="Address `slowwave serve` binds; another than a loopback address needs keys "
        "(`slowwave keys create`).",
    )
    port: int = Field(
        default=8765, ge=1, le=65535, description="Port of `slowwave serve` (REST and MCP)."
    )
    pool_size: int = Field(
        default=8,
        ge=1,
        description="Database connections one server process holds: requests beyond them wait "
        "up to `serve_pool_wait_s`.",
    )
    pool_wait_s: float = Field(
        default=0.5,
        gt=0,
        description="How long a request waits for a free database connection before it is "
        "answered 503 with Retry-After (a fast refusal, not a queue without end).",
    )
    statement_timeout_ms: int = Field(
        default=5000,
        ge=1,
        description="A server's statement timeout: one slow query cannot hold a connection longer.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest request body the server reads."
    )
    default_conversation: str | None = Field(
        default=None,
        min_length=1,
        description="The conversation a call that names none is about (an MCP client that "
        "knows what was said, not where to file it), when its key names none "
        "(`slowwave keys create --conversation`). Unset: such a call is refused.",
    )
    max_messages: int = Field(
        default=1000, ge=1, description="Most messages one record request carries."
    )
    max_query_chars: int = Field(
        default=2000, ge=1, description="Longest search query the server takes."
    )
    max_k: int = Field(default=100, ge=1, description="Most results one search returns.")
    rate_per_s: float = Field(
        default=50.0,
        gt=0,
        description="Requests a second one key may make, per server process (a token bucket; "
        "replicas count apart): beyond it, 429 with Retry-After.",
    )
    rate_burst: int = Field(
        default=100, ge=1, description="Requests one key may make at once before the rate holds."
    )
    embed_batch: int = Field(
        default=64,
        ge=1,
        description="Most search queries embedded together: concurrent requests share one call "
        "of the embedding model.",
    )
