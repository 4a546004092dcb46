"""Facts written straight into semantic_memory with COPY: for tests and benchmarks that need a
populated memory without running consolidation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import psycopg

FactRow = tuple[str, str, list[str]]  # category, fact, keywords


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
    with (
        conn.transaction(),
        conn.cursor().copy(
            "COPY semantic_memory (id, conversation_id, category, fact, keywords, "
            "source_episodic_ids, valid_at, embedding) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy,
    ):
        copy.set_types(
            ["uuid", "text", "text", "text", "text[]", "uuid[]", "timestamptz", "vector"]
        )
        for fact_id, (category, text, keywords), vector in zip(ids, rows, vectors, strict=True):
            copy.write_row(
                (fact_id, conversation, category, text, keywords, [uuid.uuid4()], valid_at, vector)
            )
    return ids
