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
the TypeScript one) raise the class of the code they are answered with. The classes are defined
in ``slowwave_client.errors`` (the client installs without the server, and shares them), read
by every layer through ``slowwave.models.errors``; this module is their public name.
"""

from __future__ import annotations

from slowwave_client.errors import *  # noqa: F403  (every class, as its __all__ names them)
from slowwave_client.errors import __all__ as __all__
from slowwave_client.errors import by_code, classes, from_answer  # noqa: F401  (public, not in __all__)
