"""Query embeddings of concurrent requests, computed together.

A server's requests each need one query embedded. ``EmbeddingBatcher.embed`` hands the text to
one worker thread and waits; the worker takes whatever is waiting (up to ``max_batch``) and
embeds it in one call. No request waits on purpose: while one batch is computed the next
gathers, so a batch is as large as the load makes it, and the event loop never runs the model.
Queries go first: the texts of ``embed_many`` (a server's episodes, embedded in the background)
fill what room a batch has left, so a query waits behind at most the batch being computed.
"""

from __future__ import annotations

import itertools
import queue
import threading
from concurrent.futures import Future

import numpy as np

from slowwave.models.embedding.base import Embedder

_STOP, _QUERY, _BULK = 0, 1, 2  # the order the worker takes them in
_Item = tuple[int, int, str | None, "Future[np.ndarray] | None"]  # priority, order, text, future


class EmbeddingBatcher:
    def __init__(self, embedder: Embedder, *, max_batch: int = 64) -> None:
        self._embedder = embedder
        self._max_batch = max_batch
        self._queue: queue.PriorityQueue[_Item] = queue.PriorityQueue()
        self._order = itertools.count()  # first come, first served within a priority
        self._thread = threading.Thread(target=self._loop, name="slowwave-embed", daemon=True)
        self._thread.start()
        self.batches = 0  # how many calls of the model, and how many texts: batching at work
        self.texts = 0

    def embed(self, text: str, timeout: float | None = 60.0) -> np.ndarray:
        """``text``'s embedding, computed with whatever else is waiting."""
        future: Future[np.ndarray] = Future()
        self._queue.put((_QUERY, next(self._order), text, future))
        return future.result(timeout=timeout)

    def embed_many(self, texts: list[str], timeout: float | None = 600.0) -> list[np.ndarray]:
        """Each text's embedding, in batches with whatever else is waiting; the queries that
        come meanwhile go first (a long list holds a query back by one batch at most)."""
        futures: list[Future[np.ndarray]] = []
        for text in texts:
            future: Future[np.ndarray] = Future()
            self._queue.put((_BULK, next(self._order), text, future))
            futures.append(future)
        return [f.result(timeout=timeout) for f in futures]

    def _loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self._max_batch and batch[-1][0] != _STOP:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if batch[-1][0] == _STOP:
                self._refuse(batch[:-1])
                return
            self._run([(text, future) for _, _, text, future in batch])  # type: ignore[misc]

    def _refuse(self, batch: list[_Item]) -> None:
        """Closed: what waits is told so, and not computed."""
        while True:
            for _, _, _, future in batch:
                if future is not None:
                    future.set_exception(RuntimeError("the embedding batcher was closed"))
            try:
                batch = [self._queue.get_nowait()]
            except queue.Empty:
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
        self._queue.put((_STOP, next(self._order), None, None))
        self._thread.join(timeout=10)
