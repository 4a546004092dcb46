"""Facts written straight into semantic_memory with COPY: for tests and benchmarks that need a
populated memory without running consolidation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import psycopg

from slowwave.sql.copy import copy_rows

FactRow = tuple[str, str, list[str]]  # category, fact, keywords
COLUMNS = (
    ("id", "uuid"),
    ("conversation_id", "text"),
    ("category", "text"),
    ("fact", "text"),
    ("keywords", "text[]"),
    ("source_episodic_ids", "uuid[]"),
    ("valid_at", "timestamptz"),
    ("embedding", "vector"),
)


def copy_facts(
    conn: psycopg.Connection,
    conversation: str,
    rows: Sequence[FactRow],
    vectors: np.ndarray,
    valid_at: datetime,
) -> list[uuid.UUID]:
    """Insert active facts of ``conversation`` (each with one made-up source episode) in one
    transaction; returns their ids in order."""
    ids = [uuid.uuid4() for _ in rows]
    with conn.transaction():
        copy_rows(
            conn,
            "semantic_memory",
            COLUMNS,
            (
                (fact_id, conversation, category, text, keywords, [uuid.uuid4()], valid_at, vector)
                for fact_id, (category, text, keywords), vector in zip(
                    ids, rows, vectors, strict=True
                )
            ),
        )
    return ids
