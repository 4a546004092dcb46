"""slowwave on a Postgres it does not run: a server of its own on TCP with a password-protected
role that owns its database and is no superuser, as a managed Postgres gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fix_external_postgres import ExternalPostgres
from tests.fix_processes import run_cli


@pytest.mark.slow
def test_migrate_backfill_and_search_run_on_an_external_postgres_as_a_role_that_is_no_superuser(
    external_postgres: ExternalPostgres, tmp_path: Path, locomo_path: Path, prefect_api_url: str
) -> None:
    url = external_postgres.url("slowwave")
    migrated = run_cli(tmp_path, "db", "migrate", DATABASE_URL=url)
    assert migrated.returncode == 0, migrated.stderr
    assert "127.0.0.1" in migrated.stdout and "not-a-superuser-pw" not in migrated.stdout
    backfill = run_cli(
        tmp_path,
        "backfill",
        str(locomo_path),
        "--conversation",
        "conv-30",
        DATABASE_URL=url,
        PREFECT_API_URL=prefect_api_url,
        SLOWWAVE_LLM_RUNTIME="replay",
        SLOWWAVE_REPLAY_DATA=str(locomo_path),
    )
    assert backfill.returncode == 0, backfill.stderr
    found = run_cli(
        tmp_path, "search", "Where did Gina open her store?", "-c", "conv-30", "--format",
        "json", DATABASE_URL=url,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout), "search answers from the external server"
    with external_postgres.admin("slowwave") as admin:
        (owner, superuser) = admin.execute(
            "SELECT tableowner, (SELECT rolsuper FROM pg_roles WHERE rolname = tableowner) "
            "FROM pg_tables WHERE tablename = 'semantic_memory'"
        ).fetchone()  # type: ignore[misc]
        (facts,) = admin.execute(
            "SELECT count(*) FROM semantic_memory WHERE conversation_id = 'conv-30'"
        ).fetchone()  # type: ignore[misc]
    assert (owner, superuser) == ("app", False) and facts > 0
    assert not (tmp_path / "pgdata").exists(), "no embedded server was started"


@pytest.mark.slow
def test_a_role_that_may_not_create_the_vector_extension_is_told_what_to_ask_for(
    external_postgres: ExternalPostgres, tmp_path: Path
) -> None:
    result = run_cli(tmp_path, "db", "migrate", DATABASE_URL=external_postgres.url("bare"))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "ask the database's administrator to run `CREATE EXTENSION vector;` in bare" in lines[0]
    assert "role app" in lines[0] and "Traceback" not in result.stderr
