"""`slowwave serve` over the wire: record and read, keys and tenants, limits and errors, MCP.

One server for the module, on 127.0.0.1, with its own home: LoCoMo's conv-30 (its first eight
sessions) backfilled into the default tenant (the replay model), keys of two tenants. Every
route of the OpenAPI document and every MCP tool is enumerated, so that a new one cannot escape
the tenancy checks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from slowwave.server.auth import RateLimit
from slowwave.server.mcp import TOOLS
from tests.fix_locomo import locomo_subset
from tests.fix_processes import run_cli, slowwave_env
from tests.fix_server import Served, make_key, start_server

pytestmark = pytest.mark.slow

THEIRS = "conv-30"  # the default tenant's, consolidated; acme has none of that id
T = "2025-03-04T18:00:00Z"


def said(n: int, text: str = "hello", at: str = T) -> dict[str, Any]:
    return {"message_id": f"m{n}", "timestamp": at, "speaker": "user", "text": text}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, locomo_path: Path, prefect_api_url: str
) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("serve")
    replay = {"SLOWWAVE_LLM_RUNTIME": "replay", "SLOWWAVE_REPLAY_DATA": str(locomo_path)}
    # its first eight sessions of nineteen: facts enough to read, in under half the time
    theirs = locomo_subset(tmp_path_factory.mktemp("data"), THEIRS, sessions=8)
    done = run_cli(home, "backfill", str(theirs), PREFECT_API_URL=prefect_api_url, **replay)
    assert done.returncode == 0, done.stderr[-2000:]
    keys = {
        "admin": make_key(home, "default", "admin"),
        "acme-read": make_key(home, "acme", "read"),
        "acme-write": make_key(home, "acme", "write"),
        "acme-admin": make_key(home, "acme", "admin"),
        "revoked": make_key(home, "acme", "write"),
    }
    revoked = run_cli(home, "keys", "revoke", keys["revoked"][:10])
    assert revoked.returncode == 0, revoked.stderr
    server = start_server(  # the replay model: a run a key asks for is quick
        home,
        port=None,
        SLOWWAVE_SERVE_RATE_PER_S="10000",
        SLOWWAVE_SERVE_RATE_BURST="10000",
        # episodic memories by full text only, unweighed by reviews: what two conversations'
        # searches return does not hang on when a background thread embedded each one
        # (tests/test_episodic.py tests both)
        SLOWWAVE_SEARCH_MEMORY_VECTOR_WEIGHT="0",
        SLOWWAVE_SEARCH_RETRIEVABILITY_WEIGHT="0",
        **replay,
    )
    server.keys = keys
    try:
        yield server
    finally:
        server.stop()
        assert server.process.returncode is not None
        run_cli(home, "db", "stop")


def their_fact(served: Served) -> str:
    with served.client(served.keys["admin"]) as http:
        facts = http.get(f"/v1/conversations/{THEIRS}/facts").json()
    assert facts, "the default tenant's conversation has facts"
    return str(facts[0]["id"])


def test_an_agent_records_then_reads_and_a_search_answers_with_scores_and_ranks(
    served: Served,
) -> None:
    with served.client(served.keys["admin"]) as http:
        found = http.get(
            f"/v1/conversations/{THEIRS}/search",
            params={"query": "What does Gina do?", "k": 3, "format": "markdown"},
        )
        assert found.status_code == 200, found.text
        body = found.json()
        assert len(body["hits"]) == 3 and body["markdown"].startswith("## Semantic Memory")
        assert set(body["hits"][0]["ranks"]) == {
            "fulltext",
            "vector",
            "temporal",
            "episode",
            "session",
        }
        context = http.get(f"/v1/conversations/{THEIRS}/context", params={"budget_tokens": 200})
        assert context.status_code == 200 and len(context.json()["context"]) <= 200 * 4 + 80
        history = http.get(f"/v1/facts/{body['hits'][0]['id']}/history").json()
        assert history[-1]["conversation_id"] == THEIRS
    with served.client(served.keys["acme-write"]) as http:
        first = http.post(
            "/v1/conversations/dana/messages",
            json={"messages": [said(1, "I moved to Lisbon."), said(2, ""), said(1, "again")]},
        )
        assert first.status_code == 200, first.text
        answer = first.json()
        assert (answer["recorded"], answer["episodes_new"]) == (1, 1)
        assert [(r["index"], r["message_id"]) for r in answer["rejected"]] == [(1, "m2"), (2, "m1")]
        again = http.post("/v1/conversations/dana/messages", json={"messages": [said(1)]}).json()
        assert (again["recorded"], again["already_recorded"]) == (0, 1)
        status = http.get("/v1/conversations/dana").json()
        assert (status["episodes_pending"], status["facts_active"]) == (1, 0)


def _routes(served: Served) -> list[tuple[str, str]]:
    with served.client() as http:
        document = http.get("/openapi.json").json()
    return [(m.upper(), p) for p, ops in document["paths"].items() for m in ops]


def _fill(path: str, conversation: str, fact: str) -> str:
    return (
        path.replace("{conversation_id}", conversation)
        .replace("{fact_id}", fact)
        .replace("{name}", "sw_nosuchkey")
    )


QUERY: dict[str, str | int] = {"query": "What does she do for work?", "reason": "a test", "k": 3}


def _ask(http: httpx.Client, method: str, path: str) -> httpx.Response:
    if method == "POST" and path.endswith("/messages"):
        return http.post(path, json={"messages": [said(900, "a probe")]})
    if method == "POST" and path.endswith("/consolidate"):
        started = http.post(path)
        if started.status_code == 202:  # acme's own conversation: its run ends before the next
            _ended(http, started.json()["run_id"])
        return started
    if method == "POST":
        return http.post(path, json={"scope": "read"})
    return http.request(method, path, params=QUERY)


def _ended(http: httpx.Client, run_id: str, within_s: float = 120) -> None:
    """Wait for a run a key asked for to end, so that what is compared next is settled."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if http.get(f"/v1/runs/{run_id}").json().get("status") not in ("queued", "running"):
            return
        time.sleep(0.2)
    pytest.fail(f"run {run_id} did not end within {within_s} s")


