"""The public API: what ``import slowwave`` exports, and nothing but it in use.

The backfill below imports from ``slowwave`` only, as an embedding application would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import slowwave
from slowwave.sql.db import Database

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("prefect", "torch", "ray", "vllm", "sentence_transformers", "transformers")


def test_importing_slowwave_or_one_stage_loads_no_prefect_torch_or_ray() -> None:
    for module in ("slowwave", "slowwave.tasks.consolidate", "slowwave.sql.db"):
        probe = f"import sys, {module}; print([n for n in {HEAVY!r} if n in sys.modules])"
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == "[]", module


def test_importing_the_command_line_changes_no_environment_the_command_sets_its_defaults() -> None:
    from slowwave.__main__ import DEFAULTS

    clean = {k: v for k, v in os.environ.items() if k not in DEFAULTS}

    def printed(probe: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=ROOT,
            env=clean,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    imported = "import os; was = dict(os.environ); import slowwave.cli; print(os.environ == was)"
    assert printed(imported) == "True"
    # the command itself (its entry point) sets them, for the Prefect it imports
    command = (
        "import os, sys; import slowwave.cli as cli; cli.app = lambda: print("
        "all(os.environ.get(k) == v for k, v in DEFAULTS.items())); "
        "from slowwave.__main__ import DEFAULTS, main; main()"
    )
    assert printed(command) == "True"


def test_every_export_resolves_and_every_error_a_user_can_act_on_is_a_slowwave_error() -> None:
    operations = ["backfill", "consolidate", "export", "forget", "ingest", "revert"]
    assert sorted(slowwave.__all__) == sorted(
        ["AsyncClient", "Client", "Memory", "Settings", "SlowwaveError", "__version__", *operations]
    )
    for name in slowwave.__all__:
        assert getattr(slowwave, name) is not None
    with pytest.raises(AttributeError):
        slowwave.no_such_thing  # noqa: B018
    from slowwave.models.errors import (
        DatabaseUnavailable,
        EmbeddedPostgresError,
        EmbeddingDimensionMismatch,
        HistoryError,
        MalformedAnswer,
        MigrationError,
        ModelNotPrepared,
        RuntimeNotAvailable,
        RuntimeUnreachable,
        SearchError,
        ServerError,
    )
    from slowwave.tasks.revert import RevertRefused

    for error in (
        EmbeddingDimensionMismatch,
        RuntimeNotAvailable,
        RuntimeUnreachable,
        ModelNotPrepared,
        ServerError,
        DatabaseUnavailable,
        EmbeddedPostgresError,
        MigrationError,
        MalformedAnswer,
        HistoryError,
        RevertRefused,
        SearchError,
    ):
        assert issubclass(error, slowwave.SlowwaveError), error


@pytest.mark.slow
def test_an_agent_records_messages_through_the_path_ingest_takes(
    db: Database, settings: slowwave.Settings
) -> None:
    conversation = f"agent-{uuid.uuid4().hex[:8]}"
    messages = [
        {"message_id": "1", "timestamp": "2026-11-24T09:00:00Z", "speaker": "Ana", "text": "hi"},
        {"message_id": "2", "timestamp": "2026-11-24T09:01:00Z", "speaker": "Ana", "text": ""},
        {"message_id": "3", "timestamp": "yesterday", "speaker": "Ana", "text": "I moved."},
        {"message_id": "1", "timestamp": "2026-11-24T09:02:00Z", "speaker": "Ana", "text": "x"},
    ]
    with slowwave.Memory(settings) as memory:
        first = memory.record(conversation, messages)
        again = memory.record(conversation, messages[:1])

    assert (first.received, first.recorded, first.episodes_new) == (4, 1, 1)
    rejected = sorted((r.reason, r.index, r.message_id) for r in first.rejected)
    reasons = [reason for reason, _, _ in rejected]
    assert reasons[0].startswith("duplicate message_id '1'") and "agent-" not in reasons[0]
    assert reasons[1] == "text: is empty" and reasons[2].startswith("timestamp:")
    assert [(i, m) for _, i, m in rejected] == [(3, "1"), (1, "2"), (2, "3")]
    assert (again.recorded, again.already_recorded, again.episodes_new) == (0, 1, 0)  # once
    slowwave.forget(conversation_id=conversation, reason="erasure", by="dpo", settings=settings)
    with slowwave.Memory(settings) as memory:
        refused = memory.record(conversation, messages[:1])
    assert (refused.recorded, len(refused.rejected)) == (0, 1)
