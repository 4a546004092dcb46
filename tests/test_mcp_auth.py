"""One answer to a bad key on every surface: MCP over HTTP refuses a request with no key, an
unknown key or a revoked one as REST does (401, ``WWW-Authenticate: Bearer``, the same error
body), before MCP sees it, whatever the JSON-RPC method; a valid key is served; a tool that
fails answers with the error's code and message, as REST's body carries them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fix_processes import run_cli, stop_db
from tests.fix_server import Served, make_key, start_server

pytestmark = pytest.mark.slow

# What the streamable HTTP transport requires of a POST
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

CALLS: dict[str, dict[str, Any]] = {
    "initialize": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "a test", "version": "0"},
    },
    "tools/list": {},
    "tools/call": {
        "name": "list_facts",
        "arguments": {"conversation_id": "dana"},
    },
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("mcp-auth")
    keys = {
        "admin": make_key(home, "acme", "admin"),
        "read": make_key(home, "acme", "read"),
        "revoked": make_key(home, "acme", "admin"),
    }
    revoked = run_cli(home, "keys", "revoke", keys["revoked"][:10])
    assert revoked.returncode == 0, revoked.stderr
    server = start_server(home)
    server.keys = keys
    try:
        with server.client(keys["admin"]) as http:  # a conversation of acme's, with no facts
            recorded = http.post(
                "/v1/conversations/dana/messages",
                json={
                    "messages": [
                        {
                            "message_id": "m1",
                            "timestamp": "2025-03-04T18:00:00Z",
                            "speaker": "user",
                            "text": "I moved to Lisbon.",
                        }
                    ]
                },
            )
            assert recorded.status_code == 200, recorded.text
        yield server
    finally:
        server.stop()
        assert server.process.returncode is not None
        stop_db(home)


def rpc(served: Served, key: str | None, method: str, params: dict[str, Any]) -> httpx.Response:
    headers = dict(HEADERS)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(f"{served.url}/mcp", json=body, headers=headers, timeout=60)


@pytest.mark.parametrize("method", list(CALLS))
@pytest.mark.parametrize("who", ["no key", "revoked", "unknown", "not a bearer"])
def test_a_request_without_a_valid_key_is_refused_before_mcp_sees_it(
    served: Served, method: str, who: str
) -> None:
    authorization = {
        "no key": {},
        "revoked": {"Authorization": f"Bearer {served.keys['revoked']}"},
        "unknown": {"Authorization": "Bearer sw_" + "x" * 43},
        "not a bearer": {"Authorization": f"Basic {served.keys['admin']}"},
    }[who]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": CALLS[method]}
    answer = httpx.post(
        f"{served.url}/mcp", json=body, headers={**HEADERS, **authorization}, timeout=60
    )
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"] == "Bearer"
    error = answer.json()["error"]
    assert (error["status"], error["code"]) == (401, "unauthorized")
    # REST's answer to the same header, word for word
    rest = httpx.get(f"{served.url}/v1/conversations/dana/facts", headers=authorization, timeout=60)
    assert rest.status_code == 401 and rest.json() == answer.json()
    assert rest.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("method", list(CALLS))
def test_a_valid_key_is_served_every_method(served: Served, method: str) -> None:
    answer = rpc(served, served.keys["read"], method, CALLS[method])
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    if method == "initialize":
        assert result["serverInfo"]["name"] == "slowwave"
    if method == "tools/list":
        assert "search_memory" in {t["name"] for t in result["tools"]}
    if method == "tools/call":
        assert result["isError"] is False, result


@pytest.mark.parametrize(
    ("key", "tool", "arguments", "path", "params"),
    [
        (
            "read",
            "forget_conversation",
            {"conversation_id": "dana", "reason": "a privacy request"},
            "/v1/conversations/dana",
            {"reason": "a privacy request"},
        ),
        ("read", "list_facts", {"conversation_id": "nobody"}, "/v1/conversations/nobody/facts", {}),
    ],
)
def test_a_tool_that_fails_answers_with_the_errors_code_and_message_as_rest_does(
    served: Served,
    key: str,
    tool: str,
    arguments: dict[str, Any],
    path: str,
    params: dict[str, str],
) -> None:
    answer = rpc(served, served.keys[key], "tools/call", {"name": tool, "arguments": arguments})
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    text = " ".join(c.get("text", "") for c in result["content"])
    method = "DELETE" if tool == "forget_conversation" else "GET"
    with served.client(served.keys[key]) as http:
        rest = http.request(method, path, params=params).json()["error"]
    assert rest["code"] in ("forbidden", "not_found")
    assert result["isError"] is True and f"{rest['code']}: {rest['message']}" in text, text


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_a_method_but_post_is_405_with_allow_post_and_ends(served: Served, method: str) -> None:
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {served.keys['read']}"}
    # a GET the server took as a stream would wait here until the timeout: it must end at once
    answer = httpx.request(method, f"{served.url}/mcp", headers=headers, timeout=10)
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.json()["error"]["code"] == "method_not_allowed"
