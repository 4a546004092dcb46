"""Soak: mixed search and record load on two server replicas while a consolidation runs.

One home, one database, two `slowwave serve` replicas on 127.0.0.1. LoCoMo's first
conversation is consolidated beforehand (searched by the load); the next ones are pending and
consolidated during the load (the replay model, in this process, as a nightly run would). Clients
alternate searches and batches of recorded messages, spread over both replicas; partway through,
one replica is killed with SIGKILL and the clients carry on against the other (as a load
balancer would, a request whose connection failed is sent again to the live one).

It checks, and reports:

- no answer with a 5xx status;
- every recorded message stored exactly once (the message ids sent, against the rows);
- the facts of the conversations consolidated under load equal those of the same run, without
  load, in another home.

``--sessions N`` loads only the first N sessions of each conversation: a shorter soak, for a
check that it runs rather than for its figures.

    python -m benchmarks.soak [--seconds 300] [--clients 16] [--pending 2] [--sessions N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from benchmarks.homes import fresh_home
from benchmarks.report import print_figures
from benchmarks.serve import DEFAULT_DATA, questions_of, start_server, stop
from slowwave.models.processes import free_port, unwind_on_sigterm


def _settings(home: Path, data: Path) -> Any:
    from slowwave.models.settings import Settings

    return Settings(home=home, replay_data=data, _env_file=None)


def _load(home: Path, data: Path, names: set[str], sessions: int | None) -> None:
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.ingest.locomo import read_locomo

    def first(key: str) -> bool:  # locomo:conv-26:session_3
        return sessions is None or int(key.split(":")[2].removeprefix("session_")) <= sessions

    with Database(_settings(home, data)) as db:
        migrate(db)
        with db.connection() as conn:
            load_episodes(
                conn,
                [
                    e
                    for e in read_locomo(data)
                    if e.conversation_id in names and first(e.external_key)
                ],
            )


def _consolidate(home: Path, data: Path, names: list[str]) -> Any:
    from slowwave.models.embedding import load_embedder
    from slowwave.models.llm.replay import LoCoMoReplayModel
    from slowwave.sql.db import Database
    from slowwave.tasks.consolidate import consolidate

    settings = _settings(home, data)
    embedder = load_embedder(settings)
    try:
        with Database(settings) as db:
            return consolidate(db, LoCoMoReplayModel(data), embedder, settings, conversations=names)
    finally:
        embedder.close()


def _facts(home: Path, data: Path, names: list[str]) -> list[tuple[str, ...]]:
    from slowwave.sql.db import Database

    with Database(_settings(home, data)) as db, db.connection() as conn:
        rows = conn.execute(
            "SELECT conversation_id, category, fact, valid_at::text, "
            "coalesce(invalid_at::text, '') FROM semantic_memory "
            "WHERE conversation_id = ANY(%s) ORDER BY 1, 2, 3, 4",
            [names],
        ).fetchall()
    return [tuple(str(v) for v in row) for row in rows]


def _stored(home: Path, data: Path, prefix: str) -> dict[str, int]:
    """(conversation/message id) → times stored, over the rows and the episodes' messages."""
    from slowwave.sql.db import Database

    with Database(_settings(home, data)) as db, db.connection() as conn:
        rows = conn.execute(
            "SELECT e.conversation_id || '/' || (m ->> 'message_id'), count(*) "
            "FROM episodic_memory e, jsonb_array_elements(e.messages) m "
            "WHERE e.conversation_id LIKE %s GROUP BY 1",
            [prefix + "%"],
        ).fetchall()
    return {str(k): int(n) for k, n in rows}


def _key(home: Path, data: Path) -> str:
    from slowwave.models.keys import Scope
    from slowwave.sql.db import Database
    from slowwave.tasks.keys import create_key

    with Database(_settings(home, data)) as db, db.connection() as conn:
        return create_key(conn, "default", Scope.write, by="benchmarks.soak")[0]


