"""One operation, one answer: the same call through Python (``slowwave.Memory`` and
``slowwave.api``), the CLI, REST and MCP leaves the same database and gives the same answer,
defaults included — a forget's purge among them. Every surface calls ``slowwave.service``; this
is the test that they parse and render and decide nothing else."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import slowwave
import slowwave.errors
from slowwave import Memory
from slowwave.models.settings import Settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database
from tests.fix_processes import run_cli
from tests.fix_server import Served, make_key, start_server

pytestmark = pytest.mark.slow

THEIRS = "conv-30"  # consolidated by the backfill below
SURFACES = ("python", "cli", "rest", "mcp")
T = "2025-03-04T18:00:00Z"


def said(n: int, text: str, at: str = T) -> dict[str, Any]:
    return {"message_id": f"m{n}", "timestamp": at, "speaker": "Dana", "text": text}


MESSAGES = [
    said(1, "I moved to Manchester last month."),
    said(2, "The new lab is old, and I keep fixing burners.", "2025-03-04T18:01:00Z"),
]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, locomo_path: Path, prefect_api_url: str
) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("surfaces")
    replay = {"SLOWWAVE_LLM_RUNTIME": "replay", "SLOWWAVE_REPLAY_DATA": str(locomo_path)}
    done = run_cli(
        home, "backfill", str(locomo_path), "-c", THEIRS, PREFECT_API_URL=prefect_api_url, **replay
    )
    assert done.returncode == 0, done.stderr[-2000:]
    admin = make_key(home, "default", "admin")
    server = start_server(
        home,
        port=None,
        SLOWWAVE_SERVE_RATE_PER_S="10000",
        SLOWWAVE_SERVE_RATE_BURST="10000",
        **ALIKE,
    )
    server.keys = {"admin": admin}
    try:
        yield server
    finally:
        server.stop()
        run_cli(home, "db", "stop")


# Every surface ranks episodic memories alike only while their reviews do not weigh them: a
# search reviews what it returns, so the next one's FSRS retrievability differs
# (tests/test_episodic.py tests the reviews); here the weight is 0 on every surface.
ALIKE = {"SLOWWAVE_SEARCH_RETRIEVABILITY_WEIGHT": "0"}


def settings_of(served: Served) -> Settings:
    return Settings(home=served.home, search_retrievability_weight=0)


def ask(served: Served, operation: str, *args: Any, **kwargs: Any) -> Any:
    """Python's surface: a ``Memory`` of the server's database, closed once it answered."""
    with Memory(settings_of(served)) as memory:
        return getattr(memory, operation)(*args, **kwargs)


def mcp(served: Served, tool: str, arguments: dict[str, Any]) -> Any:
    """A ``tools/call`` as any MCP client sends it; the tool's structured answer."""
    with served.client(served.keys["admin"]) as http:
        answer = http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            },
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert not result.get("isError"), result
    structured = result.get("structuredContent")
    if structured is None:
        return result["content"][0]["text"]
    return structured.get("result", structured) if set(structured) == {"result"} else structured


