"""The command line as an operator meets it in the first hour: tables that fit 80 columns with
every id whole, short ids taken back as input (an ambiguous one refused with its candidates),
mistakes told before anything starts, a mistyped setting named, `--version`."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from slowwave.models.errors import AmbiguousId
from slowwave.models.ids import short_key
from slowwave.tasks.ids import resolve, shorten
from slowwave.tasks.runs import start_run
from tests.fix_model_server import fake_model
from tests.fix_processes import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"
SHORT = re.compile(r"(?<![0-9a-f-])[0-9a-f]{7,12}(?![0-9a-f-])")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, prefect_api_url: str) -> Iterator[Path]:
    """A home after a backfill in which Kenji's conversation was quarantined."""
    home = tmp_path_factory.mktemp("operator") / "home"
    with fake_model(garble=("Osaka",)) as model:
        done = run_cli(
            home,
            "backfill",
            str(SAMPLE),
            **model.env(SLOWWAVE_MAX_ATTEMPTS="1", PREFECT_API_URL=prefect_api_url),
        )
    assert done.returncode == 1, done.stderr  # a run with a quarantined conversation
    assert "CompletedWithFailures" in done.stderr
    assert "slowwave quarantine list" in done.stderr
    yield home


def _narrow(home: Path, *args: str) -> str:
    shown = run_cli(home, *args, COLUMNS="80")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def _json(home: Path, *args: str) -> object:
    given = run_cli(home, *args, "--json")
    assert given.returncode == 0, given.stderr
    return json.loads(given.stdout)


def _whole(ids: list[str], table: str) -> None:
    """Every id is in the table as a short id (the start of its last group), uncut, and the
    table fits 80 columns without an ellipsis."""
    assert ids
    shown = set(SHORT.findall(table))
    missing = [i for i in ids if not any(short_key(uuid.UUID(i)).startswith(s) for s in shown)]
    assert missing == [], table
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert "…" not in table


@pytest.mark.slow
def test_every_table_command_at_80_columns_keeps_every_id_whole(home: Path) -> None:
    runs = _json(home, "runs", "list")
    assert isinstance(runs, list)
    listed = _narrow(home, "runs", "list")
    _whole([r["id"] for r in runs], listed)
    assert "failures" in listed  # the status, in its narrow column

    facts = _json(home, "facts", "-c", "dana", "--all")
    assert isinstance(facts, list)
    _whole([f["id"] for f in facts], _narrow(home, "facts", "-c", "dana", "--all", "--ids"))
    run_ids = {f["created_by_run_id"] for f in facts}
    _whole(sorted(run_ids), _narrow(home, "facts", "-c", "dana", "--ids"))

    history = _narrow(home, "facts", "history", facts[0]["id"])
    _whole([facts[0]["id"]], history)

    quarantined = _json(home, "quarantine", "list")
    assert isinstance(quarantined, list) and quarantined
    _whole([e["id"] for e in quarantined], _narrow(home, "quarantine", "list"))

    status = _narrow(home, "db", "status", "--conversations")
    for conversation in ("dana", "kenji", "omar"):
        assert conversation in status
    assert max(len(line) for line in status.splitlines()) <= 80, status


@pytest.mark.slow
def test_a_short_id_as_printed_is_taken_as_input(home: Path) -> None:
    listed = _narrow(home, "facts", "-c", "dana", "--ids")
    facts = _json(home, "facts", "-c", "dana")
    assert isinstance(facts, list)
    full = facts[0]["id"]
    short = next(s for s in SHORT.findall(listed) if short_key(uuid.UUID(full)).startswith(s))
    history = _json(home, "facts", "history", short)
    assert isinstance(history, list)
    assert full in {v["id"] for v in history}


def test_a_short_id_is_the_shortest_unique_start_of_the_random_part_and_an_ambiguous_one_is_refused(
    conn: psycopg.Connection,
) -> None:
    a, b = (start_run(conn).run_id for _ in range(2))
    # two runs made in the same millisecond share their time prefix: short ids never use it
    twin_a = uuid.UUID(f"{str(a)[:24]}abcdef000001")
    twin_b = uuid.UUID(f"{str(a)[:24]}abcdef000002")
    with conn.transaction():
        conn.execute("UPDATE consolidation_runs SET id = %s WHERE id = %s", (twin_a, a))
        conn.execute("UPDATE consolidation_runs SET id = %s WHERE id = %s", (twin_b, b))
    short = shorten(conn, "run", [twin_a, twin_b])
    assert short == {twin_a: "abcdef000001", twin_b: "abcdef000002"}
    assert resolve(conn, "run", "abcdef000002") == twin_b
    with pytest.raises(AmbiguousId) as refused:
        resolve(conn, "run", "abcdef0")
    assert str(twin_a) in str(refused.value) and str(twin_b) in str(refused.value)


def test_a_mistyped_setting_is_named_with_the_closest_one(tmp_path: Path) -> None:
    shown = run_cli(tmp_path, "settings", SLOWWAVE_CHUNK_SIZ="4")
    assert shown.returncode == 0, shown.stderr
    assert (
        "warning: SLOWWAVE_CHUNK_SIZ is not a slowwave setting; did you mean SLOWWAVE_CHUNK_SIZE?"
        in shown.stderr
    )


@pytest.mark.slow
def test_an_unknown_conversation_is_an_error_not_an_empty_table(home: Path) -> None:
    for args in (
        ["facts", "-c", "danna"],
        ["quarantine", "list", "-c", "danna"],
        ["context", "-c", "danna"],
    ):
        shown = run_cli(home, *args)
        assert shown.returncode == 1, args
        assert shown.stderr.strip() == (
            "error: no conversation 'danna': nothing was recorded under that id [not_found]"
        )
        assert shown.stdout == ""


@pytest.mark.slow
def test_mistakes_in_a_source_are_told_before_anything_starts(tmp_path: Path) -> None:
    missing = run_cli(tmp_path, "backfill", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"error: no such file or folder: {tmp_path / 'nope.jsonl'}"
    locomo = tmp_path / "locomo.jsonl"
    locomo.write_text('[{"qa": [], "conversation": {"speaker_a": "A"}}]\n')
    wrong = run_cli(tmp_path, "ingest", str(locomo))
    assert wrong.returncode == 1
    assert "--format locomo" in wrong.stderr
    assert not (tmp_path / "pgdata").exists()  # refused before the database was started


@pytest.mark.slow
def test_version_and_help_with_an_example(tmp_path: Path) -> None:
    from importlib.metadata import version

    shown = run_cli(tmp_path, "--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"slowwave {version('slowwave')}"
    helped = run_cli(tmp_path, "runs", "revert", "--help", COLUMNS="80")
    assert "Example: slowwave runs revert" in helped.stdout
    assert "<bool>" not in helped.stdout


def test_every_command_s_help_has_an_example() -> None:
    import typer

    from slowwave.cli import app

    def commands(group: object, path: str) -> list[tuple[str, object]]:
        found = []
        for name, command in getattr(group, "commands", {}).items():
            found += commands(command, f"{path} {name}")
            if not getattr(command, "commands", None):
                found.append((f"{path} {name}", command))
        return found

    missing = [
        name
        for name, command in commands(typer.main.get_command(app), "slowwave")
        if "Example" not in (getattr(command, "help", "") or "")
    ]
    assert missing == []
