"""Query embeddings of concurrent requests, computed together.

A server's requests each need one query embedded. ``EmbeddingBatcher.embed`` hands the text to
one worker thread and waits; the worker takes whatever is waiting (up to ``max_batch``) and
embeds it in one call. No request waits on purpose: while one batch is computed the next
gathers, so a batch is as large as the load makes it, and the event loop never runs the model.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

import numpy as np

from slowwave.models.embedding.base import Embedder


class EmbeddingBatcher:
    def __init__(self, embedder: Embedder, *, max_batch: int = 64) -> None:
        self._embedder = embedder
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[tuple[str, Future[np.ndarray]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="slowwave-embed", daemon=True)
        self._thread.start()
        self.batches = 0  # how many calls of the model, and how many texts: batching at work
        self.texts = 0

    def embed(self, text: str, timeout: float | None = 60.0) -> np.ndarray:
        """``text``'s embedding, computed with whatever else is waiting."""
        future: Future[np.ndarray] = Future()
        self._queue.put((text, future))
        return future.result(timeout=timeout)

    def embed_many(self, texts: list[str], timeout: float | None = 600.0) -> list[np.ndarray]:
        """Each text's embedding, in batches with whatever else is waiting (queries among
        them: a long list does not hold a query back by more than a batch)."""
        futures: list[Future[np.ndarray]] = []
        for text in texts:
            future: Future[np.ndarray] = Future()
            self._queue.put((text, future))
            futures.append(future)
        return [f.result(timeout=timeout) for f in futures]

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list[tuple[str, Future[np.ndarray]]]) -> None:
        try:
            vectors = self._embedder.embed([text for text, _ in batch])
        except BaseException as exc:  # every waiter hears of it, the worker goes on
            for _, future in batch:
                future.set_exception(exc)
            return
        self.batches += 1
        self.texts += len(batch)
        for (_, future), vector in zip(batch, vectors, strict=True):
            future.set_result(np.asarray(vector))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
