"""Facts a small model can be trusted for: grounded in what they cite, self-contained, and
never stored twice for one sentence (issue: facts you can trust)."""

from __future__ import annotations

import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Message
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.grounding import Grounding, sources_of, ungrounded_span
from slowwave.tasks.guard import (
    copied_under_name,
    degenerate_reason,
    exclaimed,
    not_self_contained,
)
from tests.fix_episodes import active, add, at, decisions, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact
from tests.test_consolidation import answer

MEETING = (
    "Marcus here. The Q2 project review is on Thursday with a budget of $150,000; sign up "
    "for the newsletter at news@acme.example and read acme-labs.dev/roadmap first."
)


@pytest.mark.parametrize(
    ("invented", "span"),
    [
        ("Marcus Chen is a software engineer at Google.", "Chen"),
        ("Marcus has a Q2 project review with a budget of $250,000.", "$250,000"),
        ("Marcus gets the newsletter at marcus@acme.example.", "marcus@acme.example"),
        ("Marcus reads the roadmap at acme-labs.dev/plans.", "acme-labs.dev/plans"),
        ("Marcus has been at the company for three years.", "three"),
    ],
)
def test_an_invented_name_number_email_or_url_is_the_span_refused(invented: str, span: str) -> None:
    sources = sources_of([MEETING, "user"])
    assert ungrounded_span(invented, sources, Grounding.names) == span


@pytest.mark.parametrize(
    "grounded",
    [
        "Marcus has a Q2 project review with a budget of 150k dollars.",
        "Marcus has a Q2 project review with a budget of $150,000.",
        "Marcus gets the newsletter at news@acme.example.",
        "Marcus reads the roadmap at https://www.acme-labs.dev/roadmap.",
        "Marcus's project review is on Thursday.",
    ],
)
def test_the_same_name_number_email_or_url_in_another_form_is_grounded(grounded: str) -> None:
    assert ungrounded_span(grounded, sources_of([MEETING]), Grounding.names) is None


def test_a_date_worked_out_from_the_episodes_time_is_grounded_and_a_far_one_is_not() -> None:
    sources = sources_of(["I went hiking yesterday, and we move next year."], [(_d(8), _d(8))])
    assert ungrounded_span("Dana went hiking on 7 May 2023.", sources, Grounding.literals) is None
    assert ungrounded_span("Dana moves in 2024.", sources, Grounding.literals) is None
    assert ungrounded_span("Dana moves in 2031.", sources, Grounding.literals) == "2031"
    assert ungrounded_span("Dana went hiking in November.", sources, Grounding.literals) == (
        "November"
    )


def test_names_are_checked_only_at_the_names_level() -> None:
    sources = sources_of([MEETING])
    invented = "Marcus Chen is a software engineer at Google."
    assert ungrounded_span(invented, sources, Grounding.literals) is None
    assert ungrounded_span(invented, sources, Grounding.off) is None


def _d(day: int):  # type: ignore[no-untyped-def]
    from datetime import date

    return date(2023, 5, day)


def test_invented_names_numbers_emails_and_urls_are_refused_and_logged_with_the_span(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        make_episode("c", "m1", MEETING, at(2025, 3, 3), speaker="Marcus"),
        make_episode("c", "m2", "Marcus again: I lead the platform team.", at(2025, 3, 4)),
        make_episode("c", "m3", "Marcus once more: I cycle to work.", at(2025, 3, 5)),
    )
    model = ScriptedModel(
        {
            "m1": lambda r: answer(
                fact("Marcus Chen is a software engineer at Google.", "identity", episodes=["E1"]),
                fact("Marcus has a project review with a $250,000 budget.", "goal"),
                fact("Marcus gets the newsletter at marcus@acme.example.", "preference"),
                fact("Marcus reads the roadmap at acme-labs.dev/plans.", "interest"),
                fact("Marcus has a Q2 project review with a budget of $150,000.", "goal"),
                fact("Marcus gets the newsletter at news@acme.example.", "preference"),
            )
        }
    )
    summary = consolidate(db, model, embedder, with_settings(settings, grounding="names"))

    assert set(active(conn, "c")) == {
        "Marcus has a Q2 project review with a budget of $150,000.",
        "Marcus gets the newsletter at news@acme.example.",
    }
    refused = {
        d["proposed_fact"]: d["reason"] for d in decisions(conn) if d["action"] == "rejected"
    }
    assert refused == {
        "Marcus Chen is a software engineer at Google.": "ungrounded: 'Chen' is in no message "
        "and no fact shown",
        "Marcus has a project review with a $250,000 budget.": "ungrounded: '$250,000' is in "
        "no message and no fact shown",
        "Marcus gets the newsletter at marcus@acme.example.": "ungrounded: "
        "'marcus@acme.example' is in no message and no fact shown",
        "Marcus reads the roadmap at acme-labs.dev/plans.": "ungrounded: "
        "'acme-labs.dev/plans' is in no message and no fact shown",
    }
    assert summary.actions_rejected == 4 and summary.actions_ungrounded == 4
    assert ("actions rejected by the guard (of them ungrounded)", "4 (4)") in summary.counter_rows()


