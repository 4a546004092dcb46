"""A conversation consolidated now, when a key asks: over REST and MCP, a run id at once, its
state followed to the end, refused to a read key and to another tenant's conversation."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fix_processes import run_cli
from tests.fix_server import Served, make_key, start_server

pytestmark = pytest.mark.slow

THEIRS = "conv-30"  # ingested, not consolidated: the replay model knows its facts


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, locomo_path: Path) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("now")
    replay = {"SLOWWAVE_LLM_RUNTIME": "replay", "SLOWWAVE_REPLAY_DATA": str(locomo_path)}
    done = run_cli(home, "ingest", str(locomo_path), "--format", "locomo", **replay)
    assert done.returncode == 0, done.stderr[-2000:]
    keys = {
        "write": make_key(home, "default", "write"),
        "read": make_key(home, "default", "read"),
        "acme-write": make_key(home, "acme", "write"),
    }
    server = start_server(home, **replay)
    server.keys = keys
    try:
        yield server
    finally:
        server.stop()
        assert server.process.returncode is not None
        run_cli(home, "db", "stop")


def _followed(served: Served, key: str, run_id: str, within_s: float = 300) -> dict[str, Any]:
    """The run's state once it ended (queued and running on the way)."""
    deadline = time.monotonic() + within_s
    with served.client(key) as http:
        while time.monotonic() < deadline:
            state = http.get(f"/v1/runs/{run_id}")
            assert state.status_code == 200, state.text
            if state.json()["status"] not in ("queued", "running"):
                return dict(state.json())
            time.sleep(0.5)
    pytest.fail(f"run {run_id} did not end within {within_s} s")


def test_a_write_key_consolidates_a_conversation_now_and_follows_its_run_to_the_end(
    served: Served,
) -> None:
    with served.client(served.keys["write"]) as http:
        started = http.post(f"/v1/conversations/{THEIRS}/consolidate")
        assert started.status_code == 202, started.text
        body = started.json()
        assert body["started_in"] == "server" and body["conversation_id"] == THEIRS
        status = http.get(f"/v1/conversations/{THEIRS}").json()

    ended = _followed(served, served.keys["write"], body["run_id"])

    assert ended["status"] == "completed" and ended["kind"] == "now", ended
    assert (
        ended["episodes_consolidated"]
        == status["episodes_pending"] + status["episodes_consolidated"]
        and ended["facts_inserted"] > 0
    )
    with served.client(served.keys["read"]) as http:
        after = http.get(f"/v1/conversations/{THEIRS}").json()
        assert (after["episodes_pending"], after["oldest_pending_at"]) == (0, None)
        assert after["facts_active"] > 0


def test_a_read_key_and_another_tenant_are_refused_and_see_no_run(served: Served) -> None:
    with served.client(served.keys["read"]) as http:
        refused = http.post(f"/v1/conversations/{THEIRS}/consolidate")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    with served.client(served.keys["acme-write"]) as http:
        theirs = http.post(f"/v1/conversations/{THEIRS}/consolidate")
        assert theirs.status_code == 404, theirs.text  # acme has no conv-30
    with served.client(served.keys["write"]) as http:
        mine = http.post(f"/v1/conversations/{THEIRS}/consolidate").json()["run_id"]
    with served.client(served.keys["acme-write"]) as http:
        other = http.get(f"/v1/runs/{mine}")
        nothing = http.get(f"/v1/runs/{uuid.uuid4()}")
    assert other.status_code == nothing.status_code == 404
    assert other.json()["error"]["message"].replace(mine, "X") == nothing.json()["error"][
        "message"
    ].replace(str(nothing.request.url).rsplit("/", 1)[1], "X")
    _followed(served, served.keys["write"], mine)


def test_an_mcp_client_consolidates_now_and_reads_the_runs_state(served: Served) -> None:
    def call(tool: str, arguments: dict[str, Any]) -> Any:
        with served.client(served.keys["write"]) as http:
            answer = http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                },
                headers={"Accept": "application/json, text/event-stream"},
            ).json()["result"]
        assert not answer["isError"], answer
        return answer["structuredContent"]

    started = call("consolidate_conversation", {"conversation_id": THEIRS})
    state = call("run_state", {"run_id": started["run_id"]})
    assert state["run_id"] == started["run_id"] and state["status"] in (
        "queued",
        "running",
        "completed",
    )
    _followed(served, served.keys["write"], started["run_id"])
