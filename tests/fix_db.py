"""Database fixtures: a real embedded PostgreSQL 18 + pgvector, stopped (and checked) at the end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from slowwave.models.settings import Settings
from slowwave.sql.db import Database, migrate
from tests.fix_processes import with_prepared_embedder

TABLES = (
    "decision_log, consolidation_chunks, semantic_memory, ingested_messages, episodic_memory, "
    "consolidation_runs, history_operations, conversation_profiles, export_targets"
)


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """True once no process has ``pid`` (zombies of our own children count as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home = with_prepared_embedder(tmp_path_factory.mktemp("slowwave-home"))
    # chunk_size pinned, and short or lone episodes not packed beyond it: the tests describe
    # chunking by their own numbers, not the defaults'. Grounding off: a scripted answer says
    # what its test describes, not what its episodes say; tests.test_grounding turns it on
    return Settings(
        home=home,
        database_url=None,
        chunk_size=8,
        chunk_min_tokens=0,
        chunk_lone_joins=False,
        grounding="off",
        _env_file=None,
    )


@pytest.fixture(scope="session")
def database(settings: Settings) -> Iterator[Database]:
    """The session's database, migrated. Its postmaster must be gone after the session."""
    db = Database(settings).open()
    assert db.embedded is not None
    pid = db.embedded.pid
    assert pid is not None
    migrate(db)
    try:
        yield db
    finally:
        db.close()
        assert wait_gone(pid), f"embedded postmaster {pid} still running after the test session"


@pytest.fixture
def db(database: Database) -> Iterator[Database]:
    """The session database, emptied after each test."""
    yield database
    with database.connection() as conn:
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")


@pytest.fixture
def conn(db: Database) -> Iterator[psycopg.Connection]:
    with db.connection() as connection:
        yield connection


def url_for_database(base_url: str, name: str) -> str:
    """The server's URL with another database name (the embedded URL uses a unix socket)."""
    head, _, query = base_url.partition("?")
    prefix = head.rsplit("/", 1)[0]
    return f"{prefix}/{name}" + (f"?{query}" if query else "")


@pytest.fixture
def fresh_database_url(database: Database) -> Iterator[str]:
    """A new, empty database on the session's server, dropped afterwards."""
    name = f"fresh_{time.monotonic_ns()}"
    with database.raw_connection(autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url_for_database(database.url, name)
    finally:
        with database.raw_connection(autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def home_settings(home: Path, **overrides: object) -> Settings:
    return Settings(home=home, database_url=None, _env_file=None, **overrides)