def test_a_key_of_one_tenant_cannot_reach_or_learn_of_another_tenants_conversation(
    served: Served,
) -> None:
    fact = their_fact(served)
    secrets = _their_facts(served)
    routes = _routes(served)
    assert len(routes) >= 14  # every route, probes and admin included
    before = _snapshot(served)
    for name in ("acme-read", "acme-write", "acme-admin"):
        with served.client(served.keys[name]) as http:
            for method, path in routes:
                if path in ("/healthz", "/readyz", "/mcp") or path.startswith("/docs"):
                    continue
                if "{conversation_id}" not in path and "{fact_id}" not in path:
                    continue
                theirs = _ask(http, method, _fill(path, THEIRS, fact))
                nobody = _ask(http, method, _fill(path, "nobody-at-all", str(uuid_like())))
                where = f"{name} {method} {path}"
                assert theirs.status_code < 500 and nobody.status_code < 500, where
                if method == "POST":  # lands in acme's own conversation of that id
                    assert theirs.status_code in (200, 202, 403), where
                    continue
                assert theirs.status_code == nobody.status_code, (where, theirs.text)
                assert _shape(theirs, THEIRS, fact) == _shape(nobody, "nobody-at-all", None), where
                assert not any(f in theirs.text for f in secrets), where
    after = _snapshot(served)
    assert after["default"] == before["default"]  # the default tenant's conv-30 is as it was
    with served.client(served.keys["acme-read"]) as http:  # acme's own, recorded and forgotten
        gone = http.get(f"/v1/conversations/{THEIRS}")
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "forgotten"


def _their_facts(served: Served) -> list[str]:
    with served.client(served.keys["admin"]) as http:
        facts = http.get(f"/v1/conversations/{THEIRS}/facts", params={"all": True}).json()
    return [f["fact"] for f in facts]


def uuid_like() -> str:
    return "01234567-89ab-7def-8123-456789abcdef"


def _shape(response: httpx.Response | str, conversation: str, fact: str | None) -> str:
    text = response if isinstance(response, str) else response.text
    text = text.replace(conversation, "X")
    if fact:
        text = text.replace(fact, "F")
    text = re.sub(r"[0-9a-f]{64}", "D", text)  # a tombstone's digest: of the key, its own
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)", "T", text)  # its times
    # whether the purger has reached a tombstone yet is timing, not tenancy: one word for both
    text = re.sub(
        r"its bytes (?:were purged at T|are not purged from the database's files yet)",
        "its bytes P",
        text,
    )
    text = re.sub(r'"purged":\s*(?:true|false)', '"purged":P', text)
    # how often each was searched before: its own review state, not the other tenant's
    text = re.sub(r'"retrievability":\s*[0-9.e-]+', '"retrievability":R', text)
    text = re.sub(r'"reviews":\s*\d+', '"reviews":N', text)
    text = re.sub(r'"purged_at":\s*(?:null|"T")', '"purged_at":P', text)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "F", text)


