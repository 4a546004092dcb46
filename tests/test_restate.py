"""An item that reads as its speaker's message is written as a fact about the speaker: the
sentence restated in the third person, not refused; what cannot be rewritten mechanically is
refused as before. Through the pipeline, a restated update ends the fact it replaces in event
time, with lineage."""

from __future__ import annotations

import psycopg
import pytest

from slowwave.models.change import replaced
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.restate import (
    person_named,
    restate,
    speaker_of,
    subject_name,
    without_opening,
    without_request,
)
from tests.fix_episodes import active, add, at, decisions, facts, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact
from tests.test_consolidation import answer


@pytest.mark.parametrize(
    ("said", "restated"),
    [
        (
            "Big news: I'm moving to Manchester in July for a new job at a sixth-form college.",
            "Dana is moving to Manchester in July for a new job at a sixth-form college.",
        ),
        (
            "Theo and I want to open a second shop near the river next year.",
            "Theo and Dana want to open a second shop near the river next year.",
        ),
        (
            "Omar is allergic to hazelnuts, so nothing with nuts in our shop.",
            "Omar is allergic to hazelnuts, so nothing with nuts in Dana's shop.",
        ),
        ("I teach chemistry and a bit of physics.", "Dana teaches chemistry and a bit of physics."),
        (
            "I really love bouldering with my sister Mia.",
            "Dana really loves bouldering with their sister Mia.",
        ),
        ("I don't like early meetings.", "Dana doesn't like early meetings."),
        (
            "I switched to day shifts at the hospital.",
            "Dana switched to day shifts at the hospital.",
        ),
        ("I study French on Sundays.", "Dana studies French on Sundays."),
        (
            "Mia is much better at overhangs than I am.",
            "Mia is much better at overhangs than Dana is.",
        ),
        ("I've owned three bikes since 2020.", "Dana has owned three bikes since 2020."),
        (
            "I've been running lately, and I'm happy to say I recently set a personal best.",
            "Dana has been running lately, and Dana is happy to say Dana recently set a "
            "personal best.",
        ),
    ],
)
def test_a_speakers_own_sentence_is_restated_about_them(said: str, restated: str) -> None:
    assert restate(said, "Dana") == restated


@pytest.mark.parametrize(
    ("said", "restated"),
    [
        # named once, then "their" (LongMemEval: "The user is looking to grow The user's
        # social media presence for The user's freelance writing business.")
        (
            "I'm looking to grow my social media presence for my freelance writing business.",
            "The user is looking to grow their social media presence for their freelance "
            "writing business.",
        ),
        ("She reminded me of my friend Emily.", "She reminded the user of their friend Emily."),
        ("My sister and my brother visit me.", "The user's sister and their brother visit them."),
    ],
)
def test_a_person_is_named_once_and_then_their_or_them(said: str, restated: str) -> None:
    assert restate(said, "The user") == restated


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        (
            "I've been trying to get back into playing the guitar, can you recommend some "
            "online resources besides Fender Play that can help me improve my skills?",
            "I've been trying to get back into playing the guitar.",
        ),
        ("I'm planning a trip to Japan - any tips?", "I'm planning a trip to Japan."),
        ("I live in Leeds, is that far from Manchester?", "I live in Leeds."),
        # all question, or no request after it: as it was
        ("What is the best way to learn?", "What is the best way to learn?"),
        ("Is it ok, or not?", "Is it ok, or not?"),
        ("I teach at a sixth-form college?", "I teach at a sixth-form college?"),
    ],
)
def test_a_request_to_the_agent_that_closes_a_statement_is_no_part_of_the_fact(
    said: str, kept: str
) -> None:
    assert without_request(said) == kept


@pytest.mark.parametrize(
    "said",
    [
        "We hired our first apprentice, Lea.",  # "we": whom it means is not mechanical
        "I taught myself to knit.",
        "Audrey believes pets bring joy to our lives.",  # nothing of the speaker's: unchanged
        "Dana teaches chemistry in Leeds.",
    ],
)
def test_what_cannot_be_rewritten_mechanically_is_left_as_it_was(said: str) -> None:
    assert restate(said, "Dana") is None


def test_a_messages_opening_is_no_part_of_the_fact_nor_hides_its_subject() -> None:
    said = "By the way, The user is currently on page 200 of the book."
    assert without_opening(said) == "The user is currently on page 200 of the book."
    assert subject_name(said) == "The user"
    assert without_opening("speaking of which, Dana runs.") == "Dana runs."
    assert without_opening("Bythe way Dana runs.") == "Bythe way Dana runs."


