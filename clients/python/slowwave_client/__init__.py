"""slowwave's Python client: the memory a ``slowwave serve`` holds, over HTTP, with
``slowwave.Memory``'s methods and answers typed as the server's schemas.

    from slowwave_client import Client

    with Client() as memory:  # SLOWWAVE_BASE_URL, SLOWWAVE_API_KEY
        memory.record("dana", [{"role": "user", "content": "I moved to Manchester."}])
        print(memory.search("where does Dana live?", "dana").memories[0].text)

It installs with httpx and pydantic alone (``pip install slowwave-client``); with the server
installed, the same classes are ``slowwave.Client`` and ``slowwave.AsyncClient``, and the
errors are ``slowwave.errors``' own.
"""

from __future__ import annotations

from slowwave_client import errors, types
from slowwave_client.client import DEFAULT_BASE_URL, AsyncClient, Client
from slowwave_client.errors import SlowwaveError

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_BASE_URL",
    "AsyncClient",
    "Client",
    "SlowwaveError",
    "__version__",
    "errors",
    "types",
]