def _snapshot(served: Served) -> dict[str, Any]:
    with served.client(served.keys["admin"]) as http:
        return {
            "default": (
                http.get(f"/v1/conversations/{THEIRS}").json(),
                http.get(f"/v1/conversations/{THEIRS}/facts", params={"all": True}).json(),
            )
        }


def test_every_mcp_tool_keeps_to_its_tenant_and_an_sdk_client_gets_search_results(
    served: Served,
) -> None:
    fact = their_fact(served)
    secrets = _their_facts(served)

    async def session(key: str, tools: tuple[str, ...] = TOOLS) -> dict[str, Any]:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        found: dict[str, Any] = {}
        import httpx2

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as web,
            Client(streamable_http_client(f"{served.url}/mcp", http_client=web)) as client,
        ):
            listed = await client.list_tools()
            found["tools"] = sorted(t.name for t in listed.tools)
            for tool in tools:
                for conversation in (THEIRS, "nobody-at-all"):
                    arguments: dict[str, Any] = {"conversation_id": conversation}
                    if tool == "search_memory":
                        arguments["query"] = "What does she do for work?"
                    if tool == "fact_history":
                        arguments = {"fact_id": fact if conversation == THEIRS else uuid_like()}
                    if tool == "add_memory":
                        arguments["messages"] = [said(901, "an mcp probe")]
                    if tool == "forget_conversation":
                        arguments["reason"] = "a test"
                    result = await client.call_tool(tool, arguments)
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    found[f"{tool} {conversation}"] = (result.is_error, text)
                    if tool == "consolidate_conversation" and not result.is_error:
                        run = (result.structured_content or {})["run_id"]
                        with served.client(key) as http:  # settled before the next call
                            await anyio.to_thread.run_sync(_ended, http, run)
        return found

    acme = anyio.run(session, served.keys["acme-admin"])
    assert acme["tools"] == sorted(TOOLS)
    for tool in TOOLS:
        theirs, nobody = acme[f"{tool} {THEIRS}"], acme[f"{tool} nobody-at-all"]
        if tool == "add_memory":  # into acme's own conversation of that id
            assert theirs[0] is False and nobody[0] is False
            continue
        assert theirs == nobody or not any(f in theirs[1] for f in secrets), tool
        assert _shape(theirs[1], THEIRS, fact) == _shape(nobody[1], "nobody-at-all", None), tool
    ours = anyio.run(session, served.keys["admin"], ("search_memory",))
    is_error, text = ours[f"search_memory {THEIRS}"]
    assert is_error is False and any(f in text for f in secrets)


def test_a_revoked_key_an_unknown_key_and_no_key_are_refused(served: Served) -> None:
    for key in (served.keys["revoked"], "sw_" + "x" * 43, "not-a-key", None):
        with served.client(key) as http:
            answer = http.get(f"/v1/conversations/{THEIRS}/facts")
        assert answer.status_code == 401, key
        assert answer.json()["error"]["code"] == "unauthorized"
    with served.client(served.keys["acme-read"]) as http:
        refused = http.post("/v1/conversations/dana/messages", json={"messages": [said(3)]})
    assert refused.status_code == 403 and "needs write" in refused.json()["error"]["message"]


