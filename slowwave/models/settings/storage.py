"""Settings: the database: where it is and how it is reached."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class DatabaseSettings(BaseSettings):
    """The database: where it is and how it is reached."""

    model_config = group_config("SLOWWAVE_")

    url: SecretStr | None = Field(
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
