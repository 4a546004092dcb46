"""One operation, one answer: the same call through Python (``slowwave.Memory`` and
``slowwave.api``), the CLI, REST, MCP, the memory browser and the Prefect flows leaves the same
database and gives the same answer, defaults included — a forget's purge among them. Every
surface calls ``slowwave.service``; this is the test that they parse and render and decide
nothing else. The browser's pages are read back (the facts they link, a fact's versions, the
counts at a glance) and compared with the same reading of Python's answer; a flow runs as a
Prefect worker runs it, imported and called with its parameters in a process of its own."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

import slowwave
import slowwave.errors
from slowwave import Memory
from slowwave.models.ids import conversation_ref
from slowwave.models.settings import Settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database
from tests.fix_locomo import locomo_subset
from tests.fix_processes import run_cli, slowwave_env, stop_db
from tests.fix_server import Served, make_key, quarantine_latest, start_server

pytestmark = pytest.mark.slow

THEIRS = "conv-30"  # consolidated by the backfill below
SURFACES = ("python", "cli", "rest", "mcp")
T = "2025-03-04T18:00:00Z"
QUESTION = "What does she do for work?"


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
    # its first eight sessions of nineteen: facts enough to read, in under half the time
    theirs = locomo_subset(tmp_path_factory.mktemp("data"), THEIRS, sessions=8)
    done = run_cli(home, "backfill", str(theirs), PREFECT_API_URL=prefect_api_url, **replay)
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
        # a server searches with the message windows its embedding thread has done so far (an
        # episode's excerpt is centred on the nearest window): Python's search embeds them
        # first, so that every surface searches the same, whichever asks first
        ask(server, "search", QUESTION, THEIRS)
        yield server
    finally:
        server.stop()
        stop_db(home)


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
        "python": lambda s: ask(s, "search", QUESTION, THEIRS, 5, as_of=None).model_dump(
            mode="json"
        ),
        "cli": lambda s: cli_json(
            s, "search", QUESTION, "-c", THEIRS, "-k", "5", "--format", "json"
        ),
        "rest": lambda s: rest(
            s,
            "GET",
            f"/v1/conversations/{THEIRS}/search",
            params={"query": QUESTION, "k": 5},
        ),
        "mcp": lambda s: mcp(
            s,
            "search_memory",
            {"conversation_id": THEIRS, "query": QUESTION, "k": 5},
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
            f.model_dump(mode="json") for f in ask(s, "facts", THEIRS, as_of=_day(s))
        ],
        "cli": lambda s: cli_json(s, "facts", "-c", THEIRS, "--as-of", day_of(s), "--json"),
        "rest": lambda s: rest(
            s, "GET", f"/v1/conversations/{THEIRS}/facts", params={"as_of": day_of(s)}
        ),
        "mcp": lambda s: mcp(s, "list_facts", {"conversation_id": THEIRS, "as_of": day_of(s)}),
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


def day_of(served: Served) -> str:
    """The day (UTC) the conversation's latest fact became valid, later than the day's first
    moment: as of the bare date it is not valid yet; a surface reading the date as the day's
    last moment would show it."""
    latest = max(ask(served, "facts", THEIRS), key=lambda f: f.valid_at).valid_at.astimezone(UTC)
    assert latest.time() != datetime.min.time(), latest
    return latest.date().isoformat()


def _day(served: Served) -> datetime:
    return datetime.fromisoformat(day_of(served))


def _naive() -> datetime:
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


# ── the browser ──────────────────────────────────────────────────────────────
LINKED_FACT = re.compile(r'<a href="/ui/facts/([0-9a-f-]{36})[^"]*">([^<]*)</a>')
VERSION = re.compile(r"<li><strong>(\w+)</strong>: ([^\n]*)\n")
GLANCE = re.compile(
    r"(\d+) episodes pending · (\d+) consolidated ·\s*(?:<a [^>]*>)?(\d+) quarantined"
    r"(?:</a>)? ·\s*(\d+) facts active"
)
HELD = re.compile(r'name="episode" value="([0-9a-f-]{36})"')
SAID = re.compile(r'<pre class="said">([^<]*)</pre>', re.S)
FORM_TOKEN = re.compile(r'name="form_token" value="([^"]+)"')


def page(served: Served, path: str, **params: Any) -> str:
    """A page of the memory browser, signed in with the admin's key."""
    with served.browser(served.keys["admin"]) as web:
        shown = web.get(path, params=params)
    assert shown.status_code == 200, shown.text[:2000]
    return shown.text


