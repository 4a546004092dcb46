"""The service's state: a database, the embedding model, and what runs beside the answers.

One ``Service`` serves every surface. In a server (``background=True``) query embeddings are
batched across requests, the facts a search served and its episodes' reviews are recorded by a
thread of their own, and a forget's purge runs right after its answer; in one process (the CLI,
``slowwave.Memory``) the same work is done inline, before the call returns. Either way the
database ends the same.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Self, TypeAlias
from uuid import UUID

import numpy as np
import psycopg
from psycopg_pool import PoolTimeout

from slowwave import sql
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder, as_queries
from slowwave.models.embedding.batching import EmbeddingBatcher
from slowwave.models.errors import Busy, ConversationRequired, DatabaseUnavailable, NotFound
from slowwave.models.llm import load_model
from slowwave.models.rerank import Reranker, load_reranker
from slowwave.models.run import RunRequest
from slowwave.models.settings import Settings, get_settings
from slowwave.models.tenant import tenant_of
from slowwave.service.caller import Caller
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.forget import purge_files, resolve_conversations
from slowwave.tasks.ids import IdKind, resolve
from slowwave.tasks.memories import (
    Embed,
    embed_windows,
    missing_windows,
    record_reviews,
    write_windows,
)
from slowwave.tasks.runs import finish_run, start_run
from slowwave.tasks.search import record_retrieval

logger = logging.getLogger(__name__)

# A server's search embeds a conversation's new messages itself when they make at most this
# many windows (an agent's latest turns: one call of the model, tens of milliseconds); more (a
# bulk record) go to its embedding thread, so that no search waits on a backlog.
INLINE_WINDOWS = 8


class Retrievals:
    """What searches served, written by a thread of their own: the facts (retrieved) and the
    episodes (an FSRS review each). A search answers without waiting on the write, and the
    write passes over rows a run holds locked."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._queue: queue.SimpleQueue[Served | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="slowwave-retrievals", daemon=True)
        self._thread.start()

    def add(self, served: Served) -> None:
        if served.facts or served.episodes:
            self._queue.put(served)

    def _loop(self) -> None:
        while True:
            served = self._queue.get()
            if served is None:
                return
            while not self._queue.empty():  # whatever came meanwhile, in one write
                more = self._queue.get()
                if more is None:
                    served.write(self._db)
                    return
                served = served.merged(more)
            served.write(self._db)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


class Windows:
    """In a server, the episodes' windows of messages embedded by a thread of their own, for
    the conversations searches asked about (each once, however many searches asked while it
    waited): a search answers at once with what is embedded so far (full text finds the rest),
    and the embedding goes through the query batcher."""

    def __init__(self, db: Database, embed: Embed, window: int) -> None:
        self._db, self._embed, self._window = db, embed, window
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="slowwave-windows", daemon=True)
        self._thread.start()

    def add(self, conversation: str) -> None:
        self._queue.put(conversation)

    def _loop(self) -> None:
        while True:
            conversation = self._queue.get()
            if conversation is None:
                return
            wanted = {conversation: None}
            while not self._queue.empty():  # whatever came meanwhile, in one call
                more = self._queue.get()
                if more is None:
                    return
                wanted[more] = None
            self._embed_all(list(wanted))

    def _embed_all(self, conversations: list[str]) -> None:
        """Every waiting conversation's new windows, in one model call (a burst of searches
        waits one call, not one per conversation); no connection is held while it embeds."""
        try:
            with self._db.connection() as conn:
                windows = [w for c in conversations for w in missing_windows(conn, c, self._window)]
            if windows:
                vectors = self._embed([w.text for w in windows])
                with self._db.connection() as conn:
                    write_windows(conn, windows, vectors)
        except Exception as exc:  # a best effort: the next search asks again
            logger.warning(
                "could not embed the episodes of %d conversations: %s", len(conversations), exc
            )

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


@dataclass(frozen=True)
class Served:
    """What one search (or several, merged) returned: facts, and episodes reviewed ``at``."""

    facts: tuple[UUID, ...] = ()
    episodes: tuple[UUID, ...] = ()
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def merged(self, other: Served) -> Served:
        return Served(self.facts + other.facts, self.episodes + other.episodes, other.at)

    def record(self, conn: psycopg.Connection) -> None:
        record_retrieval(conn, sorted(set(self.facts)))
        record_reviews(conn, sorted(set(self.episodes)), self.at)

    def write(self, db: Database) -> None:
        try:
            with db.connection() as conn:
                self.record(conn)
        except (psycopg.Error, PoolTimeout) as exc:  # a best effort: the next search retries
            logger.warning(
                "could not record %d retrieved fact(s) and %d episode review(s): %s",
                len(set(self.facts)),
                len(set(self.episodes)),
                exc,
            )


