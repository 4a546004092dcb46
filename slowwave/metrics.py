"""Decision metrics and the backlog in the Prometheus text format: printed by `slowwave metrics`,
served on 127.0.0.1 for a scraper by `slowwave metrics --serve` and by `slowwave serve`. Each
scrape reads the runs' summaries (``tasks.metrics``) and the pending episodes per tenant, so the
figures are the database's, whichever process ran the flows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from slowwave.models.run import SIMILARITY_BOUNDS
from slowwave.sql.db import Database
from slowwave.sql.db.status import Backlog, read_backlog
from slowwave.tasks.metrics import DecisionMetrics, read_metrics

# counters of a run's summary, by metric and label value
ACTIONS = {
    "facts_inserted": "new",
    "facts_reinforced": "reinforce",
    "facts_updated": "update",
    "facts_invalidated": "invalidate",
    "dedupe_merges": "merge",
    "actions_rejected": "rejected",
    "facts_evicted": "evict",
}
EPISODES = {
    "episodes_consolidated": "consolidated",
    "episodes_skipped": "skipped_by_gate",
    "episodes_quarantined": "quarantined",
    "episodes_deferred": "deferred",
    "episodes_conflicted": "conflicted",
    "episodes_over_budget": "over_budget",
}
GRAY_ZONE = {
    "gray_zone_pairs": "asked",
    "gray_zone_merges": "merged",
    "gray_zone_unfaithful": "unfaithful",
}
CHUNKS = {"chunks": "all", "chunks_failed": "failed", "chunks_conflicted": "conflicted"}
TOKENS = {"prompt_tokens": "prompt", "completion_tokens": "completion"}
# counters of a run's summary with no label: metric, help, summary field
SINGLE_COUNTERS = (
    ("slowwave_model_calls", "Prompts sent to the model.", "model_calls"),
    (
        "slowwave_answers_cut_off",
        "Answers that reached max_tokens (whole items kept).",
        "answers_cut_off",
    ),
    (
        "slowwave_model_refusals",
        "429s and 503s the model's endpoint answered before answers the runs applied.",
        "model_refusals",
    ),
    (
        "slowwave_model_refusal_wait_seconds",
        "Seconds spent waiting those refusals out.",
        "model_waited_s",
    ),
    (
        "slowwave_actions_ungrounded",
        "Facts refused as ungrounded: a name, number, date, email address or URL in no message "
        "they cite and no fact shown (counted among the rejected actions too).",
        "actions_ungrounded",
    ),
)


def families(m: DecisionMetrics) -> Iterator[Metric]:
    """The metric families of ``m``."""

    def labelled(name: str, doc: str, label: str, keys: dict[str, str]) -> Metric:
        family = CounterMetricFamily(name, doc, labels=[label])
        for key, value in keys.items():
            family.add_metric([value], m.counters.get(key, 0.0))
        return family

    runs = CounterMetricFamily("slowwave_runs", "Finished runs.", labels=["kind", "status"])
    seconds = CounterMetricFamily(
        "slowwave_run_seconds", "Wall time of finished runs.", labels=["kind", "status"]
    )
    for (kind, status), value in sorted(m.runs.items()):
        runs.add_metric([kind, status], value)
        seconds.add_metric([kind, status], m.run_seconds.get((kind, status), 0.0))
    yield runs
    yield seconds
    yield labelled("slowwave_actions", "Decisions applied, by action.", "action", ACTIONS)
    yield labelled("slowwave_episodes", "Episodes by outcome.", "outcome", EPISODES)
    yield labelled("slowwave_chunks", "Chunks by outcome.", "outcome", CHUNKS)
    yield labelled("slowwave_tokens", "Model tokens billed.", "kind", TOKENS)
    yield labelled(
        "slowwave_gray_zone_pairs",
        "Gray-zone pairs: asked of the model, merged, refused as unfaithful.",
        "outcome",
        GRAY_ZONE,
    )
    computed = CounterMetricFamily(
        "slowwave_prompt_tokens_computed",
        'Prompt tokens the engine computed: the billed ones (slowwave_tokens{kind="prompt"}) '
        "less those its prefix cache served.",
    )
    computed.add_metric(
        [], m.counters.get("prompt_tokens", 0.0) - m.counters.get("prompt_tokens_cached", 0.0)
    )
    yield computed
    for name, doc, key in SINGLE_COUNTERS:
        family = CounterMetricFamily(name, doc)
        family.add_metric([], m.counters.get(key, 0.0))
        yield family
    stages = CounterMetricFamily(
        "slowwave_stage_seconds",
        "Seconds spent in each stage, summed over shards.",
        labels=["stage"],
    )
    for stage, value in sorted(m.stage_seconds.items()):
        stages.add_metric([stage], value)
    yield stages
    similarity = HistogramMetricFamily(
        "slowwave_decision_similarity",
        "Cosine similarity of a decision's fact to its nearest active fact (dedupe merges, "
        "new facts).",
        labels=["action"],
    )
    for action, totals in sorted(m.similarity.items()):
        buckets: list[tuple[str, float]] = [
            (str(bound), n) for bound, n in zip(SIMILARITY_BOUNDS, totals.buckets, strict=True)
        ]
        buckets.append(("+Inf", totals.count))
        similarity.add_metric([action], buckets, sum_value=totals.total)
    yield similarity


def backlog_families(backlog: list[Backlog], now: datetime) -> Iterator[Metric]:
    """The backlog per tenant: episodes pending, and how long the oldest has waited."""
    pending = GaugeMetricFamily(
        "slowwave_episodes_pending",
        "Episodes waiting for a run (neither consolidated nor quarantined), by tenant.",
        labels=["tenant"],
    )
    oldest = GaugeMetricFamily(
        "slowwave_episodes_pending_oldest_seconds",
        "Seconds since the oldest pending episode was recorded, by tenant.",
        labels=["tenant"],
    )
    for waiting in backlog:
        pending.add_metric([waiting.tenant], waiting.episodes_pending)
        age = (now - waiting.oldest_pending_at).total_seconds()
        oldest.add_metric([waiting.tenant], max(age, 0.0))
    yield pending
    yield oldest


class DecisionCollector(Collector):
    """Reads the runs' decisions from the database at each collection."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        with self.db.connection() as conn:
            metrics = read_metrics(conn)
        yield from families(metrics)


class BacklogCollector(Collector):
    """Reads the backlog at each collection: every tenant's, or one ``tenant``'s (a server
    shows a key of another tenant than the default its own only)."""

    def __init__(self, db: Database, tenant: str | None = None) -> None:
        self.db = db
        self.tenant = tenant

    def collect(self) -> Iterator[Metric]:
        with self.db.connection() as conn:
            backlog = read_backlog(conn)
        mine = [b for b in backlog if self.tenant is None or b.tenant == self.tenant]
        yield from backlog_families(mine, datetime.now(UTC))


def registry_for(db: Database) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DecisionCollector(db))
    registry.register(BacklogCollector(db))
    return registry


def metrics_text(db: Database) -> str:
    """The metrics now, in the Prometheus text format."""
    return generate_latest(registry_for(db)).decode()


def serve_metrics(db: Database, port: int) -> Any:
    """Serve the metrics on http://127.0.0.1:``port``/metrics from a thread; returns the
    server (``shutdown()`` it) and its thread."""
    return start_http_server(port, addr="127.0.0.1", registry=registry_for(db))
