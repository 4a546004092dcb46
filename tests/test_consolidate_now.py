"""A conversation consolidated now, when a key asks: over REST and MCP, a run id at once, its
state followed to the end, refused to a read key and to another tenant's conversation. What an
agent just said (chat messages, no times: its episode still open) is closed by the request and
consolidated; a message after it starts the next episode, which the next request takes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fix_model_server import fake_model
from tests.fix_processes import stop_db
from tests.fix_server import Served, make_key, start_server

pytestmark = pytest.mark.slow

THEIRS = "ana"  # recorded four days ago, in two sittings: two closed episodes, pending
_DAYS_AGO = datetime.now(UTC) - timedelta(days=4)
HERS = [
    {"message_id": f"a{i}", "timestamp": (_DAYS_AGO + timedelta(hours=h)).isoformat(), **m}
    for i, (h, m) in enumerate(
        [
            (0, {"speaker": "user", "text": "I work as a carpenter in Porto."}),
            (0, {"speaker": "assistant", "text": "What do you build?"}),
            (5, {"speaker": "user", "text": "Mostly boats, and my sister Rita helps."}),
        ]
    )
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("now")
    with fake_model() as model:  # a new fact a chunk, citing its first episode
        keys = {
            "write": make_key(home, "default", "write"),
            "read": make_key(home, "default", "read"),
            "acme-write": make_key(home, "acme", "write"),
        }
        server = start_server(home, port=None, **model.env())
        server.keys = keys
        try:
            with server.client(keys["write"]) as http:
                said = http.post(f"/v1/conversations/{THEIRS}/messages", json={"messages": HERS})
                assert said.status_code == 200 and said.json()["episodes_new"] == 2, said.text
            yield server
        finally:
            server.stop()
            assert server.process.returncode is not None
            stop_db(home)


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
        assert theirs.status_code == 404, theirs.text  # acme has no such conversation
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


def _mcp(served: Served, tool: str, arguments: dict[str, Any]) -> Any:
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


ZOE = [
    {"role": "user", "content": "Hi, I am Zoe. I live in Bristol and work as a nurse."},
    {"role": "assistant", "content": "Nice to meet you, Zoe."},
    {"role": "user", "content": "Big news: I just moved to Glasgow for a new job at a hospital."},
]
LATER = [{"role": "user", "content": "My first week at the Glasgow hospital went well."}]


def test_what_an_agent_just_said_is_consolidated_when_it_asks_now_over_rest(
    served: Served,
) -> None:
    key = served.keys["write"]
    with served.client(key) as http:
        said = http.post("/v1/conversations/zoe/messages", json={"messages": ZOE})
        assert said.status_code == 200 and said.json()["episodes_new"] == 1, said.text
        run_id = http.post("/v1/conversations/zoe/consolidate").json()["run_id"]
    ended = _followed(served, key, run_id)

    assert ended["status"] == "completed", ended
    assert ended["episodes_consolidated"] == 1 and ended["facts_inserted"] >= 1, ended
    assert ended["left_undone"] == {} and ended["note"] == "nothing left undone"
    with served.client(key) as http:
        facts = http.get("/v1/conversations/zoe/facts").json()
        assert any("Zoe" in f["fact"] for f in facts), facts
        # a message after the request is the next episode, pending until the next request
        later = http.post("/v1/conversations/zoe/messages", json={"messages": LATER}).json()
        assert (later["episodes_new"], later["episodes_grown"]) == (1, 0), later
        status = http.get("/v1/conversations/zoe").json()
        assert (status["episodes_pending"], status["episodes_consolidated"]) == (1, 1)
        again = http.post("/v1/conversations/zoe/consolidate").json()["run_id"]
    second = _followed(served, key, again)
    assert second["status"] == "completed" and second["episodes_consolidated"] == 1, second
    with served.client(key) as http:
        status = http.get("/v1/conversations/zoe").json()
    assert (status["episodes_pending"], status["episodes_consolidated"]) == (0, 2)


def test_what_an_agent_just_said_is_consolidated_when_it_asks_now_over_mcp(
    served: Served,
) -> None:
    added = _mcp(served, "add_memory", {"conversation_id": "yuki", "messages": ZOE})
    assert added["episodes_new"] == 1, added
    started = _mcp(served, "consolidate_conversation", {"conversation_id": "yuki"})
    _followed(served, served.keys["write"], started["run_id"])

    state = _mcp(served, "run_state", {"run_id": started["run_id"]})
    assert state["status"] == "completed" and state["episodes_consolidated"] == 1, state
    assert state["facts_inserted"] >= 1 and state["note"] == "nothing left undone", state
    later = _mcp(served, "add_memory", {"conversation_id": "yuki", "messages": LATER})
    assert (later["episodes_new"], later["episodes_grown"]) == (1, 0), later
    again = _mcp(served, "consolidate_conversation", {"conversation_id": "yuki"})
    ended = _followed(served, served.keys["write"], again["run_id"])
    assert ended["episodes_consolidated"] == 1, ended


def test_an_mcp_client_consolidates_now_and_reads_the_runs_state(served: Served) -> None:
    def call(tool: str, arguments: dict[str, Any]) -> Any:
        return _mcp(served, tool, arguments)

    started = call("consolidate_conversation", {"conversation_id": THEIRS})
    state = call("run_state", {"run_id": started["run_id"]})
    assert state["run_id"] == started["run_id"] and state["status"] in (
        "queued",
        "running",
        "completed",
    )
    _followed(served, served.keys["write"], started["run_id"])
