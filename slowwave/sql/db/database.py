"""One handle on slowwave's Postgres: the configured ``DATABASE_URL`` or the embedded server.

``Database`` resolves where Postgres is, checks once that it is reachable and has pgvector
(with a one-line error when not), and hands out pooled connections with the ``vector`` type
registered. It owns the embedded server's lifetime for this process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Self

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from slowwave.models.errors import DatabaseUnavailable
from slowwave.models.settings import Settings, get_settings
from slowwave.sql.db.embedded import EmbeddedPostgres

log = logging.getLogger(__name__)


LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def redact(url: str) -> str:
    """The DSN for messages and logs: read by libpq's own parser (a URL, its query string or
    keyword=value, quoting and percent-encoding included), written back as keyword=value with
    the password replaced; one libpq cannot parse is not shown at all."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(a connection string libpq cannot parse)"
    if "password" in params:
        params["password"] = "***"
    first = [k for k in _SHOWN_FIRST if k in params]
    return make_conninfo("", **{k: params[k] for k in first + sorted(set(params) - set(first))})


_SHOWN_FIRST = ("host", "hostaddr", "port", "dbname", "user", "password")


def machine_local(url: str) -> bool:
    """Whether the DSN reaches a server on this machine only: every host libpq would try (a
    host list included; PGHOST when the DSN names none) is a unix socket or a loopback name,
    and every hostaddr a loopback address."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return False
    hosts = str(params.get("host") or os.environ.get("PGHOST", "")).split(",")
    addresses = [a for a in str(params.get("hostaddr") or "").split(",") if a]
    if addresses:
        return all(a.strip() in LOOPBACK for a in addresses)
    return all(not h.strip() or h.strip().startswith("/") or h.strip() in LOOPBACK for h in hosts)


def application_name() -> str:
    """How this process names its connections (libpq's ``fallback_application_name``: a name
    the DSN gives wins): "slowwave PID", so that a re-embedding's switch finds the other
    slowwave processes connected (``tasks.reembed.others_connected``)."""
    return f"slowwave {os.getpid()}"


def _configure(conn: psycopg.Connection) -> None:
    """Register pgvector's types when the extension exists (it does after migration)."""
    # The vector type is created by the first migration; before it, nothing needs it.
    with suppress(psycopg.ProgrammingError):
        register_vector(conn)
    conn.commit()


class Database:
    """Where slowwave's data lives, for one process. Use as a context manager."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        pool_size: int | None = None,
        pool_wait_s: float | None = None,
        statement_timeout_ms: int | None = None,
        hold: bool = False,
    ) -> None:
        """``pool_size``, ``pool_wait_s`` (how long ``connection()`` waits for a free one before
        psycopg_pool's ``PoolTimeout``) and ``statement_timeout_ms`` (on every pooled
        connection) default to the settings' pool and no timeout: a server sets all three.
        ``hold``: the pool keeps all ``pool_size`` connections open (a server's first requests
        find them made), else it opens them as they are needed."""
        self.settings = settings or get_settings()
        self._pool_size = pool_size or self.settings.database.pool_max_size
        self._hold = hold
        self._pool_lock = threading.Lock()  # one pool, however many threads ask first
        self._pool_wait_s = pool_wait_s or self.settings.database.connect_timeout_s * 3
        self._options = (
            {"options": f"-c statement_timeout={int(statement_timeout_ms)}"}
            if statement_timeout_ms
            else {}
        )
        self._embedded: EmbeddedPostgres | None = None
        self._pool: ConnectionPool | None = None
        self._url: str | None = None

    # ── lifecycle ───────────────────────────────────────────────────────────
    def open(self) -> Self:
        if self._url is not None:
            return self
        configured = self.settings.database.url
        if configured is None:
            self._embedded = EmbeddedPostgres(self.settings.pgdata)
            url = self._embedded.start()
        else:
            url = configured.get_secret_value()
        self._url = url
        try:
            self._check(url)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.reset_pool()
        if self._embedded is not None:
            self._embedded.release()
            self._embedded = None
        self._url = None

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ── access ──────────────────────────────────────────────────────────────
    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("Database is not open")
        return self._url

    @property
    def embedded(self) -> EmbeddedPostgres | None:
        return self._embedded

    def where(self) -> str:
        """Human description of the server in use, without secrets."""
        if self._embedded is not None:
            return f"embedded Postgres in {self._embedded.pgdata}"
        return redact(self.url)

    def raw_connection(self, *, autocommit: bool = False) -> psycopg.Connection:
        """A dedicated, unpooled connection (migrations, long locks, tests)."""
        conn = psycopg.connect(
            self.url,
            autocommit=autocommit,
            connect_timeout=int(self.settings.database.connect_timeout_s),
            fallback_application_name=application_name(),
        )
        _configure(conn)
        return conn

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection; the pool opens on first use."""
        with self.pool().connection() as conn:
            yield conn

    def pool(self) -> ConnectionPool:
        """The connection pool, opened on the first call."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = self._new_pool()
            return self._pool

    def fill(self) -> None:
        """Wait until the pool holds its connections (``hold``: all of them), or raise
        ``DatabaseUnavailable`` when they are not made within the pool's wait."""
        try:
            self.pool().wait(timeout=max(self._pool_wait_s, 30.0))
        except PoolTimeout as exc:
            raise DatabaseUnavailable(f"the pool's connections were not made: {exc}") from exc

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(
            self.url,
            min_size=self._pool_size if self._hold else 1,
            max_size=self._pool_size,
            # autocommit: a unit of work is always an explicit ``conn.transaction()``
            # block, never a transaction left open by a stray read
            kwargs={
                "connect_timeout": int(self.settings.database.connect_timeout_s),
                "autocommit": True,
                "fallback_application_name": application_name(),
                **self._options,
            },
            configure=_configure,
            # a connection is tried before it is lent: after a restart or a failover of the
            # server every pooled one is dead, and each would fail its first statement
            check=ConnectionPool.check_connection,
            timeout=self._pool_wait_s,
            open=True,
            name="slowwave",
        )

    def reset_pool(self) -> None:
        """Close pooled connections, e.g. after a migration created the vector type."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None

    # ── checks ──────────────────────────────────────────────────────────────
    def _check(self, url: str) -> None:
        try:
            with psycopg.connect(
                url, connect_timeout=int(self.settings.database.connect_timeout_s)
            ) as conn:
                row = conn.execute(
                    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
                ).fetchone()
        except psycopg.OperationalError as exc:
            reason = " ".join(str(exc).split())
            raise DatabaseUnavailable(
                f"cannot connect to Postgres at {redact(url)}: {reason}"
            ) from exc
        if row is None:
            raise DatabaseUnavailable(
                f"the Postgres at {redact(url)} has no `vector` extension available; "
                "install pgvector (>= 0.8) on that server, or unset DATABASE_URL to use "
                "the embedded server"
            )
