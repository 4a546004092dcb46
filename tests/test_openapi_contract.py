"""The OpenAPI document is the contract: every answer a route gives is one it declares (status,
content type, schema, headers), every request it allows is taken and every one it forbids is
refused. Schemathesis checks it against a real server with an admin key; the rules the document
states by hand (the conversation id's pattern) are checked against the code they restate."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema_rs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError, constr

import slowwave.errors
from slowwave.models.tenant import conversation_problem
from slowwave.server.deps import CONVERSATION_ID_PATTERN, NO_NUL_PATTERN, TEXT_PATTERN
from tests.fix_processes import stop_db
from tests.fix_server import Served, make_key, start_server

# Python's whitespace beside ECMAScript's (JSON Schema's) \s, which differ on U+0085 and U+FEFF
ROOT = Path(__file__).resolve().parents[1]
TRICKY = "\t\n\x0b\x0c\r\x1c\x1f \x7f\x80\x85\x9f\xa0\u1680\u180e\u2000\u200a\u200b\u2028"
TRICKY += "\u2029\u202f\u205f\u3000\ufeff\x00\x01"


def _engines(pattern: str) -> list[tuple[str, Callable[[str], bool]]]:
    """The pattern as the server reads it (pydantic's Rust regex) and as a client or a contract
    test reads it (JSON Schema's ECMAScript dialect, here Schemathesis's own validator)."""
    server = TypeAdapter(constr(pattern=pattern))
    document = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})

    def by_server(value: str) -> bool:
        try:
            server.validate_python(value)
        except ValidationError:
            return False
        return True

    return [("server", by_server), ("document", lambda value: bool(document.is_valid(value)))]


CONVERSATION_ID = _engines(CONVERSATION_ID_PATTERN)
TEXT = _engines(TEXT_PATTERN)
NO_NUL = _engines(NO_NUL_PATTERN)


# (no lone surrogate: it is not UTF-8, so no request can carry one)
@given(
    st.text(alphabet=st.sampled_from(TRICKY) | st.characters(exclude_categories=["Cs"]), max_size=6)
)
@example("a\n")  # Python's `$` matches before a final newline; JSON Schema's does not
@example("\x85")  # whitespace to Python, not to ECMAScript's \s
@example("\ufeff")  # the other way round
@example("tab\tx")
# what is checked is which values pass, never how fast: on a loaded machine a first call (the
# patterns compiled) can pass Hypothesis's 200 ms deadline and fail the test as flaky
@settings(deadline=None)
def test_the_documented_patterns_accept_exactly_what_the_service_does(value: str) -> None:
    takes_id = conversation_problem(value) is None
    for where, accepts in CONVERSATION_ID:
        assert accepts(value) is takes_id, (where, value)
    takes_text = bool(value.strip()) and "\x00" not in value
    for where, accepts in TEXT:
        assert accepts(value) is takes_text, (where, value)
    for where, accepts in NO_NUL:
        assert accepts(value) is ("\x00" not in value), (where, value)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("contract")
    admin = make_key(home, "default", "admin")
    # newest first in GET /v1/keys, whose link revokes the first listed: not the admin key
    make_key(home, "default", "read")
    server = start_server(
        home, SLOWWAVE_SERVE_RATE_PER_S="10000", SLOWWAVE_SERVE_RATE_BURST="10000"
    )
    server.keys = {"admin": admin}
    try:
        yield server
    finally:
        server.stop()
        assert server.process.returncode is not None
        stop_db(home)


@pytest.mark.slow
def test_every_route_answers_as_the_openapi_document_says(served: Served, tmp_path: Path) -> None:
    """Every check Schemathesis has, a few examples per operation, in every phase (examples,
    boundaries and methods a path does not take, fuzzing, and the links' sequences)."""
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{served.url}/openapi.json",
            "--checks",
            "all",
            "--header",
            f"Authorization: Bearer {served.keys['admin']}",
            "--max-examples",
            "8",
            # one worker: two threads generating at once hit a CPython 3.11 race in ast.parse
            # (hypothesis describes its filters from their source): "AST constructor recursion
            # depth mismatch", an error of the generator, not of the API
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        cwd=tmp_path,  # its reports, never in the checkout
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-8000:] + ran.stderr[-2000:]
    assert "18 selected / 18 total" in ran.stdout, ran.stdout[-2000:]


@pytest.mark.slow
def test_every_operation_declares_each_error_it_can_answer_with_the_error_schema(
    served: Served,
) -> None:
    with served.client() as http:
        document = http.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["key"]["scheme"] == "bearer"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            declared = set(operation["responses"])
            assert "400" in declared, where  # the guard's NUL, on every route
            if path in ("/healthz", "/readyz"):
                continue
            assert {"401", "403", "429", "503"} <= declared, where
            assert operation["security"] == [{"key": []}], where
            if method == "post":
                assert "413" in declared, where  # the body guard's
            if "{" in path or operation.get("parameters"):
                assert "422" in declared, where
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (where, status)
    conversation = document["paths"]["/v1/conversations/{conversation_id}"]
    assert "410" in conversation["get"]["responses"]  # a forgotten conversation
    metrics = document["paths"]["/metrics"]["get"]["responses"]
    assert set(metrics["200"]["content"]) == {"text/plain"}


@pytest.mark.slow
def test_a_method_a_path_does_not_take_is_405_with_every_method_it_does(served: Served) -> None:
    with served.client(served.keys["admin"]) as http:
        document = http.get("/openapi.json").json()
        for path, operations in document["paths"].items():
            url = path.replace("{conversation_id}", "c").replace("{name}", "sw_nosuchkey")
            url = url.replace("{fact_id}", "01234567-89ab-7def-8123-456789abcdef")
            for method in ("PATCH", "OPTIONS", "PUT"):
                if method.lower() in operations:
                    continue
                answer = http.request(method, url)
                assert answer.status_code == 405, (method, path, answer.text)
                allowed = {m.strip() for m in answer.headers["allow"].split(",")}
                assert allowed == {m.upper() for m in operations}, (method, path)
                assert answer.json()["error"]["code"] == "method_not_allowed"
        mcp = http.get("/mcp", timeout=10)
    assert mcp.status_code == 405 and mcp.headers["allow"] == "POST"


@pytest.mark.slow
def test_the_servers_own_refusals_answer_codes_of_the_one_list(served: Served) -> None:
    """What the middleware and the handlers refuse before a route runs has a code of
    ``slowwave.errors``, as a route's own errors do."""
    codes = slowwave.errors.by_code()
    with served.client(served.keys["admin"]) as http:
        nul = http.get("/v1/conversations/c%00/search", params={"query": "x"})
        nowhere = http.get("/v1/no/such/route")
        huge = http.post(
            "/v1/conversations/c/messages",
            content=b"{" + b" " * 2_000_000 + b"}",  # over the 1 MiB default
            headers={"content-type": "application/json"},
        )
    answered = {
        "nul": (nul.status_code, nul.json()["error"]["code"]),
        "nowhere": (nowhere.status_code, nowhere.json()["error"]["code"]),
        "huge": (huge.status_code, huge.json()["error"]["code"]),
    }
    assert answered == {
        "nul": (400, "nul_character"),
        "nowhere": (404, "no_route"),
        "huge": (413, "too_large"),
    }
    for status, code in answered.values():
        assert codes[code].status == status, code


@pytest.mark.slow
def test_the_documents_limits_are_this_servers_settings(served: Served) -> None:
    with served.client() as http:
        document = http.get("/openapi.json").json()
    search = document["paths"]["/v1/conversations/{conversation_id}/search"]["get"]
    limits = {p["name"]: p["schema"] for p in search["parameters"]}
    assert limits["query"]["maxLength"] == 2000 and limits["k"]["maximum"] == 100
    with served.client(served.keys["admin"]) as http:
        too_many = http.get("/v1/conversations/c/search", params={"query": "x", "k": 101})
        longest = http.get("/v1/conversations/c/search", params={"query": "x" * 2000, "k": 100})
    assert too_many.status_code == 422 and too_many.json()["error"]["code"] == "invalid_k"
    assert longest.status_code == 404  # taken: no such conversation


def test_a_conversation_id_in_a_request_body_is_documented_as_the_path_takes_it() -> None:
    """A key's conversation (POST /v1/keys) is refused with a control character, as a path's
    is: the document says so, or a client that follows it gets a 422 it could not foresee."""
    # the server's document as the clients are generated from it (kept equal by test_clients)
    document = json.loads((ROOT / "clients" / "openapi.json").read_text())
    found = {}
    for name, schema in document["components"]["schemas"].items():
        field = schema.get("properties", {}).get("conversation_id")
        if field is None or name.endswith(("Answer", "State", "Started")) or "Request" not in name:
            continue
        choices = field.get("anyOf", [field])
        found[name] = [c.get("pattern") for c in choices if c.get("type") == "string"]
    assert found, "no request body names a conversation"
    assert all(p == [CONVERSATION_ID_PATTERN] for p in found.values()), found