def versions_on_page(served: Served) -> str:
    """The versions list of the fact's page (the episodes it cites follow it)."""
    shown = page(served, f"/ui/facts/{their_fact(served)}")
    return shown.split('<ol class="versions">', 1)[1].split("</ol>", 1)[0]


def linked_facts(text: str) -> list[tuple[str, str]]:
    return sorted((i, html.unescape(f)) for i, f in LINKED_FACT.findall(text))


def facts_of(answer: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((f["id"], f["fact"]) for f in answer)


def searched_on_page(text: str) -> dict[str, Any]:
    """The search's two lists as the conversation's page shows them, best first."""
    hits = text.split("<h3>Facts</h3>", 1)[1].split("<h3>Episodic memories</h3>", 1)
    return {
        "hits": [(i, html.unescape(f)) for i, f in LINKED_FACT.findall(hits[0])],
        "memories": [html.unescape(m) for m in SAID.findall(hits[1].split("</section>")[0])],
    }


def searched(answer: Any) -> dict[str, Any]:
    return {
        "hits": [(str(h.id), h.fact) for h in answer.hits],
        "memories": [m.text for m in answer.memories],
    }


# what the browser shows, read from its page, beside the same reading of Python's answer
BROWSER: dict[str, tuple[Callable[[Served], Any], Callable[[Served], Any]]] = {
    "facts as of a naive time (UTC everywhere)": (
        lambda s: linked_facts(page(s, f"/ui/conversations/{THEIRS}", as_of=_naive().isoformat())),
        lambda s: facts_of(READS["facts as of a naive time (UTC everywhere)"]["python"](s)),
    ),
    "facts as of a bare date (its first moment, UTC, everywhere)": (
        lambda s: linked_facts(page(s, f"/ui/conversations/{THEIRS}", as_of=day_of(s))),
        lambda s: facts_of(
            READS["facts as of a bare date (its first moment, UTC, everywhere)"]["python"](s)
        ),
    ),
    "a fact's history": (
        lambda s: [(a, html.unescape(f)) for a, f in VERSION.findall(versions_on_page(s))],
        lambda s: [(v["action"], v["fact"]) for v in READS["a fact's history"]["python"](s)],
    ),
    "status": (
        lambda s: [int(n) for n in GLANCE.findall(page(s, f"/ui/conversations/{THEIRS}"))[0]],
        lambda s: [
            READS["status"]["python"](s)[k]
            for k in (
                "episodes_pending",
                "episodes_consolidated",
                "episodes_quarantined",
                "facts_active",
            )
        ],
    ),
    "search (the browser's ten facts and five memories)": (
        lambda s: searched_on_page(page(s, f"/ui/conversations/{THEIRS}", query=QUESTION)),
        lambda s: searched(ask(s, "search", QUESTION, THEIRS, 10, memories=5)),
    ),
    "quarantine (the tenant's)": (
        lambda s: sorted(HELD.findall(page(s, "/ui/quarantine"))),
        lambda s: sorted(str(e.id) for e in ask_service(s, "quarantined")),
    ),
}


@pytest.mark.parametrize("operation", sorted(BROWSER))
def test_the_browser_shows_what_python_answers(served: Served, operation: str) -> None:
    if operation.startswith("quarantine"):  # one held back, so that the list is not empty
        record_via("python", served, "held-browser")
        quarantine_latest(served, "held-browser")
    shown, answered = (read(served) for read in BROWSER[operation])
    assert answered, f"{operation} answered nothing in Python"
    assert shown == answered, differences(shown, answered)


# ── the flows ────────────────────────────────────────────────────────────────
def run_flow(served: Served, prefect_api_url: str, flow: str, **parameters: Any) -> Any:
    """``slowwave.flows.FLOW`` as a Prefect worker runs a deployment's flow: imported and called
    with its parameters, in a process of its own with the server's home; what it returned."""
    module, name = flow.rsplit(".", 1)
    result = served.home / f"flow-{time.monotonic_ns()}.json"
    program = (
        "import json, sys, pathlib\n"
        f"from slowwave.flows.{module} import {name}\n"
        f"result = {name}(**json.loads(sys.argv[1]))\n"
        "pathlib.Path(sys.argv[2]).write_text(json.dumps(result, default=str))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, json.dumps(parameters), str(result)],
        env=slowwave_env(served.home, PREFECT_API_URL=prefect_api_url, **ALIKE),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text())


# ── forget ───────────────────────────────────────────────────────────────────
FORGET_SURFACES = (*SURFACES, "flow", "browser")
# the browser's answer is its page: the rows it says it removed, and what it says of the purge
PURGE_SAID = {
    "rewritten before this answer": "done",
    "rewritten right after this answer": "queued",
    "not rewritten (asked)": "skipped",
}
REMOVED = re.compile(r'<tr><td>(\w+)</td><td class="num">(\d+)</td></tr>')


def forget_in_browser(served: Served, conversation: str, reason: str) -> dict[str, Any]:
    """Open the conversation's forget page, type its name to confirm, forget it."""
    with served.browser(served.keys["admin"]) as web:
        form = web.get("/ui/forget", params={"conversation": conversation})
        assert form.status_code == 200, form.text[:2000]
        token = FORM_TOKEN.search(form.text)
        assert token is not None
        done = web.post(
            "/ui/forget",
            data={
                "form_token": token.group(1),
                "conversation": conversation,
                "confirm": conversation,
                "reason": reason,
            },
        )
    assert done.status_code == 200 and "<h1>Forgotten</h1>" in done.text, done.text[:2000]
    (purge,) = (p for said, p in PURGE_SAID.items() if f"Table files: {said}" in done.text)
    kind = "forget_conversation" if "The conversation <strong>" in done.text else "forget_fact"
    return {
        "kind": kind,
        "rows": {table: int(n) for table, n in REMOVED.findall(done.text)},
        "purge": purge,
    }


def forget_via(
    surface: str, served: Served, conversation: str, prefect_api_url: str
) -> dict[str, Any]:
    reason = "erasure request #4411"
    if surface == "flow":  # a deployment is told the conversation's reference, never its id
        ref = conversation_ref(conversation)
        return dict(
            run_flow(served, prefect_api_url, "history.forget", conversation=ref, reason=reason)
        )
    if surface == "browser":
        return forget_in_browser(served, conversation, reason)
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


@pytest.fixture(scope="module")
def python_forgot(served: Served) -> dict[str, int]:
    """The rows Python's forget removes of a conversation recorded as each surface's is."""
    record_via("python", served, "forget-twin")
    return dict(forget_via("python", served, "forget-twin", "")["rows"])


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


@pytest.mark.parametrize("surface", FORGET_SURFACES)
def test_forget_purges_by_default_on_every_surface_and_the_conversation_says_when(
    served: Served, surface: str, prefect_api_url: str, python_forgot: dict[str, int]
) -> None:
    conversation = f"forget-{surface}"
    record_via("python", served, conversation)
    answer = forget_via(surface, served, conversation, prefect_api_url)
    assert answer["kind"] == "forget_conversation" and answer["rows"]["episodes"] == 1
    assert answer["rows"] == python_forgot, differences(answer["rows"], python_forgot)
    # in one process the purge is done before the answer; a server answers, then purges
    assert answer["purge"] == ("queued" if surface in ("rest", "mcp", "browser") else "done")
    after = purged_in_time(served, conversation)
    assert after["code"] == "forgotten" and after["purged"] is True
    assert rows_of(served, conversation) == {
        "episodes": [],
        "ingested": (0,),
        "tombstones": [("forget_conversation", True)],
    }
    with httpx.Client(base_url=served.url) as http:  # no key: no tombstone either
        assert http.get(f"/v1/conversations/{conversation}").status_code == 401


# ── export ───────────────────────────────────────────────────────────────────
def export_via(surface: str, served: Served, to: Path, prefect_api_url: str) -> dict[str, Any]:
    """An export to ``to``; what it did to each kind's dataset."""
    if surface == "python":
        report = slowwave.export(to, settings=settings_of(served))
        return {name: asdict(kind) for name, kind in report.kinds.items()}
    if surface == "cli":
        return dict(cli_json(served, "export", "--to", str(to), "--json")["kinds"])
    return dict(run_flow(served, prefect_api_url, "export.export", to=str(to))["kinds"])


def lake(to: Path) -> dict[str, list[dict[str, Any]]]:
    """Every Parquet file under ``to``, by path, as its rows in a stable order."""
    import polars as pl

    return {
        str(f.relative_to(to)): pl.read_parquet(f).sort(pl.all()).to_dicts()
        for f in sorted(to.rglob("*.parquet"))
    }


def test_an_export_writes_the_same_files_from_python_the_cli_and_the_flow(
    served: Served, prefect_api_url: str, tmp_path: Path
) -> None:
    done = {
        surface: export_via(surface, served, tmp_path / surface, prefect_api_url)
        for surface in ("python", "cli", "flow")
    }
    python = lake(tmp_path / "python")
    assert python and done["python"]["facts"]["rows_written"] > 0
    for surface in ("cli", "flow"):
        assert done[surface] == done["python"], (
            surface,
            differences(done[surface], done["python"]),
        )
        theirs = lake(tmp_path / surface)
        assert theirs == python, (surface, differences(theirs, python))
