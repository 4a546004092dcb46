"""The service's own promises, beside what tests/test_surfaces.py compares across surfaces:
errors by code and status, what a ``Memory`` owns, and a database that does not answer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import slowwave
import slowwave.errors
from slowwave import Memory
from slowwave.models.embedding.base import Embedder, Vectors
from slowwave.models.settings import Settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database


def test_every_public_error_has_a_code_and_the_http_status_it_means() -> None:
    for name in slowwave.errors.__all__:
        error = getattr(slowwave.errors, name)
        assert issubclass(error, slowwave.SlowwaveError), name
        assert error.code and error.code.islower(), name
        assert 400 <= error.status < 600, name
    table = slowwave.errors.by_code()
    assert table["not_found"] is slowwave.errors.NotFound
    assert table["database_unavailable"] is slowwave.errors.DatabaseUnavailable
    assert slowwave.errors.DatabaseUnavailable.status == 503
    assert slowwave.errors.DatabaseUnavailable.retry_after_s
    narrower = slowwave.errors.InvalidRequest("k must be from 1 to 100", code="invalid_k")
    assert (narrower.code, narrower.status, str(narrower)) == ("invalid_k", 422, narrower.message)
    assert slowwave.errors.InvalidRequest.code == "invalid_request"  # the class keeps its own


class Counted:
    """An embedder of the caller's: the service uses it and must leave it open."""

    name = "counted"
    dim = 384

    def __init__(self) -> None:
        self.closed = False

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.ones((len(texts), self.dim), dtype=np.float32) / np.sqrt(self.dim)

    def close(self) -> None:
        self.closed = True


def test_a_memory_leaves_an_embedder_and_a_database_it_was_lent_open(
    settings: Settings, db: Database
) -> None:
    given = Counted()
    assert isinstance(given, Embedder)
    memory = Memory(settings, given)
    memory.record("own", [_said(1)])
    assert memory.search("hello", "own").hits == []
    memory.close()
    assert given.closed is False
    with Memory(settings, given, database=db) as borrowed:
        borrowed.record("own", [_said(2)])
    assert given.closed is False
    with db.connection() as conn:  # the database it was lent stays open
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_naive_as_of_is_utc_in_every_read(settings: Settings, db: Database) -> None:
    from datetime import UTC, datetime

    with Memory(settings, Counted(), database=db) as memory:
        memory.record("zones", [_said(3)])
        naive = memory.facts("zones", as_of=datetime(2025, 3, 5, 9, 0))
        zoned = memory.facts("zones", as_of=datetime(2025, 3, 5, 9, 0, tzinfo=UTC))
        assert naive == zoned
        assert memory.search("hello", "zones", as_of=datetime(2025, 3, 5)).hits == []
        assert memory.context("zones", as_of=datetime(2025, 3, 5)).context == ""


def test_a_database_that_does_not_answer_is_unavailable_with_a_retry_not_an_internal_error(
    tmp_path: Path,
) -> None:
    closed = Settings(
        home=tmp_path, database_url="postgresql://nobody@127.0.0.1:9/none?connect_timeout=2"
    )
    with (
        pytest.raises(slowwave.errors.DatabaseUnavailable) as down,
        Service.open(closed) as service,
    ):
        service.facts(Caller.operator(), "anyone")
    assert down.value.status == 503 and down.value.code == "database_unavailable"
    assert down.value.retry_after_s


def test_a_caller_of_one_scope_is_refused_what_needs_another(
    settings: Settings, db: Database
) -> None:
    from slowwave.models.keys import Scope

    service = Service(settings, db, Counted())
    reader = Caller("acme", Scope.read, "a read key")
    with pytest.raises(slowwave.errors.Forbidden):
        service.record(reader, "theirs", [_said(4)])
    with pytest.raises(slowwave.errors.Forbidden):
        service.forget(reader, conversation_id="theirs", reason="not theirs to forget")
    admin = Caller("acme", Scope.admin, "an admin key of acme")
    with pytest.raises(slowwave.errors.Forbidden):  # runs span tenants
        service.runs(admin)
    service.close()


def _said(n: int) -> dict[str, Any]:
    return {
        "message_id": f"m{n}",
        "timestamp": "2025-03-04T18:00:00Z",
        "speaker": "Dana",
        "text": "hello there",
    }
