"""What `slowwave serve` costs and holds: the LoCoMo questions over HTTP at rising concurrency,
beside the same questions through the in-process ``Memory.search``, in one run.

LoCoMo's conversations are consolidated with the replay model into a fresh home; the server is
started on it (127.0.0.1). Then, side by side on the same machine:

- in process: every question through ``Memory.search``, one after another (the baseline);
- over HTTP: async httpx clients (1, 8, 32, 64 at once by default), each asking the questions
  in turn for ``--seconds``: requests/s, p50 / p95 / p99 latency, errors (``errors_by``: how
  many of each status, or of each exception where no answer came), and the CPU share of
  the load generator and of the server (they share the machine's cores);
- recording: clients posting batches of 100 messages to conversations of their own;
- findable: clients each recording one message with a word of its own, then searching for it
  until a search returns it as an episodic memory: the time from the record's answer to that
  search's answer.

Searches return episodic memories beside the facts (the default); one client's latency is also
measured with facts only (``memories=0``: the search as it was before episodic memories), in
process and over HTTP, side by side. Each conversation is searched once before the timing, which
embeds its messages (``windows_first_search_ms``: that first search).

Goals (on two cores): at 1 client the server adds at most 20% to the in-process p50; with
episodic memories one client's p50 at most 1.3x facts only; at 32 clients it serves at least 3x
the requests/s of 1 client, p99 at most 2x p50, no error; recording at least 5,000 messages/s;
a recorded message found by search within 1,000 ms at p99 with 32 clients.

    python -m benchmarks.serve [--conversations 7] [--sessions N] [--questions N] [--seconds 15]
        [--levels 1,8,32,64] [--record-clients 8] [--find-clients 32] [--port P] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.homes import fresh_home
from benchmarks.report import print_figures
from slowwave.models.processes import free_port, unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def questions_of(data: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["sample_id"], qa["question"]) for c in data for qa in c["qa"] if qa.get("question")]


def prepare(
    home: Path, data_path: Path, conversations: int, sessions: int | None = None
) -> list[tuple[str, str]]:
    """LoCoMo's first ``conversations`` (their first ``sessions``, or all) consolidated (replay
    model) into ``home``."""
    from slowwave.models.embedding import load_embedder
    from slowwave.models.llm.replay import LoCoMoReplayModel
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.consolidate import consolidate
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.ingest.locomo import read_locomo

    data = json.loads(data_path.read_text(encoding="utf-8"))[:conversations]
    names = {c["sample_id"] for c in data}
    settings = Settings(home=home, replay_data=data_path, _env_file=None)

    def first(key: str) -> bool:  # locomo:conv-26:session_3
        return sessions is None or int(key.split(":")[2].removeprefix("session_")) <= sessions

    embedder = load_embedder(settings)
    try:
        with Database(settings) as db:
            migrate(db)
            with db.connection() as conn:
                load_episodes(
                    conn,
                    [
                        e
                        for e in read_locomo(data_path)
                        if e.conversation_id in names and first(e.external_key)
                    ],
                )
            consolidate(db, LoCoMoReplayModel(data_path), embedder, settings)
    finally:
        embedder.close()
    return questions_of(data)


def in_process(home: Path, questions: list[tuple[str, str]]) -> dict[str, Any]:
    """Every question through Memory.search, one after another, with episodic memories and
    with facts only (``memories=0``), alternating; and the query embedding alone."""
    from slowwave.memory import Memory
    from slowwave.models.settings import Settings

    settings = Settings(home=home, _env_file=None)
    latencies: dict[str, list[float]] = {"memories": [], "facts_only": []}
    embeds, first = [], []
    with Memory(settings) as memory:
        for conversation in dict.fromkeys(c for c, _ in questions):  # each one's windows
            started = time.perf_counter()
            memory.search("hello", conversation, 10)
            first.append(time.perf_counter() - started)
        for conversation, question in questions:
            for shape, memories in (("memories", None), ("facts_only", 0)):
                started = time.perf_counter()
                memory.search(question, conversation, 10, memories=memories)
                latencies[shape].append(time.perf_counter() - started)
            started = time.perf_counter()
            memory.service.embedder.embed([question])
            embeds.append(time.perf_counter() - started)
    return {
        "requests": len(latencies["memories"]),
        "p50_ms": ms(statistics.median(latencies["memories"])),
        "p95_ms": ms(percentile(latencies["memories"], 95)),
        "p99_ms": ms(percentile(latencies["memories"], 99)),
        "facts_only_p50_ms": ms(statistics.median(latencies["facts_only"])),
        "facts_only_p99_ms": ms(percentile(latencies["facts_only"], 99)),
        "embed_p50_ms": ms(statistics.median(embeds)),
        "windows_first_search_ms": ms(statistics.median(first)),
    }


def make_key(home: Path) -> str:
    from slowwave.models.keys import Scope
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database
    from slowwave.tasks.keys import create_key

    with Database(Settings(home=home, _env_file=None)) as db, db.connection() as conn:
        key, _ = create_key(conn, "default", Scope.write, by="benchmarks.serve")
    return key


def start_server(home: Path, port: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    """`slowwave serve` on ``port``, ready; its output to ``log`` (else discarded)."""
    env = {
        **os.environ,
        "SLOWWAVE_HOME": str(home),
        "SLOWWAVE_SERVE_RATE_PER_S": "1000000",  # one key for every client: no rate limit
        "SLOWWAVE_SERVE_RATE_BURST": "1000000",
    }
    env.pop("SLOWWAVE_DATABASE_URL", None)
    with open(log or os.devnull, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "slowwave", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"slowwave serve exited {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.5)
    stop(process)
    raise RuntimeError("slowwave serve did not get ready in 3 minutes")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


async def answered(
    request: Awaitable[httpx.Response], errors: Counter[str], label: str = ""
) -> httpx.Response | None:
    """``request``'s answer where it is a 200; else None, the error counted in ``errors`` under
    ``label`` and its status, or the exception's name where no answer came."""
    try:
        answer = await request
    except httpx.HTTPError as error:
        errors[f"{label}{type(error).__name__}"] += 1
        return None
    if answer.status_code != 200:
        errors[f"{label}{answer.status_code}"] += 1
        return None
    return answer