def cli_json(served: Served, *args: str) -> Any:
    done = run_cli(served.home, *args, **ALIKE)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def rest(served: Served, method: str, path: str, **kwargs: Any) -> Any:
    with served.client(served.keys["admin"]) as http:
        answer = http.request(method, path, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()


def rows_of(served: Served, conversation: str) -> dict[str, Any]:
    """What the database holds about a conversation, as comparable values."""
    with Database(settings_of(served)) as db, db.connection() as conn:
        episodes = conn.execute(
            "SELECT start_at, end_at, jsonb_array_length(messages), consolidated_at IS NULL "
            "FROM episodic_memory WHERE conversation_id = %s ORDER BY start_at",
            (conversation,),
        ).fetchall()
        ingested = conn.execute(
            "SELECT count(*) FROM ingested_messages WHERE conversation_id = %s", (conversation,)
        ).fetchone()
        stones = conn.execute(
            "SELECT kind, purged_at IS NOT NULL FROM history_operations "
            "WHERE target = slowwave_digest(%s)",
            (conversation,),
        ).fetchall()
    return {"episodes": episodes, "ingested": ingested, "tombstones": stones}


# ── record ───────────────────────────────────────────────────────────────────
def record_via(surface: str, served: Served, conversation: str) -> dict[str, Any]:
    if surface == "python":
        with Memory(settings_of(served)) as memory:
            return memory.record(conversation, MESSAGES).model_dump(mode="json")
    if surface == "rest":
        return rest(
            served,
            "POST",
            f"/v1/conversations/{conversation}/messages",
            json={"messages": MESSAGES},
        )
    if surface == "mcp":
        return mcp(served, "add_memory", {"conversation_id": conversation, "messages": MESSAGES})
    lines = served.home / f"{conversation}.jsonl"
    lines.write_text(
        "".join(json.dumps({**m, "conversation_id": conversation}) + "\n" for m in MESSAGES)
    )
    done = run_cli(served.home, "ingest", str(lines))
    assert done.returncode == 0, done.stderr[-2000:]
    return {"conversation_id": conversation, "recorded": len(MESSAGES)}


@pytest.mark.parametrize("surface", SURFACES)
def test_recording_the_same_messages_leaves_the_same_episodes_on_every_surface(
    served: Served, surface: str
) -> None:
    conversation = f"rec-{surface}"
    first = record_via(surface, served, conversation)
    again = record_via(surface, served, conversation)  # idempotent by message id
    assert first["recorded"] == len(MESSAGES)
    if surface != "cli":  # the CLI ingests a file: its report is the ingest's
        assert first == record_via("python", served, f"twin-{surface}") | {
            "conversation_id": conversation
        }
        assert again["recorded"] == 0 and again["already_recorded"] == len(MESSAGES)
    assert rows_of(served, conversation) == rows_of(served, "rec-python")


# ── reads ────────────────────────────────────────────────────────────────────
READS: dict[str, dict[str, Callable[[Served], Any]]] = {
    "search": {
        "python": lambda s: (
            Memory(settings_of(s))
            .search("What does she do for work?", THEIRS, 5, as_of=None)
            .model_dump(mode="json")
        ),
        "cli": lambda s: cli_json(
            s, "search", "What does she do for work?", "-c", THEIRS, "-k", "5", "--format", "json"
        ),
        "rest": lambda s: rest(
            s,
            "GET",
            f"/v1/conversations/{THEIRS}/search",
            params={"query": "What does she do for work?", "k": 5},
        ),
        "mcp": lambda s: mcp(
            s,
            "search_memory",
            {"conversation_id": THEIRS, "query": "What does she do for work?", "k": 5},
        ),
    },
    "facts as of a naive time (UTC everywhere)": {
        "python": lambda s: [
            f.model_dump(mode="json") for f in ask(s, "facts", THEIRS, as_of=_naive())
        ],
        "cli": lambda s: cli_json(
            s, "facts", "-c", THEIRS, "--as-of", _naive().isoformat(), "--json"
        ),
        "rest": lambda s: rest(
            s, "GET", f"/v1/conversations/{THEIRS}/facts", params={"as_of": _naive().isoformat()}
        ),
        "mcp": lambda s: mcp(
            s, "list_facts", {"conversation_id": THEIRS, "as_of": _naive().isoformat()}
        ),
    },
    "facts as of a bare date (its first moment, UTC, everywhere)": {
        "python": lambda s: [
            f.model_dump(mode="json") for f in ask(s, "facts", THEIRS, as_of=_day())
        ],
        "cli": lambda s: cli_json(s, "facts", "-c", THEIRS, "--as-of", DAY, "--json"),
        "rest": lambda s: rest(
            s, "GET", f"/v1/conversations/{THEIRS}/facts", params={"as_of": DAY}
        ),
        "mcp": lambda s: mcp(s, "list_facts", {"conversation_id": THEIRS, "as_of": DAY}),
    },
    "context": {
        "python": lambda s: ask(s, "context", THEIRS, 300).context,
        "cli": lambda s: run_cli(s.home, "context", "-c", THEIRS, "--budget", "300").stdout.rstrip(
            "\n"
        ),
        "rest": lambda s: rest(
            s, "GET", f"/v1/conversations/{THEIRS}/context", params={"budget_tokens": 300}
        )["context"],
        "mcp": lambda s: mcp(s, "get_context", {"conversation_id": THEIRS, "budget_tokens": 300}),
    },
}


def their_fact(served: Served) -> str:
    return str(ask(served, "facts", THEIRS)[0].id)


READS |= {
    "a fact's history": {
        "python": lambda s: [
            v.model_dump(mode="json") for v in ask(s, "history", ask(s, "facts", THEIRS)[0].id)
        ],
        "cli": lambda s: cli_json(s, "facts", "history", their_fact(s), "--json"),
        "rest": lambda s: rest(s, "GET", f"/v1/facts/{their_fact(s)}/history"),
        "mcp": lambda s: mcp(s, "fact_history", {"fact_id": their_fact(s)}),
    },
    "status": {
        "python": lambda s: ask(s, "status", THEIRS).model_dump(mode="json"),
        "rest": lambda s: rest(s, "GET", f"/v1/conversations/{THEIRS}"),
        "mcp": lambda s: mcp(s, "conversation_status", {"conversation_id": THEIRS}),
    },
    "quarantine": {
        "python": lambda s: [
            e.model_dump(mode="json") for e in ask_service(s, "quarantined", [THEIRS])
        ],
        "cli": lambda s: cli_json(s, "quarantine", "list", "-c", THEIRS, "--json"),
        "rest": lambda s: [
            e for e in rest(s, "GET", "/v1/quarantine") if e["conversation_id"] == THEIRS
        ],
    },
}


def ask_service(served: Served, operation: str, *args: Any) -> Any:
    """An operation Memory does not offer (an operator's), through the service in Python."""
    with Service.open(settings_of(served)) as service:
        return getattr(service, operation)(Caller.operator(), *args)


DAY = "2023-06-01"


def _day() -> Any:
    from datetime import datetime

    return datetime.fromisoformat(DAY)


def _naive() -> Any:
    from datetime import datetime

    return datetime(2023, 6, 1, 12, 0)  # no zone: read as UTC on every surface


@pytest.mark.parametrize(
    ("operation", "surface"),
    [(operation, surface) for operation in sorted(READS) for surface in READS[operation]],
)
def test_a_read_gives_the_same_answer_on_every_surface(
    served: Served, operation: str, surface: str
) -> None:
    answer = unrendered(READS[operation][surface](served))
    assert answer or operation == "quarantine", f"{operation} answered nothing on {surface}"
    python = unrendered(READS[operation]["python"](served))
    assert answer == python, differences(answer, python)


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two JSON answers differ, leaf by leaf."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b))
            for d in differences(a.get(k), b.get(k), f"{where}.{k}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: {str(a)[:300]} != {str(b)[:300]}"]


REVIEW_STATE = {"reviews", "retrievability"}


def unrendered(answer: Any) -> Any:
    """An answer without its markdown block (MCP's search adds one for the agent's prompt),
    and its episodic memories without their review state: each search reviews what it returns
    (a server does so after its answer), so the next surface's search sees one review more
    (tests/test_episodic.py tests the reviews)."""
    if not isinstance(answer, dict):
        return answer
    kept = {k: v for k, v in answer.items() if k != "markdown"}
    if isinstance(kept.get("memories"), list):
        kept["memories"] = [
            {k: v for k, v in m.items() if k not in REVIEW_STATE} for m in kept["memories"]
        ]
    return kept


def test_a_conversation_that_does_not_exist_is_the_same_error_on_every_surface(
    served: Served,
) -> None:
    with pytest.raises(slowwave.errors.NotFound) as python:
        ask(served, "facts", "nobody-here")
    with served.client(served.keys["admin"]) as http:
        over_rest = http.get("/v1/conversations/nobody-here/facts")
    done = run_cli(served.home, "facts", "-c", "nobody-here")
    with served.client(served.keys["admin"]) as http:
        over_mcp = http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "list_facts", "arguments": {"conversation_id": "nobody-here"}},
            },
            headers={"Accept": "application/json, text/event-stream"},
        ).json()["result"]
    message = str(python.value)
    assert over_rest.status_code == 404
    assert over_rest.json()["error"] == {"status": 404, "code": "not_found", "message": message}
    assert done.returncode == 1 and f"{message} [not_found]" in " ".join(done.stderr.split())
    # the SDK names the tool before the error: "Error executing tool list_facts: not_found: …"
    assert over_mcp["isError"] and over_mcp["content"][0]["text"].endswith(f"not_found: {message}")


