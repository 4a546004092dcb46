"""COPY in binary, the one way slowwave bulk-writes rows: a table and its (column, type) pairs.

Each caller declares its column list once, as ``Columns``, and hands rows in that order; the
COPY statement is built from the constant names, never from data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

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


def copy_arrow(conn: psycopg.Connection, table: str, columns: Columns, data: Any) -> None:
    """COPY an Arrow table whose columns are ``columns``, in order, into ``table`` (inside the
    caller's transaction), encoded to the binary format as whole columns (pgpq)."""
    from pgpq import ArrowToPostgresBinaryEncoder

    if tuple(data.column_names) != tuple(name for name, _ in columns):
        raise ValueError(f"columns {data.column_names} are not {[n for n, _ in columns]}")
    names = ", ".join(name for name, _ in columns)
    encoder = ArrowToPostgresBinaryEncoder(data.schema)
    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.write(encoder.write_header())
        for batch in data.to_batches():
            copy.write(encoder.write_batch(batch))
        copy.write(encoder.finish())
