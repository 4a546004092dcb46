"""Profiles: with SLOWWAVE_PROFILES on, a run that changes a conversation's active facts has the
model write its profile within a token limit; it is stored, refreshed when the facts change
again, kept but marked stale when writing fails, and goes with what is forgotten."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from slowwave.memory import Memory
from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.errors import Conflict, MalformedAnswer, NotFound
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.profile import ConversationProfile
from slowwave.models.settings import ConsolidationSettings, Settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.forget import forget_fact
from slowwave.tasks.profile import read_profile, refresh_profiles
from slowwave.tasks.revert import revert_run
from tests.fix_episodes import active, add, at, make_episode, with_settings
from tests.fix_models import Script, ScriptedModel, fact
from tests.fix_processes import run_cli

_FACT_LINE = re.compile(r"^- \[\w+\] (.*)$", re.M)


@dataclass
class ProfilingModel:
    """The scripted model for consolidation; a profile request is answered by ``write`` from
    the fact sentences it shows (a string that is not a profile: a failed answer)."""

    scripted: ScriptedModel
    write: Callable[[list[str]], str] = lambda facts: " ".join(f"{f}." for f in facts)
    raw: str | None = None
    name: str = "profiling"
    asked: list[GenerationRequest] = field(default_factory=list)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        others = [r for r in requests if r.purpose is not Purpose.profile]
        answers = dict(zip(map(id, others), self.scripted.generate(others), strict=True))
        for r in requests:
            if r.purpose is Purpose.profile:
                self.asked.append(r)
                text = (
                    self.raw
                    or ConversationProfile(
                        profile=self.write(_FACT_LINE.findall(r.user))
                    ).model_dump_json()
                )
                answers[id(r)] = ModelAnswer(r.chunk_id, text, prompt_tokens=40)
        return [answers[id(r)] for r in requests]

    def close(self) -> None:
        return None


def _says(*texts: str) -> Callable[[object], ConsolidationOutput]:
    return lambda request: ConsolidationOutput(facts=[fact(t, "identity") for t in texts])


SCRIPT: dict[str, Script] = {
    "p-1": _says("User is a nurse in Leeds", "User has two daughters"),
    "p-2": _says("User is a nurse in Leeds"),  # a reinforcement: no sentence changes
    "p-3": _says("User started learning the harp"),
}


def _night(conn: psycopg.Connection, key: str, day: int) -> None:
    add(
        conn,
        make_episode("prof", key, f"Night {day} of the profile test ({key}).", at(2025, 4, day)),
    )


def test_a_run_that_changes_facts_writes_the_profile_and_one_that_only_reinforces_does_not(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, profiles=True)
    model = ProfilingModel(ScriptedModel(SCRIPT))
    _night(conn, "p-1", 1)
    first = consolidate(db, model, embedder, on, kind="backfill")
    written = read_profile(conn, "prof")
    assert first.profiles_written == 1 and written is not None and not written.stale
    assert written.facts == 2 and written.run_id == first.run_id
    assert "nurse in Leeds" in (written.profile or "") and "two daughters" in (
        written.profile or ""
    )

    _night(conn, "p-2", 2)
    second = consolidate(db, model, embedder, on, kind="backfill")
    assert second.profiles_written == 0 and len(model.asked) == 1
    assert read_profile(conn, "prof") == written

    _night(conn, "p-3", 3)
    third = consolidate(db, model, embedder, on, kind="backfill")
    refreshed = read_profile(conn, "prof")
    assert third.profiles_written == 1 and refreshed is not None
    assert refreshed.facts == 3 and "harp" in (refreshed.profile or "")
    with Memory(on, embedder=embedder) as memory:
        assert memory.profile("prof") == refreshed


def test_a_profile_is_kept_within_its_token_limit_at_a_sentence(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    _night(conn, "p-1", 1)
    consolidate(db, ProfilingModel(ScriptedModel(SCRIPT)), embedder, settings, kind="backfill")
    wordy = ProfilingModel(ScriptedModel({}), write=lambda facts: "A long sentence here. " * 80)
    refresh_profiles(
        conn, wordy, ["prof"], ConsolidationSettings(profiles=True, profile_max_tokens=40)
    )
    profile = read_profile(conn, "prof")
    assert profile is not None and profile.profile is not None
    assert 0 < average_tokens(profile.profile) <= 40 and profile.profile.endswith("here.")


def test_a_failed_answer_keeps_the_old_profile_stale_until_a_later_run_rewrites_it(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, profiles=True)
    _night(conn, "p-1", 1)
    consolidate(db, ProfilingModel(ScriptedModel(SCRIPT)), embedder, on, kind="backfill")
    before = read_profile(conn, "prof")
    _night(conn, "p-3", 3)
    broken = ProfilingModel(ScriptedModel(SCRIPT), raw='{"profile": ')
    failed = consolidate(db, broken, embedder, on, kind="backfill")
    assert failed.status == "completed" and failed.profiles_failed == 1
    kept = read_profile(conn, "prof")
    assert kept is not None and before is not None
    assert kept.stale and kept.profile == before.profile and kept.facts == before.facts

    later = consolidate(db, ProfilingModel(ScriptedModel({})), embedder, on, kind="backfill")
    fresh = read_profile(conn, "prof")
    assert later.profiles_written == 1 and fresh is not None and not fresh.stale
    assert "harp" in (fresh.profile or "")


def test_forgetting_a_fact_takes_the_profile_text_and_a_revert_marks_it_stale(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    on = with_settings(settings, profiles=True)
    _night(conn, "p-1", 1)
    consolidate(db, ProfilingModel(ScriptedModel(SCRIPT)), embedder, on, kind="backfill")
    _night(conn, "p-3", 3)
    third = consolidate(db, ProfilingModel(ScriptedModel(SCRIPT)), embedder, on, kind="backfill")
    revert_run(conn, third.run_id, reason="harp was a joke", by="test")
    reverted = read_profile(conn, "prof")
    assert reverted is not None and reverted.stale

    nurse = active(conn, "prof")["User is a nurse in Leeds"]["id"]
    forget_fact(db, nurse, by="test", reason="privacy request", purge=False)
    forgotten = read_profile(conn, "prof")
    assert forgotten is not None and forgotten.profile is None and forgotten.stale


def test_a_profile_refreshed_on_demand_is_written_from_the_active_facts_or_refused_in_words(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    _night(conn, "p-1", 1)
    consolidate(db, ProfilingModel(ScriptedModel(SCRIPT)), embedder, settings, kind="backfill")
    add(conn, make_episode("bare", "b-1", "Nothing consolidated yet.", at(2025, 4, 1)))
    service, operator = Service(settings, db, embedder), Caller.operator()
    try:
        with pytest.raises(NotFound) as none:
            service.profile(operator, "prof")  # profiles are off for runs
        assert none.value.code == "no_profile"

        written = service.refresh_profile(operator, "prof", model=ProfilingModel(ScriptedModel({})))

        assert written.run_id is None and not written.stale and written.facts == 2
        assert "nurse in Leeds" in (written.profile or "")
        assert service.profile(operator, "prof") == written
        broken = ProfilingModel(ScriptedModel({}), raw='{"profile": ')
        with pytest.raises(MalformedAnswer):
            service.refresh_profile(operator, "prof", model=broken)
        kept = service.profile(operator, "prof")
        assert kept.stale and kept.profile == written.profile
        with pytest.raises(Conflict) as bare:
            service.refresh_profile(operator, "bare", model=broken)
        assert bare.value.code == "no_facts"
        with pytest.raises(NotFound):
            service.refresh_profile(operator, "nobody", model=broken)
    finally:
        service.close()


@pytest.mark.slow
def test_the_command_line_prints_the_stored_profile_or_says_how_to_get_one(
    tmp_path: Path, embedder: Embedder
) -> None:
    settings = Settings(home=tmp_path, database_url=None, _env_file=None)
    with Database(settings) as db:
        migrate(db)
        with db.connection() as conn:
            add(conn, make_episode("cli-prof", "cli-p", "I'm a beekeeper in Oslo.", at(2025, 1, 1)))
            model = ProfilingModel(ScriptedModel({"cli-p": _says("User keeps bees in Oslo")}))
            consolidate(db, model, embedder, settings, kind="backfill")
            refresh_profiles(conn, model, ["cli-prof"], ConsolidationSettings(profiles=True))
    shown = run_cli(tmp_path, "profile", "-c", "cli-prof", "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    stored = json.loads(shown.stdout)
    assert stored["profile"] == "User keeps bees in Oslo." and stored["stale"] is False
    missing = run_cli(tmp_path, "profile", "-c", "nobody")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "error: no conversation 'nobody': nothing was recorded under that id [not_found]"
    )
