"""An asyncio event loop on a thread of its own, for runtimes whose clients are async.

The consolidation scheduler is synchronous and wants one ``concurrent.futures.Future`` per
request, resolved as soon as that request's answer is back. Async clients (vLLM's
``AsyncLLM``, ``httpx.AsyncClient``) keep many requests in flight on one loop; this gives
them that loop without the caller having to be async, in a Ray actor or in a plain process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """A running event loop; ``submit`` schedules a coroutine on it from any thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coroutine`` on the loop; cancelling the future cancels it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return self.submit(coroutine).result()

    def close(self, timeout_s: float = 30.0) -> None:
        """Cancel what is still running, stop the loop and join its thread (a task that
        ignores its cancellation for ``timeout_s`` is left behind on a daemon thread)."""
        if self.loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(TimeoutError):
                self.submit(cancel_all()).result(timeout=timeout_s)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.loop.close()
