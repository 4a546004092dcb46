"""A run's counts are what it committed. `slowwave runs list`, `slowwave runs show` (and their
--json), the REST list (the same statement) and the run's Prefect artifact agree with the chunks,
decisions, facts and episodes in the database, for a run killed with SIGKILL, one stopped by
SIGTERM (as `timeout` stops it) and one that finished with a failed chunk."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from slowwave import sql
from slowwave.models.settings import Settings
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.export import export
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.revert import list_runs
from slowwave.tasks.runs import mark_crashed
from tests.fix_db import url_for_database
from tests.fix_model_server import FakeModel, fake_model
from tests.fix_processes import slowwave_env
from tests.reliability.crash_child import settings_for
from tests.reliability.fix_commands import CommandModel, HashEmbedder, story_episodes
from tests.reliability.fix_crash import kill_at

# every count a run row carries, in `runs list --json` and `runs show --json` alike
COUNTS = (
    "conversations",
    "chunks",
    "chunks_failed",
    "episodes_consolidated",
    "episodes_skipped",
    "episodes_quarantined",
    "facts_inserted",
    "facts_reinforced",
    "facts_updated",
    "facts_invalidated",
    "dedupe_merges",
    "actions_rejected",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_cached",
)

# killed: its first chunks applied, the others wait on the model when it is killed
KILLED = ("k1", "k2", "k3")
# stopped by SIGTERM while its later chunks wait on the model
STOPPED = ("t1", "t2")
# the last run takes what the others left, and these; one of f1's episodes is never answered
FRESH = ("f1", "f2")
GARBLED = "Zanzibar"
# the crash suite's stories (tests/reliability): 7 episodes each, 2 a chunk, every kind of action
STORIES = 3


def _transcript(path: Path) -> Path:
    """Three sessions (episodes) per conversation, a day apart, long ago (all due)."""
    lines = []
    for c in (*KILLED, *STOPPED, *FRESH):
        for s in range(3):
            day = f"2023-03-{10 + s:02d}"
            place = GARBLED if (c, s) == ("f1", 0) else f"town number {s}"
            for m, (speaker, text) in enumerate(
                (
                    ("user", f"In session {s}, {c} says they moved to {place} with a dog."),
                    ("assistant", f"How is {place} treating you and the dog, {c}?"),
                    ("user", f"{c}: the dog loves the river walks in {place}, I love the bakery."),
                )
            ):
                lines.append(
                    {
                        "conversation_id": c,
                        "message_id": f"{c}-{s}-{m}",
                        "timestamp": f"{day}T10:0{m}:00+00:00",
                        "speaker": speaker,
                        "text": text,
                        "session_id": f"s{s}",
                    }
                )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def committed(conn: psycopg.Connection, run_id: uuid.UUID) -> dict[str, int]:
    """What the run committed, counted here from the rows themselves: its chunks, its decisions
    (an eviction is not the model's invalidation) and the episodes it finished."""
    chunks = conn.execute(
        "SELECT conversation_id, status, cardinality(episode_ids), prompt_tokens, "
        "completion_tokens, cached_tokens FROM consolidation_chunks WHERE run_id = %s",
        (run_id,),
    ).fetchall()
    actions: dict[str, int] = dict(
        conn.execute(
            "SELECT action, count(*) FROM decision_log "
            "WHERE run_id = %s AND proposed_action <> 'evict' GROUP BY action",
            (run_id,),
        ).fetchall()
    )
    episodes = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE gated) FROM episodic_memory "
        "WHERE consolidation_run_id = %s",
        (run_id,),
    ).fetchone()
    assert episodes is not None
    return {
        "conversations": len({c[0] for c in chunks}),
        "chunks": len(chunks),
        "chunks_failed": sum(c[1] in ("failed", "quarantined") for c in chunks),
        "episodes_consolidated": episodes[0],
        "episodes_skipped": episodes[1],
        "episodes_quarantined": sum(c[2] for c in chunks if c[1] == "quarantined"),
        "facts_inserted": actions.get("new", 0),
        "facts_reinforced": actions.get("reinforce", 0),
        "facts_updated": actions.get("update", 0),
        "facts_invalidated": actions.get("invalidate", 0),
        "dedupe_merges": actions.get("merge", 0),
        "actions_rejected": actions.get("rejected", 0),
        "prompt_tokens": sum(c[3] for c in chunks),
        "completion_tokens": sum(c[4] for c in chunks),
        "prompt_tokens_cached": sum(c[5] for c in chunks),
    }