async def client_load(
    urls: list[str],
    key: str,
    questions: list[tuple[str, str]],
    clients: int,
    seconds: float,
    kill_at: float,
    kill: Any,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """The clients' load, and what it met. A replica counts as failed once its connection is
    refused, as a load balancer's check sees it; any other transport error (a killed
    replica's open request, a read that timed out on a busy one) sends the request to the
    next replica and is counted by kind in ``transport_errors``."""
    started = time.perf_counter()
    deadline = started + seconds
    dead: set[str] = set()
    killer = [kill]  # the first client kills a replica, once
    counts = {"searches": 0, "records": 0, "status_5xx": 0, "status_4xx": 0, "resent": 0}
    sent: set[str] = set()
    failures: list[str] = []  # what the first 5xx answers said, for a reader of a failed soak
    errors: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {key}"}

    async with httpx.AsyncClient(headers=headers, timeout=30, transport=transport) as http:

        async def ask(n: int, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
            """One request, to the replica this client uses, or to a live one when it fails."""
            for attempt in range(len(urls) + 1):
                live = [u for u in urls if u not in dead] or urls
                url = live[(n + attempt) % len(live)]
                try:
                    return await http.request(method, url + path, **kwargs)
                except httpx.ConnectError:
                    dead.add(url)
                    counts["resent"] += 1
                except httpx.TransportError as error:
                    errors[type(error).__name__] += 1
                    counts["resent"] += 1
            return None

        async def client(n: int) -> None:
            i = 0
            while time.perf_counter() < deadline:
                if n == 0 and killer and time.perf_counter() - started >= kill_at:
                    killer.pop()()
                i += 1
                if i % 2:
                    conversation, question = questions[(n * 7919 + i) % len(questions)]
                    answer = await ask(
                        n,
                        "GET",
                        f"/v1/conversations/{conversation}/search",
                        params={"query": question, "k": 10},
                    )
                    counts["searches"] += 1
                else:
                    ids = [f"{n}-{i}-{j}" for j in range(20)]
                    messages = [
                        {
                            "message_id": m,
                            "timestamp": f"2024-02-{1 + i % 28:02d}T10:{j:02d}:00Z",
                            "speaker": "user",
                            "text": f"soak message {m}",
                        }
                        for j, m in enumerate(ids)
                    ]
                    answer = await ask(
                        n,
                        "POST",
                        f"/v1/conversations/soak-{n}/messages",
                        json={"messages": messages},
                    )
                    sent.update(f"soak-{n}/{m}" for m in ids)
                    counts["records"] += 1
                if answer is None or answer.status_code >= 500:
                    counts["status_5xx"] += 1
                    if len(failures) < 5:
                        failures.append(_failure(answer, time.perf_counter() - started))
                elif answer.status_code >= 400:
                    counts["status_4xx"] += 1

        await asyncio.gather(*(client(n) for n in range(clients)))
    return {
        **counts,
        "sent": sent,
        "replicas_failed": len(dead),
        "transport_errors": dict(errors),
        "failures": failures,
    }


def _failure(answer: httpx.Response | None, at: float) -> str:
    """One 5xx answer (or none: every replica's connection failed), as a line."""
    if answer is None:
        return f"at {at:.1f} s: no replica answered"
    return f"at {at:.1f} s: {answer.request.method} {answer.status_code} {answer.text[:300]}"


def run_soak(
    data: Path,
    *,
    seconds: float,
    clients: int,
    pending: int,
    port: int = 0,
    sessions: int | None = None,
) -> dict[str, Any]:
    """The soak, in temporary homes; its figures (the checks as booleans among them). The
    replicas listen on ``port`` and the next one (0: on two free ports)."""
    samples = json.loads(data.read_text(encoding="utf-8"))[: 1 + pending]
    with (
        tempfile.TemporaryDirectory(prefix="slowwave-soak-") as tmp,
        tempfile.TemporaryDirectory(prefix="slowwave-soak-quiet-") as quiet_tmp,
    ):
        home, quiet = fresh_home(tmp), fresh_home(quiet_tmp)
        try:
            ports = (port, port + 1) if port else _two_free_ports()
            return _soak_in(home, quiet, data, samples, ports, seconds, clients, sessions)
        finally:
            for each in (home, quiet):
                _stop_postgres(each, data)


def _two_free_ports() -> tuple[int, int]:
    first = second = free_port()
    while second == first:
        second = free_port()
    return first, second


def _stop_postgres(home: Path, data: Path) -> None:
    """The home's embedded Postgres, stopped: the replica killed with SIGKILL never let go of
    it, so no clean exit of another holder stops it."""
    from slowwave.sql.db.embedded import prune_dead_holders, stop_embedded

    pgdata = _settings(home, data).pgdata
    prune_dead_holders(pgdata)
    stop_embedded(pgdata, force=True)


def _soak_in(
    home: Path,
    quiet: Path,
    data: Path,
    samples: list[dict[str, Any]],
    ports: tuple[int, int],
    seconds: float,
    clients: int,
    sessions: int | None,
) -> dict[str, Any]:
    searched, consolidated = samples[0]["sample_id"], [s["sample_id"] for s in samples[1:]]
    # the same run without load, for the facts it must end with
    _load(quiet, data, set(consolidated), sessions)
    _consolidate(quiet, data, consolidated)
    expected = _facts(quiet, data, consolidated)

    _load(home, data, {searched, *consolidated}, sessions)
    _consolidate(home, data, [searched])
    key = _key(home, data)
    logs = [home / f"replica-{port}.log" for port in ports]
    replicas = [start_server(home, port, log) for port, log in zip(ports, logs, strict=True)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]

    def kill() -> None:
        os.killpg(replicas[0].pid, signal.SIGKILL)

    night: dict[str, Any] = {}

    def nightly() -> None:
        time.sleep(min(5.0, seconds / 6))  # the load is on by then
        started = time.perf_counter()
        night["summary"] = _consolidate(home, data, consolidated)
        night["seconds"] = round(time.perf_counter() - started, 1)

    worker = threading.Thread(target=nightly, name="soak-nightly")
    worker.start()
    try:
        load = asyncio.run(
            client_load(
                urls,
                key,
                [(searched, q) for _, q in questions_of(samples[:1])],
                clients,
                seconds,
                seconds / 2,
                kill,
            )
        )
    finally:
        worker.join()
        for replica in replicas:
            stop(replica)
    stored = _stored(home, data, "soak-")
    got = _facts(home, data, consolidated)

    sent: set[str] = load.pop("sent")
    summary = night.get("summary")
    return {
        **load,
        "clients": clients,
        "seconds": seconds,
        "messages_sent": len(sent),
        "messages_stored": sum(stored.values()),
        "stored_exactly_once": set(stored) == sent and all(n == 1 for n in stored.values()),
        "consolidation_status": summary.status if summary is not None else None,
        "consolidation_seconds": night.get("seconds"),
        "facts_expected": len(expected),
        "facts_equal_without_load": got == expected,
        "no_5xx": load["status_5xx"] == 0,
        "replica_errors": _errors(logs) if load["status_5xx"] else [],
    }


def _errors(logs: list[Path]) -> list[str]:
    """The replicas' logged errors and the last lines of their tracebacks (at most 40 lines)."""
    kept: list[str] = []
    for log in logs:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        for n, line in enumerate(lines):
            if "ERROR" in line or line.startswith(("Traceback", "psycopg", "slowwave")):
                kept.extend(lines[n : n + 3])
    return kept[-40:]


def main() -> None:
    unwind_on_sigterm()  # a stopped soak stops the replicas it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--pending", type=int, default=2, help="conversations consolidated")
    parser.add_argument("--sessions", type=int, default=None, help="the first N of each")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    figures = run_soak(
        args.data,
        seconds=args.seconds,
        clients=args.clients,
        pending=args.pending,
        sessions=args.sessions,
    )
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()
