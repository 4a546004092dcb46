"""Every error a caller of slowwave can act on, each with a stable ``code`` and the HTTP
``status`` it means.

    import slowwave.errors

    try:
        memory.search("where does Dana live?", "dana")
    except slowwave.errors.NotFound:
        ...
    except slowwave.errors.SlowwaveError as exc:
        print(exc.code, exc.status, exc)

The server answers an error as ``{"error": {"status", "code", "message"}}`` with that status
(and ``Retry-After`` where ``retry_after_s`` is set); the CLI prints ``error [code]: message``
and exits 1; an MCP tool call fails with ``code: message``. The classes are defined in
``slowwave.models.errors``, below every layer that raises them; this module is their public
name.
"""

from __future__ import annotations

from slowwave.models.errors import (
    AmbiguousId,
    Busy,
    Conflict,
    DatabaseUnavailable,
    EmbeddedPostgresError,
    EmbeddingDimensionMismatch,
    EmptySource,
    ExportError,
    Forbidden,
    Gone,
    HistoryError,
    InvalidConversationId,
    InvalidRequest,
    InvalidTenant,
    MalformedAnswer,
    MappingError,
    MigrationError,
    ModelNotPrepared,
    NotFound,
    RateLimited,
    RuntimeNotAvailable,
    RuntimeUnreachable,
    SearchError,
    ServerError,
    SlowwaveError,
    SourceError,
    TooLarge,
    Unauthorized,
    UnknownConversation,
    UnknownFact,
    UnknownId,
    UnknownKey,
)

__all__ = [
    "AmbiguousId",
    "Busy",
    "Conflict",
    "DatabaseUnavailable",
    "EmbeddedPostgresError",
    "EmbeddingDimensionMismatch",
    "EmptySource",
    "ExportError",
    "Forbidden",
    "Gone",
    "HistoryError",
    "InvalidConversationId",
    "InvalidRequest",
    "InvalidTenant",
    "MalformedAnswer",
    "MappingError",
    "MigrationError",
    "ModelNotPrepared",
    "NotFound",
    "RateLimited",
    "RuntimeNotAvailable",
    "RuntimeUnreachable",
    "SearchError",
    "ServerError",
    "SlowwaveError",
    "SourceError",
    "TooLarge",
    "Unauthorized",
    "UnknownConversation",
    "UnknownFact",
    "UnknownId",
    "UnknownKey",
]


def by_code() -> dict[str, type[SlowwaveError]]:
    """The most specific public class for each code (what a client raises for an answer)."""
    table: dict[str, type[SlowwaveError]] = {}
    for name in __all__:
        cls = globals()[name]
        table.setdefault(cls.code, cls)
    return table
