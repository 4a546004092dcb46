"""Decision metrics in the Prometheus text format: what a scraper reads matches the database."""

from __future__ import annotations

from pathlib import Path

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from slowwave.metrics import metrics_text, serve_metrics
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.processes import free_port
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_model_server import fake_model
from tests.fix_processes import run_cli


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus exposition, by name and labels (parsing fails on bad
    syntax)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _ageless(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if not line.startswith("slowwave_episodes_pending_old")
    )


@pytest.mark.slow
def test_a_scraper_reads_the_runs_decisions_tokens_and_similarities_as_the_database_has_them(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_path: Path,
) -> None:
    ingest(db, locomo_path, IngestPolicy.of(settings))
    run = consolidate(
        db, LoCoMoReplayModel(locomo_path), embedder, settings, conversations=["conv-30"]
    )
    port = free_port()
    server, thread = serve_metrics(db, port)
    try:
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    # the same text but for the age of the oldest pending episode, which grows as time goes
    assert _ageless(scraped) == _ageless(metrics_text(db))
    samples = _samples(scraped)
    pending = samples[("slowwave_episodes_pending", (("tenant", "default"),))]
    (in_db,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE consolidated_at IS NULL"
    ).fetchone()  # type: ignore[misc]
    assert pending == in_db > 0  # the other conversations, ingested and not consolidated
    assert samples[("slowwave_episodes_pending_oldest_seconds", (("tenant", "default"),))] > 0
    assert samples[("slowwave_runs_total", (("kind", "manual"), ("status", "completed")))] == 1
    new = samples[("slowwave_actions_total", (("action", "new"),))]
    assert new == run.facts_inserted > 0
    (in_log,) = conn.execute("SELECT count(*) FROM decision_log WHERE action = 'new'").fetchone()  # type: ignore[misc]
    assert new == in_log
    assert samples[("slowwave_episodes_total", (("outcome", "consolidated"),))] == 19
    assert samples[("slowwave_tokens_total", (("kind", "prompt"),))] == run.prompt_tokens
    assert samples[("slowwave_stage_seconds_total", (("stage", "apply"),))] > 0
    similar = conn.execute(
        "SELECT action, count(*), count(*) FILTER (WHERE similarity <= 0.5) "
        "FROM decision_log WHERE similarity IS NOT NULL GROUP BY action"
    ).fetchall()
    assert similar, "the replay run recorded similarities"
    for action, count, at_most_half in similar:
        assert samples[("slowwave_decision_similarity_count", (("action", action),))] == count
        bucket = (("action", action), ("le", "0.5"))
        assert samples[("slowwave_decision_similarity_bucket", bucket)] == at_most_half


@pytest.mark.slow
def test_slowwave_metrics_prints_the_prometheus_text_format(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "metrics")
    assert result.returncode == 0, result.stderr
    samples = _samples(result.stdout)
    assert samples[("slowwave_actions_total", (("action", "new"),))] == 0
    assert "# TYPE slowwave_decision_similarity histogram" in result.stdout


@pytest.mark.slow
def test_prompt_tokens_the_engines_prefix_cache_served_are_counted_apart_from_billed_ones(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_one_path: Path,
) -> None:
    ingest(db, locomo_one_path, IngestPolicy.of(settings))
    with fake_model() as fake:
        model = OpenAICompatibleModel(
            fake.url, "fake", strict=False, schema_dialect="json_object", concurrency=1
        )
        try:
            run = consolidate(db, model, embedder, settings, conversations=["conv-30"])
        finally:
            model.close()
    # every chunk's prompt starts with the same system prompt: the slot's cache served it
    assert 0 < run.prompt_tokens_cached < run.prompt_tokens
    by_chunk, by_run = conn.execute(
        "SELECT (SELECT sum(cached_tokens) FROM consolidation_chunks WHERE run_id = r.id), "
        "r.prompt_tokens_cached FROM consolidation_runs r WHERE r.id = %s",
        (run.run_id,),
    ).fetchone()  # type: ignore[misc]
    assert by_chunk == by_run == run.prompt_tokens_cached
    samples = _samples(metrics_text(db))
    assert samples[("slowwave_tokens_total", (("kind", "prompt"),))] == run.prompt_tokens
    computed = samples[("slowwave_prompt_tokens_computed_total", ())]
    assert computed == run.prompt_tokens - run.prompt_tokens_cached == run.prompt_tokens_computed
    shown = ("tokens in: computed (prefix cache)", f"{computed:.0f} ({by_run})")
    assert shown in run.counter_rows()


@pytest.mark.slow
def test_a_backfill_counts_the_summaries_it_asked_for_in_its_runs_calls_and_tokens(
    tmp_path: Path, prefect_api_url: str
) -> None:
    sample = Path(__file__).resolve().parents[1] / "examples/transcripts/sample-chats.jsonl"
    with fake_model() as fake:
        # the sample's episodes are short: every one summarised all the same
        # (and no second look: the calls counted are the chunks' and the summaries')
        env = fake.env(
            SLOWWAVE_SUMMARIZE_ON_INGEST="true",
            SLOWWAVE_SUMMARY_MIN_CHARS="0",
            SLOWWAVE_SECOND_LOOK="false",
            PREFECT_API_URL=prefect_api_url,
        )
        done = run_cli(tmp_path, "backfill", str(sample), **env)
        summarized = fake.calls
    assert done.returncode == 0, done.stderr[-3000:]
    samples = _samples(run_cli(tmp_path, "metrics").stdout)
    chunks = samples[("slowwave_chunks_total", (("outcome", "all"),))]
    calls = samples[("slowwave_model_calls_total", ())]
    # every call the model answered is in the run: the 10 episodes' summaries and the chunks
    assert calls == summarized == chunks + 10
    assert samples[("slowwave_tokens_total", (("kind", "prompt"),))] > 0
    computed = samples[("slowwave_prompt_tokens_computed_total", ())]
    assert 0 < computed < samples[("slowwave_tokens_total", (("kind", "prompt"),))]
