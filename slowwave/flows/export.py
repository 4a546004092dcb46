"""The export flow: bring the Parquet export up to date, from the Prefect UI or, through the
``export`` deployment's trigger, after every nightly run and every backfill that ends (with or
without failures), so that the export holds what the night learned. Where it goes is the
setting ``SLOWWAVE_EXPORT_TO`` unless the run names ``to``; with neither, a triggered run
exports nothing and says so."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from slowwave.models.errors import NoExportTarget
from slowwave.models.settings import get_settings
from slowwave.service import Caller, Service


@flow(name="slowwave-export", log_prints=True)
def export(
    to: str | None = None, what: str | None = None, since: str | None = None
) -> dict[str, Any]:
    """Write the partitions (tenant and day) that changed since the last export, as Parquet.
    ``to``: a folder or ``s3://bucket/prefix`` (default ``SLOWWAVE_EXPORT_TO``); ``what``: of
    facts, versions, decisions, runs, episodes (default ``SLOWWAVE_EXPORT_WHAT``); ``since``:
    only the partitions from this day, time or run on."""
    with Service.open(get_settings()) as service:
        try:
            report = service.export(Caller.operator(), to, what=what, since=since)
        except NoExportTarget as exc:  # a deployment run where it is not set: said, not failed
            get_run_logger().warning(f"nothing exported: {exc}")
            return {}
    create_table_artifact(
        table=[{"what": name, **asdict(kind)} for name, kind in report.kinds.items()],
        key="slowwave-export",
        description=f"export to `{report.target}`: {report.files_changed} file(s) written or "
        "removed",
    )
    print(f"export to {report.target}: {report.files_changed} file(s) written or removed")
    return asdict(report)
