"""The soak, sized for CI (`python -m benchmarks.soak` runs it at full size): half a minute
of mixed search and record load from 16 clients over two replicas, one killed with SIGKILL
midway, while a consolidation runs on the same database."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from benchmarks.soak import client_load, run_soak


@pytest.mark.slow
def test_load_on_two_replicas_while_a_run_consolidates_loses_nothing_and_changes_no_fact(
    locomo_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its homes, and only its, here
    figures = run_soak(locomo_path, seconds=30, clients=16, pending=1)
    shown = str(figures)  # a string, so a failure prints every figure

    assert figures["searches"] > 100 and figures["records"] > 100, shown
    assert figures["no_5xx"], "\n".join(figures["failures"] + figures["replica_errors"])
    assert figures["replicas_failed"] == 1, shown  # the one killed; the other kept serving
    assert figures["stored_exactly_once"], shown
    assert figures["consolidation_status"] == "completed", shown
    assert figures["facts_expected"] > 0 and figures["facts_equal_without_load"], shown
    # the Postgres of its homes went with them, the killed replica's holding notwithstanding
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if _soak_postgres(p, tmp_path)]
    assert not left, f"the soak left its Postgres running: {left}"


def _soak_postgres(process: psutil.Process, root: Path) -> bool:
    command = " ".join(process.info["cmdline"] or [])
    return "postgres" in command and str(root) in command


def test_a_replica_slow_to_answer_is_asked_again_elsewhere_and_not_counted_failed() -> None:
    """Only a refused connection marks a replica failed: a read that times out on a live one
    (the machine busy) is sent to the other, and counted by kind."""
    slow_once = {"left": 1}

    def replicas(request: httpx.Request) -> httpx.Response:
        if request.url.port == 1 and slow_once["left"]:
            slow_once["left"] -= 1
            raise httpx.ReadTimeout("timed out", request=request)
        if request.url.port == 3:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"results": []})

    def load(urls: list[str]) -> dict[str, Any]:
        return asyncio.run(
            client_load(
                urls,
                "key",
                [("c", "q")],
                clients=2,
                seconds=0.2,
                kill_at=1e9,
                kill=lambda: None,
                transport=httpx.MockTransport(replicas),
            )
        )

    figures = load(["http://127.0.0.1:1", "http://127.0.0.1:2"])
    assert figures["replicas_failed"] == 0, figures
    assert figures["transport_errors"] == {"ReadTimeout": 1}, figures
    assert figures["status_5xx"] == 0

    refused = load(["http://127.0.0.1:3", "http://127.0.0.1:2"])
    assert refused["replicas_failed"] == 1, refused
    assert refused["status_5xx"] == 0
