"""reembed: a store's vectors made again by another embedding model, then switched in at once.

A store holds one model's vectors: a process started with another model is refused
(``sql.db.migrate.check_embedding_model``), since vectors of two models are never compared.
To change the model, ``slowwave db reembed`` runs with the new model's settings and:

1. records the re-embedding (``embedding_reembed``, 0035_reembed): a second start with the same
   model goes on where the first stopped, one with another model is refused unless restarted;
2. embeds every fact (what a fact's vector encodes, ``models.fact.embedding_text``) and every
   episode window (its messages, as ``tasks.memories`` embeds them) with the new model, in
   batches, each committed into the row's shadow column (``embedding_next``) as it is written.
   Search, dedupe and every run keep reading ``embedding``, the recorded model's, meanwhile;
   a kill loses at most the batch in hand;
3. switches, in one transaction with writers held off (``LOCK ... SHARE ROW EXCLUSIVE``):
   what was written meanwhile is embedded, the shadow vectors become the store's (the column
   takes the new model's dimension where it differs), and the new model is recorded. The
   switch refuses while another slowwave process is connected (a server, a run, a worker would
   go on with the old model's vectors against the new): stop them first, start them again
   with the new settings after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.embedding.base import Embedder
from slowwave.models.errors import Conflict
from slowwave.models.fact import embedding_text
from slowwave.sql.db.database import application_name
from slowwave.sql.db.migrate import record_embedding_model, stored_embedding_model
from slowwave.tasks.memories import lines

BATCH = 256
_FIRST = UUID(int=0)

Progress = Callable[[str, int, int], None]
"""Told after each batch: what ("facts", "windows"), how many have the new vectors, of how many."""


@dataclass(frozen=True)
class ReembedReport:
    """What a re-embedding did: the model it wrote (``model``, ``dim``) and the one the store
    held (``previous``), how many facts and windows this call embedded, whether it went on
    with one under way (``resumed``) and whether it switched the store to the new vectors."""

    model: str
    previous: str | None
    dim: int
    facts: int
    windows: int
    resumed: bool
    switched: bool


def begin(conn: psycopg.Connection, model: str, dim: int, *, restart: bool = False) -> bool:
    """Record a re-embedding to ``model``; whether one to it was under way already (its shadow
    vectors are kept). One to another model is refused, or with ``restart`` its vectors are
    dropped and this one begins."""
    with conn.transaction():
        row = conn.execute("SELECT model, started_at FROM embedding_reembed FOR UPDATE").fetchone()
        if row is not None and row[0] == model:
            return True
        if row is not None and not restart:
            raise Conflict(
                f"a re-embedding to {row[0]!r} is under way (since {row[1]:%Y-%m-%d %H:%M} "
                f"UTC): run `slowwave db reembed` with SLOWWAVE_EMBEDDING_MODEL={row[0]!r} to "
                f"finish it, or with --restart to drop its vectors and re-embed with {model!r}"
            )
        conn.execute(
            "UPDATE semantic_memory SET embedding_next = NULL WHERE embedding_next IS NOT NULL"
        )
        conn.execute(
            "UPDATE episode_windows SET embedding_next = NULL WHERE embedding_next IS NOT NULL"
        )
        conn.execute("DELETE FROM embedding_reembed")
        conn.execute("INSERT INTO embedding_reembed (model, dim) VALUES (%s, %s)", (model, dim))
    return False


def counts(conn: psycopg.Connection) -> dict[str, int]:
    """facts, facts_done, windows, windows_done (``reembed_progress``)."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(sql.statement("reembed_progress")).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


def embed_facts(
    conn: psycopg.Connection, embedder: Embedder, batch: int, progress: Progress | None = None
) -> int:
    """Every fact without the new model's vector, ``batch`` at a time, each batch committed.
    How many."""
    after, done = _FIRST, 0
    tell = _teller(conn, progress, "facts")
    while True:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                sql.statement("reembed_facts_missing"), {"after": after, "limit": batch}
            ).fetchall()
        if not rows:
            return done
        texts = [embedding_text(r["category"], r["fact"], list(r["keywords"])) for r in rows]
        with conn.transaction():
            conn.execute(
                sql.statement("reembed_facts_write"),
                {"ids": [r["id"] for r in rows], "embeddings": list(embedder.embed(texts))},
            )
        after, done = rows[-1]["id"], done + len(rows)
        tell(done)