HOSTILE: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x\x00y"}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "' OR 1=1; DROP TABLE x; --"}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x", "k": "many"}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x", "k": 10**9}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x" * 5000}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x", "as_of": "yesterday"}}),
    ("GET", "/v1/conversations/c/search", {"params": {"query": "x", "category": "nope"}}),
    ("GET", "/v1/conversations/c%00d/facts", {}),
    ("GET", "/v1/conversations/tab%09x/facts", {}),
    ("GET", "/v1/facts/not-a-uuid/history", {}),
    ("GET", "/v1/conversations/c/context", {"params": {"budget_tokens": -1}}),
    ("POST", "/v1/conversations/c/messages", {"content": b"{not json"}),
    ("POST", "/v1/conversations/c/messages", {"content": b'{"messages": "\xff\xfe"}'}),
    ("POST", "/v1/conversations/c/messages", {"json": {"messages": "all of them"}}),
    ("POST", "/v1/conversations/c/messages", {"json": {"messages": []}}),
    ("POST", "/v1/conversations/c/messages", {"json": {"messages": [said(1)] * 1001}}),
    ("POST", "/v1/conversations/c/messages", {"content": b"x" * 2_000_000}),
    ("POST", "/v1/conversations/c%27%3B--/messages", {"json": {"messages": [1]}}),
    ("DELETE", "/v1/conversations/c", {"params": {"reason": ""}}),
    ("GET", "/v1/no/such/route", {}),
]


def test_hostile_input_gets_a_clear_4xx_and_stores_nothing(served: Served) -> None:
    before = _episodes(served)
    with served.client(served.keys["admin"]) as http:
        for method, path, kwargs in HOSTILE:
            answer = http.request(method, path, **kwargs)
            where = f"{method} {path} {str(kwargs)[:80]}"
            assert 400 <= answer.status_code < 500, (where, answer.status_code, answer.text)
            error = answer.json()["error"]
            assert error["message"] and "Traceback" not in answer.text, where
        # NUL, lone surrogates, control characters inside messages: rejected one by one
        hostile = {"messages": [said(1, "nul\x00"), said(2, "\ud800"), {"text": 5}]}
        mixed = http.post(
            "/v1/conversations/c/messages",
            content=json.dumps(hostile).encode(),  # JSON escapes: \u0000 and a lone \ud800
            headers={"content-type": "application/json"},
        ).json()
        assert mixed["recorded"] == 0 and len(mixed["rejected"]) == 3
    assert _episodes(served) == before


def _episodes(served: Served) -> int:
    with served.client(served.keys["admin"]) as http:
        runs = http.get(f"/v1/conversations/{THEIRS}").json()
        missing = http.get("/v1/conversations/c")
    assert missing.status_code == 404
    return int(runs["episodes_consolidated"]) + int(runs["episodes_pending"])


def test_probes_metrics_and_the_openapi_document(served: Served) -> None:
    with served.client() as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").json() == {"status": "ready"}
        assert http.get("/metrics").status_code == 401
        document = http.get("/openapi.json").json()
    assert all(p.startswith(("/v1/", "/healthz", "/readyz", "/metrics")) for p in document["paths"])
    with served.client(served.keys["admin"]) as http:
        text = http.get("/metrics").text
    assert (
        'slowwave_http_requests_total{method="GET",route="/v1/conversations/{conversation_id}'
        in text
    )
    assert "slowwave_http_request_seconds_bucket" in text


def test_no_key_appears_in_any_log_or_answer(served: Served) -> None:
    logs = served.log.read_text(errors="replace")
    logs += "".join(p.read_text(errors="replace") for p in served.home.rglob("*.log"))
    for key in served.keys.values():
        assert key not in logs
        assert key[12:] not in logs  # not even its secret part
    with served.client(served.keys["admin"]) as http:
        listed = http.get("/v1/keys").text
    assert not any(key in listed for key in served.keys.values())


def test_the_server_refuses_to_run_open_on_a_network_or_with_no_key(tmp_path: Path) -> None:
    open_wide = subprocess.run(
        [sys.executable, "-m", "slowwave", "serve", "--host", "0.0.0.0", "--no-auth"],
        env=slowwave_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert open_wide.returncode == 1 and "--no-auth on 0.0.0.0" in open_wide.stderr
    no_keys = subprocess.run(
        [sys.executable, "-m", "slowwave", "serve", "--port", "1"],
        env=slowwave_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert no_keys.returncode == 1 and "no API key exists" in no_keys.stderr
    run_cli(tmp_path, "db", "stop")


def test_a_database_that_is_down_is_a_503_with_a_retry_on_every_surface_never_a_500(
    tmp_path: Path,
) -> None:
    key = make_key(tmp_path, "default", "admin")
    server = start_server(tmp_path)
    try:
        with server.client(key) as http:
            assert http.get("/v1/keys").status_code == 200  # the pool holds a connection
        stopped = run_cli(tmp_path, "db", "stop", "--force")
        assert stopped.returncode == 0, stopped.stderr
        answers = []
        with server.client(key) as http:
            for _ in range(3):  # the pool's connections, broken; then none to be had
                answers.append(http.get("/v1/conversations/c/facts"))
                answers.append(http.get("/v1/keys"))
                answers.append(
                    http.post("/v1/conversations/c/messages", json={"messages": [said(1)]})
                )
            answers.append(http.get("/readyz"))
        mcp = httpx.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {key}",
            },
            timeout=60,
        )
        for answer in [*answers, mcp]:
            where = (answer.request.method, answer.request.url.path, answer.text)
            assert answer.status_code == 503, where
            assert answer.json()["error"]["code"] == "database_unavailable", where
            assert int(answer.headers["retry-after"]) >= 1, where
    finally:
        server.stop()
        assert server.process.returncode is not None
        run_cli(tmp_path, "db", "stop")