async def load(
    url: str,
    key: str,
    questions: list[tuple[str, str]],
    clients: int,
    seconds: float,
    memories: int | None = None,
) -> tuple[list[float], Counter[str]]:
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as http:

        async def client(offset: int) -> None:
            i = offset
            while time.perf_counter() < deadline:
                conversation, question = questions[i % len(questions)]
                i += clients
                started = time.perf_counter()
                search = http.get(
                    f"/v1/conversations/{conversation}/search",
                    params={
                        "query": question,
                        "k": 10,
                        **({} if memories is None else {"memories": memories}),
                    },
                )
                if await answered(search, errors) is not None:
                    latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies, errors


def stamp(batch: int, i: int) -> str:
    """A message's time: a minute apart within a batch, a day apart between batches."""
    return f"2024-01-{1 + batch % 28:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00Z"


async def record(
    url: str, key: str, clients: int, seconds: float
) -> tuple[int, Counter[str], float]:
    """Clients posting batches of 100 messages, each to a conversation of its own."""
    sent = 0
    errors: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    deadline = started + seconds
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:

        async def client(n: int) -> None:
            nonlocal sent
            batch = 0
            while time.perf_counter() < deadline:
                messages = [
                    {
                        "message_id": f"{batch}-{i}",
                        "timestamp": stamp(batch, i),
                        "speaker": "user" if i % 2 else "assistant",
                        "text": f"message {i} of batch {batch}: the weather in Lisbon was fine",
                    }
                    for i in range(100)
                ]
                batch += 1
                post = http.post(
                    f"/v1/conversations/bench-{n}/messages", json={"messages": messages}
                )
                answer = await answered(post, errors)
                if answer is None:
                    continue
                if answer.json()["recorded"] != 100:
                    errors["not all recorded"] += 1
                else:
                    sent += 100

        await asyncio.gather(*(client(n) for n in range(clients)))
    return sent, errors, time.perf_counter() - started


async def findable(
    url: str, key: str, clients: int, seconds: float
) -> tuple[list[float], Counter[str]]:
    """Clients each recording one message with a word of its own to a conversation of its own,
    then searching for the word until a search returns the message as an episodic memory: the
    seconds from the record's answer to the answer of the search that found it."""
    delays: list[float] = []
    errors: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as http:

        async def client(n: int) -> None:
            i = 0
            while time.perf_counter() < deadline:
                word = f"zq{n}x{i}marker"
                path = f"/v1/conversations/find-{n}"
                message = {
                    "message_id": f"find-{i}",
                    "timestamp": stamp(i, n),
                    "speaker": "user",
                    "text": f"the parcel code is {word}",
                }
                i += 1
                post = http.post(f"{path}/messages", json={"messages": [message]})
                if await answered(post, errors, "record ") is None:
                    continue
                recorded = time.perf_counter()
                while time.perf_counter() - recorded < 5:
                    try:
                        found = await http.get(
                            f"{path}/search", params={"query": word, "k": 1, "memories": 1}
                        )
                    except httpx.HTTPError as error:
                        errors[f"search {type(error).__name__}"] += 1
                        continue
                    if found.status_code == 200 and any(
                        word in m["text"] for m in found.json()["memories"]
                    ):
                        delays.append(time.perf_counter() - recorded)
                        break
                else:
                    errors["not found in 5 s"] += 1

        await asyncio.gather(*(client(n) for n in range(clients)))
    return delays, errors


