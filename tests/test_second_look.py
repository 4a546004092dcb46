"""A person's message that no item of the chunk's answer covers is shown to the model again,
alone (the second look): what it states is written as a fact, and a change it states ends the
known fact it replaces, in event time, with lineage. Agents' messages, questions and what the
answer already covers are never asked about."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta

import psycopg
import pytest

from slowwave.models import interrupt
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Message
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.plan import PlannedAction
from slowwave.models.second_look import ShownMessage
from slowwave.models.settings import Settings
from slowwave.models.tenant import conversation_key
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.second_look import about_the_speaker, uncovered_messages
from tests.fix_episodes import (
    active,
    add,
    at,
    decisions,
    episodes_state,
    facts,
    make_episode,
    with_settings,
)
from tests.fix_models import ScriptedModel, fact
from tests.test_changes import two_sessions
from tests.test_consolidation import answer

MOVE = "Big news: I'm moving to Manchester in July for a new job at a college."
JAPAN = "I'm also saving for a trip to Japan with my sister this year."


def _stated(*sentences: str) -> list[PlannedAction]:
    when = at(2023, 5, 20)
    return [
        PlannedAction(
            action=FactAction.new, proposed=FactAction.new, fact=s, episode_ids=[], event_time=when
        )
        for s in sentences
    ]


def test_only_a_persons_uncovered_messages_that_say_something_are_looked_at_again() -> None:
    episode = make_episode("dana", "d2", MOVE, at(2023, 5, 20))
    episode.messages += [
        Message(
            speaker="assistant",
            text="That's exciting! I will remember your new job at the college.",
        ),
        Message(speaker="user", text="Will you remind me to pack the lab notes?"),
        Message(speaker="user", text="Thanks, bye!"),
        Message(speaker="user", text=JAPAN),
    ]
    found = uncovered_messages([episode], _stated("Dana is saving for a trip to Japan."), 6)
    assert [u.message.text for u in found] == [MOVE]
    assert uncovered_messages([episode], [], 6)[-1].message.text == JAPAN  # oldest first
    assert len(uncovered_messages([episode], [], 1)) == 1  # the cap: the one that says most


def test_a_statement_passed_over_in_a_covered_message_is_looked_at_again() -> None:
    """LongMemEval's way: the first sentence of a message is written as a fact, the answer to a
    later question is in its second, after which the person asks something."""
    said = (
        "I was thinking of getting Emily to audition for a role, I'll definitely encourage her "
        "to give it a shot. The play I attended was actually a production of The Glass "
        "Menagerie, have you heard of it? Do you have any tips for her audition?"
    )
    episode = make_episode("pat", "p1", said, at(2023, 5, 20))
    stated = _stated("Pat is thinking of getting Emily to audition for a role.")
    (found,) = uncovered_messages([episode], stated, 6)
    assert found.message.text == said
    # what is shown: the statement no item covers, not the one written nor the question
    assert found.statements == (
        "The play I attended was actually a production of The Glass Menagerie, have you heard "
        "of it?"
    )
    written = _stated(*stated_facts(stated), "Pat attended a production of The Glass Menagerie.")
    assert uncovered_messages([episode], written, 6) == []


def test_a_question_that_opens_with_a_contraction_is_not_looked_at_again() -> None:
    """LongMemEval's playlist question: the message opens by asking ("What's a good ...?") and
    states the answer after it; only the statement is shown."""
    playlist = (
        "Also, by the way, I've been listening to a playlist I created on Spotify, called "
        "Summer Vibes."
    )
    said = (
        "What's a good music streaming service that can help me discover new artists? "
        + playlist
        + " Who's the best lo-fi artist on it, in your view?"
    )
    episode = make_episode("pat", "p1", said, at(2023, 5, 20))
    (found,) = uncovered_messages([episode], [], 6)
    assert found.statements == playlist


def test_what_the_second_look_states_of_no_one_of_the_speakers_is_not_taken() -> None:
    """A remark about no one of the speaker's is not a fact about them (an assistant's opening
    line, which the default model wrote as facts: "Podcasts are an excellent way to stay
    informed!")."""
    shown = ShownMessage(
        "The user", "By the way, I've been listening to a playlist I made on Spotify, Summer Vibes."
    )
    assert about_the_speaker("The user made a Spotify playlist called Summer Vibes.", shown)
    assert about_the_speaker("Summer Vibes is a playlist of chill tracks.", shown)  # theirs
    assert not about_the_speaker("Podcasts are an excellent way to stay informed!", shown)
    assert not about_the_speaker("Music discovery is a great topic!", shown)
    sister = ShownMessage("Dana", "My sister Mia is moving to Porto in May.")
    assert about_the_speaker("Mia is moving to Porto in May.", sister)  # someone she names


