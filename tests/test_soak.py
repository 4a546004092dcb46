"""The soak's load generator (`python -m benchmarks.soak`; its promises, a replica killed under
load while a run consolidates, are checked at its tiny size in tests/test_benchmarks.py): what
it counts as a failed replica."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from benchmarks.soak import client_load


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
