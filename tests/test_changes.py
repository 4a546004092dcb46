"""Two sentences alike but for a number are two values, not one fact said twice: dedupe never
merges them, and the later one ends the earlier without asking the model, as does one that
counts again a thing the earlier counts ("5 MCU films" after "4 MCU films"); a new number in
other words is asked about. A pair is asked about only where the later fact names a value the known
one holds another of."""

from __future__ import annotations

import psycopg
import pytest

from slowwave.models.change import (
    alike_but_for_numbers,
    count_changed,
    counts,
    named_values,
    names_another_value,
    one_word_swapped,
)
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.fact import numbers_in, other_numbers
from slowwave.models.llm.base import Purpose
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from tests.fix_episodes import active, add, at, decisions, facts, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact
from tests.test_consolidation import answer

THREE = "The user attended three sessions of the bereavement support group."
FIVE = "The user attended five sessions of the bereavement support group."


def test_numbers_are_read_in_digits_and_words_alike() -> None:
    assert numbers_in(FIVE) == {"5"} == numbers_in("The user attended 5 sessions.")
    assert numbers_in("1,200 followers, a 5K in 25:50") == {"1200", "5", "25:50"}
    assert other_numbers(FIVE, THREE) and not other_numbers(FIVE, FIVE.replace("five", "5"))
    assert not other_numbers(FIVE, "The user attends a bereavement support group.")


def two_sessions(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    said: tuple[str, str],
    written: tuple[str, str],
    out_of_date: bool,
) -> tuple[RunSummary, ScriptedModel]:
    """Two episodes of user ``u`` two months apart, the model writing one fact of each, and
    saying the first no longer holds when asked (if ``out_of_date``); consolidated in one run."""
    add(
        conn,
        make_episode("u", "e1", said[0], at(2023, 3, 4)),
        make_episode("u", "e2", said[1], at(2023, 5, 20)),
    )
    model = ScriptedModel(
        {
            "e1": lambda r: answer(fact(written[0], "experience")),
            "e2": lambda r: answer(fact(written[1], "experience")),
        },
        out_of_date=lambda known, later: out_of_date and known == written[0],
    )
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    return consolidate(db, model, embedder, one), model


@pytest.mark.slow
@pytest.mark.parametrize("out_of_date", [True, False])
def test_a_new_fact_alike_but_for_its_number_ends_the_old_value_without_asking_the_model(
    out_of_date: bool,
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
) -> None:
    # the default model copied "three sessions" back: what it would say is not asked
    summary, model = two_sessions(
        db,
        conn,
        embedder,
        settings,
        (
            "I went to three sessions of the grief group so far.",
            "Up to five sessions of the grief group now!",
        ),
        (THREE, FIVE),
        out_of_date,
    )

    now = active(conn, "u")
    assert FIVE in now  # never merged into the fact with the other number
    assert summary.dedupe_merges == 0 and summary.change_pairs == 1
    assert summary.changes_found == 1
    assert not [r for r in model.requests if r.purpose is Purpose.change]
    three = next(f for f in facts(conn, "u") if f["fact"] == THREE)
    assert THREE not in now and now[FIVE]["supersedes_id"] == three["id"]
    assert three["invalid_at"] == now[FIVE]["valid_at"] == at(2023, 5, 20)


@pytest.mark.slow
@pytest.mark.parametrize("out_of_date", [True, False])
def test_a_new_number_in_other_words_is_asked_about_and_ends_the_old_value_or_stands_beside_it(
    out_of_date: bool,
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
) -> None:
    # another time for the same race: a new result, or one more beside the first
    old = "The user ran a charity 5K in 27:12 at the park."
    new = "The user ran the charity 5K again in 25:50 this spring."
    summary, model = two_sessions(
        db,
        conn,
        embedder,
        settings,
        ("I ran the charity 5K at the park in 27:12.", "Ran the charity 5K again, 25:50!"),
        (old, new),
        out_of_date,
    )

    now = active(conn, "u")
    assert new in now and summary.change_pairs == 1
    assert [r for r in model.requests if r.purpose is Purpose.change]
    ran = next(f for f in facts(conn, "u") if f["fact"] == old)
    if out_of_date:
        assert old not in now and now[new]["supersedes_id"] == ran["id"]
        assert ran["invalid_at"] == now[new]["valid_at"] == at(2023, 5, 20)
    else:
        assert old in now and now[new]["supersedes_id"] is None


