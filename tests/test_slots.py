"""Slots: a single-valued attribute of a person (where they live, their name) is held by at
most one active fact of a conversation. A model that answers `new` for a changed value still
leaves one holder: the new value updates the old one, at the event time (seeds 000 and 002:
the residence change and the name correction)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from slowwave.models.consolidation import ConsolidationOutput, normalize_slot
from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Message
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.revert import revert_run
from tests.fix_episodes import active, add, at, decisions, facts, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact

LOCATION = "identity:location:user"


def _new(text: str, slot: str | None, keyword: str) -> Callable[[object], ConsolidationOutput]:
    """A model that answers `new` whatever is known already."""
    return lambda request: ConsolidationOutput(
        facts=[fact(text, "identity", keywords=("User", keyword), slot=slot)]
    )


def _by_text(conn: psycopg.Connection, conversation: str) -> dict[str, dict[str, object]]:
    return {f["fact"]: f for f in facts(conn, conversation)}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("User lives in Beijing", LOCATION), ("User moved to Tokyo", LOCATION)),
        (
            ("The user's name is Bob", "identity:name:user"),
            ("The user's name is actually Alice", "identity:name:user"),
        ),
    ],
    ids=["residence-change", "name-correction"],
)
def test_a_new_value_in_a_filled_slot_updates_the_old_one_though_the_model_said_new(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    first: tuple[str, str],
    second: tuple[str, str],
) -> None:
    conversation = "slot-" + first[1].split(":")[1]
    one, two = (f"{conversation}-1", f"{conversation}-2")
    model = ScriptedModel({one: _new(*first, "first"), two: _new(*second, "second")})
    add(conn, make_episode(conversation, one, f"Hi! {first[0]} ({conversation}).", at(2025, 1, 1)))
    consolidate(db, model, embedder, settings, kind="backfill")
    add(conn, make_episode(conversation, two, f"News: {second[0]}.", at(2025, 6, 15)))
    consolidate(db, model, embedder, settings, kind="backfill")

    rows = _by_text(conn, conversation)
    old, new = rows[first[0]], rows[second[0]]
    assert old["invalid_at"] == at(2025, 6, 15)  # ended when the new value was said
    assert new["invalid_at"] is None and new["supersedes_id"] == old["id"]
    assert list(active(conn, conversation)) == [second[0]]
    (logged,) = [d for d in decisions(conn) if d["fact_id"] == new["id"]]
    assert (logged["proposed_action"], logged["action"]) == ("new", "update")
    assert logged["previous_fact_id"] == old["id"] and "slot" in logged["reason"]


def test_with_slots_off_both_values_stay_active_as_the_model_said(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    off = with_settings(settings, slots=False)
    model = ScriptedModel(
        {
            "off-1": _new("User lives in Lisbon", LOCATION, "Lisbon"),
            "off-2": _new("User moved to Oslo", LOCATION, "Oslo"),
        }
    )
    add(conn, make_episode("off", "off-1", "I live in Lisbon, for now.", at(2025, 1, 1)))
    add(conn, make_episode("off", "off-2", "I moved to Oslo last week!", at(2025, 2, 1)))
    consolidate(db, model, embedder, with_settings(off, chunk_size=1), kind="backfill")
    assert set(active(conn, "off")) == {"User lives in Lisbon", "User moved to Oslo"}


def test_a_change_within_one_chunk_keeps_its_history_and_other_people_keep_their_slot(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    model = ScriptedModel(
        {
            "mix-1": _new("Ana lives in Madrid", "identity:location:ana", "Madrid"),
            "mix-2": _new("Ben lives in Cairo", "identity:location:ben", "Cairo"),
            "mix-3": _new("Ana moved to Quito", "identity:location:ana", "Quito"),
        }
    )
    add(
        conn,
        make_episode("mix", "mix-1", "Ana: Madrid is home.", at(2025, 3, 1), speaker="ana"),
        make_episode("mix", "mix-2", "Ben: Cairo is home.", at(2025, 3, 2), speaker="ben"),
        make_episode("mix", "mix-3", "Ana: off to Quito, for good!", at(2025, 3, 9), speaker="ana"),
    )
    result = consolidate(db, model, embedder, settings, kind="backfill")
    assert result.chunks == 1  # one chunk, one answer, three `new`
    rows = _by_text(conn, "mix")
    assert rows["Ana lives in Madrid"]["invalid_at"] == at(2025, 3, 9)
    assert rows["Ana moved to Quito"]["supersedes_id"] == rows["Ana lives in Madrid"]["id"]
    assert set(active(conn, "mix")) == {"Ben lives in Cairo", "Ana moved to Quito"}


def test_a_restated_value_reinforces_its_holder_and_a_revert_gives_the_slot_back(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    model = ScriptedModel(
        {
            "re-1": _new("User lives in Nairobi", LOCATION, "Nairobi"),
            "re-2": _new("User lives in Nairobi.", LOCATION, "Nairobi"),
            "re-3": _new("User moved to Lima", LOCATION, "Lima"),
        }
    )
    add(conn, make_episode("re", "re-1", "Nairobi has been home for years.", at(2025, 1, 1)))
    consolidate(db, model, embedder, settings, kind="backfill")
    add(conn, make_episode("re", "re-2", "Still in Nairobi, yes.", at(2025, 2, 1)))
    consolidate(db, model, embedder, settings, kind="backfill")
    (holder,) = active(conn, "re").values()
    assert len(holder["source_episodic_ids"]) == 2  # reinforced, not a second row

    add(conn, make_episode("re", "re-3", "We moved to Lima in March.", at(2025, 3, 1)))
    moved = consolidate(db, model, embedder, settings, kind="backfill")
    assert list(active(conn, "re")) == ["User moved to Lima"]
    revert_run(conn, moved.run_id, reason="wrong city", by="test")
    assert [f["id"] for f in active(conn, "re").values()] == [holder["id"]]


def test_the_database_refuses_two_active_facts_in_one_slot(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    model = ScriptedModel({"db-1": _new("User lives in Hanoi", LOCATION, "Hanoi")})
    add(conn, make_episode("dbslot", "db-1", "Hanoi, since 2019.", at(2025, 1, 1)))
    consolidate(db, model, embedder, settings, kind="backfill")
    with pytest.raises(psycopg.errors.ExclusionViolation), conn.transaction():
        conn.execute(
            "INSERT INTO semantic_memory (id, conversation_id, category, fact, keywords, "
            "source_episodic_ids, valid_at, embedding, slot) "
            "SELECT gen_random_uuid(), conversation_id, category, 'User lives in Hue', keywords, "
            "source_episodic_ids, valid_at, embedding, slot FROM semantic_memory "
            "WHERE conversation_id = 'dbslot'"
        )


@pytest.mark.parametrize(
    ("given", "key"),
    [
        ("identity:location:ana", "identity:location:ana"),
        (" Identity:Location : Ana Lee ", "identity:location:ana_lee"),
        ("identity:location", "identity:location"),
        ("relationship:partner:user", "relationship:partner:user"),
        ("identity:favourite_food:ana", None),
        ("location", None),
        ("identity:location:ana:extra", None),
        ("", None),
        (None, None),
    ],
)
def test_slot_keys_are_normalized_and_outside_the_vocabulary_dropped(
    given: str | None, key: str | None
) -> None:
    assert normalize_slot(given) == key


@pytest.mark.parametrize(
    ("given", "speakers", "key"),
    [
        ("identity:location:ana", ["Ana Lee", "Bo"], "identity:location:ana_lee"),
        ("identity:location:Ana Lee", ["Ana Lee", "Bo"], "identity:location:ana_lee"),
        ("identity:location:user", ["user", "assistant"], "identity:location:user"),
        ("identity:location:max", ["Ana Lee", "Bo"], None),  # the cat Max, not a speaker
        ("identity:location:i", ["user", "assistant"], "identity:location:user"),
        ("identity:location:me", ["Ana Lee", "assistant"], "identity:location:ana_lee"),
        ("identity:location:i", ["Ana Lee", "Bo"], None),  # which of the two?
        ("identity:location:ana", ["Ana Lee", "Ana Ruiz"], None),  # which Ana?
        ("identity:location", ["Ana Lee", "Bo"], "identity:location"),
    ],
)
def test_a_slot_names_one_of_the_chunk_speakers_or_is_dropped(
    given: str, speakers: list[str], key: str | None
) -> None:
    assert normalize_slot(given, speakers) == key


def test_a_slot_whose_person_is_no_speaker_updates_nothing(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    """Between two people, a small model's `i` would otherwise make Bo's home end Ana's."""
    model = ScriptedModel(
        {
            "who-1": _new("Ana lives in Lima", "identity:location:i", "Lima"),
            "who-2": _new("Bo lives in Quito", "identity:location:i", "Quito"),
        }
    )
    for key, text, day in (("who-1", "Lima is home.", 1), ("who-2", "Quito is home.", 2)):
        episode = make_episode("who", key, text, at(2025, 4, day), speaker="Ana")
        episode.messages.append(Message(speaker="Bo", text=f"Bo: {text}"))
        add(conn, episode)
        consolidate(db, model, embedder, settings, kind="backfill")
    assert set(active(conn, "who")) == {"Ana lives in Lima", "Bo lives in Quito"}
    slots = conn.execute("SELECT DISTINCT slot FROM semantic_memory WHERE conversation_id = 'who'")
    assert slots.fetchall() == [(None,)]
