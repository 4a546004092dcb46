"""What every group of settings shares: read from the environment and `.env`, each variable
named as it always was (``SLOWWAVE_SERVE_PORT`` is ``settings.serve.port``)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict


def group_config(prefix: str) -> SettingsConfigDict:
    """A group's configuration: its variables start with ``prefix``, unless a field names its
    own (``validation_alias``: a name kept from before the settings were grouped)."""
    return SettingsConfigDict(
        env_prefix=prefix,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )
