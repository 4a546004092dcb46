"""COPY in binary, the one way slowwave bulk-writes rows: a table and its (column, type) pairs.

Each caller declares its column list once, as ``Columns``, and hands rows in that order; the
COPY statement is built from the constant names, never from data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import psycopg

Columns = Sequence[tuple[str, str]]  # (column name, Postgres type for the binary format)


def copy_rows(
    conn: psycopg.Connection, table: str, columns: Columns, rows: Iterable[Sequence[object]]
) -> None:
    """COPY ``rows`` into ``table`` (inside the caller's transaction)."""
    names = ", ".join(name for name, _ in columns)
    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types([kind for _, kind in columns])
        for row in rows:
            copy.write_row(row)
