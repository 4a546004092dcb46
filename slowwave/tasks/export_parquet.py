"""An export's Parquet files: each kind's Arrow schema, and its partitions written from their
rows, streamed in batches (memory flat in the size of the export)."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import date
from itertools import groupby
from typing import Any

import psycopg
from psycopg import sql as pgsql

from slowwave.models.run import RUN_COUNTS
from slowwave.tasks.export_target import Target, partition

ROWS_PER_BATCH = 65_536  # rows fetched at a time, and the row group size: memory stays flat
EPISODES_PER_BATCH = 4_096  # an episode holds its whole transcript


def schema_of(name: str) -> Any:
    """The Arrow schema of a kind's files (after its ``tenant`` and ``day``, which the
    partition's path holds)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    text, texts = pa.string(), pa.list_(pa.string())
    fact = [
        ("id", text),
        ("conversation_id", text),
        ("category", text),
        ("fact", text),
        ("keywords", texts),
        ("source_episodic_ids", texts),
        ("valid_at", ts),
        ("invalid_at", ts),
        ("supersedes_id", text),
        ("created_at", ts),
        ("created_by_run_id", text),
        ("action", text),
    ]
    fields = {
        "facts": fact,
        "versions": fact,
        "decisions": [
            ("id", pa.int64()),
            ("run_id", text),
            ("conversation_id", text),
            ("chunk_id", text),
            ("proposed_action", text),
            ("action", text),
            ("fact_id", text),
            ("previous_fact_id", text),
            ("proposed_fact", text),
            ("similarity", pa.float32()),
            ("episode_ids", texts),
            ("event_time", ts),
            ("recorded_at", ts),
            ("reason", text),
        ],
        "runs": [
            ("id", text),
            ("flow_run_id", text),
            ("kind", text),
            ("status", text),
            ("started_at", ts),
            ("finished_at", ts),
            *[(n, pa.int64() if "tokens" in n else pa.int32()) for n in RUN_COUNTS],
        ],
        "episodes": [
            ("id", text),
            ("conversation_id", text),
            ("messages", text),
            ("summary", text),
            ("surprise", pa.float32()),
            ("start_at", ts),
            ("end_at", ts),
            ("created_at", ts),
            ("consolidated_at", ts),
            ("consolidation_run_id", text),
            ("quarantined_at", ts),
        ],
    }[name]
    return pa.schema(fields)


def write_partitions(
    conn: psycopg.Connection,
    target: Target,
    name: str,
    rows_sql: pgsql.Composable,
    partitions: list[tuple[str | None, date]],
) -> int:
    """Rewrite these partitions from their rows, streamed in batches in partition order: one
    file open at a time, memory flat in the size of the export."""
    import pyarrow as pa

    schema = schema_of(name)
    query = pgsql.SQL(
        "SELECT q.* FROM ({rows}) q "
        "JOIN unnest(%(tenants)s::text[], %(days)s::date[]) AS p (tenant, day) "
        "ON q.tenant IS NOT DISTINCT FROM p.tenant AND q.day = p.day "
        "ORDER BY q.tenant, q.day"
    ).format(rows=rows_sql)
    params = {"tenants": [t for t, _ in partitions], "days": [d for _, d in partitions]}
    written = 0
    with ExitStack() as files, conn.cursor(name=f"slowwave_export_{name}") as cursor:
        cursor.execute(query, params)
        key: tuple[Any, ...] | None = None
        writer: Any = None
        size = EPISODES_PER_BATCH if name == "episodes" else ROWS_PER_BATCH
        while rows := cursor.fetchmany(size):
            for (tenant, day), run in groupby(rows, key=lambda r: (r[0], r[1])):
                if (tenant, day) != key:
                    files.close()  # the partition before is whole: moved into place
                    key = (tenant, day)
                    writer = files.enter_context(
                        target.partition_writer(partition(name, tenant, day), schema)
                    )
                columns = list(zip(*(r[2:] for r in run), strict=True))
                writer.write_batch(
                    pa.record_batch(
                        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)],
                        schema=schema,
                    ),
                    row_group_size=ROWS_PER_BATCH,
                )
                written += len(columns[0])
    return written