@pytest.mark.slow
def test_a_best_beaten_in_other_words_ends_the_old_best_without_asking_the_model(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    old = "The user ran a charity 5K in 27:12, a personal best."
    new = "The user set a new personal best in the charity 5K: 25:50."
    summary, model = two_sessions(
        db,
        conn,
        embedder,
        settings,
        ("My best 5K is 27:12, at the charity run.", "New personal best at the charity 5K: 25:50!"),
        (old, new),
        out_of_date=False,  # what the model would say is not asked
    )

    now = active(conn, "u")
    assert old not in now and new in now and summary.changes_found == 1
    assert not [r for r in model.requests if r.purpose is Purpose.change]
    ran = next(f for f in facts(conn, "u") if f["fact"] == old)
    assert now[new]["supersedes_id"] == ran["id"]


def test_two_sentences_alike_but_for_a_number_state_one_count_at_two_times() -> None:
    said_before = (
        "The user did attend three sessions of the bereavement support group, and it really "
        "helped The user process The user's emotions."
    )
    said_later = (
        "The user attended five sessions of the bereavement support group and found it really "
        "helpful in processing their emotions"
    )
    assert alike_but_for_numbers(said_later, said_before)
    assert alike_but_for_numbers("The user owns 4 bikes.", "The user owns 3 bikes.")
    assert not alike_but_for_numbers("The user has 2 cats.", "The user owns 3 bikes.")
    assert not alike_but_for_numbers(FIVE, FIVE.replace("five", "5"))  # the same number
    assert not alike_but_for_numbers(
        "The user set a new personal best in the charity 5K: 25:50.",
        "The user ran a charity 5K in 27:12, a personal best.",
    )


def test_a_sentence_counts_a_thing_by_the_word_after_its_number_or_before_its_digits() -> None:
    assert counts(FIVE) == {"session": {"5"}}
    assert counts("The user is now on page 220, and it's amazing.") == {"page#": {"220"}}
    # a time or a duration is no count of a thing; nor is a number beside function words
    assert counts("Caroline started transitioning three years ago.") == {}
    assert counts("The user ran the 5K in a time of 27:12.") == {}  # a race's distance
    assert not count_changed("The user plans a 10K run.", "The user ran a charity 5K run.")
    # ... unless the sentence names a best: a best beaten is a value that changed (LongMemEval)
    best = "The user is hoping to beat their personal best time of 25:50 this time around."
    assert counts(best) == {"best#": {"25:50"}}
    assert count_changed(best, "The user set a personal best time in a 5K run with 27:12.")
    assert not count_changed(best, "The user's personal best time is 25:50 in the 5K.")
    mcu = "The user has watched 12 films in the last 3 months, including 5 MCU films."
    assert count_changed(mcu, "The user wants to watch 4 MCU films and loves Spider-Man.")
    assert count_changed("James already has three dogs at home.", "James has two dogs.")
    assert not count_changed("The user has 2 cats.", "The user owns 3 bikes.")
    assert not count_changed(mcu, "The user has watched 12 films, 5 of them MCU films.")
    assert not count_changed(
        "Caroline started playing guitar five years ago.",
        "Caroline started transitioning three years ago.",
    )
    # a count named before its number, or with a word between them (LongMemEval)
    species = "The user's total species count of woodpeckers is now 32."
    assert counts(species) == {"speci": {"32"}, "woodpecker": {"32"}}
    assert count_changed(species, "The user has seen 27 different species so far.")
    assert counts("The total number of books the user owns is 12.") == {"book": {"12"}}
    assert count_changed("The user's follower count is now 600.", "The user has 500 followers.")
    assert counts("The user's total is now 12.") == {}  # the total of nothing named


@pytest.mark.parametrize(
    ("later", "known", "changed"),
    [
        # how long something has gone on until now: the later value holds (LongMemEval)
        (
            "The user has been sticking to their daily tidying routine for 4 weeks now.",
            "The user is proud of sticking to their daily tidying routine - it's already been "
            "3 weeks!",
            True,
        ),
        (
            "The user has had their cat, Luna, for about 9 months now.",
            "The user has had Luna for about 6 months now and wants to microchip her.",
            True,
        ),
        (
            "Kai has been living in Harajuku for 3 months.",
            "Kai has been living in Harajuku for 2 months.",
            True,
        ),
        # another thing's duration, a point in time, a trip's length: no value that ran on
        (
            "The user has been playing piano for 5 years now.",
            "The user has been learning guitar for 3 years now.",
            False,
        ),
        (
            "Dana has been teaching for 5 years now.",
            "Dana has been climbing for 3 years now.",
            False,
        ),
        (
            "The user moved to Paris three years ago.",
            "The user moved to Paris two years ago.",
            False,
        ),
        ("The user went to Japan for two weeks.", "The user went to Japan for three weeks.", False),
    ],
)
def test_a_duration_that_runs_on_to_now_is_a_value_that_changes_for_the_same_thing_only(
    later: str, known: str, changed: bool
) -> None:
    assert count_changed(later, known) is changed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("said", "old", "new"),
    [
        (
            ("I'd love to watch 4 MCU films, Spider-Man first.", "12 films lately, 5 of them MCU!"),
            "The user wants to watch 4 MCU films and thinks Spider-Man: Homecoming fits.",
            "The user has watched 12 films in the last 3 months, including 5 MCU films.",
        ),
        # how long something has gone on until now, longer at a later time
        (
            ("I've had Luna for about 6 months now.", "It's been about 9 months with Luna now!"),
            "The user has had their cat Luna for about 6 months now.",
            "The user has had their cat Luna for about 9 months now and keeps her busy.",
        ),
    ],
    ids=["a count", "a duration"],
)
def test_a_new_fact_counting_again_what_a_known_fact_counts_ends_it_without_asking(
    said: tuple[str, str],
    old: str,
    new: str,
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
) -> None:
    summary, model = two_sessions(
        db,
        conn,
        embedder,
        settings,
        said,
        (old, new),
        out_of_date=False,  # asked, the model would copy the known fact
    )

    now = active(conn, "u")
    assert summary.changes_found == 1
    assert not [r for r in model.requests if r.purpose is Purpose.change]
    before = next(f for f in facts(conn, "u") if f["fact"] == old)
    assert old not in now and now[new]["supersedes_id"] == before["id"]
    assert before["invalid_at"] == now[new]["valid_at"] == at(2023, 5, 20)