def test_the_speaker_is_the_one_whose_message_the_item_repeats_and_a_role_goes_by_its_name() -> (
    None
):
    told = make_episode("x", "r1", "Hi! I'm Dana. I teach chemistry in Leeds.", at(2023, 3, 4))
    asked = make_episode("x", "r2", "How is Leeds?", at(2023, 3, 4), speaker="assistant")
    assert speaker_of("I teach chemistry in Leeds.", [told, asked]) == "user"
    assert person_named("user", [told, asked], []) == "Dana"
    assert person_named("assistant", [told], []) is None  # an agent's "I" is no person's
    assert person_named("Caroline", [told], []) == "Caroline"
    quiet = make_episode("x", "r3", "Short answers on weekdays, please.", at(2023, 4, 2))
    assert person_named("user", [quiet], ["Dana teaches chemistry.", "Dana climbs."]) == "Dana"
    assert person_named("user", [quiet], []) == "The user"
    junk = ["Reaching the Gold level is a great goal!", "Reaching is a fan."]
    assert person_named("user", [quiet], junk) == "The user"  # a gerund is no name


def test_a_person_known_by_role_is_named_as_the_chat_names_them_not_as_a_facts_first_word() -> None:
    greeted = [
        make_episode("x", "r1", "Busy, but I love it.", at(2023, 3, 4)),
        make_episode(
            "x", "r2", "Congratulations, Dana! How is it?", at(2023, 3, 4), speaker="assistant"
        ),
    ]
    assert person_named("user", greeted, []) == "Dana"
    drafted = make_episode(
        "x", "r5", "Here is a draft:\n\nDear Jason,\nI hope this finds you well.", at(2023, 3, 4),
        speaker="assistant",
    )  # fmt: skip
    assert person_named("user", [greeted[0], drafted], []) == "The user"  # a letter's greeting
    quiet = [make_episode("x", "r3", "Short answers on weekdays, please.", at(2023, 4, 2))]
    # what a small model wrote first about a chat on team outings, charity events and networking
    things = [
        "Giant Jenga is a fantastic choice for a team outing.",
        "Giant is planning a team outing.",
        "Los Angeles is a hub for philanthropy.",
        "Los Angeles hosts charity events.",
    ]
    assert person_named("user", quiet, things) == "The user"
    told = [make_episode("x", "r4", "One of the members, Jack, gives me feedback.", at(2023, 4, 2))]
    someone = ["Jack met Tom at a networking event.", "Jack gave the user feedback."]
    assert person_named("user", told, someone) == "The user"  # whom the user talks about
    mostly = ["The user runs.", "The user swims.", "The user reads.", "Kim met the user."]
    assert person_named("user", quiet, mostly) == "The user"


