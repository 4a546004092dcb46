"""slowwave: nightly consolidation of agents' episodic memory into audited, bitemporal semantic
memory on Postgres + pgvector.

The public API is what this module exports (``__all__``); everything under ``slowwave.flows``,
``slowwave.tasks``, ``slowwave.models`` and ``slowwave.sql`` is internal and may change. The
exports load on first use: ``import slowwave`` loads no Prefect, torch or Ray, and neither does a
Ray worker or a child process that imports one stage.

    import slowwave

    with slowwave.Memory() as memory:
        memory.record("conv-26", messages)
        hits = memory.search("where does Caroline live?", "conv-26")
    summary = slowwave.consolidate()

    with slowwave.Client("sw_…", "http://127.0.0.1:8765") as memory:  # the same, over HTTP
        hits = memory.search("where does Caroline live?", "conv-26")
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "Memory",
    "Settings",
    "SlowwaveError",
    "__version__",
    "backfill",
    "consolidate",
    "export",
    "forget",
    "ingest",
    "revert",
]

# export → the module that defines it, imported on first use
_LAZY = {
    "AsyncClient": "slowwave_client",
    "Client": "slowwave_client",
    "Memory": "slowwave.memory",
    "Settings": "slowwave.models.settings",
    "SlowwaveError": "slowwave.errors",
    "backfill": "slowwave.api",
    "consolidate": "slowwave.api",
    "export": "slowwave.api",
    "forget": "slowwave.api",
    "ingest": "slowwave.api",
    "revert": "slowwave.api",
}

if TYPE_CHECKING:
    from slowwave.api import backfill, consolidate, export, forget, ingest, revert
    from slowwave.errors import SlowwaveError
    from slowwave.memory import Memory
    from slowwave.models.settings import Settings
    from slowwave_client import AsyncClient, Client


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slowwave' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