def test_the_values_a_sentence_names_are_its_numbers_and_the_names_inside_it() -> None:
    said = "Dana is moving to Manchester in July for a new job at Northfield's college."
    assert named_values(said, ["Dana"]) == {"manchester", "july", "northfield"}
    quoted = 'The user is on page 220 of "The Nightingale". It is long.'
    assert named_values(quoted, ["The user"]) == {"220", "the", "nightingale"}
    restated = "The user said The user's plan is to go with the cardboard box cityscape."
    assert named_values(restated, ["The user"]) == set()


@pytest.mark.parametrize(
    ("later", "known", "asked"),
    [
        ("Dana is moving to Manchester in July.", "Dana teaches chemistry in Leeds.", True),
        ("The user now has 4 bikes.", "The user owns 3 bikes.", True),
        # the same names on both sides, or none on one: no value to swap
        ("Melanie showed Caroline a photo of bowls.", "Melanie is proud of Caroline.", False),
        ("Omar hired his first apprentice, Lea.", "Omar is allergic to hazelnuts.", False),
        ("Kenji switched to day shifts.", "Kenji is a nurse in Osaka.", False),
    ],
)
def test_a_pair_is_asked_about_only_where_the_later_fact_names_another_value(
    later: str, known: str, asked: bool
) -> None:
    subject = later.split()[0] if not later.startswith("The user") else "The user"
    assert names_another_value(later, known, [subject]) is asked


