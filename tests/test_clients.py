"""The clients against a real ``slowwave serve`` on 127.0.0.1: the Python client (sync and
async, and alone from its wheel), the TypeScript client's own tests, an MCP client that knows
only what was said, and the check that the clients' types match the server's document."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest
from packaging.requirements import Requirement

import slowwave
import slowwave.errors
from slowwave_client import AsyncClient, Client
from slowwave_client.types import SearchAnswer
from tests.fix_processes import run_cli
from tests.fix_server import Served, start_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TYPESCRIPT = ROOT / "clients" / "typescript"
T = TypeVar("T")

SAID: list[dict[str, Any]] = [
    {"role": "user", "content": "Big news: I'm moving to Manchester in March for a lab job."},
    {"role": "assistant", "content": [{"type": "text", "text": "Congratulations! Which lab?"}]},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose keys allow two requests a second (a burst of twenty), so that a
    client meets a 429; acme's keys made over REST by its admin key."""
    home = tmp_path_factory.mktemp("clients")
    admin = run_cli(home, "keys", "create", "--tenant", "acme", "--scope", "admin")
    other = run_cli(home, "keys", "create", "--tenant", "globex", "--scope", "write")
    assert admin.returncode == 0 and other.returncode == 0, admin.stderr + other.stderr
    server = start_server(home, SLOWWAVE_SERVE_RATE_PER_S="2", SLOWWAVE_SERVE_RATE_BURST="20")
    server.keys = {"admin": admin.stdout.strip(), "other": other.stdout.strip()}
    try:
        with server.client(server.keys["admin"]) as http:
            for name, body in {
                "desk": {"scope": "write", "conversation_id": "desk"},  # an agent's key
                "write": {"scope": "write"},
                "read": {"scope": "read"},
                "limited": {"scope": "write"},
                "ts-limited": {"scope": "write"},  # the TypeScript tests' own, a whole burst
                "ui-limited": {"scope": "read"},  # signs in to the browser, a whole burst
                "revoked": {"scope": "write"},
            }.items():
                made = http.post("/v1/keys", json=body)
                assert made.status_code == 200, made.text
                server.keys[name] = made.json()["key"]
            revoked = http.delete(f"/v1/keys/{server.keys['revoked'][:10]}")
            assert revoked.status_code == 200, revoked.text
        yield server
    finally:
        server.stop()


def poll(read: Callable[[], T], done: Callable[[T], bool], within_s: float = 1.0) -> T:
    deadline = time.monotonic() + within_s
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def mentions(answer: SearchAnswer, text: str) -> bool:
    return any(text in memory.text for memory in answer.memories or [])


def test_the_python_client_records_chat_messages_and_the_next_search_finds_them(
    served: Served,
) -> None:
    assert slowwave.Client is Client and slowwave.AsyncClient is AsyncClient
    with Client(served.keys["write"], served.url) as memory:
        recorded = memory.record("py-desk", SAID)
        assert (recorded.received, recorded.recorded, recorded.rejected) == (2, 2, [])
        again = memory.record("py-desk", SAID)  # a retry: the ids are derived, nothing added
        assert (again.recorded, again.already_recorded) == (0, 2)
        answer = poll(
            lambda: memory.search("where is she moving?", "py-desk", memories=3),
            lambda a: mentions(a, "Manchester"),
        )
        assert isinstance(answer, SearchAnswer) and mentions(answer, "Manchester")
        assert answer.memories and answer.memories[0].pending
        status = memory.status("py-desk")
        assert status.conversation_id == "py-desk" and status.episodes_pending >= 1
        assert memory.facts("py-desk") == []
        assert "Manchester" not in memory.context("py-desk").context  # facts only, by default


def test_the_async_client_has_the_same_methods_and_answers(served: Served) -> None:
    async def session() -> tuple[Any, Any]:
        async with AsyncClient(served.keys["write"], served.url) as memory:
            await memory.record("py-async", SAID)
            answer = await memory.search("where is she moving?", "py-async", memories=3)
            return answer, await memory.status("py-async")

    answer, status = anyio.run(session)
    with Client(served.keys["write"], served.url) as memory:
        same = memory.search("where is she moving?", "py-async", memories=3)
    assert same.memories is not None
    assert [m.id for m in answer.memories] == [m.id for m in same.memories]
    assert mentions(answer, "Manchester") and status.episodes_pending >= 1


