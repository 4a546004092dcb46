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

from importlib import import_module
from typing import TYPE_CHECKING, Any

from slowwave_client import errors
from slowwave_client.errors import SlowwaveError

if TYPE_CHECKING:
    from slowwave_client import types
    from slowwave_client.client import DEFAULT_BASE_URL, AsyncClient, Client

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

# The client and the schemas' models are imported when first named: the errors are all the
# server and the commands need of this package, and building the models (and importing httpx)
# was a fifth of a command's start (`slowwave settings`: 0.81 s, 0.66 s without, two cores)
_LAZY = {
    "DEFAULT_BASE_URL": "slowwave_client.client",
    "AsyncClient": "slowwave_client.client",
    "Client": "slowwave_client.client",
}


def __getattr__(name: str) -> Any:
    if name == "types":
        value: Any = import_module("slowwave_client.types")
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'slowwave_client' has no attribute {name!r}")
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
