"""Decision metrics: what consolidation decided, skipped, quarantined and spent, over every
finished run, read from the runs' stored summaries (one row per run, so reading them stays
cheap however long the decision log grows). ``slowwave.metrics`` exposes them to Prometheus."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import psycopg

from slowwave import sql
from slowwave.models.run import SIMILARITY_BOUNDS


@dataclass
class SimilarityTotals:
    """One action's similarity histogram summed over runs (cumulative buckets)."""

    buckets: list[float] = field(default_factory=lambda: [0.0] * len(SIMILARITY_BOUNDS))
    total: float = 0.0
    count: float = 0.0


@dataclass
class DecisionMetrics:
    runs: dict[tuple[str, str], float] = field(default_factory=dict)  # (kind, status)
    run_seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)  # RunSummary's numeric fields
    stage_seconds: dict[str, float] = field(default_factory=dict)
    similarity: dict[str, SimilarityTotals] = field(default_factory=dict)  # by action


def read_metrics(conn: psycopg.Connection) -> DecisionMetrics:
    """The metrics of every finished run, summed."""
    metrics = DecisionMetrics()
    similarity: dict[str, SimilarityTotals] = defaultdict(SimilarityTotals)
    for part, key, value in conn.execute(sql.statement("metrics_runs")).fetchall():
        if part in ("runs", "run_seconds"):
            kind, status = key.split("|", 1)
            getattr(metrics, part)[(kind, status)] = float(value)
        elif part == "counter":
            metrics.counters[key] = float(value)
        elif part == "stage_seconds":
            metrics.stage_seconds[key] = float(value)
        elif part == "similarity":
            action, ordinal = key.rsplit("|", 1)
            if int(ordinal) <= len(SIMILARITY_BOUNDS):
                similarity[action].buckets[int(ordinal) - 1] = float(value)
        elif part == "similarity_sum":
            similarity[key].total = float(value)
        elif part == "similarity_count":
            similarity[key].count = float(value)
    metrics.similarity = dict(similarity)
    return metrics
