"""slowwave export: Parquet partitioned by tenant and day, read back with polars; incremental by
partition; reached by a forget."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest

from slowwave.models.errors import ExportError
from slowwave.models.settings import Settings
from slowwave.models.tenant import conversation_key
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.export import drop_target, export, since_day
from slowwave.tasks.export_target import Target
from slowwave.tasks.forget import forget_conversation, forget_fact
from slowwave.tasks.history import list_facts
from slowwave.tasks.ids import shorten
from slowwave.tasks.ingest.load import load_episodes
from tests.fix_episodes import with_settings
from tests.fix_forget import consolidated_secret, new_marker, transcript
from tests.fix_locomo import locomo_subset
from tests.fix_processes import run_cli
from tests.reliability.fix_commands import CommandModel, HashEmbedder, said, story


def _consolidated(db: Database, conn: psycopg.Connection, settings: Settings) -> None:
    """Two tenants' conversations, each with a new, a reinforced, an updated and an ended
    fact; every decision in the log."""
    for key in ("lea", conversation_key("lea", "acme"), conversation_key("omar", "acme")):
        load_episodes(conn, said(key, *story(key.rsplit("\x1f")[-1].title())))
        conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), with_settings(settings, chunk_size=2))


def _default_tenant_wrote_at(conn: psycopg.Connection, when: str) -> None:
    """Move the system time at which the default tenant's facts were written."""
    conn.execute(
        f"UPDATE semantic_memory SET created_at = {when} WHERE strpos(conversation_id, chr(31)) = 0"
    )
    conn.commit()


def _read(root: Path | str, name: str) -> pl.DataFrame:
    return pl.scan_parquet(f"{root}/{name}/**/*.parquet", hive_partitioning=True).collect()


def _as_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _rows(frame: pl.DataFrame, tenant: str, conversation: str) -> list[dict[str, Any]]:
    """The export's rows of one conversation, as `slowwave facts --json` writes them."""
    rows = frame.filter((pl.col("tenant") == tenant) & (pl.col("conversation_id") == conversation))
    return sorted(
        (
            {k: _as_json(v) for k, v in r.items() if k not in {"tenant", "day"}}
            for r in rows.iter_rows(named=True)
        ),
        key=lambda r: r["id"],
    )


def _shown(
    conn: psycopg.Connection, tenant: str, conversation: str, **kw: Any
) -> list[dict[str, Any]]:
    """What `slowwave facts -c CONVERSATION [--all] --json` prints, less the version number
    (``facts history`` numbers versions; a listing leaves it empty)."""
    facts = list_facts(conn, conversation_key(conversation, tenant), **kw)
    shown = [
        f.model_copy(update={"conversation_id": conversation}).model_dump(mode="json")
        for f in facts
    ]
    for f in shown:
        assert f.pop("version") is None
    return sorted(shown, key=lambda r: r["id"])


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*.parquet")}