@pytest.mark.slow
def test_a_first_person_update_is_restated_and_ends_the_fact_it_replaces_in_event_time(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    add(
        conn,
        make_episode(
            "dana", "d1", "Hi! I'm Dana. I teach chemistry at a school in Leeds.", at(2023, 3, 4)
        ),
        make_episode(
            "dana",
            "d2",
            "Big news: I'm moving to Manchester in July. Saving for Japan with my sister too.",
            at(2023, 5, 20),
        ),
    )
    model = ScriptedModel(
        {
            "d1": lambda r: answer(fact("Dana teaches chemistry at a school in Leeds.")),
            "d2": lambda r: answer(
                fact(
                    "Big news: I'm moving to Manchester in July.",
                    action=FactAction.update,
                    existing="F1",
                ),
                fact("I'm saving for a trip to Japan with my sister.", "goal"),
            ),
        }
    )
    consolidate(db, model, embedder, one)

    now = active(conn, "dana")
    assert set(now) == {
        "Dana is moving to Manchester in July.",
        "Dana is saving for a trip to Japan with their sister.",
    }, now
    moved = now["Dana is moving to Manchester in July."]
    leeds = next(f for f in facts(conn, "dana") if "Leeds" in f["fact"])
    assert moved["supersedes_id"] == leeds["id"]
    assert leeds["invalid_at"] == moved["valid_at"] == at(2023, 5, 20)
    logged = {d["proposed_fact"]: d for d in decisions(conn) if d["action"] == "update"}
    assert (
        "restated in the third person"
        in logged["Big news: I'm moving to Manchester in July."]["reason"]
    )


def test_an_unrelated_item_beside_a_change_stays_new_and_the_other_facts_stay_active() -> None:
    # the pipeline case above keeps the Japan item new; here its rewrite alone, for the record
    assert (
        restate("I'm saving for a trip to Japan.", "Dana") == "Dana is saving for a trip to Japan."
    )


@pytest.mark.slow
def test_a_restated_item_holds_from_the_message_it_repeats_whichever_episode_it_cites(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    two = with_settings(settings, chunk_size=2, episode_threshold=1)
    add(
        conn,
        make_episode("ines", "i1", "Keep your answers short, please.", at(2023, 4, 2)),
        make_episode("ines", "i2", "I'm Ines and I'm moving to Porto in June.", at(2023, 5, 20)),
    )
    model = ScriptedModel(
        {"i1": lambda r: answer(fact("I'm moving to Porto in June.", episodes=["E1"]))}
    )
    consolidate(db, model, embedder, two)

    moved = active(conn, "ines")["Ines is moving to Porto in June."]
    assert moved["valid_at"] == at(2023, 5, 20)


def _moves(model_says_out_of_date: bool) -> ScriptedModel:
    return ScriptedModel(
        {
            "k1": lambda r: answer(fact("Kai teaches chemistry at a school in Leeds.")),
            "k2": lambda r: answer(
                fact("I'm moving to Manchester for a new job.", action=FactAction.update),
                fact("Kai bought a red bike.", "experience"),
            ),
        },
        out_of_date=lambda known, later: model_says_out_of_date and "Leeds" in known,
    )


@pytest.mark.slow
@pytest.mark.parametrize("out_of_date", [True, False])
def test_an_update_that_names_no_fact_ends_its_nearest_fact_about_the_person_only_if_out_of_date(
    out_of_date: bool,
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    add(
        conn,
        make_episode(
            "kai", "k1", "Hi, I'm Kai. I teach chemistry at a school in Leeds.", at(2023, 3, 4)
        ),
        make_episode(
            "kai",
            "k2",
            "I'm moving to Manchester for a new job. Bought a red bike!",
            at(2023, 5, 20),
        ),
    )
    model = _moves(out_of_date)
    summary = consolidate(db, model, embedder, one)

    now = active(conn, "kai")
    moved = "Kai is moving to Manchester for a new job."
    assert {moved, "Kai bought a red bike."} <= set(now)  # the unrelated item stays new
    assert summary.change_pairs == 1
    leeds = next(f for f in facts(conn, "kai") if "Leeds" in f["fact"])
    if out_of_date:
        assert "Kai teaches chemistry at a school in Leeds." not in now
        assert now[moved]["supersedes_id"] == leeds["id"]
        assert leeds["invalid_at"] == now[moved]["valid_at"] == at(2023, 5, 20)
        assert summary.changes_found == summary.facts_updated == 1
    else:
        assert leeds["invalid_at"] is None and now[moved]["supersedes_id"] is None
        assert summary.changes_found == 0


@pytest.mark.parametrize(
    ("known", "later", "now", "ends"),
    [
        (
            "Dana teaches chemistry at a high school in Leeds.",
            "Dana is moving to Manchester in July for a new job.",
            "Dana teaches chemistry at a high school in Manchester.",
            True,
        ),
        ("The user owns 3 bikes.", "The user now has 4 bikes.", "The user owns 4 bikes.", True),
        (
            "The user's 5K personal best is 27:12.",
            "The user ran a new 5K personal best of 25:50.",
            "The user's 5K personal best is 25:50.",
            True,
        ),
        # the later fact written back, a number swapped about the same thing
        (
            "The user did attend three sessions of the bereavement support group.",
            "The user attended five sessions of the bereavement support group last year.",
            "The user attended five sessions of the bereavement support group last year.",
            True,
        ),
        # the later fact written back about something else: only the subject in common
        ("The user owns 3 bikes.", "The user has 2 cats.", "The user has 2 cats.", False),
        # a copy: the later fact is about something else
        (
            "Kenji plays in a community orchestra every Sunday.",
            "Kenji switched to day shifts at the same hospital.",
            "Kenji plays in a community orchestra every Sunday.",
            False,
        ),
        # a rewrite that only adds: both hold
        (
            "Omar runs a bakery in Lyon with his husband Theo.",
            "Omar hired his first apprentice, Lea.",
            "Omar runs a bakery in Lyon with his husband Theo and his apprentice Lea.",
            False,
        ),
        # the model's own slip, a word from neither fact
        (
            "Omar runs a bakery in Lyon with his husband Theo.",
            "Omar prefers mornings for meetings.",
            "Omar runs a bakery in Lyon with his wife Theo.",
            False,
        ),
    ],
)
def test_a_known_fact_ends_only_when_the_rewrite_swaps_one_of_its_values_for_the_later_ones(
    known: str, later: str, now: str, ends: bool
) -> None:
    assert replaced(known, later, now) is ends