@pytest.mark.slow
def test_a_name_from_a_fact_shown_or_the_chunks_other_episode_is_grounded_one_unsaid_is_not(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=3, episode_threshold=1, grounding="names")
    add(conn, make_episode("c", "s1", "My sister Mia climbs.", at(2025, 3, 1), speaker="Dana"))
    consolidate(
        db,
        ScriptedModel({"s1": lambda r: answer(fact("Dana's sister is Mia.", "relationship"))}),
        embedder,
        one,
    )
    add(
        conn,
        make_episode("c", "s2", "She beat me at bouldering.", at(2025, 3, 2), speaker="Dana"),
        make_episode("c", "s3", "Lunch with Priya was fun.", at(2025, 3, 3), speaker="Dana"),
    )
    model = ScriptedModel(
        {
            "s2": lambda r: answer(
                fact("Dana lost to Mia at bouldering.", "interest", episodes=["E1"]),
                # Priya is in E2: a small model cites the wrong one of two
                fact("Dana had lunch with Priya.", "relationship", episodes=["E1"]),
                fact("Dana lost to Jess at bouldering.", "interest", episodes=["E1"]),
            )
        }
    )
    consolidate(db, model, embedder, one)
    assert set(active(conn, "c")) == {
        "Dana's sister is Mia.",
        "Dana lost to Mia at bouldering.",
        "Dana had lunch with Priya.",
    }


def test_grounding_off_writes_what_the_model_says(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[make_episode("c", f"o{i}", f"I code, day {i}.", at(2025, 3, i)) for i in range(1, 4)],
    )
    model = ScriptedModel({"o1": lambda r: answer(fact("User works at Google.", "identity"))})
    summary = consolidate(db, model, embedder, with_settings(settings, grounding="off"))
    assert set(active(conn, "c")) == {"User works at Google."}
    assert summary.actions_ungrounded == 0


def test_a_fact_that_leans_on_it_is_refused_and_of_two_sentences_the_first_is_written(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        make_episode(
            "c",
            "p1",
            "The new job? I love it. The lab is old, I fix burners. Mia climbs overhangs, "
            "two years now; she is much better at it than I am.",
            at(2025, 3, 1),
            speaker="Dana",
        ),
        make_episode("c", "p2", "I teach chemistry now.", at(2025, 3, 2), speaker="Dana"),
        make_episode("c", "p3", "Weekdays: short answers please.", at(2025, 3, 3), speaker="Dana"),
    )
    model = ScriptedModel(
        {
            "p1": lambda r: answer(
                fact("Dana loves it.", "preference"),
                fact("Dana loves it. The lab is old, and she keeps fixing burners.", "experience"),
                fact("She keeps fixing burners in the old lab.", "experience"),
                fact(CLIMB + " Dana is much better at it than she is.", "interest"),
            )
        }
    )
    summary = consolidate(db, model, embedder, settings)
    assert set(active(conn, "c")) == {CLIMB}  # the inverted second sentence is not written
    log = decisions(conn)
    reasons = sorted(d["reason"] for d in log if d["action"] == "rejected")
    assert reasons == [
        "not self-contained: 'it' refers to nothing in the sentence",
        "not self-contained: 'it' refers to nothing in the sentence",
        "not self-contained: starts with 'She'",
    ]
    (written,) = [d for d in log if d["action"] == "new"]
    assert written["reason"].startswith("kept the first of its 2 sentences")
    assert summary.actions_ungrounded == 0


CLIMB = "Mia has been climbing overhangs for about two years."