def test_the_servers_errors_are_raised_as_the_same_classes_the_server_raises(
    served: Served,
) -> None:
    with Client(served.keys["write"], served.url) as ours:
        ours.record("py-errors", SAID)
    theirs = Client(served.keys["other"], served.url)  # another tenant: not there
    with theirs, pytest.raises(slowwave.errors.NotFound) as missing:
        theirs.search("where is she moving?", "py-errors")
    assert missing.value.code == "not_found" and missing.value.status == 404
    with Client(served.keys["read"], served.url) as reader:
        with pytest.raises(slowwave.errors.Forbidden, match="needs write"):
            reader.record("py-errors", SAID)
        with pytest.raises(slowwave.errors.InvalidRequest):
            reader.search("x", "py-errors", k=0)
    revoked = Client(served.keys["revoked"], served.url)
    with revoked, pytest.raises(slowwave.errors.Unauthorized) as refused:
        revoked.status("py-errors")
    assert refused.value.code == "unauthorized"
    nowhere = Client(served.keys["write"], "http://127.0.0.1:9", max_retries=1)
    with nowhere, pytest.raises(slowwave.errors.ServerUnreachable, match="cannot reach"):
        nowhere.status("py-errors")


def test_a_browser_sign_in_is_checked_and_paced_as_a_bearer_key_is(served: Served) -> None:
    """The memory browser signs a key in through the server's one authenticator: an unknown
    key is refused, and sign-ins count against the key's rate as its requests do."""
    with httpx.Client(base_url=served.url, timeout=30) as web:
        unknown = web.post("/ui/login", data={"key": "sw_" + "x" * 43, "next": "/ui"})
        answers: list[httpx.Response] = []
        while len(answers) < 200 and (not answers or answers[-1].status_code != 429):
            # a burst of twenty, then two a second: however slow the machine, a 429 comes
            answers.append(
                web.post("/ui/login", data={"key": served.keys["ui-limited"], "next": "/ui"})
            )
    assert unknown.status_code == 401 and "not valid" in unknown.text
    statuses = [a.status_code for a in answers]
    assert statuses[0] == 303 and statuses[-1] == 429, statuses
    assert len(answers) >= 21  # not before the burst was spent
    slowed = answers[-1]
    assert int(slowed.headers["retry-after"]) >= 1 and "set-cookie" not in slowed.headers


def test_a_429_with_retry_after_is_waited_for_and_the_retry_succeeds(served: Served) -> None:
    seen: list[int] = []

    def count(response: httpx.Response) -> None:
        seen.append(response.status_code)

    key = served.keys["limited"]
    with Client(key, served.url, max_retries=0) as impatient:
        limited = None
        for _ in range(60):
            try:
                impatient.status("py-limited")
            except slowwave.errors.RateLimited as exc:
                limited = exc
                break
            except slowwave.errors.NotFound:
                pass
    assert limited is not None and limited.retry_after_s is not None and limited.retry_after_s >= 1
    counting = httpx.Client(timeout=30, event_hooks={"response": [count]})
    with Client(key, served.url, max_retries=2, http_client=counting) as patient:
        started = time.monotonic()
        recorded = patient.record("py-limited", [{"role": "user", "content": "one more"}])
        waited = time.monotonic() - started
    counting.close()
    assert recorded.recorded == 1
    assert seen[0] == 429 and seen[-1] == 200, seen
    assert waited >= 0.9  # the Retry-After (1 s at two requests a second) was honoured


def test_an_mcp_client_that_sends_only_role_and_content_records_and_finds_its_memory(
    served: Served,
) -> None:
    async def session(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        import httpx2
        from mcp import Client as McpClient
        from mcp.client.streamable_http import streamable_http_client

        out: list[Any] = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as web,
            McpClient(streamable_http_client(f"{served.url}/mcp", http_client=web)) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"add_memory", "search_memory"} <= names, names
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                out.append((result.is_error, result.structured_content, text))
        return out

    add: tuple[str, dict[str, Any]] = ("add_memory", {"messages": SAID})
    first, second, found = anyio.run(
        session,
        served.keys["desk"],  # the key names its conversation: the client names none
        [add, add, ("search_memory", {"query": "where is the user moving?"})],
    )
    assert first[0] is False and first[1]["recorded"] == 2 and first[1]["conversation_id"] == "desk"
    assert second[0] is False and (second[1]["recorded"], second[1]["already_recorded"]) == (0, 2)
    assert found[0] is False
    assert any("Manchester" in m["text"] for m in found[1]["memories"]), found
    (refused,) = anyio.run(session, served.keys["write"], [add])  # no default anywhere
    assert refused[0] is True and "conversation_required" in refused[2]


