"""The ingest benchmark, sized for CI: every path ingests the same messages, each in a process
of its own, and the last line holds the figures the README quotes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks.ingest import ENGINES, FIRST_SIZE_KEYS, PATHS, read_parquet_pyarrow
from tests.fix_processes import slowwave_env

ROOT = Path(__file__).resolve().parents[1]


def _benchmark(tmp_path: Path, *args: str) -> dict[str, Any]:
    """``python -m benchmarks.ingest ARGS --json`` in a home of its own: its figures."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.ingest", *args, "--json"],
        cwd=ROOT,
        env=slowwave_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.slow
def test_the_ingest_benchmark_runs_every_path_on_the_same_messages_at_two_sizes(
    tmp_path: Path,
) -> None:
    figures = _benchmark(tmp_path, "--sizes", "3000,6000")
    for key in (*FIRST_SIZE_KEYS, "driver_peak_rss_ratio"):
        assert figures[key] > 0, key
    for size in (3000, 6000):
        ingested = figures["by_size"][str(size)]["ingested_by_path"]
        assert ingested == dict.fromkeys(PATHS + ENGINES, size)


def test_the_pyarrow_engine_measured_against_polars_checks_what_the_shipped_path_checks(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from slowwave.tasks.ingest.columnar import ColumnarSource, read_columnar

    at = datetime(2024, 5, 1, 9, tzinfo=UTC)
    rows = [
        ("c1", "1", at, "user", "Fine."),
        ("c1", "2", at, "user", "nul\x00inside"),
        ("", "3", at, "user", "No conversation."),
        ("c\x07", "4", at, "user", "A bell in the id."),
        ("c1", "5", None, "user", "No time."),
        ("c1", "6", at, "   ", "A blank speaker."),
        ("c1", "7", at, "user", "x" * 40),
        ("c1", None, None, None, None),
    ]
    path = tmp_path / "hostile.parquet"
    names = ("conversation_id", "message_id", "timestamp", "speaker", "text")
    types = (pa.string(), pa.string(), pa.timestamp("us", "UTC"), pa.string(), pa.string())
    columns = [pa.array(list(c), t) for c, t in zip(zip(*rows, strict=True), types, strict=True)]
    pq.write_table(pa.table(dict(zip(names, columns, strict=True))), path)

    def outcome(batches: Any) -> tuple[list[int], list[tuple[int, str]]]:
        kept, refused = [], []
        for batch in batches:
            kept += batch.table.column("line").to_pylist()
            refused += [(r.line, r.reason) for r in batch.rejects]
        return kept, sorted(refused)

    polars = outcome(read_columnar(ColumnarSource(str(path), "parquet", {}), 3, 30))
    pyarrow = outcome(read_parquet_pyarrow(path, 3, 30))

    assert polars == pyarrow
    assert polars[0] == [1] and len(polars[1]) == 7


@pytest.mark.slow
def test_the_ingest_benchmark_runs_another_checkouts_own_ingest_side_by_side(
    tmp_path: Path,
) -> None:
    figures = _benchmark(tmp_path, "--sizes", "3000", "--paths", "parquet", "--against", str(ROOT))
    by_size = figures["by_size"]["3000"]
    assert by_size["ingested_by_path"] == {"parquet": 3000, "against": 3000}
    assert by_size["parquet_against_messages_per_s"] > 0 and by_size["parquet_vs_against"] > 0
    assert figures["against"] == str(ROOT)