def test_a_key_over_its_rate_waits_for_the_time_the_bucket_says() -> None:
    limit = RateLimit(rate=10, burst=3)
    assert [limit.take("k") for _ in range(3)] == [None, None, None]
    wait = limit.take("k")
    assert wait is not None and 0.05 <= wait <= 0.11
    assert limit.take("other") is None  # another key has its own bucket
    time.sleep(wait)
    assert limit.take("k") is None


def test_an_agent_on_stdio_gets_its_tenants_memory_and_a_revoked_key_stops_it(
    served: Served,
) -> None:
    from mcp import Client, StdioServerParameters

    async def session(key: str) -> tuple[list[str], bool, str]:
        env = slowwave_env(served.home, SLOWWAVE_API_KEY=key)
        command = StdioServerParameters(
            command=sys.executable, args=["-m", "slowwave", "mcp"], env=env
        )
        async with Client(command) as client:
            listed = await client.list_tools()
            result = await client.call_tool(
                "search_memory", {"conversation_id": THEIRS, "query": "What does she do?"}
            )
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return sorted(t.name for t in listed.tools), result.is_error, text

    tools, is_error, text = anyio.run(session, served.keys["admin"])
    assert tools == sorted(TOOLS) and is_error is False
    assert any(f in text for f in _their_facts(served))
    refused = subprocess.run(
        [sys.executable, "-m", "slowwave", "mcp"],
        env=slowwave_env(served.home, SLOWWAVE_API_KEY=served.keys["revoked"]),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 1 and "not valid" in refused.stderr
    assert served.keys["revoked"] not in refused.stderr


BAD_VALUES = ("x\x00y", "' OR 1=1; DROP TABLE semantic_memory; --", "[]", "-1", "\udcff", "9" * 40)


def test_every_parameter_of_every_route_takes_hostile_values_without_a_5xx(served: Served) -> None:
    with served.client() as http:
        document = http.get("/openapi.json").json()
    fact = their_fact(served)
    tried = 0
    with served.client(served.keys["acme-admin"]) as http:
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                parameters = operation.get("parameters", [])
                for parameter in parameters:
                    for bad in BAD_VALUES:
                        values = {p["name"]: _good(p["name"]) for p in parameters}
                        values[parameter["name"]] = bad
                        url, query = path, []
                        for p in parameters:
                            raw = _quote(values[p["name"]].encode("utf-8", "surrogateescape"))
                            if p["in"] == "path":
                                url = url.replace("{" + p["name"] + "}", raw)
                            elif values[p["name"]]:
                                query.append(f"{p['name']}={raw}")
                        url = url.replace("{fact_id}", fact) + "?" + "&".join(query)
                        answer = http.request(method.upper(), url)
                        tried += 1
                        where = f"{method} {path} {parameter['name']}={bad!r}"
                        assert answer.status_code < 500, (where, answer.text)
                        if answer.status_code >= 400:
                            assert answer.json()["error"]["message"], where
    assert tried > 100
    with served.client(served.keys["admin"]) as http:  # nothing of it reached another tenant
        assert http.get(f"/v1/conversations/{THEIRS}").status_code == 200


def _good(name: str) -> str:
    return {"conversation_id": "probe", "fact_id": uuid_like(), "name": "sw_nosuchkey"}.get(
        name, {"query": "what", "reason": "a test", "k": "3", "budget_tokens": "50"}.get(name, "")
    )


def _quote(raw: bytes) -> str:
    from urllib.parse import quote_from_bytes

    return quote_from_bytes(raw, safe="")
