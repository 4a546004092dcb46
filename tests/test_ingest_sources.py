"""Backfill sources: a folder or a glob of JSONL, Parquet and CSV files, with a column mapping,
validated as whole columns with the reasons the JSONL path gives, committed file by file."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest

from slowwave.models import faultpoints
from slowwave.models.errors import MappingError
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.ingest.columnar import parse_mapping
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_processes import run_cli

T0 = datetime(2023, 4, 1, 9, 0, tzinfo=UTC)
MAPPING = "conversation_id=conv,message_id=mid,timestamp=sent_at,speaker=author,text=body"
MAX_CHARS = 300


def _row(conv: str, mid: int, minutes: int, body: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "conv": conv,
        "mid": mid,
        "sent_at": (T0 + timedelta(minutes=minutes)).isoformat(),
        "author": "user" if mid % 2 else "assistant",
        "body": body,
        "channel": "web",  # a column the mapping does not name: ignored
        **extra,
    }


# (row, the reason it is rejected for, or None when it lands)
HOSTILE: list[tuple[dict[str, Any], str | None]] = [
    (_row("ana", 1, 0, "I moved to Porto last spring."), None),
    (_row("ana", 2, 1, "Porto suits you!"), None),
    (_row("ana", 3, 2, "   "), "text: is empty"),
    (
        _row("ana", 4, 3, "a NUL \x00 inside"),
        f"text: contains a NUL character, which {''}Postgres text cannot hold",
    ),
    (
        _row("ana", 5, 4, "x" * (MAX_CHARS + 1)),
        f"text: {MAX_CHARS + 1} characters, more than the limit of {MAX_CHARS}",
    ),
    (
        {**_row("ana", 6, 5, "When was this?"), "sent_at": "yesterday"},
        "timestamp: Input should be a valid datetime with a time zone",
    ),
    (
        {**_row("ana", 7, 6, "No zone here."), "sent_at": "2023-04-01T09:06:00"},
        "timestamp: Input should have timezone info",
    ),
    (
        _row("bo\x01b", 8, 7, "A control character in the id."),
        "conversation_id: contains a control character",
    ),
    (
        _row("ana", 9, 8, "Too surprising.", surprise=2.0),
        "surprise: Input should be less than or equal to 1",
    ),
    (
        _row("", 10, 9, "No conversation."),
        "conversation_id: String should have at least 1 character",
    ),
    (_row("bo", 11, 10, None), "text: must be a string, not NoneType"),
    (_row("bo", 12, 11, "I am Bo; I keep bees.", surprise=0.4), None),
]


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    columns = ["conv", "mid", "sent_at", "author", "body", "channel", "surprise"]
    return pl.DataFrame(
        {c: [r.get(c) for r in rows] for c in columns},
        schema={
            "conv": pl.String,
            "mid": pl.Int64,
            "sent_at": pl.String,
            "author": pl.String,
            "body": pl.String,
            "channel": pl.String,
            "surprise": pl.Float64,
        },
    )


def _lake(root: Path) -> dict[str, list[tuple[dict[str, Any], str | None]]]:
    """Half the rows as Parquet, half as CSV in a subfolder, plus a CSV line of invalid UTF-8
    and a file that is no transcript; what each transcript file holds."""
    root.mkdir()
    (root / "2023").mkdir()
    first, second = HOSTILE[::2], HOSTILE[1::2]
    _frame([r for r, _ in first]).write_parquet(root / "a.parquet")
    csv = root / "2023" / "b.csv"
    _frame([r for r, _ in second]).write_csv(csv)
    with csv.open("ab") as out:  # a row whose body is not UTF-8
        out.write(b"bo,13,2023-04-01T09:20:00+00:00,user,caf\xe9 au lait,web,\n")
    files = {
        str(root / "2023" / "b.csv"): [
            *second,
            (_row("bo", 13, 20, "?"), "text: is not valid UTF-8"),
        ],
        str(root / "a.parquet"): first,
    }
    (root / "notes.txt").write_text("not a transcript: not read")
    return files


def _stored(conn: psycopg.Connection) -> list[tuple[str, str, str]]:
    rows = conn.execute(
        "SELECT conversation_id, m ->> 'message_id', m ->> 'text' FROM episodic_memory, "
        "jsonb_array_elements(messages) AS m ORDER BY 1, 2"
    ).fetchall()
    return [(str(c), str(i), str(t)) for c, i, t in rows]


def _policy(settings: Settings) -> IngestPolicy:
    return IngestPolicy.of(settings.evolve(max_message_chars=MAX_CHARS))


def test_a_folder_of_parquet_and_csv_with_a_column_mapping_lands_every_valid_message_once(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    files = _lake(tmp_path / "lake")
    report = ingest(db, str(tmp_path / "lake"), _policy(settings), mapping=parse_mapping(MAPPING))
    valid = [r for rows in files.values() for r, why in rows if why is None]
    assert report.ingested == len(valid) == 3
    assert _stored(conn) == sorted((r["conv"], str(r["mid"]), r["body"]) for r in valid)

    # every other row rejected once, with its file, its row (1 = the first data row) and why
    assert report.rejects_path == str(tmp_path / "lake.rejects.jsonl")
    written = [json.loads(line) for line in Path(report.rejects_path).read_text().splitlines()]
    got = sorted((r["source"], r["line"], r["reason"]) for r in written)
    expected = sorted(
        (file, row, why)
        for file, rows in files.items()
        for row, (_, why) in enumerate(rows, start=1)
        if why is not None
    )
    assert got == expected
    assert report.read == sum(len(rows) for rows in files.values())

    again = ingest(db, str(tmp_path / "lake"), _policy(settings), mapping=parse_mapping(MAPPING))
    assert (again.ingested, again.episodes) == (0, 0), "a second run adds nothing"
    assert _stored(conn) == sorted((r["conv"], str(r["mid"]), r["body"]) for r in valid)


def test_a_columnar_row_is_rejected_for_the_reason_its_jsonl_line_is(
    db: Database, settings: Settings, tmp_path: Path
) -> None:
    # CSV cannot tell a missing text from an empty one
    rows = [r for r, why in HOSTILE if why is not None and r["body"] is not None]
    canonical = [
        {
            "conversation_id": r["conv"],
            "message_id": r["mid"],
            "timestamp": r["sent_at"],
            "speaker": r["author"],
            "text": r["body"],
            **({"surprise": r["surprise"]} if "surprise" in r else {}),
        }
        for r in rows
    ]
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in canonical))
    csv = tmp_path / "same.csv"
    _frame(rows).write_csv(csv)
    by_line = ingest(db, str(jsonl), _policy(settings))
    by_column = ingest(db, str(csv), _policy(settings), mapping=parse_mapping(MAPPING))
    # the JSONL path cannot parse "yesterday" into the reason the columnar path gives
    lines = [r.reason for r in by_line.first_rejects]
    columns = [r.reason for r in by_column.first_rejects]
    assert len(lines) == len(columns) == len(rows)
    differs = [(a, b) for a, b in zip(lines, columns, strict=True) if a != b]
    assert [b for _, b in differs] == [
        "timestamp: Input should be a valid datetime with a time zone"
    ]


def test_a_run_stopped_after_a_file_and_run_again_ends_as_a_clean_run(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    lake = tmp_path / "many"
    lake.mkdir()
    for n in range(4):
        rows = [_row(f"c{n}", i, 10 * i, f"Message {i} of file {n}.") for i in range(1, 9)]
        _frame(rows).write_parquet(lake / f"part-{n}.parquet")
    mapping = parse_mapping(MAPPING)
    ingest(db, str(lake), _policy(settings), mapping=mapping)
    clean = conn.execute(
        "SELECT conversation_id, external_key, start_at, end_at, messages FROM episodic_memory "
        "ORDER BY 1, 3"
    ).fetchall()
    conn.execute("TRUNCATE episode_windows, episodic_memory, ingested_messages")

    class Stopped(Exception):
        pass

    def stop(point: str, _: object) -> None:
        raise Stopped(point)

    faultpoints.arm("ingest.file.committed", stop, at_hit=2)
    try:
        with pytest.raises(Stopped):
            ingest(db, str(lake), _policy(settings), mapping=mapping)
    finally:
        faultpoints.disarm()
    assert conn.execute(
        "SELECT count(DISTINCT conversation_id) FROM episodic_memory"
    ).fetchone() == (2,)
    resumed = ingest(db, str(lake), _policy(settings), mapping=mapping)
    assert resumed.ingested == 16, "only the two files the stopped run did not reach"
    after = conn.execute(
        "SELECT conversation_id, external_key, start_at, end_at, messages FROM episodic_memory "
        "ORDER BY 1, 3"
    ).fetchall()
    assert after == clean


def test_a_lake_on_an_object_store_lands_as_the_same_folder_on_disk_does(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path, object_store: Any
) -> None:
    files = _lake(tmp_path / "lake")
    (tmp_path / "lake" / "c.jsonl").write_text(  # the mapping's names, as every file has
        json.dumps(
            {
                "conv": "cy",
                "mid": "1",
                "sent_at": T0.isoformat(),
                "author": "user",
                "body": "Read from a JSONL object.",
            }
        )
        + "\n"
    )
    object_store.create_dir("lake")
    for path in sorted((tmp_path / "lake").rglob("*")):
        if path.is_file():
            key = f"lake/2023-archive/{path.relative_to(tmp_path / 'lake').as_posix()}"
            with object_store.open_output_stream(key) as out:
                out.write(path.read_bytes())
    mapping = {**parse_mapping(MAPPING)}
    report = ingest(db, "s3://lake/2023-archive/", _policy(settings), mapping=mapping)
    valid = [r for rows in files.values() for r, why in rows if why is None]
    expected = sorted((r["conv"], str(r["mid"]), r["body"]) for r in valid)
    assert _stored(conn) == sorted([*expected, ("cy", "1", "Read from a JSONL object.")])
    rejected = {r.source for r in report.first_rejects}
    assert rejected == {
        "s3://lake/2023-archive/2023/b.csv",
        "s3://lake/2023-archive/a.parquet",
    }
    assert report.rejected == sum(why is not None for rows in files.values() for _, why in rows)
    pattern = "s3://lake/2023-archive/*.parquet"
    globbed = ingest(db, pattern, _policy(settings), mapping=mapping)
    assert (globbed.read, globbed.ingested) == (len(files[str(tmp_path / "lake" / "a.parquet")]), 0)


def test_a_mapping_that_names_no_column_of_the_source_stops_it_before_a_row(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "chats.csv"
    _frame([r for r, why in HOSTILE if why is None]).write_csv(path)
    with pytest.raises(MappingError, match="no column for conversation_id, message_id"):
        ingest(db, str(path), _policy(settings))
    with pytest.raises(MappingError, match="no column 'content'"):
        ingest(db, str(path), _policy(settings), mapping={"text": "content"})
    with pytest.raises(MappingError, match="unknown field 'txt'"):
        parse_mapping("txt=body")
    assert _stored(conn) == []


@pytest.mark.slow
def test_slowwave_ingest_takes_a_glob_and_a_mapping_and_names_each_rejects_file(
    tmp_path: Path,
) -> None:
    _lake(tmp_path / "lake")
    done = run_cli(
        tmp_path / "home",
        "ingest",
        str(tmp_path / "lake" / "**" / "*.csv"),
        "--map",
        MAPPING,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shown = "".join(done.stdout.split())
    assert "b.csvline2:text:containsaNULcharacter" in shown
    assert "lake-" in shown and ".rejects.jsonl" in shown, "named after the folder it globs"
    stopped = run_cli(tmp_path / "home", "ingest", str(tmp_path / "lake" / "*.parquet"))
    assert stopped.returncode == 1
    assert "name them with --map FIELD=COLUMN" in stopped.stderr


def test_rows_and_files_that_could_abort_a_transaction_are_rejected_or_read_as_they_are(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    lake = tmp_path / "odd"
    lake.mkdir()
    at = pa.array(
        [T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2), None],
        pa.timestamp("us", tz="UTC"),
    )
    # Postgres stops at 4713 BC, Arrow does not: a time from 7,500 BC
    at = pa.concat_arrays([at.slice(0, 2), pa.array([-300_000_000_000_000_000], at.type), at[3:]])
    pq.write_table(
        pa.table(
            {
                "line": ["a column named like the row number", "x", "y", "z"],
                "conversation_id": ["odd"] * 4,
                "message_id": [1, 2, 3, 4],
                "timestamp": at,
                "speaker": ["user", "\x1c", "user", "user"],
                "text": ["Kept.", "A separator is blank to Python.", "Too old.", "No time."],
                "surprise": [True, None, None, None],
            }
        ),
        lake / "export[1].parquet",
    )
    (lake / "tabs.tsv").write_text(
        "conversation_id\tmessage_id\ttimestamp\tspeaker\ttext\n"
        f"odd\t5\t{(T0 + timedelta(minutes=5)).isoformat()}\tuser\tRead from a TSV, tabs and all.\n"
    )
    pq.write_table(
        pa.table(
            {
                "conversation_id": ["odd"],
                "message_id": ["6"],
                "timestamp": [T0.isoformat()],
                "speaker": ["user"],
                "text": [["a", "list"]],
            }
        ),
        lake / "nested.parquet",
    )
    (lake / "empty.csv").write_text("")
    (lake / "._copy.parquet").write_bytes(b"an editor's shadow file, not Parquet")
    report = ingest(db, str(lake), _policy(settings), since=T0 - timedelta(days=1), until=None)
    assert _stored(conn) == [("odd", "5", "Read from a TSV, tabs and all.")]
    reasons = sorted((Path(r.source).name, r.line, r.reason) for r in report.first_rejects)
    assert reasons == [
        ("export[1].parquet", 1, "surprise: must be a number from 0 to 1, not bool"),
        ("export[1].parquet", 2, "speaker: is empty"),
        ("export[1].parquet", 3, "timestamp: outside the years 1 to 9999"),
        ("export[1].parquet", 4, "timestamp: Input should be a valid datetime"),
        ("nested.parquet", 1, "text: must be a string, not list"),
    ]


def test_a_glob_matches_as_a_path_does_and_dot_names_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slowwave.tasks.ingest.sources import _glob_match, sources_report_path

    def match(key: str, pattern: str) -> bool:
        return _glob_match(key.split("/"), pattern.split("/"))

    assert match("b/lake/2023/chats.parquet", "b/lake/**/chats.parquet")
    assert match("b/lake/chats.parquet", "b/lake/**/chats.parquet")
    assert not match("b/lake/2023/old-chats.parquet", "b/lake/**/chats.parquet")
    assert not match("b/lake/2023/x.parquet", "b/lake/*.parquet")
    (tmp_path / "lake").mkdir()
    monkeypatch.chdir(tmp_path / "lake")
    assert sources_report_path(".", tmp_path / "home") == tmp_path / "lake.rejects.jsonl"
    assert sources_report_path("./", tmp_path / "home") == tmp_path / "lake.rejects.jsonl"


def test_the_python_api_ingests_a_folder_with_a_mapping(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    import slowwave

    files = _lake(tmp_path / "lake")
    report = slowwave.ingest(
        tmp_path / "lake",
        mapping=parse_mapping(MAPPING),
        settings=settings.evolve(max_message_chars=MAX_CHARS),
    )
    valid = [r for rows in files.values() for r, why in rows if why is None]
    assert report.ingested == len(valid)
    assert _stored(conn) == sorted((r["conv"], str(r["mid"]), r["body"]) for r in valid)