def facts_written(conn: psycopg.Connection, run_id: uuid.UUID) -> int:
    """The facts the run wrote (with the fake model, which only answers new facts, one a new
    decision each)."""
    row = conn.execute(
        "SELECT count(*) FROM semantic_memory WHERE created_by_run_id = %s", (run_id,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def counts(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in COUNTS}


@dataclass
class Night:
    """The runs of one night, as the operator and the database saw them."""

    url: str
    home: Path
    env: dict[str, str]
    runs: dict[str, uuid.UUID] = field(default_factory=dict)
    # the REST list (statement runs_list) and the database, just after the kill
    rest_after_kill: dict[str, Any] = field(default_factory=dict)
    committed_after_kill: dict[str, int] = field(default_factory=dict)
    show_after_kill: subprocess.CompletedProcess[str] | None = None
    exits: dict[str, int] = field(default_factory=dict)

    def cli(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "slowwave", *args],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)


def _wait_committed(night: Night, model: FakeModel, child: subprocess.Popen[str]) -> uuid.UUID:
    """The run's id once the model holds its later calls and what it committed stopped
    changing (its answered chunks all applied)."""
    deadline = time.monotonic() + 240
    last: tuple[object, ...] = ()
    steady_since = time.monotonic()
    with night.connect() as conn:
        while time.monotonic() < deadline:
            assert child.poll() is None, "the run ended before it was stopped"
            row = conn.execute(
                "SELECT r.id, (SELECT count(*) FROM consolidation_chunks c WHERE c.run_id = r.id) "
                "FROM consolidation_runs r WHERE r.status = 'running'"
            ).fetchone()
            now = time.monotonic()
            if row is None or not model.held.is_set() or row[1] == 0:
                steady_since = now
            elif tuple(row) != last:
                last, steady_since = tuple(row), now
            elif now - steady_since > 3.0:
                run_id: uuid.UUID = row[0]
                return run_id
            time.sleep(0.2)
    raise AssertionError("the run committed nothing before the model held its calls")


# the scenarios count a chunk an episode: a conversation's last one stays alone
ONE_EPISODE_A_CHUNK = {"SLOWWAVE_CHUNK_SIZE": "1", "SLOWWAVE_CHUNK_LONE_JOINS": "false"}


def _start(night: Night, model: FakeModel, *args: str) -> subprocess.Popen[str]:
    with (night.home.parent / f"{args[0]}-{len(night.runs)}.log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "slowwave", *args],
            env={**night.env, **model.env(**ONE_EPISODE_A_CHUNK)},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # a group of its own: what it starts stops with it
        )


def _stop_group(child: subprocess.Popen[str]) -> None:
    """Whatever is left of the run's process group (all of it, when a test failed half-way)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)


@pytest.fixture(scope="module")
def night(
    database: Database, prefect_api: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Night]:
    from prefect.settings import PREFECT_API_URL

    folder = tmp_path_factory.mktemp("run-counts")
    name = f"run_counts_{uuid.uuid4().hex[:8]}"
    with database.raw_connection(autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = url_for_database(database.url, name)
    env = slowwave_env(
        folder / "home",
        SLOWWAVE_DATABASE_URL=url,
        PREFECT_API_URL=str(PREFECT_API_URL.value()),  # the session's test API
        SLOWWAVE_MAX_ATTEMPTS="1",
    )
    night = Night(url=url, home=folder / "home", env=env)
    try:
        ingested = night.cli("ingest", str(_transcript(folder / "chats.jsonl")))
        assert ingested.returncode == 0, ingested.stderr[-3000:]
        _play(night)
        yield night
    finally:
        with database.raw_connection(autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _play(night: Night) -> None:
    # 1. killed with SIGKILL once its first chunks are applied and the rest wait on the model
    hold = threading.Event()
    with fake_model(hold=hold, hold_after=4) as model:
        child = _start(night, model, "consolidate", *(a for c in KILLED for a in ("-c", c)))
        try:
            night.runs["killed"] = run_id = _wait_committed(night, model, child)
            os.kill(child.pid, signal.SIGKILL)
            night.exits["killed"] = child.wait(30)
        finally:
            _stop_group(child)
    with night.connect() as conn:
        night.rest_after_kill = next(r.model_dump() for r in list_runs(conn, 20) if r.id == run_id)
        night.committed_after_kill = committed(conn, run_id)
        assert facts_written(conn, run_id) == night.committed_after_kill["facts_inserted"]
    night.show_after_kill = night.cli("runs", "show", str(run_id), "--json")

    # 2. stopped by SIGTERM (what `timeout` sends) while later chunks wait on the model
    hold = threading.Event()
    with fake_model(hold=hold, hold_after=2) as model:
        child = _start(night, model, "consolidate", *(a for c in STOPPED for a in ("-c", c)))
        try:
            night.runs["stopped"] = _wait_committed(night, model, child)
            child.send_signal(signal.SIGTERM)
            night.exits["stopped"] = child.wait(60)
        finally:
            _stop_group(child)

    # 3. the rest of the night, to the end: every conversation due, one chunk never answered
    with fake_model(garble=(GARBLED,)) as model:
        finished = night.cli("consolidate", **model.env(**ONE_EPISODE_A_CHUNK))
    assert finished.returncode == 1, finished.stderr[-3000:]  # CompletedWithFailures
    with night.connect() as conn:
        known = set(night.runs.values())
        (last,) = [
            r[0]
            for r in conn.execute("SELECT id FROM consolidation_runs").fetchall()
            if r[0] not in known
        ]
    night.runs["finished"] = last


def _listed(night: Night) -> dict[uuid.UUID, dict[str, Any]]:
    return {uuid.UUID(r["id"]): r for r in night.json("runs", "list")}


@pytest.mark.slow
def test_a_run_killed_with_sigkill_reports_what_it_committed(night: Night) -> None:
    run_id = night.runs["killed"]
    assert night.exits["killed"] == -signal.SIGKILL
    after_kill = night.committed_after_kill
    assert after_kill["facts_inserted"] > 0 and after_kill["conversations"] == len(KILLED)
    # the REST list, before anything noticed the process is gone: still running, and what it
    # committed so far
    assert night.rest_after_kill["status"] == "running"
    assert counts(night.rest_after_kill) == after_kill
    # the operator's look notices the process is gone: crashed, with what it committed
    assert night.show_after_kill is not None
    assert night.show_after_kill.returncode == 0, night.show_after_kill.stderr[-3000:]
    shown_then = json.loads(night.show_after_kill.stdout)
    assert shown_then["status"] == "crashed"
    assert counts(shown_then) == after_kill

    with night.connect() as conn:
        now = committed(conn, run_id)
    assert now == after_kill  # later runs took over its claims, not its history
    listed = _listed(night)[run_id]
    assert listed["status"] == "crashed"
    assert counts(listed) == now
    shown = night.json("runs", "show", str(run_id))
    assert shown["status"] == "crashed"
    assert counts(shown) == now


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_reports_what_it_committed(night: Night) -> None:
    run_id = night.runs["stopped"]
    assert night.exits["stopped"] != 0
    with night.connect() as conn:
        now = committed(conn, run_id)
        assert facts_written(conn, run_id) == now["facts_inserted"]
    assert now["facts_inserted"] > 0 and now["conversations"] == len(STOPPED)
    listed = _listed(night)[run_id]
    assert listed["status"] == "interrupted"
    assert counts(listed) == now
    shown = night.json("runs", "show", str(run_id))
    assert shown["status"] == "interrupted"
    assert counts(shown) == now
    with night.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
        stored = cur.execute(
            "SELECT summary FROM consolidation_runs WHERE id = %s", (run_id,)
        ).fetchone()
    assert stored is not None
    assert {k: stored["summary"][k] for k in COUNTS} == now  # the metrics read the summary


@pytest.mark.slow
def test_a_finished_run_reports_what_it_committed_and_its_artifact_agrees(night: Night) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    run_id = night.runs["finished"]
    with night.connect() as conn:
        now = committed(conn, run_id)
        assert facts_written(conn, run_id) == now["facts_inserted"]
    assert now["chunks_failed"] == now["episodes_quarantined"] == 1  # f1's first episode
    # what the other two left, and the two fresh conversations
    assert now["conversations"] == len(KILLED) + len(STOPPED) + len(FRESH)
    listed = _listed(night)[run_id]
    assert listed["status"] == "completed_with_failures"
    assert counts(listed) == now
    shown = night.json("runs", "show", str(run_id))
    assert shown["status"] == "completed_with_failures"
    assert counts(shown) == now

    with get_client(sync_client=True) as client:
        (artifact,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["slowwave-run-summary"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[uuid.UUID(shown["flow_run_id"])]),
            )
        )
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    assert isinstance(rows, list), rows
    table = {r["measure"]: r["value"] for r in rows}
    assert table["conversations"] == now["conversations"]
    assert table["chunks (model calls)"].split()[0] == str(now["chunks"])
    assert table["episodes consolidated"] == now["episodes_consolidated"]
    assert table["episodes quarantined"] == now["episodes_quarantined"]
    assert table["facts new"] == now["facts_inserted"]
    assert table["tokens in / out"] == f"{now['prompt_tokens']} / {now['completion_tokens']}"


@pytest.mark.slow
def test_every_run_of_the_night_is_listed_with_the_counts_it_committed(night: Night) -> None:
    listed = _listed(night)
    assert set(listed) == set(night.runs.values())
    with night.connect() as conn:
        for run_id, row in listed.items():
            assert counts(row) == committed(conn, run_id), row["status"]
        # the metrics add up the runs' summaries: the crashed run's too
        metrics = {
            key: value
            for part, key, value in conn.execute(sql.statement("metrics_runs")).fetchall()
            if part == "counter"
        }
        night_total = [committed(conn, run_id) for run_id in listed]
    for name in COUNTS:
        assert metrics[name] == sum(c[name] for c in night_total), name


def _row(conn: psycopg.Connection, table: str, **values: object) -> None:
    columns = ", ".join(values)
    placeholders = ", ".join(f"%({k})s" for k in values)
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", values)


def test_the_migration_gives_runs_recorded_before_it_what_they_committed(
    settings: Settings, fresh_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed run was stored without its conversations and quarantined episodes (and with an
    empty array for a summary, which the metrics cannot read); an interrupted one with what its
    process still counted. A finished run keeps the counts it stored."""
    values = {**settings.model_dump(), "database_url": fresh_database_url}
    (counts,) = (m.version for m in sql.migrations() if m.name == "run_counts")
    before = tuple(m for m in sql.migrations() if m.version < counts)  # as a database was then
    crashed, interrupted, finished = (uuid.uuid4() for _ in range(3))
    with Database(Settings(**values, _env_file=None)) as db:
        with monkeypatch.context() as patched:
            patched.setattr(sql, "migrations", lambda: before)
            migrate(db)
        with db.connection() as conn:
            for run_id, status, stored in (
                (crashed, "crashed", {"chunks": 2, "episodes_consolidated": 1}),
                (interrupted, "interrupted", {}),
                (finished, "completed", {"conversations": 5, "chunks": 9, "facts_inserted": 7}),
            ):
                summary = {"kind": "nightly", **stored} if status != "crashed" else []
                _row(
                    conn,
                    "consolidation_runs",
                    id=run_id,
                    status=status,
                    started_at=datetime(2024, 1, 2, tzinfo=UTC),
                    finished_at=datetime(2024, 1, 2, 1, tzinfo=UTC),
                    summary=Jsonb(summary),
                    **stored,
                )
                for n, state in enumerate(("applied", "quarantined")):
                    episode, chunk = uuid.uuid4(), uuid.uuid4()
                    _row(
                        conn,
                        "episodic_memory",
                        id=episode,
                        conversation_id=f"c{n}",
                        external_key=f"{run_id}-{n}",
                        messages=Jsonb([{"speaker": "user", "text": "hi"}]),
                        start_at=datetime(2024, 1, 1, tzinfo=UTC),
                        end_at=datetime(2024, 1, 1, tzinfo=UTC),
                        consolidated_at=datetime.now(UTC) if state == "applied" else None,
                        consolidation_run_id=run_id if state == "applied" else None,
                        quarantined_at=None if state == "applied" else datetime.now(UTC),
                    )
                    _row(
                        conn,
                        "consolidation_chunks",
                        id=chunk,
                        run_id=run_id,
                        conversation_id=f"c{n}",
                        episode_ids=[episode],
                        status=state,
                        prompt_tokens=100,
                        completion_tokens=10,
                    )
                    if state == "applied":
                        for action, proposed in (("new", "new"), ("invalidate", "evict")):
                            _row(
                                conn,
                                "decision_log",
                                run_id=run_id,
                                conversation_id=f"c{n}",
                                chunk_id=chunk,
                                proposed_action=proposed,
                                action=action,
                                episode_ids=[episode],
                                event_time=datetime.now(UTC),
                            )
        migrate(db)
        with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = {r["id"]: r for r in cur.execute("SELECT * FROM consolidation_runs").fetchall()}
            cur.execute(sql.statement("metrics_runs")).fetchall()  # every summary is readable
    expected = {
        "conversations": 2,
        "chunks": 2,
        "chunks_failed": 1,
        "episodes_consolidated": 1,
        "episodes_quarantined": 1,
        "facts_inserted": 1,
        "facts_invalidated": 0,  # an eviction is not the model's invalidation
        "prompt_tokens": 200,
        "completion_tokens": 20,
    }
    for run_id in (crashed, interrupted):
        assert {k: rows[run_id][k] for k in expected} == expected
        assert {k: rows[run_id]["summary"][k] for k in expected} == expected
    assert rows[interrupted]["summary"]["kind"] == "nightly"  # the rest of it kept
    assert rows[finished]["conversations"] == 5 and rows[finished]["chunks"] == 9
    assert rows[finished]["facts_inserted"] == 7 and rows[finished]["summary"]["chunks"] == 9


def test_a_run_killed_mid_story_is_listed_with_every_kind_of_decision_it_committed(
    db: Database, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """Killed just after a commit, mid-run, on stories that reinforce, update and invalidate:
    listed (the REST statement) and exported while still marked running, then crashed, with
    what it committed."""
    load_episodes(conn, story_episodes(STORIES))
    conn.commit()
    said = kill_at(db, tmp_path, "commit.after", 3)
    assert said == "AT commit.after", (tmp_path / "child.log").read_text()[-3000:]
    ((run_id,),) = conn.execute("SELECT id FROM consolidation_runs").fetchall()
    what = committed(conn, run_id)
    assert what["facts_inserted"] and what["facts_reinforced"] and what["facts_invalidated"]
    assert 0 < what["chunks"] < STORIES * 4  # some of its chunks, not all
    conn.commit()

    (listed,) = [r.model_dump() for r in list_runs(conn, 20)]
    assert listed["status"] == "running"
    assert counts(listed) == what
    export(db, tmp_path / "lake", what="runs")  # an export taken now says as much
    (exported,) = pl.read_parquet(tmp_path / "lake" / "runs" / "**" / "*.parquet").to_dicts()
    assert exported["status"] == "running" and counts(exported) == what

    assert mark_crashed(conn, lease_s=3600) == [run_id]
    from slowwave.tasks.runs import show_run

    (listed,) = [r.model_dump() for r in list_runs(conn, 20)]
    shown = show_run(conn, run_id)
    assert shown is not None
    assert listed["status"] == shown["status"] == "crashed"
    assert counts(listed) == counts(shown) == what


def test_a_finished_run_counted_what_it_committed_so_its_figures_are_unchanged(
    db: Database, conn: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process's own count of a run that ends (as stored before the counts were read from
    what it committed) is what it committed, every kind of decision included: a finished run's
    figures stay what they were."""
    import slowwave.tasks.runs as runs

    load_episodes(conn, story_episodes(STORIES))
    conn.commit()
    monkeypatch.setattr(runs, "count_committed", lambda conn, summary: None)
    summary = consolidate(
        db, CommandModel(), HashEmbedder(), settings_for(db.url, tmp_path), kind="backfill"
    )
    what = committed(conn, summary.run_id)
    assert what["facts_inserted"] and what["facts_reinforced"] and what["facts_updated"]
    assert what["facts_invalidated"]
    assert {name: getattr(summary, name) for name in COUNTS} == what
    (listed,) = [r.model_dump() for r in list_runs(conn, 20)]
    assert listed["status"] == "completed" and counts(listed) == what