def embed_windows(
    conn: psycopg.Connection, embedder: Embedder, batch: int, progress: Progress | None = None
) -> int:
    """Every episode window without the new model's vector, as ``embed_facts``."""
    after: tuple[UUID, int] = (_FIRST, -1)
    done = 0
    tell = _teller(conn, progress, "windows")
    while True:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                sql.statement("reembed_windows_missing"),
                {"after_episode": after[0], "after_from": after[1], "limit": batch},
            ).fetchall()
        if not rows:
            return done
        texts = ["\n".join(lines(r["messages"] or [])) for r in rows]
        with conn.transaction():
            conn.execute(
                sql.statement("reembed_windows_write"),
                {
                    "episodes": [r["episode_id"] for r in rows],
                    "froms": [r["messages_from"] for r in rows],
                    "tos": [r["messages_to"] for r in rows],
                    "embeddings": list(embedder.embed(texts)),
                },
            )
        after, done = (rows[-1]["episode_id"], rows[-1]["messages_from"]), done + len(rows)
        tell(done)


def _teller(
    conn: psycopg.Connection, progress: Progress | None, kind: str
) -> Callable[[int], None]:
    """What to call after each batch with how many this call embedded: ``progress`` told the
    share of ``kind`` done, counted once at the start (two scans, not two a batch)."""
    if progress is None:
        return lambda done: None
    start = counts(conn)
    return lambda done: progress(kind, start[f"{kind}_done"] + done, start[kind])


def others_connected(conn: psycopg.Connection) -> list[str]:
    """The other slowwave processes connected to this database (by their connections'
    application_name), as "pid (state)"."""
    rows = conn.execute(
        "SELECT DISTINCT application_name, state FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name LIKE 'slowwave %%' AND application_name <> %s",
        (application_name(),),
    ).fetchall()
    return sorted(f"{name.removeprefix('slowwave ')} ({state or 'idle'})" for name, state in rows)


def switch(
    conn: psycopg.Connection, embedder: Embedder, model: str, *, force: bool = False
) -> tuple[int, int]:
    """The new vectors made the store's, in one transaction: writers held off, what was
    written since embedded, the columns swapped, ``model`` recorded, the re-embedding ended.
    How many facts and windows were embedded under the lock."""
    others = others_connected(conn)
    if others and not force:
        raise Conflict(
            f"{len(others)} other slowwave process(es) are connected to this database "
            f"(pid {', '.join(others)}): a server, a run or a worker started with the old "
            "model would go on comparing its vectors with the new ones; stop them, then run "
            "`slowwave db reembed` again (or pass --force), and start them with the new settings"
        )
    with conn.transaction():
        conn.execute("LOCK TABLE semantic_memory, episode_windows IN SHARE ROW EXCLUSIVE MODE")
        # a batch's own transaction is a savepoint here: all commit with the switch
        facts = embed_facts(conn, embedder, BATCH)
        windows = embed_windows(conn, embedder, BATCH)
        _swap(conn, "semantic_memory", embedder.dim)
        _swap(conn, "episode_windows", embedder.dim)
        record_embedding_model(conn, model)
        conn.execute("DELETE FROM embedding_reembed")
    return facts, windows


def _swap(conn: psycopg.Connection, table: str, dim: int) -> None:
    """``table``'s shadow vectors become its vectors (of ``dim`` dimensions)."""
    current = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass "
        "AND attname = 'embedding'",
        (table,),
    ).fetchone()
    name = pgsql.Identifier(table)
    if current is not None and current[0] != dim:
        conn.execute(
            pgsql.SQL(
                "ALTER TABLE {} ALTER COLUMN embedding TYPE vector({}) "
                "USING embedding_next::vector({})"
            ).format(name, pgsql.Literal(dim), pgsql.Literal(dim))
        )
        conn.execute(pgsql.SQL("UPDATE {} SET embedding_next = NULL").format(name))
    else:
        conn.execute(
            pgsql.SQL("UPDATE {} SET embedding = embedding_next, embedding_next = NULL").format(
                name
            )
        )


def reembed(
    conn: psycopg.Connection,
    embedder: Embedder,
    model: str,
    *,
    batch: int = BATCH,
    restart: bool = False,
    switch_to: bool = True,
    force: bool = False,
    progress: Progress | None = None,
) -> ReembedReport:
    """Re-embed the store behind ``conn`` with ``embedder`` (named ``model``) and, unless
    ``switch_to`` is false, switch to its vectors (``force``: though other slowwave processes
    are connected)."""
    previous = stored_embedding_model(conn)
    under_way = conn.execute("SELECT model FROM embedding_reembed").fetchone()
    if previous == model and under_way is None:  # nothing to do
        return ReembedReport(model, previous, embedder.dim, 0, 0, resumed=False, switched=False)
    resumed = begin(conn, model, embedder.dim, restart=restart)
    facts = embed_facts(conn, embedder, batch, progress)
    windows = embed_windows(conn, embedder, batch, progress)
    switched = False
    if switch_to:
        more_facts, more_windows = switch(conn, embedder, model, force=force)
        facts, windows, switched = facts + more_facts, windows + more_windows, True
    return ReembedReport(
        model=model,
        previous=previous,
        dim=embedder.dim,
        facts=facts,
        windows=windows,
        resumed=resumed,
        switched=switched,
    )