class Purger:
    """Forgets' purges, after their answers: the tables are rewritten (``VACUUM FULL`` takes
    an exclusive lock on each for its time) by this thread, not while a request waits.
    Forgets that come while a purge runs share the next one; each tombstone records when its
    bytes were purged (``purged_at``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self._thread = threading.Thread(target=self._loop, name="slowwave-purger", daemon=True)
        self._thread.start()

    def queue(self) -> None:
        self.idle.clear()
        self._wanted.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            if self._stop.is_set():
                return
            self._wanted.clear()
            try:
                purge_files(self._db)
            except (psycopg.Error, PoolTimeout) as exc:  # the tombstones stay unpurged: shown
                logger.warning("forget: the purge after the answer failed: %s", exc)
            if not self._wanted.is_set():
                self.idle.set()

    def close(self) -> None:
        """Finish a purge that was asked for (the forgets' answers promised it), then stop."""
        if not self.idle.is_set():
            self.idle.wait(timeout=600)
        self._stop.set()
        self._wanted.set()
        self._thread.join(timeout=10)


Launcher: TypeAlias = Callable[[RunRequest, str], str]
"""Starts a run a key asked for elsewhere (a Prefect flow run): the request and the
conversation's stored key in, the flow run's id out."""


def run_asked(
    db: Database, settings: Settings, embedder: Embedder, request: RunRequest, key: str
) -> None:
    """A run a key asked for, of one conversation, here: the settings' model loaded for it and
    closed after. What fails is in the run's row, where ``run_state`` reads it; a model that
    does not load leaves a failed run behind, so that the id the caller holds says so."""
    try:
        model = load_model(settings)
    except Exception as exc:
        logger.exception("run %s asked for: the model did not load", request.run_id)
        with db.connection() as conn:
            summary = start_run(conn, kind="now", request=request)
            finish_run(conn, summary, f"the model did not load: {type(exc).__name__}: {exc}")
        return
    try:
        consolidate(db, model, embedder, settings, kind="now", conversations=[key], request=request)
    except Exception:  # recorded in its row by the run itself
        logger.exception("run %s asked for failed", request.run_id)
    finally:
        model.close()


class Asked:
    """The runs keys asked for, in a server without Prefect: one at a time, in a thread of
    their own, in the order asked; those not started yet are answered as queued."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        embedder: Callable[[], Embedder],
        queued: dict[UUID, str],
    ) -> None:
        self._db, self._settings, self._embedder = db, settings, embedder
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slowwave-asked")
        self._queued = queued

    def submit(self, request: RunRequest, key: str) -> None:
        self._pool.submit(self._run, request, key)

    def _run(self, request: RunRequest, key: str) -> None:
        try:
            run_asked(self._db, self._settings, self._embedder(), request, key)
        finally:
            self._queued.pop(request.run_id, None)

    def close(self) -> None:
        """Let the run at work finish (a run stopped half-way is recorded as interrupted by
        the server's own Ctrl-C); those not started are dropped, never half-done."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class Outage:
    """Tells a busy pool from a database that is down: both leave a caller without a connection
    after the pool's wait, but a database that does not take a new connection is down. Asked at
    most once per ``every_s``, whatever the callers that wait for the answer, so that a busy
    server does not open a connection per refusal."""

    def __init__(self, db: Database, every_s: float = 1.0) -> None:
        self._db = db
        self.every_s = every_s
        self._lock = threading.Lock()
        self._asked = -float("inf")
        self._down: str | None = None

    def down(self) -> str | None:
        """Why the database does not answer, or None when it does (blocks for up to a
        connection's timeout)."""
        with self._lock:
            if time.monotonic() - self._asked >= self.every_s:
                self._down = self._ask()
                self._asked = time.monotonic()
            return self._down

    def _ask(self) -> str | None:
        try:
            psycopg.connect(self._db.url, connect_timeout=2).close()
        except psycopg.Error as failed:
            return " ".join(str(failed).split())[:300]
        return None


class ServiceCore:
    """The database, the embedder and the background helpers every operation shares."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        embedder: Embedder | None = None,
        *,
        background: bool = False,
        own_db: bool = False,
        launcher: Launcher | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self._embedder = embedder
        self._own_embedder = embedder is None
        self._own_db = own_db
        self.background = background
        self.search_settings = settings.search
        self._batcher: EmbeddingBatcher | None = None
        self.retrievals: Retrievals | None = Retrievals(db) if background else None
        self.purger: Purger | None = Purger(db) if background else None
        self.outage = Outage(db)
        self.launcher = launcher
        self._asked: Asked | None = None
        # runs keys asked for that have no row yet (run id → tenant): answered as queued
        self.queued: dict[UUID, str] = {}
        self._windows: Windows | None = None
        self._reranker = reranker
        self._own_reranker = reranker is None
        self._reranker_lock = threading.Lock()

    @classmethod
    def started(
        cls,
        settings: Settings,
        embedder: Embedder | None = None,
        *,
        migrated: bool = False,
        pool_size: int | None = None,
        pool_wait_s: float | None = None,
        statement_timeout_ms: int | None = None,
        hold: bool = False,
        background: bool = False,
        launcher: Launcher | None = None,
        warm: bool = False,
    ) -> Self:
        """The service over the settings' database (the embedded server by default), opened
        here and closed with it (``close``), as every surface that holds one starts it: the
        commands (``open``), the server (its pool's size, wait and statement timeout, its
        connections made first: ``hold``; its background helpers; its embedder loaded and run
        once before the first request: ``warm``) and MCP over stdio. ``migrated``: the schema
        brought up to date first, and another embedding model than the store's refused."""
        db = Database(
            settings,
            pool_size=pool_size,
            pool_wait_s=pool_wait_s,
            statement_timeout_ms=statement_timeout_ms,
            hold=hold,
        ).open()
        try:
            if migrated:
                migrate(db)
            if hold:
                db.fill()  # the first requests find their connections made
            service = cls(
                db.settings, db, embedder, background=background, own_db=True, launcher=launcher
            )
        except BaseException:
            db.close()
            raise
        try:
            if warm:
                service.embedder.embed(["warm up"])
        except BaseException:
            service.close()
            raise
        return service

    @classmethod
    @contextmanager
    def open(
        cls, settings: Settings | None = None, embedder: Embedder | None = None
    ) -> Iterator[Self]:
        """The settings' database (the embedded server by default), open and migrated, for
        the calls of one block; closed after, with whatever it loaded."""
        service = cls.started(settings or get_settings(), embedder, migrated=True)
        try:
            yield service
        finally:
            service.close()

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use (a forget or a record needs none)."""
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    @property
    def reranker(self) -> Reranker:
        """The reranker, loaded the first time a search asks for it (once, however many ask
        at that moment)."""
        with self._reranker_lock:
            if self._reranker is None:
                self._reranker = load_reranker(self.settings)
            return self._reranker

    def embed_query(self, text: str) -> np.ndarray:
        """A query's vector: batched with concurrent queries in a server, inline otherwise."""
        (query,) = as_queries(self.embedder, [text])
        if not self.background:
            return self.embedder.embed([query])[0]
        return self.batcher.embed(query)

    def served(self, served: Served, conn: psycopg.Connection) -> None:
        """Record what a search served: its facts as retrieved (``SLOWWAVE_MAX_ACTIVE_FACTS``
        keeps the used), its episodes reviewed (FSRS)."""
        if self.retrievals is not None:
            self.retrievals.add(served)
        else:
            served.record(conn)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, or a fast ``Busy`` when every one is in use, or
        ``DatabaseUnavailable`` when the database does not answer (both say when to retry)."""
        with self.reaching(), self.db.connection() as conn:
            yield conn

    @contextmanager
    def reaching(self) -> Iterator[None]:
        """Around work that takes its own connections: a full pool is ``Busy``, a database
        that does not answer is ``DatabaseUnavailable``."""
        try:
            yield
        except PoolTimeout:
            down = self.outage.down()
            if down is not None:  # the pool dropped its broken connections and only waits
                raise DatabaseUnavailable(f"the database does not answer: {down}") from None
            raise Busy("every database connection of this server is busy: retry shortly") from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"the database does not answer: {' '.join(str(exc).split())[:300]}"
            ) from None

    def conversation(self, caller: Caller, conversation_id: str | None) -> str:
        """The conversation a call is about: the one it names, else its key's, else the
        server's default (``SLOWWAVE_SERVE_DEFAULT_CONVERSATION``); none of the three is
        ``InvalidRequest`` saying how to name one."""
        chosen = (
            conversation_id or caller.conversation_id or self.settings.serve.default_conversation
        )
        if not chosen:
            raise ConversationRequired(
                "conversation_id: required (name it, make the key with `slowwave keys create "
                "--conversation`, or set SLOWWAVE_SERVE_DEFAULT_CONVERSATION)"
            )
        return chosen

    def conversation_keys(self, caller: Caller, names: Sequence[str]) -> list[str]:
        """The stored keys of the caller's conversations, named by id or by reference (``c:…``,
        as a flow's parameters carry them). A reference that names none of the caller's
        tenant's conversations names nothing (left out, with a warning, as a flow does)."""
        refs = [n for n in names if n.startswith("c:")]
        resolved: list[str] = []
        if refs:
            with self.connection() as conn:
                resolved = [
                    key
                    for key in resolve_conversations(conn, refs)
                    if tenant_of(key) == caller.tenant
                ]
        return [*resolved, *(caller.key(n) for n in names if not n.startswith("c:"))]

    def require(self, conn: psycopg.Connection, key: str, conversation_id: str) -> None:
        """A conversation the caller's tenant has (an episode or a fact), or ``NotFound``."""
        row = conn.execute(
            sql.statement("conversation_exists"), {"conversation_id": key}
        ).fetchone()
        if row is None or not row[0]:
            raise not_found(conversation_id)

    @staticmethod
    def resolve(conn: psycopg.Connection, kind: IdKind, id_: UUID | str) -> UUID:
        """The id of ``kind`` that ``id_`` names: a UUID as it is; text a whole id, or a short
        id as the listings print it (``UnknownId``, or ``AmbiguousId`` with the candidates)."""
        return id_ if isinstance(id_, UUID) else resolve(conn, kind, id_)

    def embed_new_windows(self, conn: psycopg.Connection, key: str) -> None:
        """Have the conversation's messages not embedded yet embedded before a search reads
        them, so that what was said a moment ago is found by its meaning by the first search,
        on any replica: here, inline (a server through its query batcher) when they make at
        most ``INLINE_WINDOWS`` windows, as an agent's latest turns do; a larger backlog (a
        bulk record) by the server's thread, while the search goes on with what is embedded
        and its full-text channel. With the vector channel off, by no one."""
        policy = self.search_settings
        if policy.memory_vector_weight <= 0:
            return
        if not self.background:
            embed_windows(conn, self.embedder.embed, key, policy.memory_window)
            return
        if (
            embed_windows(conn, self.batcher.embed_many, key, policy.memory_window, INLINE_WINDOWS)
            is None
        ):
            if self._windows is None:
                self._windows = Windows(self.db, self.batcher.embed_many, policy.memory_window)
            self._windows.add(key)

    @property
    def batcher(self) -> EmbeddingBatcher:
        """Query embeddings of concurrent requests, computed together (a server)."""
        if self._batcher is None:
            self._batcher = EmbeddingBatcher(
                self.embedder, max_batch=self.settings.serve.embed_batch
            )
        return self._batcher

    @property
    def asked(self) -> Asked:
        """The server's worker for the runs keys ask for, started on first use."""
        if self._asked is None:
            self._asked = Asked(self.db, self.settings, lambda: self.embedder, self.queued)
        return self._asked

    def close(self) -> None:
        if self._windows is not None:
            self._windows.close()
        if self._asked is not None:
            self._asked.close()
        if self.purger is not None:
            self.purger.close()
        if self.retrievals is not None:
            self.retrievals.close()
        if self._batcher is not None:
            self._batcher.close()
        if self._own_embedder and self._embedder is not None:
            self._embedder.close()
            self._embedder = None
        if self._own_reranker and self._reranker is not None:
            self._reranker.close()
            self._reranker = None
        if self._own_db:
            self.db.close()


def not_found(conversation_id: str) -> NotFound:
    return NotFound(f"no conversation {conversation_id!r}: nothing was recorded under that id")


__all__ = ["Purger", "Retrievals", "ServiceCore", "not_found"]