def test_one_sentence_under_two_categories_in_one_answer_is_one_fact_with_both_sources(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    e1, e2, _ = add(
        conn,
        make_episode("c", "k1", "Mia climbs overhangs, two years now.", at(2025, 3, 1)),
        make_episode("c", "k2", "Two years of overhangs for Mia!", at(2025, 3, 2)),
        make_episode("c", "k3", "Rain all day here.", at(2025, 3, 3)),
    )
    model = ScriptedModel(
        {
            "k1": lambda r: answer(
                fact(CLIMB, "preference", keywords=["climbing"], episodes=["E1"]),
                fact(
                    CLIMB.replace("Mia has", "Mia  HAS").rstrip("."),
                    "interest",
                    keywords=["Mia"],
                    episodes=["E2"],
                ),
            )
        }
    )
    summary = consolidate(db, model, embedder, with_settings(settings, chunk_size=3))
    rows = active(conn, "c")
    assert list(rows) == [CLIMB]
    assert rows[CLIMB]["category"] == "preference"  # the first item's
    assert rows[CLIMB]["source_episodic_ids"] == [e1.id, e2.id]
    assert summary.dedupe_merges == 1


def test_one_sentence_under_another_category_a_night_later_reinforces_the_first(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    e1, e2 = add(
        conn,
        make_episode("c", "t1", "Mia climbs overhangs, two years now.", at(2025, 3, 1)),
        make_episode("c", "t2", "Still two years of overhangs for Mia.", at(2025, 3, 9)),
    )
    model = ScriptedModel(
        {
            "t1": lambda r: answer(fact(CLIMB, "preference", keywords=["climbing", "overhangs"])),
            "t2": lambda r: answer(fact(CLIMB, "interest", keywords=["Mia", "sport", "years"])),
        }
    )
    consolidate(db, model, embedder, one)
    rows = active(conn, "c")
    assert list(rows) == [CLIMB]
    assert rows[CLIMB]["category"] == "preference"
    assert rows[CLIMB]["source_episodic_ids"] == [e1.id, e2.id]
    merged = [d for d in decisions(conn) if d["action"] == "merge"]
    assert len(merged) == 1 and merged[0]["similarity"] == 1.0


def test_two_sentences_a_night_apart_that_say_different_things_stay_two_facts(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    add(
        conn,
        make_episode("c", "d1", "Mia climbs overhangs, two years now.", at(2025, 3, 1)),
        make_episode("c", "d2", "Mia also paints on Sundays.", at(2025, 3, 9)),
    )
    model = ScriptedModel(
        {
            "d1": lambda r: answer(fact(CLIMB, "interest")),
            "d2": lambda r: answer(fact("Mia paints on Sundays.", "interest")),
        }
    )
    summary = consolidate(db, model, embedder, one)
    assert set(active(conn, "c")) == {CLIMB, "Mia paints on Sundays."}
    assert summary.dedupe_merges == 0


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("Big news: I'm moving to Manchester in July.", "starts with 'Big news'"),
        ("Yes, chemistry and a bit of physics.", "starts with 'Yes'"),
        ("Dana says my lab is old.", "says 'my', a message not a fact about someone"),
        (
            "James asked if John is looking forward to any new games.",
            "says 'asked if', a question not a fact about someone",
        ),
        ("She teaches chemistry.", "starts with 'She'"),
        # a message's "we", whoever they are (the second look, LongMemEval's sessions)
        (
            "We're all looking forward to a fun day out, getting some exercise, and supporting "
            "a great cause.",
            "starts with 'We'",
        ),
        ("Our shop opens at seven on Sundays.", "starts with 'Our'"),
        ("Dana loves it.", "'it' refers to nothing in the sentence"),
        ("Being a mom is awesome.", "names no one it is about"),
        # an assistant's answer written as a fact (LongMemEval's sessions, the default model)
        (
            "Sorry to hear that your audition didn't go as well as you had hoped.",
            "starts with 'Sorry'",
        ),
        (
            "Warming up before playing tennis is crucial to prevent injuries and prepare your "
            "muscles for the game.",
            "names no one it is about",
        ),
        (
            "Staying organized and managing your time effectively is a crucial skill to master.",
            "names no one it is about",
        ),
    ],
)
def test_a_message_copied_as_a_fact_is_not_self_contained(item: str, reason: str) -> None:
    assert not_self_contained(item) == f"not self-contained: {reason}"


@pytest.mark.parametrize(
    "item",
    [
        "Light Cardio**: Jog around the court or do some jumping jacks to warm up.",
        "**MCU Films**: The user has watched four of them this year.",
        "- The user keeps old sneakers under the bed.",
    ],
)
def test_an_answers_markdown_copied_as_a_fact_is_not_a_sentence(item: str) -> None:
    assert (degenerate_reason(item) or "").startswith("degenerate fact: markdown")


def test_an_answers_heading_copied_as_a_fact_is_not_a_sentence() -> None:
    # LongMemEval: the default model copied an assistant's headings
    for heading in ("New Nike Running Shoe Models:", "Types of External Hard Drives: "):
        assert (degenerate_reason(heading) or "").startswith("degenerate fact: a heading")
    assert degenerate_reason("Nike has been the user's favourite brand for running shoes.") is None


def test_a_fact_copied_from_a_message_shown_cut_short_is_refused() -> None:
    """The second look shows a long message cut, ending "[…]"; the model copied the cut."""
    copied = "The user will have the opportunity to meet the shelter's volunteers […]"
    assert degenerate_reason(copied) == (
        "degenerate fact: copied from a message shown cut short ([…])"
    )
    assert degenerate_reason("The user will meet the shelter's volunteers.") is None


@pytest.mark.parametrize(
    ("item", "refused"),
    [
        # an assistant's reply copied as a fact (LongMemEval, the default model)
        ("Reaching the Gold level is a great goal!", True),
        ("A Starbucks fan, eh?", True),
        ("Sephora is a beauty lover's paradise!", True),
        ("You're welcome!", True),
        # about the one who speaks: a statement, whatever its mark
        ("The user is now on page 220, and it's amazing how much The user has learned!", False),
        ("Dana got the job at the sixth-form college!", False),
        ("Sephora is a beauty lover's paradise.", False),  # not a reply by its mark
    ],
)
def test_an_exclamation_or_a_question_about_no_one_who_speaks_is_a_reply(
    item: str, refused: bool
) -> None:
    assert (exclaimed(item, ["user", "assistant", "Dana"]) is not None) is refused


@pytest.mark.parametrize(
    ("item", "refused"),
    [
        # a person's message under their name, then restated (LoCoMo, the second look)
        ("James it’s a pity James didn’t get a chance to take a photo with them.", True),
        ("Caroline this support network has been amazing.", True),
        ("John yes, these have been with him on his journey since the beginning.", True),
        ("Caroline, those lessons are great - self-acceptance and finding support are key.", True),
        ("Caroline Caroline is so lucky to have such a great support system.", True),
        ("Gina Lopez wow, the studio looks amazing.", True),
        # a statement about them, however it goes on
        ("Nate thanks Joanna for the recipe.", False),
        ("James, Maria and Ana went hiking in the Alps.", False),
        ("Caroline's support network has been amazing.", False),
        ("Together, we can make a real difference.", False),  # no one's name: another rule's
    ],
)
def test_a_message_copied_under_its_speakers_name_is_not_a_fact(item: str, refused: bool) -> None:
    speakers = ["James", "Caroline", "John", "Gina Lopez", "Nate", "Joanna"]
    assert (copied_under_name(item, speakers) is not None) is refused


@pytest.mark.parametrize(
    "item",
    [
        "Dana teaches chemistry and a bit of physics in Manchester.",
        'Dana is reading "I Am Malala" for her book club.',
        "Audrey believes pets bring joy to our lives.",
        "Melanie carves out me-time each day for running.",
        "The user wants short answers on weekdays.",
        "Tim asked John for book recommendations.",
        "Painting is a fun way for Melanie to express her feelings.",  # a gerund, then a name
        "Sorrento is where Dana spent her honeymoon.",
    ],
)
def test_a_statement_about_someone_is_self_contained(item: str) -> None:
    assert not_self_contained(item) is None


MUSEUM = "Yesterday I took the kids to the museum. They were stoked for the dinosaur exhibit!"


@pytest.mark.parametrize("check_speaker", [True, False])
def test_one_speakers_words_given_to_the_other_go_back_to_the_speaker_unless_a_pronoun_stays(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    check_speaker: bool,
) -> None:
    tag = "on" if check_speaker else "off"
    add(
        conn,
        make_episode(tag, f"w1{tag}", MUSEUM, at(2025, 3, 1), speaker="Melanie"),
        make_episode(
            tag,
            f"w2{tag}",
            f"({tag}) Being a mom is awesome. I'm creating a library for when I have kids.",
            at(2025, 3, 2),
            speaker="Caroline",
        ),
        make_episode(
            tag, f"w3{tag}", f"({tag}) Lovely, Caroline!", at(2025, 3, 3), speaker="Melanie"
        ),
    )
    given = "Caroline's kids were stoked for the dinosaur exhibit."
    kept_hers = "Caroline took her kids to the museum yesterday."  # "her" would stay Caroline's
    right = {
        "Caroline is creating a library for when she has kids.",
        "Caroline and Melanie talked about a dinosaur exhibit.",  # two people: either said it
    }
    model = ScriptedModel(
        {
            f"w1{tag}": lambda r: answer(
                fact(given, keywords=["Caroline", "kids"]), *(fact(f) for f in [kept_hers, *right])
            )
        }
    )
    summary = consolidate(
        db, model, embedder, with_settings(settings, grounding="names", check_speaker=check_speaker)
    )

    if not check_speaker:
        assert set(active(conn, tag)) == {given, kept_hers, *right}
        return
    melanies = "Melanie's kids were stoked for the dinosaur exhibit."
    assert set(active(conn, tag)) == {melanies, *right}
    (written,) = [d for d in decisions(conn) if d["proposed_fact"] == given]
    assert written["action"] == "new"
    (keywords,) = conn.execute(  # type: ignore[misc]
        "SELECT keywords FROM semantic_memory WHERE id = %s", (written["fact_id"],)
    ).fetchone()
    assert keywords == ["Melanie", "kids"]
    assert written["reason"].startswith(
        "given to Melanie: the messages nearest to it are Melanie's, not Caroline's"
    )
    (refused,) = [d for d in decisions(conn) if d["action"] == "rejected"]
    assert refused["proposed_fact"] == kept_hers
    assert refused["reason"] == (
        "ungrounded: 'Caroline' is not whom it is about: the messages nearest to it are Melanie's"
    )
    assert summary.actions_ungrounded == 1


def test_a_fact_shown_about_one_speaker_is_refused_back_with_the_others_name(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=2, episode_threshold=1, grounding="names")
    sketches = "{} is turning his childhood sketches into a computer game."
    add(
        conn,
        make_episode(
            "g",
            "j1",
            "I'm turning my childhood sketches into a game!",
            at(2025, 3, 1),
            speaker="James",
        ),
        make_episode(
            "g", "j2", "James, that's so cool. I play chess.", at(2025, 3, 1), speaker="John"
        ),
        make_episode(
            "g", "j3", "My sketches are coming to life, John.", at(2025, 3, 9), speaker="James"
        ),
        make_episode(
            "g", "j4", "Cool! I won a chess game at the club.", at(2025, 3, 9), speaker="John"
        ),
    )
    model = ScriptedModel(
        {
            "j1": lambda r: answer(fact(sketches.format("James"))),
            "j3": lambda r: answer(
                fact(sketches.format("John")), fact("John won a chess game at the club.")
            ),
        }
    )
    consolidate(db, model, embedder, one)

    assert set(active(conn, "g")) == {
        sketches.format("James"),
        "John won a chess game at the club.",
    }
    (refused,) = [d for d in decisions(conn) if d["action"] == "rejected"]
    assert refused["reason"] == (
        "ungrounded: 'John' is not whom it is about: a fact shown says it of James"
    )


def test_an_image_caption_copied_from_a_message_is_not_written(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        make_episode(
            "i",
            "i1",
            "I'm turning my love of dance into a business. [image: a photo of dancers]",
            at(2025, 3, 1),
            speaker="Jon",
        ),
    )
    model = ScriptedModel(
        {
            "i1": lambda r: answer(
                fact(
                    "Jon is turning his love of dance into a business. [image: a photo of dancers]"
                )
            )
        }
    )
    consolidate(db, model, embedder, with_settings(settings, episode_threshold=1))
    assert set(active(conn, "i")) == {"Jon is turning his love of dance into a business."}


@pytest.mark.slow
def test_a_fact_about_what_only_the_assistant_names_is_its_advice_and_is_refused(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    # LongMemEval: the default model copied an assistant's product suggestions as facts
    episode = make_episode("u", "pets", "Hi, I'm Dana. Any ideas to keep Max busy?", at(2023, 5, 2))
    episode.messages.append(
        Message(
            speaker="assistant",
            text="Hi Dana! The Furbo Dog Camera lets you check on Max; Kong toys help too.",
        )
    )
    add(conn, episode)
    suggested = "Furbo Dog Camera lets Dana check on Max while away."
    kept = ("Dana has a dog named Max.", "Max needs ideas to keep busy.")
    model = ScriptedModel(
        {"pets": lambda r: answer(fact(suggested, "preference"), *(fact(f) for f in kept))}
    )
    consolidate(db, model, embedder, with_settings(settings, chunk_size=1, episode_threshold=1))

    assert set(active(conn, "u")) == set(kept)  # Dana and Max are named by the one who speaks
    (refused,) = [d for d in decisions(conn) if d["action"] == "rejected"]
    assert refused["proposed_fact"] == suggested
    assert "named by no one but the assistant" in refused["reason"]