def test_the_export_read_with_polars_holds_every_version_and_every_decision_by_tenant(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    _consolidated(db, conn, settings)

    report = export(db, tmp_path / "lake")

    versions, facts = _read(tmp_path / "lake", "versions"), _read(tmp_path / "lake", "facts")
    for tenant, conversation in (("default", "lea"), ("acme", "lea"), ("acme", "omar")):
        every = _shown(conn, tenant, conversation, everything=True)
        assert {f["action"] for f in every} == {"new", "update"} and len(every) == 5
        assert _rows(versions, tenant, conversation) == every
        assert _rows(facts, tenant, conversation) == _shown(conn, tenant, conversation)
    decisions = _read(tmp_path / "lake", "decisions")
    (logged,) = conn.execute("SELECT count(*) FROM decision_log").fetchone()  # type: ignore[misc]
    assert decisions.height == logged and set(decisions["tenant"]) == {"default", "acme"}
    assert set(decisions["action"]) >= {"new", "reinforce", "update", "invalidate"}
    runs = _read(tmp_path / "lake", "runs")
    assert runs.height == 1 and runs["facts_inserted"][0] > 0
    assert "summary" not in runs.columns and "error" not in runs.columns
    # a reader's columns, by name, order and type: what an export of an earlier version wrote
    counts = ["conversations", "chunks", "chunks_failed", "episodes_consolidated"]
    counts += ["episodes_skipped", "episodes_quarantined", "facts_inserted", "facts_reinforced"]
    counts += ["facts_updated", "facts_invalidated", "dedupe_merges", "actions_rejected"]
    assert list(runs.schema.items()) == list(
        {
            "id": pl.String,
            "flow_run_id": pl.String,
            "kind": pl.String,
            "status": pl.String,
            "started_at": pl.Datetime("us", "UTC"),
            "finished_at": pl.Datetime("us", "UTC"),
            **dict.fromkeys(counts, pl.Int32),
            "prompt_tokens": pl.Int64,
            "prompt_tokens_cached": pl.Int64,
            "completion_tokens": pl.Int64,
            "day": pl.Date,
        }.items()
    )
    assert not (tmp_path / "lake" / "episodes").exists()  # the text only when asked for
    today = datetime.now(UTC).date().isoformat()
    assert sorted(_files(tmp_path / "lake")) == [
        f"decisions/tenant=acme/day={today}/part-0.parquet",
        f"decisions/tenant=default/day={today}/part-0.parquet",
        f"facts/tenant=acme/day={today}/part-0.parquet",
        f"facts/tenant=default/day={today}/part-0.parquet",
        f"runs/day={today}/part-0.parquet",
        f"versions/tenant=acme/day={today}/part-0.parquet",
        f"versions/tenant=default/day={today}/part-0.parquet",
    ]
    assert report.kinds["versions"].rows_written == 15


def test_a_second_export_rewrites_only_the_partitions_that_changed_and_a_rerun_writes_nothing(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    _consolidated(db, conn, settings)
    # the default tenant's facts were written a week ago (system time): another partition
    _default_tenant_wrote_at(conn, "created_at - interval '7 days'")
    export(db, tmp_path / "lake")
    before = _files(tmp_path / "lake")
    assert len([f for f in before if f.startswith("versions/")]) == 2

    rerun = export(db, tmp_path / "lake")
    assert rerun.files_changed == 0 and _files(tmp_path / "lake") == before

    # a later night ends the default tenant's fact from a week ago and writes its successor
    load_episodes(
        conn,
        said(
            "lea",
            "now: Lea plays the violin in an amateur orchestra. => "
            "Lea plays the cello in an amateur orchestra.",
            day=9,
        ),
    )
    conn.commit()
    consolidate(db, CommandModel(), HashEmbedder(), settings, conversations=["lea"])
    later = export(db, tmp_path / "lake")

    after = _files(tmp_path / "lake")
    changed = {f for f in after if before.get(f) != after[f]}
    today = datetime.now(UTC).date().isoformat()
    week_ago = min(f for f in before if f.startswith("versions/tenant=default/"))
    assert week_ago in changed  # the ended version, in the partition of the day it was written
    assert f"versions/tenant=default/day={today}/part-0.parquet" in changed  # its successor
    assert not any("tenant=acme" in f for f in changed)  # another tenant's: untouched
    assert later.kinds["versions"].written == 2
    assert _rows(_read(tmp_path / "lake", "versions"), "default", "lea") == _shown(
        conn, "default", "lea", everything=True
    )
    assert export(db, tmp_path / "lake").files_changed == 0


def test_an_export_from_a_day_on_leaves_the_partitions_before_it_alone(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    _consolidated(db, conn, settings)
    _default_tenant_wrote_at(conn, "timestamptz '2025-01-10 12:00+00'")
    lake = tmp_path / "lake"
    export(db, lake, what="versions")
    old = "versions/tenant=default/day=2025-01-10/part-0.parquet"
    kept = (lake / old).read_bytes()
    conn.execute("UPDATE semantic_memory SET fact = fact || ' (checked)'")
    conn.commit()
    (run,) = conn.execute("SELECT id FROM consolidation_runs").fetchone()  # type: ignore[misc]
    short = shorten(conn, "run", [run])[run]  # as `slowwave runs list` shows it
    assert since_day(conn, short) == datetime.now(UTC).date()
    assert since_day(conn, "2025-01-10T23:30:00-02:00") == date(2025, 1, 11)

    report = export(db, lake, what="versions", since=short)

    assert (report.kinds["versions"].partitions, report.kinds["versions"].written) == (1, 1)
    assert (lake / old).read_bytes() == kept  # before the day: as it was
    assert all(
        f.endswith("(checked)")
        for f in _read(lake, "versions").filter(pl.col("tenant") == "acme")["fact"]
    )


def test_a_forget_rewrites_every_export_file_holding_the_conversation(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    marker = new_marker()
    consolidated_secret(db, settings, transcript(tmp_path / "chats.jsonl", marker))
    lake = tmp_path / "lake"
    export(db, lake, what="facts,versions,decisions,runs,episodes")
    kinds = ("facts", "versions", "decisions", "episodes")
    assert all("secret" in set(_read(lake, k)["conversation_id"]) for k in kinds)
    assert any(
        marker in (r["messages"] or "") for r in _read(lake, "episodes").iter_rows(named=True)
    )

    report = forget_conversation(
        db, "secret", home=settings.home, by="dpo", reason="erasure", purge=False
    )

    assert report.export_files == 4 and report.export_notes == []
    for kind in kinds:
        frame = _read(lake, kind)
        assert "secret" not in set(frame["conversation_id"]) and "keep" in set(
            frame["conversation_id"]
        )
        assert not any(marker in str(value) for row in frame.rows() for value in row)
    assert not [p for p in lake.rglob("*") if "_slowwave_tmp" in str(p)]  # nothing left aside
    assert export(db, lake, what="facts,versions,decisions,runs,episodes").files_changed == 0

    keep = list_facts(conn, "keep")[0]
    assert str(keep.id) in set(_read(lake, "versions")["id"])
    forgot = forget_fact(db, keep.id, by="dpo", reason="wrong person", purge=False)
    assert forgot.export_files == 3  # its version, its active fact, the decision that wrote it
    assert not list(lake.glob("versions/**/*.parquet"))  # it was the export's only fact
    assert str(keep.id) not in set(_read(lake, "decisions")["fact_id"].drop_nulls())


def test_an_export_that_stopped_half_way_leaves_whole_files_and_the_next_writes_the_rest(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _consolidated(db, conn, settings)
    lake = tmp_path / "lake"
    export(db, lake, what="versions")
    before = {f: (lake / f).read_bytes() for f in _files(lake)}
    conn.execute("UPDATE semantic_memory SET fact = fact || ' (checked)'")
    conn.commit()
    opened = []
    real = Target.partition_writer

    @contextmanager
    def full_disk_on_the_second(self: Target, relative: str, schema: Any) -> Iterator[Any]:
        opened.append(relative)
        with real(self, relative, schema) as writer:
            if len(opened) == 2:  # the file is open, its header written: then the disk is full
                raise OSError("No space left on device")
            yield writer

    monkeypatch.setattr(Target, "partition_writer", full_disk_on_the_second)
    with pytest.raises(ExportError, match="No space left on device"):
        export(db, lake, what="versions")
    monkeypatch.undo()

    first, second = opened
    assert (lake / second).read_bytes() == before[second]  # the old file, whole
    assert (lake / first).read_bytes() != before[first]  # the new one, moved into place
    manifest = json.loads((lake / "_slowwave_export.json").read_text())
    assert set(manifest["partitions"]) == set()  # both left it before they were touched
    again = export(db, lake, what="versions")
    assert again.kinds["versions"].written == 2
    for tenant, conversation in (("default", "lea"), ("acme", "lea"), ("acme", "omar")):
        assert _rows(_read(lake, "versions"), tenant, conversation) == _shown(
            conn, tenant, conversation, everything=True
        )
    assert not (lake / "_slowwave_tmp").exists()
    assert export(db, lake, what="versions").files_changed == 0


@pytest.mark.slow
def test_an_export_to_an_object_store_is_read_back_and_reached_by_a_forget(
    db: Database, conn: psycopg.Connection, settings: Settings, object_store: Any
) -> None:
    object_store.create_dir("audit")
    _consolidated(db, conn, settings)

    export(db, "s3://audit/slowwave/", what="versions,decisions")
    url = "s3://audit/slowwave"
    assert _rows(_read(url, "versions"), "acme", "omar") == _shown(
        conn, "acme", "omar", everything=True
    )

    report = forget_conversation(
        db,
        conversation_key("omar", "acme"),
        home=settings.home,
        by="dpo",
        reason="asked",
        purge=False,
    )

    assert report.export_files == 2 and report.export_notes == []
    assert "omar" not in set(_read(url, "versions")["conversation_id"])
    assert "omar" not in set(_read(url, "decisions")["conversation_id"])
    (target,) = conn.execute("SELECT target FROM export_targets").fetchone()  # type: ignore[misc]
    assert target == url


@pytest.mark.slow
def test_an_export_url_never_holds_a_secret_and_a_mistake_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="holds no credentials"):
        Target.of("s3://AKIA:secret@bucket/x")
    with pytest.raises(ExportError, match="a folder or an s3:// URL"):
        Target.of("ftp://host/x")
    wrong = run_cli(tmp_path, "export", "--to", str(tmp_path / "lake"), "--what", "facts,memes")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "error: --what: memes; choose from facts, versions, decisions, runs, episodes "
        "[export_refused]"
    )
    nowhere = run_cli(tmp_path, "export")
    assert nowhere.returncode == 1
    assert "--to DIR|URL, or set SLOWWAVE_EXPORT_TO" in nowhere.stderr
    never = run_cli(tmp_path, "export", "--drop", "--to", str(tmp_path / "never"))
    assert never.returncode == 1
    assert never.stderr.strip() == (
        f"error: no export registered at {tmp_path / 'never'} [export_refused]"
    )


@pytest.mark.slow
def test_polars_reads_back_what_facts_all_json_prints_and_a_forget_reaches_the_export(
    tmp_path: Path, locomo_path: Path, prefect_api_url: str
) -> None:
    env = {
        "SLOWWAVE_LLM_RUNTIME": "replay",
        "SLOWWAVE_REPLAY_DATA": str(locomo_path),
        "PREFECT_API_URL": prefect_api_url,
    }
    # two conversations' first eight sessions: versions of each to export, in half the time
    two = locomo_subset(tmp_path, "conv-30", "conv-26", sessions=8)
    backfill = run_cli(tmp_path, "backfill", str(two), **env)
    assert backfill.returncode == 0, backfill.stderr[-2000:]
    lake = tmp_path / "lake"
    every = "facts,versions,decisions,runs,episodes"

    first = run_cli(tmp_path, "export", "--to", str(lake), "--what", every, "--json", **env)

    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["kinds"]["versions"]["rows_written"] > 0
    shown = json.loads(run_cli(tmp_path, "facts", "-c", "conv-30", "--all", "--json").stdout)
    assert len(shown) > 0 and all(f.pop("version") is None for f in shown)
    assert _rows(_read(lake, "versions"), "default", "conv-30") == sorted(
        shown, key=lambda f: f["id"]
    )
    files = _files(lake)
    again = run_cli(tmp_path, "export", "--to", str(lake), "--what", every)
    assert again.returncode == 0 and "nothing changed since the last export" in again.stdout
    assert _files(lake) == files

    forgot = run_cli(tmp_path, "forget", "-c", "conv-30", "-r", "erasure", "--no-purge", "--json")

    assert forgot.returncode == 0, forgot.stderr[-2000:]
    forgotten = json.loads(forgot.stdout)
    assert forgotten["export_files"] == 4  # facts, versions, decisions, episodes
    assert forgotten["export_notes"] == 0 and forgotten["purge"] == "skipped"
    for kind in ("facts", "versions", "decisions", "episodes"):
        held = set(_read(lake, kind)["conversation_id"])
        assert "conv-30" not in held and "conv-26" in held
    after = run_cli(tmp_path, "export", "--to", str(lake), "--what", every, "--json")
    assert json.loads(after.stdout)["kinds"]["versions"]["written"] == 0


def test_a_forget_names_the_exports_it_could_not_reach_writes_nothing_there_and_stands(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    _consolidated(db, conn, settings)
    gone, blocked = tmp_path / "unmounted", tmp_path / "blocked"
    for lake in (gone, blocked):
        export(db, lake, what="versions")
        shutil.rmtree(lake)
    blocked.write_text("someone put a file where the export was\n")
    dropped = tmp_path / "handed-over"  # the operator's now: a forget no longer reaches it
    export(db, dropped, what="versions")
    assert drop_target(db, dropped) and not drop_target(db, dropped)

    report = forget_conversation(db, "lea", home=settings.home, by="dpo", reason="x", purge=False)

    assert report.rows["facts"] == 5 and list_facts(conn, "lea", everything=True) == []
    assert report.export_files == 0
    assert sorted(n.split(": not rewritten (")[0] for n in report.export_notes) == sorted(
        [str(blocked), str(gone)]
    )
    assert not gone.exists()  # no new copy of the tenant's memory where the export was
    assert "lea" in set(_read(dropped, "versions")["conversation_id"])