def test_a_message_is_looked_at_again_without_the_other_speakers_message_before_it(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """Shown the message a person's message answers, the small model wrote that message's news
    under their label ("Melanie went to an LGBTQ+ pride parade.", Caroline's): a message is
    shown alone, and nothing of another speaker's is the person's."""
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    said = "Last week I went to an LGBTQ+ pride parade with my friends."
    episode = make_episode("cm", "cm1", said, at(2023, 7, 3), speaker="Caroline")
    episode.messages.append(
        Message(
            speaker="Melanie",
            text="That sounds awesome! By the way, I signed up for a pottery class in June.",
        )
    )
    add(conn, episode)
    parade = "Caroline went to an LGBTQ+ pride parade last week."
    model = ScriptedModel(
        {"cm1": lambda r: answer(fact(parade))},
        # the small model's way: whatever the message's part of the request says is theirs
        second_look=lambda shown: [
            (said, kind)
            for word, said, kind in (
                ("parade", "Melanie went to an LGBTQ+ pride parade.", "experience"),
                ("pottery", "Melanie signed up for a pottery class in June.", "interest"),
            )
            if word in shown
        ],
    )
    consolidate(db, model, embedder, one)

    (look,) = _looks(model)
    assert "pottery class" in look.user and "parade" not in look.user
    assert set(active(conn, "cm")) == {parade, "Melanie signed up for a pottery class in June."}


def stated_facts(actions: Sequence[PlannedAction]) -> list[str]:
    return [a.fact for a in actions if a.fact]


@pytest.mark.slow
def test_a_change_the_answer_passed_over_is_found_by_the_second_look_and_ends_the_old_fact(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    moved = make_episode("dana", "d2", MOVE, at(2023, 5, 20))
    moved.messages.append(Message(speaker="user", text=JAPAN))
    moved.end_at = at(2023, 5, 20) + timedelta(minutes=1)
    add(
        conn,
        make_episode(
            "dana", "d1", "Hi! I'm Dana. I teach chemistry at a school in Leeds.", at(2023, 3, 4)
        ),
        moved,
    )
    model = ScriptedModel(
        {
            "d1": lambda r: answer(fact("Dana teaches chemistry at a school in Leeds.")),
            # the default model's way: the known fact again, the move passed over
            "d2": lambda r: answer(
                fact("Dana teaches chemistry at a school in Leeds."),
                fact("Dana is saving for a trip to Japan with Dana's sister.", "goal"),
            ),
        },
        second_look=lambda text: (
            [("Dana is moving to Manchester in July for a new job at a college.", "identity")]
            if "Manchester" in text
            else []
        ),
        out_of_date=lambda known, later: "Leeds" in known and "Manchester" in later,
    )
    summary = consolidate(db, model, embedder, one)

    now = active(conn, "dana")
    manchester = "Dana is moving to Manchester in July for a new job at a college."
    assert set(now) == {manchester, "Dana is saving for a trip to Japan with Dana's sister."}
    leeds = next(f for f in facts(conn, "dana") if "Leeds" in f["fact"])
    assert now[manchester]["supersedes_id"] == leeds["id"]
    assert leeds["invalid_at"] == now[manchester]["valid_at"] == moved.end_at
    assert summary.second_look_messages == 1 and summary.second_look_facts == 1
    assert summary.changes_found == summary.facts_updated == 1
    logged = next(d for d in decisions(conn) if d["proposed_fact"] == manchester)
    assert logged["action"] == "update" and "second look" in logged["reason"]
    # both short answers were asked with a cap of their own, far below the runtime's
    capped = {r.purpose: r.max_tokens for r in model.requests if r.max_tokens is not None}
    assert set(capped) == {Purpose.second_look, Purpose.change}
    assert all(cap < one.llm.max_tokens // 2 for cap in capped.values())


@pytest.mark.slow
def test_a_count_a_message_states_again_ends_the_known_count_without_asking_the_model(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    # grounding as shipped: the restated sentence's words are the message's
    one = with_settings(settings, chunk_size=1, episode_threshold=1, grounding="names")
    first = "I've attended three sessions of the bereavement support group so far."
    later = make_episode(
        "grief",
        "g2",
        "I've attended five sessions of the bereavement support group now, it really helps.",
        at(2023, 6, 1),
    )
    add(conn, make_episode("grief", "g1", first, at(2023, 3, 4)), later)
    three = "The user attended three sessions of the bereavement support group."
    model = ScriptedModel(
        {
            "g1": lambda r: answer(fact(three, "experience")),
            # the default model's way: something else of the message, the count passed over
            "g2": lambda r: answer(fact("The user finds the support group helpful.", "preference")),
        },
        second_look=lambda text: [],  # the model's second look finds nothing either
    )
    summary = consolidate(db, model, embedder, one)

    now = active(conn, "grief")
    five = (
        "The user has attended five sessions of the bereavement support group now, it really helps."
    )
    assert set(now) == {five, "The user finds the support group helpful."}
    ended = next(f for f in facts(conn, "grief") if f["fact"] == three)
    assert now[five]["supersedes_id"] == ended["id"]
    assert ended["invalid_at"] == now[five]["valid_at"] == later.end_at
    assert summary.facts_updated == 1
    logged = next(d for d in decisions(conn) if d["proposed_fact"] == five)
    assert logged["action"] == "update" and "second look" in logged["reason"]
    assert "without the model" in logged["reason"]


@pytest.mark.slow
def test_a_count_said_again_in_a_message_an_item_covers_without_the_number_still_ends_the_old(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    # LongMemEval: the later answer wrote the message's beans and French press, not its ratio
    six = "The user uses 1 tablespoon of coffee for every 6 ounces of water in their French press."
    beans = "The user is excited to use their new beans in their French press."
    two_sessions(
        db,
        conn,
        embedder,
        settings,
        (
            "In my French press, 1 tablespoon of coffee for every 6 ounces of water is perfect.",
            "I'm excited to use my new beans in my French press - I've got my ratio down to a "
            "science: 1 tablespoon of coffee for every 5 ounces of water.",
        ),
        (six, beans),
        out_of_date=False,
    )

    now = active(conn, "u")
    (five,) = [f for f in now if "5 ounces" in f]
    assert set(now) == {five, beans}
    ended = next(f for f in facts(conn, "u") if f["fact"] == six)
    assert now[five]["supersedes_id"] == ended["id"]
    assert ended["invalid_at"] == now[five]["valid_at"] == at(2023, 5, 20)


def test_the_old_count_written_again_beside_a_count_said_again_is_refused_not_left_active(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """LongMemEval's way: the later chunk's answer writes the known count once more, citing the
    message that says another one; the update that message makes stands alone."""
    one = with_settings(settings, chunk_size=1, episode_threshold=1, grounding="names")
    later = make_episode(
        "grief",
        "g2",
        "I remember attending five sessions and finding it really helpful in processing my "
        "emotions.",
        at(2023, 10, 30),
    )
    add(
        conn,
        make_episode("grief", "g1", "I've attended three sessions of the group.", at(2023, 5, 11)),
        later,
    )
    three = "The user attended three sessions of the bereavement support group."
    again = (
        "The user attended three sessions of the bereavement support group, and it really "
        "helped them process their emotions."
    )
    model = ScriptedModel(
        {
            "g1": lambda r: answer(fact(three, "experience")),
            "g2": lambda r: answer(fact(again, "experience")),
        },
        second_look=lambda text: [],
    )
    consolidate(db, model, embedder, one)

    now = active(conn, "grief")
    five = (
        "The user remembers attending five sessions and finding it really helpful in processing "
        "their emotions."
    )
    assert set(now) == {five}
    (refused,) = [d for d in decisions(conn) if d["action"] == "rejected"]
    assert refused["proposed_fact"] == again
    assert "counts again" in refused["reason"] and five in refused["reason"]


@pytest.mark.slow
def test_a_statement_the_second_look_leaves_open_that_names_a_value_is_restated_without_it(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """LongMemEval's way: shown the play, the small model writes the message before it again
    under its label; the statement is the user's own, and names the play. A count, and a
    message the answer states nothing of, stay unsaid."""
    one = with_settings(settings, chunk_size=1, episode_threshold=1, grounding="names")
    episode = make_episode(
        "u", "p1", "I went to a play at the community theater last week.", at(2023, 5, 20)
    )
    episode.messages += [
        Message(speaker="assistant", text="How lovely! Which play was it?"),
        Message(
            speaker="user",
            text="The play I attended was actually a production of The Glass Menagerie, have "
            "you heard of it? I'll definitely check out some of those local theater groups. "
            "I still have the Tennessee Williams book you lent me last year. Maybe I can "
            "find another good play again soon. I've seen four plays at the Lyric so far.",
        ),
        Message(speaker="assistant", text="Enjoy the theater!"),
        # the answer states nothing of it: left as the model judged it
        Message(speaker="user", text="I also booked tickets to Hamilton in Chicago for June."),
    ]
    add(conn, episode)
    model = ScriptedModel(
        {"p1": lambda r: answer(fact("The user went to a play at the community theater."))},
        second_look=lambda text: (
            [("The user went to a play at the community theater.", "interest")]
            if "Glass Menagerie" in text
            else []
        ),
    )
    summary = consolidate(db, model, embedder, one)

    play = "The play the user attended was actually a production of The Glass Menagerie."
    assert set(active(conn, "u")) == {"The user went to a play at the community theater.", play}
    assert summary.second_look_restated == 1
    (written,) = [d for d in decisions(conn) if d["proposed_fact"] == play]
    assert written["action"] == "new"
    assert active(conn, "u")[play]["valid_at"] == episode.end_at


BAKERY = "Theo and I are opening a second bakery by the river in Lyon next spring."


def _two_conversations(
    conn: psycopg.Connection,
    *,
    omar: str = "omar",
    dana_text: str = MOVE,
    omar_text: str = BAKERY,
    dana_more: Sequence[str] = (),
    omar_more: Sequence[str] = (),
) -> ScriptedModel:
    """Dana's and Omar's chats, each one episode whose answer passes over its news (and the
    messages ``*_more`` after it), and a model whose second look states the news."""
    episodes = [
        make_episode("dana", "sd1", dana_text, at(2023, 5, 20)),
        make_episode(omar, "so1", omar_text, at(2023, 5, 21)),
    ]
    for episode, more in zip(episodes, (dana_more, omar_more), strict=True):
        episode.messages += [Message(speaker="user", text=text) for text in more]
        episode.end_at = episode.start_at + timedelta(minutes=len(more))
    add(conn, *episodes)
    return ScriptedModel(
        {
            "sd1": lambda r: answer(fact("Dana likes chemistry.", "preference")),
            "so1": lambda r: answer(fact("Omar likes baking bread.", "preference")),
        },
        second_look=lambda text: (
            [("Dana is moving to Manchester in July for a new job at a college.", "identity")]
            if "Manchester" in text
            else [("Omar is opening a second bakery by the river in Lyon.", "goal")]
            if "Lyon" in text
            else []
        ),
    )


def _looks(model: ScriptedModel) -> list[GenerationRequest]:
    return [r for r in model.requests if r.purpose is Purpose.second_look]


def _chunk_costs(conn: psycopg.Connection) -> tuple[int, int, int]:
    row = conn.execute(
        "SELECT sum(prompt_tokens), sum(completion_tokens), sum(model_calls) "
        "FROM consolidation_chunks"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_chunks_of_one_tenant_share_a_second_look_request_and_each_keeps_its_own_facts(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    model = _two_conversations(conn)
    summary = consolidate(db, model, embedder, one)

    # one request shows both chunks' messages (M1, M2), so its system prompt is sent once
    (look,) = _looks(model)
    assert "Manchester" in look.user and "Lyon" in look.user
    assert summary.second_look_messages == 2 and summary.second_look_facts == 2
    dana, omar = active(conn, "dana"), active(conn, "omar")
    assert "Dana is moving to Manchester in July for a new job at a college." in dana
    assert "Omar is opening a second bakery by the river in Lyon." in omar
    assert not any("Lyon" in f for f in dana) and not any("Manchester" in f for f in omar)
    moved = dana["Dana is moving to Manchester in July for a new job at a college."]
    assert moved["source_episodic_ids"] == [episodes_state(conn)["sd1"]["id"]]
    # the chunks' rows bill every request once, the shared one split between them
    answers = model.generate(model.requests[:])  # the same requests, answered again alike
    billed = (
        sum(a.prompt_tokens for a in answers),
        sum(a.completion_tokens for a in answers),
        len(answers),
    )
    assert _chunk_costs(conn) == billed
    assert (summary.prompt_tokens, summary.completion_tokens, summary.model_calls) == billed


def test_a_second_look_request_never_shows_two_tenants_messages(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    model = _two_conversations(conn, omar=conversation_key("omar", "acme"))
    consolidate(db, model, embedder, one)

    looks = _looks(model)
    assert len(looks) == 2
    assert sorted("Lyon" in r.user for r in looks) == [False, True]
    assert "Omar is opening a second bakery by the river in Lyon." in active(
        conn, conversation_key("omar", "acme")
    )


def test_chunks_whose_messages_together_pass_what_one_request_shows_are_asked_apart(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)  # six messages a request
    model = _two_conversations(
        conn,
        dana_more=[
            "My sister Mia climbs with me at the gym every Saturday morning.",
            "I bought a secondhand road bike from a colleague last month.",
            "I have started learning Portuguese with an evening class.",
        ],
        omar_more=[
            "Our apprentice Lea bakes the sourdough loaves every single night.",
            "I play chess in the park with my neighbour on Sundays.",
        ],
    )
    summary = consolidate(db, model, embedder, one)

    # four messages and three: seven, more than one request of six may show
    shown = [
        r.json_schema["$defs"]["MessageFact"]["properties"]["message"]["enum"]
        for r in _looks(model)
    ]
    assert sorted(len(ids) for ids in shown) == [3, 4]
    assert summary.second_look_messages == 7 and summary.second_look_facts == 2


@pytest.mark.slow
def test_with_the_second_look_off_the_passed_over_message_stays_unasked(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    off = with_settings(settings, chunk_size=1, episode_threshold=1, second_look=False)
    add(conn, make_episode("dana", "d2", MOVE, at(2023, 5, 20)))
    model = ScriptedModel(
        {"d2": lambda r: answer(fact("Dana likes chemistry.", "preference"))},
        second_look=lambda text: [("Dana is moving to Manchester in July.", "identity")],
    )
    summary = consolidate(db, model, embedder, off)

    assert set(active(conn, "dana")) == {"Dana likes chemistry."}
    assert summary.second_look_messages == 0
    assert all(r.purpose.value != "second_look" for r in model.requests)


@dataclass
class _HeldSecondLook(ScriptedModel):
    """Streams: every request is answered at once except the second look's, which never is
    (a model call in flight when the operator interrupts)."""

    held: list[Future[ModelAnswer]] = field(default_factory=list)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        futures: list[Future[ModelAnswer]] = []
        for request in requests:
            future: Future[ModelAnswer] = Future()
            if request.purpose is Purpose.second_look:
                self.requests.append(request)
                self.held.append(future)
            else:
                future.set_result(super().generate([request])[0])
            futures.append(future)
        return futures

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [future.result() for future in self.submit(requests)]


@pytest.mark.slow
def test_an_interrupt_stops_a_run_waiting_on_its_second_look_and_nothing_of_the_chunk_is_applied(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    one = with_settings(settings, chunk_size=1, episode_threshold=1)
    add(conn, make_episode("dana", "d2", MOVE, at(2023, 5, 20)))
    model = _HeldSecondLook({"d2": lambda r: answer(fact("Dana likes chemistry.", "preference"))})
    outcome: list[BaseException] = []

    def run() -> None:  # a shard's thread: no KeyboardInterrupt ever reaches it
        try:
            consolidate(db, model, embedder, one)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while not model.held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert model.held, "the second look was never asked"
    interrupt.request()
    try:
        worker.join(10)
        assert not worker.is_alive(), "the run still waits on the model after the interrupt"
    finally:
        interrupt.clear()
    assert [type(e) for e in outcome] == [interrupt.Interrupted]
    assert all(f.cancelled() for f in model.held)
    assert active(conn, "dana") == {}
    assert conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE claimed_by IS NOT NULL"
    ).fetchone() == (0,)
