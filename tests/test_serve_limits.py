"""The server's limits, in process against the test database: a busy pool answers 503 at once,
a slow statement is cut by the timeout, and the embedding of concurrent queries is batched."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.embedding.batching import EmbeddingBatcher
from slowwave.models.errors import Busy
from slowwave.models.settings import Settings
from slowwave.service import Service
from slowwave.sql.db import Database


def test_a_busy_pool_answers_503_with_retry_after_at_once_and_a_slow_statement_is_cut(
    database: Database, settings: Settings, embedder: Embedder
) -> None:
    db = Database(settings, pool_size=1, pool_wait_s=0.2, statement_timeout_ms=300).open()
    service = Service(settings, db, embedder, background=True)  # as a server holds it
    try:
        with service.connection() as held:  # the one connection, taken
            started = time.monotonic()
            with pytest.raises(Busy) as busy, service.connection():
                pass
            waited = time.monotonic() - started
            with pytest.raises(psycopg.errors.QueryCanceled):
                held.execute("SELECT pg_sleep(2)")
        assert busy.value.status == 503 and busy.value.retry_after_s == 1
        assert busy.value.code == "busy"
        assert 0.15 <= waited < 1.5
    finally:
        service.close()
        db.close()


class CountingEmbedder:
    """Counts the calls; each one takes a while, as a model does."""

    dim = 4

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        time.sleep(0.05)
        with self.lock:
            self.calls.append(len(texts))
        return np.array([[len(t), 0, 0, 1] for t in texts], dtype=np.float32)

    def close(self) -> None:
        pass


def test_a_server_pool_holds_its_connections_before_the_first_request(
    database: Database, settings: Settings
) -> None:
    def backends(conn: psycopg.Connection) -> int:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0])

    with database.raw_connection(autocommit=True) as watcher:
        before = backends(watcher)
        held = Database(settings, pool_size=4, pool_wait_s=0.2, hold=True).open()
        lazy = Database(settings, pool_size=4, pool_wait_s=0.2).open()
        try:
            held.fill()  # what `slowwave serve` does before it answers /readyz
            lazy.fill()
            assert backends(watcher) - before == 4 + 1  # all four held; the lazy pool one
        finally:
            held.close()
            lazy.close()


def test_concurrent_queries_are_embedded_together_and_each_gets_its_own_vector() -> None:
    model = CountingEmbedder()
    batcher = EmbeddingBatcher(model, max_batch=64)  # type: ignore[arg-type]
    try:
        texts = ["x" * n for n in range(1, 33)]
        with ThreadPoolExecutor(max_workers=32) as pool:
            vectors = list(pool.map(batcher.embed, texts))
    finally:
        batcher.close()
    assert [int(v[0]) for v in vectors] == list(range(1, 33))
    assert sum(model.calls) == 32 and len(model.calls) <= 4  # not 32 calls: batches


class GatedEmbedder:
    """Embeds a text as its length; each call waits for the test to let it through, and the
    texts of every call are kept in order."""

    dim = 1

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = threading.Semaphore(0)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.gate.acquire()
        self.batches.append(list(texts))
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


def wait_for(batcher: EmbeddingBatcher, queued: int) -> None:
    deadline = time.monotonic() + 10
    while batcher._queue.qsize() != queued:
        assert time.monotonic() < deadline, batcher._queue.qsize()
        time.sleep(0.01)


def test_a_query_waits_behind_one_batch_of_a_long_list_at_most() -> None:
    model = GatedEmbedder()
    batcher = EmbeddingBatcher(model, max_batch=4)  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            first = pool.submit(batcher.embed, "first")
            wait_for(batcher, 0)  # the worker holds it, at the gate
            episodes = pool.submit(batcher.embed_many, [f"window {n:02d}" for n in range(20)])
            wait_for(batcher, 20)
            query = pool.submit(batcher.embed, "the query")
            wait_for(batcher, 21)
            for _ in range(7):
                model.gate.release()
            assert first.result(timeout=10)[0] == len("first")
            assert query.result(timeout=10)[0] == len("the query")
            assert len(episodes.result(timeout=10)) == 20
    finally:
        batcher.close()
    assert model.batches[1][0] == "the query"  # before the windows queued ahead of it
    assert [t for b in model.batches[1:] for t in b if t != "the query"] == [
        f"window {n:02d}" for n in range(20)
    ]


def test_a_closed_batcher_refuses_what_still_waits() -> None:
    model = GatedEmbedder()
    batcher = EmbeddingBatcher(model, max_batch=2)  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(batcher.embed, "first")
        wait_for(batcher, 0)  # the worker holds it, at the gate
        waiting = pool.submit(batcher.embed_many, ["a", "b", "c", "d"])
        wait_for(batcher, 4)
        closing = pool.submit(batcher.close)
        wait_for(batcher, 5)  # the stop is queued
        model.gate.release()
        closing.result(timeout=10)
        assert first.result(timeout=10)[0] == len("first")
        with pytest.raises(RuntimeError, match="closed"):
            waiting.result(timeout=10)
    assert model.batches == [["first"]]