# ── forget ───────────────────────────────────────────────────────────────────
def forget_via(surface: str, served: Served, conversation: str) -> dict[str, Any]:
    reason = "erasure request #4411"
    if surface == "python":
        return slowwave.forget(
            conversation_id=conversation, reason=reason, by="dpo", settings=settings_of(served)
        ).model_dump(mode="json")
    if surface == "cli":
        return cli_json(served, "forget", "-c", conversation, "-r", reason, "--json")
    if surface == "rest":
        return rest(
            served, "DELETE", f"/v1/conversations/{conversation}", params={"reason": reason}
        )
    return mcp(served, "forget_conversation", {"conversation_id": conversation, "reason": reason})


def purged_in_time(served: Served, conversation: str, within_s: float = 120) -> dict[str, Any]:
    """The conversation's GET once its bytes are purged (410 all along, purged at the end)."""
    deadline = time.monotonic() + within_s
    while True:
        with served.client(served.keys["admin"]) as http:
            answer = http.get(f"/v1/conversations/{conversation}")
        assert answer.status_code == 410, answer.text
        error = answer.json()["error"]
        if error["purged"] or time.monotonic() > deadline:
            return dict(error)
        time.sleep(0.2)


@pytest.mark.parametrize("surface", SURFACES)
def test_forget_purges_by_default_on_every_surface_and_the_conversation_says_when(
    served: Served, surface: str
) -> None:
    conversation = f"forget-{surface}"
    record_via("python", served, conversation)
    answer = forget_via(surface, served, conversation)
    assert answer["rows"]["episodes"] == 1 and answer["kind"] == "forget_conversation"
    # in one process the purge is done before the answer; a server answers, then purges
    assert answer["purge"] == ("queued" if surface in ("rest", "mcp") else "done")
    after = purged_in_time(served, conversation)
    assert after["code"] == "forgotten" and after["purged"] is True
    assert rows_of(served, conversation) == {
        "episodes": [],
        "ingested": (0,),
        "tombstones": [("forget_conversation", True)],
    }
    with httpx.Client(base_url=served.url) as http:  # no key: no tombstone either
        assert http.get(f"/v1/conversations/{conversation}").status_code == 401
