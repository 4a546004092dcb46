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
and exits 1; an MCP tool call fails with ``code: message``; the clients (``slowwave.Client``,
the TypeScript one) raise the class of the code they are answered with. A class of each code is
defined in ``slowwave_client.errors`` (the client installs without the server, and shares them);
the classes only the server raises, each narrowing one of those codes in process, in
``slowwave.models.errors``, which every layer reads; this module is their public name.
"""

from __future__ import annotations

# the server's own classes (each narrows one of the client's codes), and the list's functions
from slowwave.models.errors import (  # noqa: F401  (public: named by __all__, or documented)
    SERVER_ONLY,
    EmbeddedPostgresError,
    UnknownConversation,
    UnknownFact,
    UnknownId,
    UnknownKey,
    by_code,
    classes,
    from_answer,
)
from slowwave_client.errors import *  # noqa: F403  (every class, as its __all__ names them)
from slowwave_client.errors import __all__ as _client_all

__all__ = [*_client_all, *SERVER_ONLY]
