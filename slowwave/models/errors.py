"""The errors every layer raises. Every code is a class of ``slowwave_client.errors`` (the
client installs without the server, and raises the same classes from the server's answers);
the classes only the server raises live here, each under the class of the code it keeps (a
client answered ``not_found`` raises ``NotFound``, which they all are). The public list is
``slowwave.errors``."""

from __future__ import annotations

from slowwave_client import errors as _client
from slowwave_client.errors import *  # noqa: F403  (every class, as its __all__ names them)
from slowwave_client.errors import (
    DatabaseUnavailable,
    HistoryError,
    NotFound,
    SlowwaveError,
)
from slowwave_client.errors import from_answer as from_answer


# ── raised by slowwave.tasks.ids
class UnknownId(NotFound):
    """No id of the kind starts with what was typed."""


# ── raised by slowwave.tasks.history
class UnknownFact(NotFound, HistoryError):
    """No fact of this id (for this tenant: another tenant's fact is no fact)."""

    code = "not_found"
    status = 404


# ── raised by slowwave.tasks.search
class UnknownConversation(NotFound):
    """A command named a conversation with no episode and no fact."""


# ── raised by slowwave.tasks.keys
class UnknownKey(NotFound):
    """A key that cannot be revoked as asked: none, or more than one, answers to the name."""


# ── raised by slowwave.sql.db.embedded
class EmbeddedPostgresError(DatabaseUnavailable):
    """The embedded server could not be started or stopped."""


# the server's own classes; with the client's, the whole list
SERVER_ONLY = [
    "EmbeddedPostgresError",
    "UnknownConversation",
    "UnknownFact",
    "UnknownId",
    "UnknownKey",
]
__all__ = [*SERVER_ONLY, *_client.__all__]


def classes() -> list[type[SlowwaveError]]:
    """Every public error class, the client's and the server's own: the one list of codes
    (the error reference page is generated from it)."""
    return sorted(
        [*_client.classes(), *(globals()[n] for n in SERVER_ONLY)], key=lambda c: c.__name__
    )


def by_code() -> dict[str, type[SlowwaveError]]:
    """The class of each code: the client's (the server's own keep their parents' codes)."""
    return _client.by_code(classes())
