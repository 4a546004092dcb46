"""The command line as a newcomer uses it, each call in its own process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slowwave.models.settings import variables
from slowwave.models.settings.table import settings_markdown
from slowwave.sql.db.embedded import postmaster_pid
from tests.fix_processes import run_cli


@pytest.mark.slow
def test_migrate_then_status_prints_an_empty_migrated_database(tmp_path: Path) -> None:
    migrated = run_cli(tmp_path, "db", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "applied  0001_schema" in migrated.stdout

    status = run_cli(tmp_path, "db", "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["migrations_pending"] == 0
    assert report["embedding_dim"] == 384
    assert set(report["totals"].values()) == {"*", 0}
    # each command stopped the embedded server it started
    assert postmaster_pid(tmp_path / "pgdata") is None


@pytest.mark.slow
def test_an_unreachable_database_url_is_one_clear_line_without_the_password(
    tmp_path: Path,
) -> None:
    result = run_cli(
        tmp_path, "db", "status", DATABASE_URL="postgresql://app:s3cret@127.0.0.1:9/none"
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "error: cannot connect to Postgres at "
        "host=127.0.0.1 port=9 dbname=none user=app password=***:"
    )
    assert "s3cret" not in result.stderr + result.stdout


def test_the_settings_reference_documents_every_setting() -> None:
    page = (Path(__file__).parents[1] / "docs" / "reference" / "settings.md").read_text()
    assert "<!-- generated: settings -->" in page  # made from Settings at every build
    table = settings_markdown()
    for _, names, _ in variables():
        assert f"`{names[0]}`" in table
    assert "Undefined" not in table  # defaults from a factory are shown too


@pytest.mark.slow
def test_ingest_prints_its_table_and_where_the_rejects_are(tmp_path: Path) -> None:
    source = tmp_path / "chat.jsonl"
    good = (
        '{"conversation_id": "c1", "message_id": "1", "timestamp": "2024-02-01T10:00:00+01:00",'
        ' "role": "user", "text": "I just adopted a cat called Miso."}'
    )
    source.write_text(good + "\n{oops\n")
    result = run_cli(tmp_path / "home", "ingest", str(source), COLUMNS="200")
    assert result.returncode == 0, result.stderr
    assert "│ jsonl  │ 2    │ 1        │ 1        │ 1             │" in result.stdout
    assert "line 2: malformed JSON" in result.stdout
    assert (tmp_path / "chat.jsonl.rejects.jsonl").exists()


@pytest.mark.slow
def test_backfill_ingests_then_consolidates_in_event_time(
    tmp_path: Path, locomo_path: Path, prefect_api_url: str
) -> None:
    result = run_cli(
        tmp_path,
        "backfill",
        str(locomo_path),
        "--conversation",
        "conv-30",
        SLOWWAVE_REPLAY_DATA=str(locomo_path),
        SLOWWAVE_LLM_RUNTIME="replay",
        PREFECT_API_URL=prefect_api_url,
        COLUMNS="200",
    )
    assert result.returncode == 0, result.stderr
    assert "│ locomo │ 4124 │ 4124     │ 0        │ 187           │" in result.stdout
    assert "completed" in result.stdout
    status = json.loads(run_cli(tmp_path, "db", "status", "--json", "--conversations").stdout)
    conv30 = next(c for c in status["conversations"] if c["conversation_id"] == "conv-30")
    assert conv30["episodes_pending"] == 0 and conv30["facts_active"] > 0
    assert status["totals"]["episodes_pending"] == 187 - conv30["episodes_consolidated"]


def test_a_keyword_style_database_url_never_shows_its_password(tmp_path: Path) -> None:
    dsn = "host=127.0.0.1 port=9 user=app password='s3 cret' dbname=none connect_timeout=2"
    result = run_cli(tmp_path, "db", "status", DATABASE_URL=dsn)
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot connect to Postgres at ")
    assert "password=***" in line and "s3" not in line and "cret" not in line


def test_redaction_reads_every_dsn_form_with_libpqs_own_parser() -> None:
    from slowwave.sql.db.database import redact

    assert redact("postgresql://app:s3cret@db:5432/x") == (
        "host=db port=5432 dbname=x user=app password=***"
    )
    assert redact("postgresql://db/x?user=app&password=s3cret") == (
        "host=db dbname=x user=app password=***"
    )
    assert redact("host=db password=s3cret user=app") == "host=db user=app password=***"
    assert redact("host=db password = 'it\\'s secret' user=app") == "host=db user=app password=***"
    # a password with the characters a hand-written parser trips on
    for secret in ("p@ss:w/rd", "a b", "x&password=y", "q'uote"):
        from urllib.parse import quote

        url = redact(f"postgresql://app:{quote(secret, safe='')}@db/x")
        escaped = secret.replace("\\", "\\\\").replace("'", "\\'")
        keywords = redact(f"host=db user=app password='{escaped}'")
        assert "password=***" in url and "password=***" in keywords
        assert not any(part in url + keywords for part in ("p@ss", "w/rd", "a b", "=y", "q'"))
    assert redact("host=db password='unterminated") == "(a connection string libpq cannot parse)"


@pytest.mark.slow
def test_an_invalid_setting_is_one_line_naming_the_variable_for_every_command(
    tmp_path: Path,
) -> None:
    for args, env in (
        (("db", "stop", "--force"), {"SLOWWAVE_LLM_RUNTIME": "nonsense"}),
        (("db", "status"), {"SLOWWAVE_CLAIM_LEASE_S": "5"}),
    ):
        result = run_cli(tmp_path, *args, **env)
        assert result.returncode == 1
        (line,) = result.stderr.strip().splitlines()
        ((name, value),) = env.items()
        assert line.startswith(f"error: invalid setting {name}={value!r}: "), line


@pytest.mark.slow
def test_search_mistakes_are_one_line_with_exit_code_1(tmp_path: Path) -> None:
    bad_k = run_cli(tmp_path, "search", "tea", "-c", "nobody", "-k", "-1")
    assert bad_k.returncode == 1
    assert bad_k.stderr.strip().splitlines() == [
        "error: k must be from 1 to 100, not -1 [invalid_k]"
    ]
    unknown = run_cli(tmp_path, "search", "tea", "-c", "nobody")
    assert unknown.returncode == 1
    (line,) = unknown.stderr.strip().splitlines()
    assert line == "error: no conversation 'nobody': nothing was recorded under that id [not_found]"
    assert unknown.stdout == ""


@pytest.mark.slow
def test_a_search_of_a_conversation_with_no_facts_yet_answers_its_episodes_with_a_note(
    tmp_path: Path,
) -> None:
    source = tmp_path / "chat.jsonl"
    source.write_text(
        '{"conversation_id": "c1", "message_id": "1", "timestamp": "2024-02-01T10:00:00Z",'
        ' "role": "user", "text": "I just adopted a cat called Miso."}\n'
    )
    home = tmp_path / "home"
    assert run_cli(home, "ingest", str(source)).returncode == 0
    found = run_cli(home, "search", "cat", "-c", "c1", "--format", "json")
    assert found.returncode == 0, found.stderr  # as REST answers: an empty list
    assert json.loads(found.stdout)["hits"] == []
    assert found.stderr.strip().startswith("conversation 'c1' has no facts yet")
    assert "episodic memories" in found.stderr  # what was said is found all the same
    (memory,) = json.loads(found.stdout)["memories"]
    assert memory["text"] == "user: I just adopted a cat called Miso." and memory["pending"]
    shown = run_cli(home, "search", "cat", "-c", "c1")
    assert shown.returncode == 0
    assert shown.stdout.startswith("## Semantic Memory\n\n## Episodic Memories\n## Memory 1 [")


@pytest.mark.slow
def test_a_query_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.fix_processes import slowwave_env

    result = subprocess.run(
        [sys.executable.encode(), b"-m", b"slowwave", b"search", b"caf\xe9", b"-c", b"x"],
        env=slowwave_env(tmp_path),
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.decode().strip().splitlines() == [
        "error: the query is not valid UTF-8 text [invalid_query]"
    ]


@pytest.mark.slow
def test_consolidate_and_backfill_say_what_is_missing_in_one_line_before_any_work(
    tmp_path: Path,
) -> None:
    unreachable = run_cli(
        tmp_path, "consolidate", DATABASE_URL="postgresql://app:s3cret@127.0.0.1:9/none"
    )
    assert unreachable.returncode == 1
    lines = unreachable.stderr.strip().splitlines()
    assert len(lines) == 1, unreachable.stderr
    (line,) = lines
    assert line.startswith(
        "error: cannot connect to Postgres at "
        "host=127.0.0.1 port=9 dbname=none user=app password=***:"
    )
    no_model = run_cli(
        tmp_path,
        "backfill",
        str(Path(__file__).parents[1] / "examples" / "transcripts" / "sample-chats.jsonl"),
        SLOWWAVE_LLM_MODEL=str(tmp_path / "no-such-model"),
    )
    assert no_model.returncode == 1
    lines = no_model.stderr.strip().splitlines()
    assert len(lines) == 1, no_model.stderr
    (line,) = lines
    assert line.startswith(f"error: no model at {tmp_path / 'no-such-model'}")
    assert "Traceback" not in no_model.stdout + no_model.stderr


@pytest.mark.slow
def test_status_of_a_database_of_another_dimension_says_so_in_one_line(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "db", "migrate", SLOWWAVE_EMBEDDING_DIM="8").returncode == 0
    try:
        status = run_cli(tmp_path, "db", "status")
        assert status.returncode == 1
        (line,) = status.stderr.strip().splitlines()
        assert line == (
            "error: the schema stores 8-dimensional embeddings but SLOWWAVE_EMBEDDING_DIM=384; "
            "use a database migrated for 384 dimensions, set it back to 8, or re-embed the "
            "store with a 384-dimensional model (`slowwave db reembed`) [schema_mismatch]"
        )
        assert "embeddings 8-d" in status.stdout  # what is there is still shown
    finally:
        run_cli(tmp_path, "db", "stop")
