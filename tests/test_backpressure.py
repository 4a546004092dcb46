"""A hosted model's backpressure: 429 with Retry-After is waited out as it says, fewer requests
go at once while it lasts, the waiting is counted in the run's record, and an endpoint that
keeps refusing ends the run within its wait limit with its claims released, not hung. Against
an HTTP endpoint of the test's own (``tests.fix_model_server``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.llm import load_model
from slowwave.models.llm.base import GenerationRequest, Purpose
from slowwave.models.llm.openai import OpenAICompatibleModel, retry_after_s
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from tests.fix_episodes import add, at, episodes_state, facts, make_episode
from tests.fix_model_server import FakeModel, fake_model

SAID = ["Dana teaches chemistry in Leeds.", "Dana climbs with Mia.", "Dana saves for Japan."]
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array"}}}


def _request(n: int) -> GenerationRequest:
    return GenerationRequest(
        chunk_id=f"c{n}", purpose=Purpose.consolidate, system="Answer in JSON.",
        user=f"### E1 | now\nuser: hello {n}\n", json_schema=SCHEMA,
    )  # fmt: skip


def _client(model: FakeModel, **options: float) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        model.url,
        "fake",
        strict=False,
        schema_dialect="json_object",
        concurrency=int(options.pop("concurrency", 8)),
        max_retries=int(options.pop("max_retries", 5)),
        max_wait_s=options.pop("max_wait_s", 300.0),
    )


def test_retry_after_is_read_as_seconds_or_as_an_http_date() -> None:
    def answered(value: str) -> float | None:
        return retry_after_s(httpx.Response(429, headers={"Retry-After": value}))

    assert answered("7") == 7.0
    soon = answered(format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True))
    assert soon is not None and 25 < soon <= 30
    assert answered("soon") is None and answered("") is None


@pytest.mark.slow  # waits out real Retry-After seconds
def test_while_an_endpoint_refuses_fewer_requests_go_at_once_and_each_answer_says_so() -> None:
    with fake_model(refuse=4, refuse_after_s=0.2, answer_s=0.3) as model:
        client = _client(model, concurrency=4)
        try:
            started = time.monotonic()
            answers = client.generate([_request(n) for n in range(8)])
        finally:
            client.close()
    assert [a.error for a in answers] == [None] * 8
    assert sum(a.refusals for a in answers) == 4 == model.refused
    assert all(a.waited_s >= 0.2 for a in answers if a.refusals)
    # four let in at first, all refused: one at a time after that, then two, three after
    # one and two more answers; four only once six are answered, with two left
    assert model.peak_after_refusals < 4
    assert time.monotonic() - started < 30


@pytest.mark.slow  # waits out real Retry-After seconds
def test_an_endpoint_that_keeps_refusing_gives_up_within_the_wait_limit() -> None:
    with fake_model(refuse=10**6, refuse_after_s=1) as model:
        client = _client(model, concurrency=2, max_retries=100, max_wait_s=2.5)
        try:
            started = time.monotonic()
            with pytest.raises(RuntimeUnreachable, match="HTTP 429"):
                client.generate([_request(1)])
        finally:
            client.close()
    assert time.monotonic() - started < 10
    assert 2 <= model.refused <= 5


@pytest.mark.slow
def test_a_run_against_a_refusing_endpoint_waits_it_out_and_its_record_counts_the_wait(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(conn, *(make_episode("d", f"d{i}", t, at(2024, 3, 1 + i)) for i, t in enumerate(SAID)))
    with fake_model(refuse=3, refuse_after_s=1) as model:
        on = model.settings(settings)
        summary = consolidate(db, load_model(on), embedder, on)
    assert summary.status == "completed" and summary.episodes_consolidated == 3
    (record,) = conn.execute(  # type: ignore[misc]
        "SELECT summary FROM consolidation_runs WHERE id = %s", (summary.run_id,)
    ).fetchone()
    assert record["model_refusals"] == 3 and record["model_waited_s"] >= 3
    # what a run without refusals writes: the fake model's one fact a chunk
    assert sorted(f["fact"] for f in facts(conn)) == sorted(
        f'The user said: "user: {t}"' for t in SAID
    )


@pytest.mark.slow
def test_a_run_against_an_endpoint_that_keeps_refusing_ends_with_its_claims_released(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(conn, *(make_episode("d", f"d{i}", t, at(2024, 3, 1 + i)) for i, t in enumerate(SAID)))
    with fake_model(refuse=10**6, refuse_after_s=1) as model:
        refusing = model.settings(settings, openai_max_wait_s=2.0)
        started = time.monotonic()
        with pytest.raises(RuntimeUnreachable):
            consolidate(db, load_model(refusing), embedder, refusing)
    assert time.monotonic() - started < 60
    for episode in episodes_state(conn).values():
        assert episode["consolidated_at"] is None and episode["claimed_by"] is None
        assert episode["attempts"] == 0  # the endpoint's refusal is charged to no chunk
    (status,) = conn.execute(  # type: ignore[misc]
        "SELECT status FROM consolidation_runs ORDER BY started_at DESC LIMIT 1"
    ).fetchone()
    assert status == "failed"
