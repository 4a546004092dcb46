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


def names_of(group: type[BaseSettings], name: str, field: FieldInfo) -> tuple[str, ...]:
    """The variables a group's field is read from, as it declares them: its aliases
    (``SLOWWAVE_DATABASE_URL``, ``DATABASE_URL``), else its group's prefix and its name."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(c) for c in alias.choices)
    return (f"{group.model_config.get('env_prefix', '')}{name}".upper(),)


# a setting by its variable's name less ``SLOWWAVE_`` (lower case) -> (group, field): read from
# the groups' declarations (the first variable each field names), not written a second time
BY_NAME: dict[str, tuple[str, str]] = {
    names_of(cls, name, field)[0].removeprefix("SLOWWAVE_").lower(): (group, name)
    for group, cls in GROUPS.items()
    for name, field in cls.model_fields.items()
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
        for name, field in cls.model_fields.items():
            yield f"{group}.{name}", names_of(cls, name, field), field


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