def test_the_typescript_client_passes_its_tests_against_the_server(served: Served) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("Node.js is not installed: the TypeScript client cannot be tested")
    if not (TYPESCRIPT / "node_modules" / ".bin" / "tsc").exists():
        pytest.fail("clients/typescript has no node_modules: run `npm ci` there (.ci/run does)")
    keys = {name: served.keys[name] for name in ("write", "other", "revoked")}
    keys["limited"] = served.keys["ts-limited"]
    ran = subprocess.run(
        [npm, "test", "--silent"],
        cwd=TYPESCRIPT,
        env={
            **os.environ,
            "SLOWWAVE_BASE_URL": served.url,
            "SLOWWAVE_TEST_KEYS": json.dumps(keys),
            "NO_COLOR": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert "# pass 4" in ran.stdout and "# skipped 0" in ran.stdout, ran.stdout[-2000:]


def test_the_clients_types_are_regenerated_whenever_the_servers_document_changes(
    tmp_path: Path,
) -> None:
    generate = [sys.executable, str(ROOT / "scripts" / "generate_clients.py")]
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the TypeScript types cannot be generated")
    checked = subprocess.run([*generate, "--check"], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stderr
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import generate_clients as generator
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    document = json.loads(generator.document())
    answer = document["components"]["schemas"]["Recorded"]
    answer["properties"]["renamed"] = answer["properties"].pop("recorded")
    answer["required"] = [("renamed" if n == "recorded" else n) for n in answer["required"]]
    changed = tmp_path / "openapi.json"
    changed.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    stale = generator.stale(generator.generated(changed))
    assert set(stale) == {
        generator.DOCUMENT,
        generator.PYTHON_TYPES,
        generator.TYPESCRIPT_TYPES,
    }


def closure(name: str) -> list[metadata.Distribution]:
    """A distribution and everything it needs, as installed here (markers evaluated)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [name]
    while todo:
        wanted = todo.pop()
        dist = metadata.distribution(wanted)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(found.values())


def test_the_python_client_installs_and_runs_alone_from_its_wheel(
    served: Served, tmp_path: Path
) -> None:
    """Its wheel in a fresh virtualenv beside only its own dependencies (this environment's,
    linked: nothing is downloaded); no slowwave, torch, Prefect or Ray there."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", str(ROOT / "clients" / "python")),
            *("--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("slowwave_client-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install"),
            *("--no-deps", "--no-index", "-q", str(wheel)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    deps = tmp_path / "deps"
    deps.mkdir()
    for dist in closure("slowwave-client"):
        if dist.metadata["Name"] == "slowwave-client":
            continue
        for file in dist.files or []:
            top = file.parts[0]
            source = Path(str(dist.locate_file(top)))
            if top != ".." and not top.endswith(".pth") and not (deps / top).exists():
                (deps / top).symlink_to(source)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "zz-dependencies.pth").write_text(f"{deps}\n")
    script = f"""
import json, sys, time
started = time.perf_counter()
from slowwave_client import Client
imported_s = time.perf_counter() - started
with Client({served.keys["write"]!r}, {served.url!r}) as memory:
    memory.record("py-alone", [{{"role": "user", "content": "I keep bees on the roof."}}])
    answer = memory.search("what does she keep on the roof?", "py-alone", memories=3)
heavy = sorted(m for m in ("slowwave", "torch", "prefect", "ray", "psycopg") if m in sys.modules)
try:
    import slowwave
    server = True
except ImportError:
    server = False
print(json.dumps({{"import_s": imported_s, "texts": [m.text for m in answer.memories],
                  "heavy": heavy, "server": server}}))
"""
    ran = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert any("bees" in text for text in out["texts"]), out
    assert out["heavy"] == [] and out["server"] is False, out
    size = wheel.stat().st_size
    print(f"client wheel {size / 1024:.0f} KiB; import {out['import_s'] * 1000:.0f} ms")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on loopback that accepts a connection and never answers."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_lent_http_client_still_gives_up_after_the_clients_timeout(silent_port: int) -> None:
    url = f"http://127.0.0.1:{silent_port}"
    lent = httpx.Client(timeout=None)  # would wait for ever
    started = time.monotonic()
    with (
        Client("sw_" + "x" * 43, url, timeout=0.5, max_retries=0, http_client=lent) as memory,
        pytest.raises(slowwave.errors.ServerUnreachable, match=r"no answer within 0\.5 s"),
    ):
        memory.status("anything")
    lent.close()
    assert time.monotonic() - started < 10
