"""Apply ``sql/migrations`` in order, each in its own transaction, recording what ran.

Re-running is a no-op. Concurrent migrators serialise on an advisory lock. A migration whose
file changed after it was applied is an error, not a silent drift. The vector column's
dimension follows ``SLOWWAVE_EMBEDDING_DIM`` when the schema is created; afterwards a differing
setting is reported as a mismatch (changing it needs a re-embedding, not a setting flip), and
so is another embedding model than the one whose vectors the store holds (``embedding_model``).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql as pgsql

from slowwave import sql
from slowwave.models.errors import MigrationError
from slowwave.sql.db.database import Database

_LOCK_KEY = 0x736C6F77  # "slow": the advisory lock that serialises migrators

_LEDGER = """
CREATE TABLE IF NOT EXISTS slowwave_schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


def check_dimension(actual: int | None, dim: int) -> None:
    """Refuse a schema whose embeddings have another dimension than the settings' (None: not
    migrated yet, nothing to compare)."""
    if actual is not None and actual != dim:
        raise MigrationError(
            f"the schema stores {actual}-dimensional embeddings but SLOWWAVE_EMBEDDING_DIM="
            f"{dim}; use a database migrated for {dim} dimensions, set it back to {actual}, or "
            f"re-embed the store with a {dim}-dimensional model (`slowwave db reembed`)"
        )


def check_embedding_model(conn: psycopg.Connection, model: str) -> None:
    """Record the embedding model of a store that holds no vector yet; refuse another model's
    on a store that does (its vectors would be compared with the other model's: a search that
    answers nonsense, a dedupe that merges strangers). A schema from before the record was
    kept (migrated only part of the way) is left as it is."""
    table = conn.execute("SELECT to_regclass('embedding_model')").fetchone()
    if table is None or table[0] is None:
        return
    stored = stored_embedding_model(conn)
    if stored == model:
        return
    if stored is not None:
        held = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM semantic_memory) "
            "OR EXISTS (SELECT 1 FROM episode_windows)"
        ).fetchone()
        if held is not None and held[0]:
            raise MigrationError(
                f"this store holds vectors of embedding model {stored!r}, not of "
                f"SLOWWAVE_EMBEDDING_MODEL={model!r}: vectors of two models cannot be compared; "
                f"set SLOWWAVE_EMBEDDING_MODEL back to {stored!r}, or re-embed the store with "
                f"{model!r} (`slowwave db reembed` with these settings), or use another database"
            )
    record_embedding_model(conn, model)


def stored_embedding_model(conn: psycopg.Connection) -> str | None:
    """The embedding model whose vectors the store holds, as recorded (None: none yet)."""
    row = conn.execute("SELECT model FROM embedding_model").fetchone()
    return None if row is None else str(row[0])


def record_embedding_model(conn: psycopg.Connection, model: str) -> None:
    """Record ``model`` as the one whose vectors the store holds (migrate, a re-embedding's
    switch)."""
    conn.execute(
        "INSERT INTO embedding_model (model) VALUES (%s) ON CONFLICT (only_row) "
        "DO UPDATE SET model = excluded.model, recorded_at = now()",
        (model,),
    )


@dataclass(frozen=True)
class MigrationReport:
    applied: list[str]
    already: list[str]
    embedding_dim: int


def applied_versions(conn: psycopg.Connection) -> dict[int, str]:
    """version → checksum of the migrations recorded in the database (empty when none)."""
    exists = conn.execute("SELECT to_regclass('slowwave_schema_migrations')").fetchone()
    if exists is None or exists[0] is None:
        return {}
    rows = conn.execute("SELECT version, checksum FROM slowwave_schema_migrations").fetchall()
    return {int(v): str(c) for v, c in rows}


def pending_migrations(conn: psycopg.Connection) -> list[str]:
    """The migrations this release has that the database has not applied (empty: current)."""
    done = applied_versions(conn)
    return [f"{m.version:04d}_{m.name}" for m in sql.migrations() if m.version not in done]


def schema_embedding_dim(conn: psycopg.Connection) -> int | None:
    """The dimension of ``semantic_memory.embedding`` as created, or None before migration."""
    row = conn.execute(
        """
        SELECT a.atttypmod FROM pg_attribute a
        WHERE a.attrelid = to_regclass('semantic_memory') AND a.attname = 'embedding'
        """
    ).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else None


def no_vector_privilege(conn: psycopg.Connection) -> str:
    """One line for a role that may not create the ``vector`` extension (the usual case on a
    managed Postgres, where only its administrator may)."""
    row = conn.execute("SELECT current_user, current_database()").fetchone()
    user, database = row if row is not None else ("?", "?")
    return (
        f"the `vector` extension is not installed in database {database} and role {user} may "
        f"not create it: ask the database's administrator to run `CREATE EXTENSION vector;` "
        f"in {database} (pgvector >= 0.8), then run `slowwave db migrate` again"
    )


def migrate(db: Database, *, check_model: bool = True) -> MigrationReport:
    """Bring the schema up to date; then refuse another embedding model or dimension than the
    store's (``check_model``; a re-embedding, ``tasks.reembed``, runs with the new one)."""
    dim = db.settings.embedding.dim
    applied: list[str] = []
    already: list[str] = []
    with db.raw_connection(autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(_LEDGER)
            done = applied_versions(conn)
            for migration in sql.migrations():
                label = f"{migration.version:04d}_{migration.name}"
                if migration.version in done:
                    if done[migration.version] != migration.checksum:
                        raise MigrationError(
                            f"migration {label} was changed after it was applied; "
                            "add a new migration instead of editing an applied one"
                        )
                    already.append(label)
                    continue
                rendered = pgsql.SQL(migration.text).format(embedding_dim=pgsql.Literal(dim))
                try:
                    with conn.transaction():
                        conn.execute(rendered)
                        conn.execute(
                            "INSERT INTO slowwave_schema_migrations (version, name, checksum) "
                            "VALUES (%s, %s, %s)",
                            (migration.version, migration.name, migration.checksum),
                        )
                except psycopg.errors.InsufficientPrivilege as exc:
                    if "extension" in str(exc):
                        raise MigrationError(no_vector_privilege(conn)) from None
                    raise MigrationError(f"migration {label} failed (rolled back): {exc}") from exc
                except psycopg.Error as exc:
                    raise MigrationError(f"migration {label} failed (rolled back): {exc}") from exc
                applied.append(label)
            actual = schema_embedding_dim(conn)
            # a dimension apart is refused below, first
            if check_model and (actual is None or actual == dim):
                check_embedding_model(conn, db.settings.embedding.model)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    if check_model:
        check_dimension(actual, dim)
    db.reset_pool()
    return MigrationReport(applied=applied, already=already, embedding_dim=actual or dim)