def measured(process: psutil.Process, *, children: bool = True) -> float:
    """CPU seconds of ``process`` (and of its children: the server's own processes)."""
    times = process.cpu_times()
    total = times.user + times.system
    for child in process.children(recursive=True) if children else ():
        try:
            child_times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += child_times.user + child_times.system
    return float(total)


def main() -> None:
    unwind_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=None, help="the first N of each")
    parser.add_argument("--questions", type=int, default=None, help="the first N (default: all)")
    parser.add_argument("--seconds", type=float, default=15.0, help="per concurrency level")
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--record-clients", type=int, default=8)
    parser.add_argument("--find-clients", type=int, default=32)
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    port = args.port or free_port()
    cores = psutil.cpu_count() or 1

    with tempfile.TemporaryDirectory(prefix="slowwave-serve-bench-") as tmp:
        home = fresh_home(tmp)
        questions = prepare(home, args.data, args.conversations, args.sessions)[: args.questions]
        baseline = in_process(home, questions)
        key = make_key(home)
        server = start_server(home, port)
        url = f"http://127.0.0.1:{port}"
        figures: dict[str, Any] = {
            "questions": len(questions),
            "cores": cores,
            "in_process": baseline,
        }
        try:
            me, served = psutil.Process(), psutil.Process(server.pid)
            asyncio.run(load(url, key, questions, 1, 2.0))  # warm: pools, caches
            latencies, _ = asyncio.run(load(url, key, questions, 1, args.seconds, memories=0))
            figures["clients_1_facts_only"] = {
                "p50_ms": ms(statistics.median(latencies)) if latencies else None,
                "p99_ms": ms(percentile(latencies, 99)),
            }
            for clients in levels:
                cpu_me, cpu_server = measured(me, children=False), measured(served)
                started = time.perf_counter()
                latencies, errors = asyncio.run(load(url, key, questions, clients, args.seconds))
                wall = time.perf_counter() - started
                errors_by = dict(sorted(errors.items()))
                figures[f"clients_{clients}"] = {
                    "requests_per_s": round(len(latencies) / wall, 1),
                    "p50_ms": ms(statistics.median(latencies)) if latencies else None,
                    "p95_ms": ms(percentile(latencies, 95)),
                    "p99_ms": ms(percentile(latencies, 99)),
                    "errors": errors.total(),
                    "errors_by": errors_by,
                    "load_generator_cpu_share": round(
                        (measured(me, children=False) - cpu_me) / wall / cores, 2
                    ),
                    "server_cpu_share": round((measured(served) - cpu_server) / wall / cores, 2),
                }
            sent, record_errors, wall = asyncio.run(
                record(url, key, args.record_clients, args.seconds)
            )
            figures["record"] = {
                "clients": args.record_clients,
                "messages_per_s": round(sent / wall),
                "errors": record_errors.total(),
                "errors_by": dict(sorted(record_errors.items())),
            }
            delays, find_errors = asyncio.run(findable(url, key, args.find_clients, args.seconds))
            figures["record_to_found"] = {
                "clients": args.find_clients,
                "messages": len(delays),
                "p50_ms": ms(statistics.median(delays)) if delays else None,
                "p99_ms": ms(percentile(delays, 99)),
                "errors": find_errors.total(),
                "errors_by": dict(sorted(find_errors.items())),
            }
        finally:
            stop(server)

    one = figures.get("clients_1", {})
    many = figures.get("clients_32") or figures[f"clients_{levels[-1]}"]
    figures["goals"] = {
        "server_over_in_process_p50_at_1": round(one["p50_ms"] / baseline["p50_ms"], 2)
        if one.get("p50_ms")
        else None,
        "rps_32_over_rps_1": round(many["requests_per_s"] / one["requests_per_s"], 2)
        if one.get("requests_per_s")
        else None,
        "p99_over_p50_at_32": round(many["p99_ms"] / many["p50_ms"], 2)
        if many.get("p50_ms")
        else None,
        "errors": sum(figures[f"clients_{c}"]["errors"] for c in levels)
        + figures["record"]["errors"]
        + figures["record_to_found"]["errors"],
        "record_messages_per_s": figures["record"]["messages_per_s"],
        "memories_over_facts_only_p50_in_process": round(
            baseline["p50_ms"] / baseline["facts_only_p50_ms"], 2
        ),
        "memories_over_facts_only_p50_at_1": round(
            one["p50_ms"] / figures["clients_1_facts_only"]["p50_ms"], 2
        )
        if one.get("p50_ms") and figures["clients_1_facts_only"]["p50_ms"]
        else None,
        "record_to_found_p99_ms": figures["record_to_found"]["p99_ms"],
    }
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()
