"""The root of every error a user of slowwave can act on, and the errors every surface shares:
the server's (raised in process), the Python client's (raised from the server's answer) — one
set of classes, so ``except slowwave.errors.NotFound`` holds around either.

``SlowwaveError`` is what to catch around slowwave's API. Each error carries a stable ``code``
(what a program tests) and the HTTP ``status`` it means; the server answers with both in one
handler, the CLI prints them as one line, MCP returns the same code and message. A class names
its usual code; an instance may name a narrower one (``InvalidRequest("…", code="invalid_k")``),
which stays stable the same way. ``retry_after_s`` says when a retry may succeed (a busy pool, a
database coming back, a rate limit).

Each subclass defined elsewhere keeps the built-in base it had (``ValueError``,
``RuntimeError``, ``ConnectionError``), so code that caught that still does. Every code is a
class here (the client installs without the server, and raises them from answers); the classes
only the server raises, each narrowing one of these codes in process (``UnknownFact`` is a
``not_found``), live in the server (``slowwave.models.errors``). The whole list is
``slowwave.errors``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar


class SlowwaveError(Exception):
    """Something a user can act on: a database out of reach, a model not set up, a run that
    cannot be reverted as asked, a setting that does not hold."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400
    retry_after_s: float | None = None
    details: dict[str, Any] | None = None  # more the answer carries (a tombstone, say)

    def __init__(
        self, message: str = "", *, code: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code  # type: ignore[misc]  # an instance's narrower code
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s

    @property
    def message(self) -> str:
        return str(self)


class InvalidRequest(SlowwaveError, ValueError):
    """A request that cannot be done as asked: a value out of range, a field missing."""

    code = "invalid_request"
    status = 422


class InvalidK(InvalidRequest):
    """A number of results (`k`, `memories`) outside what the server answers."""

    code = "invalid_k"


class InvalidBudget(InvalidRequest):
    """A token budget (`budget_tokens`, `memory_tokens`) outside what the server answers."""

    code = "invalid_budget"


class InvalidLimit(InvalidRequest):
    """A page size (`limit`) outside what the server answers."""

    code = "invalid_limit"


class ReasonRequired(InvalidRequest):
    """A forget, a revert or a release without the reason its record keeps."""

    code = "reason_required"


class ConversationRequired(InvalidRequest):
    """No conversation named, by the request, the key or `SLOWWAVE_SERVE_DEFAULT_CONVERSATION`."""

    code = "conversation_required"


class NothingToAdd(InvalidRequest):
    """A record with neither messages nor a text to remember."""

    code = "nothing_to_add"


class InvalidBody(InvalidRequest):
    """A body the server cannot read at all."""

    code = "invalid_body"
    status = 400


class NulCharacter(InvalidRequest):
    """A path or query that holds a NUL character."""

    code = "nul_character"
    status = 400


class MethodNotAllowed(SlowwaveError):
    """A method the path does not take (the answer's `Allow` names those it does)."""

    code = "method_not_allowed"
    status = 405


class InternalError(SlowwaveError):
    """The server failed on the request; its log holds the incident id the message names."""

    code = "internal"
    status = 500


class NotFound(SlowwaveError, LookupError):
    """No such thing for this caller: a conversation another tenant has is not found either."""

    code = "not_found"
    status = 404


class NoRoute(NotFound):
    """No route of the server answers this path."""

    code = "no_route"


class NoProfile(NotFound):
    """The conversation has no profile yet (runs write them with `SLOWWAVE_PROFILES=true`)."""

    code = "no_profile"


class Gone(SlowwaveError, LookupError):
    """It was there and was forgotten on request: the tombstone says when."""

    code = "forgotten"
    status = 410


class Unauthorized(SlowwaveError, PermissionError):
    """No key, or a key that is not valid (unknown, revoked)."""

    code = "unauthorized"
    status = 401


class Forbidden(SlowwaveError, PermissionError):
    """A valid key whose scope or tenant does not allow this."""

    code = "forbidden"
    status = 403


class TooLarge(SlowwaveError, ValueError):
    """A request over a limit of the server's (messages, body bytes)."""

    code = "too_large"
    status = 413


class TooManyMessages(TooLarge):
    """More messages in one request than `SLOWWAVE_SERVE_MAX_MESSAGES`."""

    code = "too_many_messages"


class RateLimited(SlowwaveError):
    """A key that asked faster than its rate: retry after ``retry_after_s``."""

    code = "rate_limited"
    status = 429


class Busy(SlowwaveError):
    """Every database connection is in use: retry shortly."""

    code = "busy"
    status = 503
    retry_after_s = 1.0


class Conflict(SlowwaveError):
    """The state does not allow it now (a run not revertible as asked, an id that names two)."""

    code = "conflict"
    status = 409


class NoFacts(Conflict):
    """The conversation has no active facts to write a profile from."""

    code = "no_facts"


# ── raised by slowwave.models.llm.base
class RuntimeUnreachable(SlowwaveError, ConnectionError):
    """The runtime cannot answer anything now (its engine died, its endpoint is down).

    Transient: the run is retried and no chunk is charged an attempt for it.
    """

    code = "model_unreachable"
    status = 503
    retry_after_s = 5.0


class RuntimeNotAvailable(SlowwaveError, RuntimeError):
    """The selected runtime cannot be used on this installation."""

    code = "model_unavailable"
    status = 503


# ── raised by slowwave.models.llm.weights
class ModelNotPrepared(SlowwaveError, RuntimeError):
    """The model is not there, or not what the catalog pins."""

    code = "model_not_prepared"
    status = 503


# ── raised by slowwave.models.embedding.base
class EmbeddingDimensionMismatch(SlowwaveError, ValueError):
    """The embedding model's dimension is not the schema's."""

    code = "embedding_dimension_mismatch"
    status = 409


# ── raised by slowwave.models.processes
class ServerError(SlowwaveError, RuntimeError):
    """A local server exited or did not become healthy in time, or did not stop."""

    code = "local_server_failed"
    status = 503


# ── raised by slowwave.models.tenant
class InvalidTenant(SlowwaveError, ValueError):
    """A tenant name slowwave does not accept."""

    code = "invalid_tenant"
    status = 422


class InvalidConversationId(SlowwaveError, ValueError):
    """A conversation id slowwave cannot store."""

    code = "invalid_conversation_id"
    status = 422


# ── raised by slowwave.tasks.ids
class AmbiguousId(SlowwaveError, LookupError):
    """More than one id of the kind starts with what was typed."""

    code = "ambiguous_id"
    status = 409


# ── raised by slowwave.tasks.history
class HistoryError(SlowwaveError, ValueError):
    """An operation on history that cannot be done as asked (no such fact, not invalidated)."""

    code = "history_error"
    status = 409


# ── raised by slowwave.tasks.calibrate
class MalformedAnswer(SlowwaveError, ValueError):
    """The model's answer is not a valid ``ConsolidationOutput``."""

    code = "malformed_answer"
    status = 502


class ProfileNotWritten(MalformedAnswer):
    """The model did not write the profile asked for; the stored one (if any) is kept."""

    code = "profile_not_written"


# ── raised by slowwave.tasks.search
class SearchError(InvalidRequest):
    """A query that cannot be searched: empty, not text, or longer than the server reads."""

    code = "invalid_query"
    status = 422


# ── raised by slowwave.tasks.export
class ExportError(SlowwaveError):
    """An export target or request slowwave cannot take."""

    code = "export_refused"
    status = 422


class NoExportTarget(ExportError):
    """No export named, and `SLOWWAVE_EXPORT_TO` not set where this runs."""

    code = "no_export_target"


# ── raised by slowwave.tasks.ingest.formats
class SourceError(SlowwaveError, ValueError):
    """A source that cannot be read as asked: no format to tell, or the wrong one."""

    code = "invalid_source"
    status = 422


# ── raised by slowwave.tasks.ingest.sources
class EmptySource(SlowwaveError, FileNotFoundError):
    """A folder or glob with no transcript file in it."""

    code = "empty_source"
    status = 404


# ── raised by slowwave.tasks.ingest.columnar
class MappingError(SlowwaveError, ValueError):
    """A column mapping that cannot be applied to a source."""

    code = "invalid_mapping"
    status = 422


# ── raised by slowwave.sql.db.database
class DatabaseUnavailable(SlowwaveError, RuntimeError):
    """Postgres cannot be reached, or it cannot serve slowwave (no pgvector)."""

    code = "database_unavailable"
    status = 503
    retry_after_s = 5.0


# ── raised by slowwave.sql.db.migrate
class MigrationError(SlowwaveError, RuntimeError):
    """The database's schema history does not match this version of slowwave (a migration
    missing: `slowwave db migrate`; or one this version does not know)."""

    code = "schema_mismatch"
    status = 503


# ── raised by the client (slowwave_client)
class ServerUnreachable(SlowwaveError, ConnectionError):
    """The client could not reach the server, or it gave no answer in time (after the
    client's retries): nothing says whether a request that was sent was done."""

    code = "server_unreachable"
    status = 503


def classes() -> list[type[SlowwaveError]]:
    """Every public error class: the one list of codes (the error reference page and the
    TypeScript client's classes are generated from it)."""
    return [globals()[name] for name in sorted(__all__)]


def by_code(among: Iterable[type[SlowwaveError]] | None = None) -> dict[str, type[SlowwaveError]]:
    """The class of each code (what a client raises for an answer), of ``classes()`` or of
    ``among``. A code is one class's: a subclass that keeps its parent's code (the server's
    ``UnknownFact``, ``not_found``) only narrows it in process, and the wire knows the parent."""
    table: dict[str, type[SlowwaveError]] = {}
    for cls in classes() if among is None else among:
        inherited = {base.code for base in cls.__mro__[1:] if issubclass(base, SlowwaveError)}
        if cls.code not in inherited:
            table[cls.code] = cls
    return table


def from_answer(status: int, body: object, retry_after_s: float | None = None) -> SlowwaveError:
    """The error a server's answer says: its body's ``{"error": {"status", "code",
    "message"}}`` as the class of its code (else of its status), with the code as sent and
    ``Retry-After``; an answer without that body (a proxy's) as the class of its status."""
    detail = body.get("error") if isinstance(body, dict) else None
    code = detail.get("code") if isinstance(detail, dict) else None
    message = detail.get("message") if isinstance(detail, dict) else None
    codes = by_code()
    cls = codes.get(code) if isinstance(code, str) else None
    if cls is None:
        by_status = {c.status: c for c in reversed(list(codes.values()))}
        cls = BY_STATUS.get(status) or by_status.get(status) or SlowwaveError
    text = message if isinstance(message, str) else f"the server answered {status}"
    error = cls(text, code=code if isinstance(code, str) else None, retry_after_s=retry_after_s)
    if isinstance(detail, dict):
        error.details = {k: v for k, v in detail.items() if k not in {"status", "code", "message"}}
    return error


# the class an answer with no known code is, by its status
BY_STATUS: dict[int, type[SlowwaveError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: TooLarge,
    422: InvalidRequest,
    429: RateLimited,
    503: Busy,
}

__all__ = [
    "AmbiguousId",
    "Busy",
    "Conflict",
    "ConversationRequired",
    "DatabaseUnavailable",
    "EmbeddingDimensionMismatch",
    "EmptySource",
    "ExportError",
    "Forbidden",
    "Gone",
    "HistoryError",
    "InternalError",
    "InvalidBody",
    "InvalidBudget",
    "InvalidConversationId",
    "InvalidK",
    "InvalidLimit",
    "InvalidRequest",
    "InvalidTenant",
    "MalformedAnswer",
    "MappingError",
    "MethodNotAllowed",
    "MigrationError",
    "ModelNotPrepared",
    "NoExportTarget",
    "NoFacts",
    "NoProfile",
    "NoRoute",
    "NotFound",
    "NothingToAdd",
    "NulCharacter",
    "ProfileNotWritten",
    "RateLimited",
    "ReasonRequired",
    "RuntimeNotAvailable",
    "RuntimeUnreachable",
    "SearchError",
    "ServerError",
    "ServerUnreachable",
    "SlowwaveError",
    "SourceError",
    "TooLarge",
    "TooManyMessages",
    "Unauthorized",
]
