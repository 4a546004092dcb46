"""Model runtimes started ahead of the flow that uses them, in the same process.

`slowwave backfill` and `slowwave consolidate` run their flow in the terminal's process. Before
the flow starts, they often wait seconds for a temporary Prefect API (7 s on two cores); the
flow then starts the language model and loads the embedding model, one after the other (2 s and
4 s for the quick start's). ``started_ahead`` starts both on threads meanwhile. The flow takes
them from here (``take``) when its settings are the ones they were
started with, and closes them as its own; whatever no flow took is closed when the block ends.

A start ahead that failed is dropped: the flow starts that runtime again itself, so the error
is the flow's, in its log and the UI. Only llama.cpp's server and a local embedding model start
ahead: runtimes on Ray are left to the flow (it connects to the cluster), vLLM to the main
thread it expects, and the OpenAI-compatible and replay runtimes have nothing to start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from slowwave.models.embedding import load_embedder
from slowwave.models.llm import load_model
from slowwave.models.settings import Settings


@dataclass
class _Ahead:
    settings: Settings
    runtimes: dict[str, Future[Any]]
    taken: set[str] = field(default_factory=set)


_ahead: _Ahead | None = None
_lock = threading.Lock()


def starts_ahead(settings: Settings) -> dict[str, Callable[[Settings], Any]]:
    """What ``started_ahead`` starts for these settings: llama.cpp's server, and the embedding
    model when it runs in this process."""
    starts: dict[str, Callable[[Settings], Any]] = {}
    if settings.llm.runtime == "llamacpp":
        starts["model"] = load_model
    if settings.embedding.actors_per_node == 0:
        starts["embedder"] = load_embedder
    return starts


@contextmanager
def started_ahead(
    settings: Settings, starts: dict[str, Callable[[Settings], Any]] | None = None
) -> Iterator[None]:
    """Start the runtimes of ``starts`` (default ``starts_ahead(settings)``), each on a thread
    of its own (llama.cpp's server loads in its own process while the embedding model loads
    here), for a flow this process runs within the block; close those it did not take."""
    global _ahead
    starts = starts_ahead(settings) if starts is None else starts
    if not starts:
        yield
        return
    pool = ThreadPoolExecutor(len(starts), thread_name_prefix="slowwave-start-ahead")
    ahead = _Ahead(settings, {name: pool.submit(start, settings) for name, start in starts.items()})
    with _lock:
        _ahead = ahead
    try:
        yield
    finally:
        with _lock:
            if _ahead is ahead:
                _ahead = None
            untaken = [f for name, f in ahead.runtimes.items() if name not in ahead.taken]
        pool.shutdown(wait=True)  # a start under way ends first, then closes
        for future in untaken:
            if future.exception() is None:
                future.result().close()


def take(name: str, settings: Settings) -> Any:
    """The runtime of that name (``model``, ``embedder``) started ahead for these settings, now
    the caller's to close, once it is ready; None when none was, another caller took it, or its
    start failed."""
    with _lock:
        ahead = _ahead
        if ahead is None or name in ahead.taken or name not in ahead.runtimes:
            return None
        if ahead.settings != settings:
            return None
        ahead.taken.add(name)
        future = ahead.runtimes[name]
    try:
        return future.result()
    except Exception:  # the flow starts it again, and reports its error
        return None


def started_ahead_for(name: str) -> bool:
    """Whether a runtime of that name (``model``, ``embedder``) waits to be taken."""
    with _lock:
        return _ahead is not None and name in _ahead.runtimes and name not in _ahead.taken
