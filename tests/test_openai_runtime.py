"""The OpenAI-compatible runtime against a local HTTP server this test starts and stops."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.errors import MalformedAnswer, RuntimeUnreachable
from slowwave.models.llm.base import GenerationRequest, Purpose
from slowwave.models.llm.llamacpp_runtime import schema_grammar
from slowwave.models.llm.openai import OpenAICompatibleModel, cached_prompt_tokens
from slowwave.models.llm.strict_schema import strict_violations
from slowwave.tasks.calibrate import parse_answer
from slowwave.tasks.transient import is_transient

ANSWER = {
    "facts": [
        {
            "action": "new",
            "category": "identity",
            "fact": "User lives in Porto",
            "keywords": ["Porto"],
            "episodes": ["E1"],
        }
    ]
}


class Endpoint(BaseHTTPRequestHandler):
    """Fails the first ``failures`` calls of each chunk with 429 / 503, then answers."""

    failures = 2
    seen: dict[str, int] = {}  # noqa: RUF012 - shared by the handler instances on purpose
    bodies: list[dict[str, Any]] = []  # noqa: RUF012
    headers_seen: list[str] = []  # noqa: RUF012

    def log_message(self, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Endpoint.bodies.append(body)
        Endpoint.headers_seen.append(self.headers.get("Authorization", ""))
        chunk = body["messages"][1]["content"]
        count = Endpoint.seen.get(chunk, 0)
        Endpoint.seen[chunk] = count + 1
        if "always-broken" in chunk:
            self._send(500, {"error": "boom"})
        elif "always-busy" in chunk:
            self._send(503, {"error": "overloaded"})
        elif count < Endpoint.failures:
            self._send(429 if count == 0 else 503, {"error": "busy"})
        else:
            self._send(
                200,
                {
                    "choices": [
                        {"message": {"content": json.dumps(ANSWER)}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 45},
                },
            )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def endpoint() -> Iterator[str]:
    Endpoint.seen, Endpoint.bodies, Endpoint.headers_seen = {}, [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _request(chunk: str) -> GenerationRequest:
    return GenerationRequest(
        chunk_id=chunk,
        purpose=Purpose.consolidate,
        system="system part",
        user=f"episodes of {chunk}",
        json_schema=ConsolidationOutput.response_schema(),
    )


@pytest.mark.slow
def test_the_batch_is_answered_after_backoff_on_429_and_503_with_tokens_counted(
    endpoint: str,
) -> None:
    model = OpenAICompatibleModel(endpoint, "m", api_key="sk-secret", max_retries=4, concurrency=2)
    answers = model.generate([_request(f"c{i}") for i in range(4)])
    model.close()
    assert [a.error for a in answers] == [None] * 4
    assert all(parse_answer(a.text or "").facts[0].fact == "User lives in Porto" for a in answers)
    assert {(a.prompt_tokens, a.completion_tokens) for a in answers} == {(321, 45)}
    assert sorted(Endpoint.seen.values()) == [3, 3, 3, 3]
    body = Endpoint.bodies[-1]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["facts"]
    assert body["response_format"]["json_schema"]["strict"] is True
    assert strict_violations(body["response_format"]["json_schema"]["schema"]) == []
    assert set(Endpoint.headers_seen) == {"Bearer sk-secret"}
    assert "sk-secret" not in repr(model)
    assert model.name == "openai:m"  # what the chunk records say wrote a fact


@pytest.mark.slow
def test_a_chunk_that_keeps_failing_is_an_answer_with_an_error_not_an_exception(
    endpoint: str,
) -> None:
    model = OpenAICompatibleModel(endpoint, "m", api_key="sk-secret", max_retries=3)
    good, bad = model.generate([_request("fine"), _request("always-broken")])
    model.close()
    assert good.error is None
    assert bad.text is None and bad.error is not None
    assert bad.error.startswith("gave up after retries: HTTP 500")
    assert "sk-secret" not in bad.error


@pytest.mark.slow
def test_an_endpoint_that_stays_unavailable_is_transient_not_a_failed_chunk(
    endpoint: str,
) -> None:
    model = OpenAICompatibleModel(endpoint, "m", api_key="sk-secret", max_retries=3)
    fine, busy = model.submit([_request("fine"), _request("always-busy")])
    assert fine.result().error is None
    with pytest.raises(RuntimeUnreachable, match="HTTP 503") as raised:
        busy.result()
    model.close()
    assert is_transient(raised.value) and "sk-secret" not in str(raised.value)


@pytest.mark.slow
def test_two_shards_first_calls_at_the_same_moment_share_one_client_loop(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import slowwave.models.llm.openai as runtime

    made: list[object] = []
    real = runtime.BackgroundLoop

    def slow_to_start(name: str) -> object:  # widens the window two first calls share
        time.sleep(0.2)
        loop = real(name)
        made.append(loop)
        return loop

    monkeypatch.setattr(runtime, "BackgroundLoop", slow_to_start)
    model = OpenAICompatibleModel(endpoint, "m", max_retries=4, concurrency=2)
    start = threading.Barrier(2)
    answers: list[object] = []

    def shard(name: str) -> None:
        start.wait()
        answers.extend(model.generate([_request(name)]))

    threads = [threading.Thread(target=shard, args=(f"s{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    model.close()
    assert len(made) == 1, "one event loop (and one HTTP client) per model"
    assert [getattr(a, "error", "?") for a in answers] == [None, None]


@pytest.mark.parametrize(
    ("payload", "cached"),
    [
        ({"usage": {"prompt_tokens_details": {"cached_tokens": 700}}}, 700),  # OpenAI, vLLM
        ({"timings": {"cache_n": 650, "prompt_n": 350}}, 650),  # llama.cpp's server
        ({"usage": {"prompt_tokens_details": None}}, 0),  # an engine that does not say
        ({"timings": {"cache_n": 5000}}, 1000),  # never more than were billed
        ({"timings": {"cache_n": "many"}}, 0),
    ],
)
def test_cached_prompt_tokens_are_read_from_either_usage_shape(
    payload: dict[str, Any], cached: int
) -> None:
    assert cached_prompt_tokens(payload, 1000) == cached


@pytest.mark.slow
def test_the_grammar_dialect_sends_the_schemas_grammar_instead_of_a_response_format(
    endpoint: str,
) -> None:
    pytest.importorskip("llama_cpp")  # the grammar is llama-cpp-python's conversion
    model = OpenAICompatibleModel(
        endpoint,
        "m",
        max_retries=4,
        strict=False,
        schema_dialect="grammar",
        grammar_of=schema_grammar,
    )
    (answer,) = model.generate([_request("g1")])
    model.close()
    assert answer.error is None
    body = Endpoint.bodies[-1]
    assert "response_format" not in body
    assert body["grammar"] == schema_grammar(ConsolidationOutput.response_schema())
    assert "root ::=" in body["grammar"]
    with pytest.raises(ValueError, match="grammar_of"):
        OpenAICompatibleModel(endpoint, "m", schema_dialect="grammar")


def test_every_character_a_string_may_hold_in_the_llamacpp_grammar_is_one_json_allows() -> None:
    """The grammar both llama.cpp servers sample with: a string's plain characters (the
    ``char`` rule's first alternative, a character class GBNF and Python's ``re`` read alike)
    are exactly those a JSON string holds unescaped, so that no answer the grammar lets through
    is refused by the parser (a raw newline inside a fact made a chunk fail)."""
    pytest.importorskip("llama_cpp")  # the grammar is llama-cpp-python's conversion
    grammar = schema_grammar(ConsolidationOutput.response_schema())
    (rule,) = [line for line in grammar.splitlines() if line.startswith("char ::= ")]
    plain = re.compile(rule.removeprefix("char ::= ").split(" | ")[0])

    def json_holds(character: str) -> bool:
        try:
            return json.loads(f'"{character}"') == character
        except json.JSONDecodeError:
            return False

    for code in range(0x80):
        character = chr(code)
        if character in '"\\':
            assert not plain.fullmatch(character)  # escaped, by the rule's second alternative
            continue
        assert bool(plain.fullmatch(character)) == json_holds(character), repr(character)
    answer = '{"facts":[{"fact":"Dana moved\nto Manchester."}]}'
    with pytest.raises(MalformedAnswer, match="control character"):
        parse_answer(answer)


def test_a_request_with_its_own_cap_is_sent_with_it_and_never_above_the_runtimes(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Endpoint, "failures", 0)
    model = OpenAICompatibleModel(endpoint, "m", max_tokens=1024)
    answers = model.generate(
        [
            _request("plain"),
            replace(_request("short"), max_tokens=96),
            replace(_request("long"), max_tokens=5000),
        ]
    )
    model.close()
    assert [a.error for a in answers] == [None] * 3
    sent = {b["messages"][1]["content"]: b["max_tokens"] for b in Endpoint.bodies}
    assert sent == {"episodes of plain": 1024, "episodes of short": 96, "episodes of long": 1024}
