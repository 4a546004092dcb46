"""Looking for what a forget must have removed: in every column, under a folder, and in
Prefect's store (over its API and in its database's files)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import psycopg
from pydantic import BaseModel

from slowwave.models.settings import Settings
from slowwave.sql.db import Database

T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


def new_marker() -> str:
    """A word no text holds by chance, in letters only: a fact of hex digits would be refused
    by the guard as mostly digits (a marker must land where the text lands)."""
    return "zqxv" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex)


def transcript(path: Path, marker: str) -> Path:
    lines = []
    for i, (conversation, text) in enumerate(
        [
            ("secret", f"remember: Noor keeps her diary under the code word {marker}."),
            ("secret", f"remember: Noor told her doctor about {marker} and the clinic."),
            ("secret", "remember: Noor plays chess with her neighbour."),
            ("keep", "remember: Omar restores old radios in his shed."),
        ]
    ):
        lines.append(
            json.dumps(
                {
                    "conversation_id": conversation,
                    "message_id": str(i),
                    "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
                    "speaker": "user",
                    "text": text,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def consolidated_secret(db: Database, settings: Settings, source: Path) -> None:
    """The transcript ingested and consolidated by the command-following model: the
    conversations "secret" (with the marker) and "keep" hold facts and decisions."""
    from slowwave.tasks.consolidate import consolidate
    from slowwave.tasks.ingest.policy import IngestPolicy
    from slowwave.tasks.ingest.transcripts import ingest
    from tests.fix_episodes import with_settings
    from tests.reliability.fix_commands import CommandModel, HashEmbedder

    ingest(db, source, IngestPolicy.of(with_settings(settings, summarize_on_ingest=False)))
    consolidate(db, CommandModel(), HashEmbedder(), settings, kind="backfill")


def columns_holding(conn: psycopg.Connection, marker: str) -> list[str]:
    """Every text, jsonb, array and tsvector column of every table that still holds it."""
    found = []
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' "
        "AND data_type IN ('text', 'jsonb', 'json', 'ARRAY', 'tsvector', 'character varying')"
    ).fetchall():
        (hits,) = conn.execute(
            f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',
            (f"%{marker}%",),
        ).fetchone()  # type: ignore[misc]
        if hits:
            found.append(f"{table}.{column}")
    return found


def files_holding(home: Path, marker: str) -> list[str]:
    needle = marker.encode()
    return [
        str(p.relative_to(home))
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink() and needle in p.read_bytes().lower()
    ]


def prefect_holding(flow_run_id: UUID, *needles: str) -> list[str]:
    """Where Prefect's store holds any of ``needles`` for the flow run: its name, parameters
    and state, its task runs, logs and artifacts (over the API), and the files of the test
    server's database (every byte, free pages included)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import get_current_settings

    APILogWorker.drain_all(timeout=10)  # the run's log lines are sent in batches
    runs = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
    with get_client(sync_client=True) as client:
        parts: dict[str, Sequence[BaseModel]] = {
            "flow run": [client.read_flow_run(flow_run_id)],
            "task runs": client.read_task_runs(flow_run_filter=runs),
            "logs": client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
            ),
            "artifacts": client.read_artifacts(flow_run_filter=runs),
        }
    found = []
    for part, items in parts.items():
        text = json.dumps([i.model_dump(mode="json") for i in items]).lower()
        found += [f"{part}: {n}" for n in needles if n.lower() in text]
    url = get_current_settings().server.database.connection_url
    database = Path(str(url.get_secret_value() if url else "").split(":///", 1)[-1])
    assert database.is_file(), f"the test server's database is not at {database}"
    for needle in needles:
        found += [f"file {f}: {needle}" for f in files_holding(database.parent, needle)]
    return found