@pytest.mark.slow
def test_an_unnamed_update_that_names_no_other_value_leaves_the_known_fact_unasked_and_active(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    leeds = "Kai teaches chemistry at a school in Leeds."
    add(
        conn,
        make_episode(
            "kai", "k1", "Hi, I'm Kai. I teach chemistry at a school in Leeds.", at(2023, 3, 4)
        ),
        make_episode("kai", "k2", "My chemistry classes are all hands-on now.", at(2023, 5, 20)),
    )
    hands_on = "Kai teaches chemistry with hands-on experiments."
    model = ScriptedModel(
        {
            "k1": lambda r: answer(fact(leeds)),
            "k2": lambda r: answer(fact(hands_on, action=FactAction.update)),
        },
        out_of_date=lambda known, later: True,  # a model that ends whatever it is shown
    )
    summary = consolidate(db, model, embedder, one)

    assert summary.change_pairs == 0 and summary.changes_found == 0
    assert {leeds, hands_on} <= set(active(conn, "kai"))


def test_two_sentences_the_same_but_for_one_word_are_one_statement_with_another_value() -> None:
    night = "Kenji works at a night shift job."
    assert one_word_swapped("Kenji works at a day shift job.", night) == ("night", "day")
    assert one_word_swapped("Kenji works at the night shift job.", night) is None  # a → the
    assert one_word_swapped("Kenji works at a day shift job now.", night) is None  # a word more
    assert one_word_swapped("Kenji has three cats.", "Kenji has two cats.") is None  # a count
    assert one_word_swapped("Kenji plays at a night shift party.", night) is None  # two words


@pytest.mark.slow
@pytest.mark.parametrize("proposed", [FactAction.update, FactAction.new])
def test_an_unnamed_update_saying_the_known_fact_with_one_word_changed_ends_it_without_asking(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    proposed: FactAction,
) -> None:
    """The quick start's Kenji: the model wrote his switch as an update naming no fact; its
    sentence is the night-shift fact's with "night" changed to "day". As a new fact (no change
    meant) the two stand side by side."""
    night, day = "Kenji works at a night shift job.", "Kenji works at a day shift job."
    add(
        conn,
        make_episode("k", "k1", "I'm Kenji, a nurse, on nights at the moment.", at(2024, 1, 10)),
        make_episode("k", "k2", "Good news, I switched to day shifts!", at(2024, 2, 13)),
    )
    model = ScriptedModel(
        {"k1": lambda r: answer(fact(night)), "k2": lambda r: answer(fact(day, action=proposed))},
        out_of_date=lambda known, later: False,  # asked, the model would keep the night shifts
    )
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    summary = consolidate(db, model, embedder, one)

    now = active(conn, "k")
    if proposed is FactAction.new:
        assert {night, day} <= set(now) and summary.changes_found == 0
        return
    assert summary.changes_found == 1
    assert not [r for r in model.requests if r.purpose is Purpose.change]
    old = next(f for f in facts(conn, "k") if f["fact"] == night)
    assert night not in now and now[day]["supersedes_id"] == old["id"]
    assert old["invalid_at"] == now[day]["valid_at"] == at(2024, 2, 13)


@pytest.mark.slow
def test_a_new_count_ends_every_known_fact_stating_the_old_count_and_leaves_other_values(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    # LongMemEval: the model wrote the 500 twice in the first session, and the change check
    # paired "600" with one of them; the other stayed active beside it
    had = "The user has 500 followers on Instagram."
    reached = "The user reached 500 followers on Instagram last week."
    goal = "The user wants 1,000 followers on Instagram by the end of the year."
    cats = "The user has 2 cats who appear in 500 photos."
    new = "The user is now at 600 followers on Instagram."
    add(
        conn,
        make_episode("u", "e1", "Hit 500 followers last week! Aiming for 1,000.", at(2023, 5, 21)),
        make_episode("u", "e2", "Checked: 600 followers now!", at(2023, 5, 25)),
    )
    model = ScriptedModel(
        {
            "e1": lambda r: answer(*(fact(f, "experience") for f in (had, reached, goal, cats))),
            "e2": lambda r: answer(fact(new, "experience")),
        },
    )
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    summary = consolidate(db, model, embedder, one)

    now = active(conn, "u")
    assert new in now and goal in now and cats in now
    assert had not in now and reached not in now
    ended = {f["fact"]: f for f in facts(conn, "u") if f["fact"] in (had, reached)}
    assert {f["invalid_at"] for f in ended.values()} == {at(2023, 5, 25)}
    # one is the update's (lineage), the other ended beside it
    assert now[new]["supersedes_id"] in {f["id"] for f in ended.values()}
    assert summary.changes_found == 2
    assert not [r for r in model.requests if r.purpose is Purpose.change]
    # the log says what the model proposed: a new fact, never an invalidation of its own
    logged = [d for d in decisions(conn) if d["action"] in ("update", "invalidate")]
    assert sorted(d["action"] for d in logged) == ["invalidate", "update"]
    assert {d["proposed_action"] for d in logged} == {"new"}
