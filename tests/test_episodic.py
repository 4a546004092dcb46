"""Episodic memories beside facts: what was said is found the moment it is recorded, through
every path, by its tenant only, never after a forget; a search reviews what it returns, a
context does not."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

import slowwave
from slowwave.models.consolidation import FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.memories import (
    asks_about_now,
    render_memories,
    search_memories,
    successors_first,
)
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact
from tests.fix_processes import run_cli, stop_db
from tests.fix_server import Served, make_key, start_server
from tests.test_consolidation import answer

NOW = datetime.now(UTC).replace(microsecond=0)
MOVE = "We finally moved to Manchester last week, the flat is near the canal."


def said(n: int, text: str, at: datetime = NOW, speaker: str = "Dana") -> dict[str, Any]:
    return {"message_id": f"m{n}", "timestamp": at.isoformat(), "speaker": speaker, "text": text}


def morning() -> list[dict[str, Any]]:
    return [
        said(1, MOVE),
        said(2, "How is the new job?", speaker="assistant"),
        said(3, "I love it. The lab is old though, and I keep fixing burners."),
    ]


def reviews(db: Database, conversation: str) -> list[int]:
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT reviews FROM episodic_memory WHERE conversation_id = %s ORDER BY start_at",
            (conversation,),
        ).fetchall()
    return [r[0] for r in rows]


def test_a_message_recorded_through_memory_is_the_next_searchs_episodic_memory(
    db: Database, settings: Settings
) -> None:
    conversation = f"dana-{uuid.uuid4().hex[:8]}"
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, morning())
        answer = memory.search("where does Dana live now", conversation)

    assert answer.hits == []  # nothing consolidated: no fact yet
    (found,) = answer.memories
    assert MOVE in found.text and found.pending and found.conversation_id == conversation
    assert found.messages == 3 and not found.excerpt and found.score > 0.99  # just reviewed
    assert found.ranks["vector"] == 1  # "live" is not said: the meaning finds it
    assert found.start_at == found.end_at == NOW


@pytest.mark.slow
def test_a_search_reviews_the_episodes_it_returns_and_a_context_reviews_none(
    db: Database, settings: Settings
) -> None:
    conversation = f"dana-{uuid.uuid4().hex[:8]}"
    earlier = NOW - timedelta(days=3)
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, [said(9, "My sister Mia climbs overhangs.", at=earlier)])
        memory.record(conversation, morning())
        shown = memory.context(conversation, 300, memories=2).context
        assert reviews(db, conversation) == [0, 0]
        assert shown.startswith("## Episodic Memories") and MOVE in shown and "Mia" in shown

        found = memory.search("Mia overhangs", conversation, memories=1)
        assert [m.reviews for m in found.memories] == [0]  # before this search's review
        assert reviews(db, conversation) == [1, 0]
        again = memory.search("Mia overhangs", conversation, memories=1)

    (mia,) = again.memories
    assert mia.reviews == 1 and "Mia" in mia.text and mia.retrievability > 0.9
    with db.connection() as conn:
        stability, reviewed_at = conn.execute(
            "SELECT review_stability, reviewed_at FROM episodic_memory WHERE id = %s", (mia.id,)
        ).fetchone()  # type: ignore[misc]
    assert stability > 0 and reviewed_at > NOW - timedelta(minutes=5)


@pytest.mark.slow
def test_an_episodic_memory_is_cut_to_its_budget_around_what_the_query_names_and_as_of_holds(
    db: Database, settings: Settings
) -> None:
    conversation = f"long-{uuid.uuid4().hex[:8]}"
    chatter = [said(n, f"Filler line number {n} about nothing much at all.") for n in range(40)]
    chatter[25] = said(25, "The newsletter goes to dana@example.org every Friday.")
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, chatter)
        later = [said(99, "The newsletter moved to Mondays.", at=NOW + timedelta(days=30))]
        memory.record(conversation, later)
        answer = memory.search("newsletter email", conversation, memory_tokens=60)
        before = memory.search("newsletter", conversation, as_of=NOW + timedelta(days=1))

    first = next(m for m in answer.memories if m.messages == 40)
    assert first.excerpt and "dana@example.org" in first.text and "…" in first.text
    assert len(first.text) <= 60 * 4 + 40
    assert [m.messages for m in before.memories] == [40]  # the later episode began after it


JOB = "I'm a research engineer at Anthropic, mostly building evaluation tools."


def _a_long_morning() -> list[dict[str, Any]]:
    """24 messages: the user's job early on, then cooking, then an email draft whose questions
    say "where", "does" and "the" and nothing of work."""
    lines = [
        ("user", "Morning! Quick intro before we start."),
        ("assistant", "Good morning, tell me about yourself."),
        ("user", JOB),
        ("assistant", "That sounds like interesting work."),
        ("user", "It is, most days are spent reading model transcripts."),
        ("assistant", "What would you like help with today?"),
        ("user", "A few things, let's start with dinner."),
        ("assistant", "Sure, what are you cooking?"),
    ]
    for dish in ["risotto", "ramen", "tacos", "curry"]:
        lines += [
            ("user", f"How long should {dish} simmer on a low flame?"),
            ("assistant", f"About twenty minutes for {dish}, stirring now and then."),
        ]
    lines += [
        ("user", "Now the draft to my landlord, can you look at it?"),
        ("assistant", "Of course, paste it in."),
        ("user", "Where does the greeting go, above or beside the date?"),
        ("assistant", "Above the greeting, on a line of its own."),
        ("user", "And where does the closing line go, does the signature follow it?"),
        ("assistant", "Yes: the closing line, then the signature below it."),
        ("user", "Does the subject line need the flat number in it?"),
        ("assistant", "It helps the landlord find it: put the flat number there."),
    ]
    return [said(n, text, speaker=who) for n, (who, text) in enumerate(lines)]


def test_an_excerpt_keeps_what_each_channel_found_and_the_neighbours_nearest_them() -> None:
    from slowwave.tasks.memories import excerpt, query_words

    assert query_words("Where does the user work?") == {"user", "work"}
    assert query_words("She works, worked, is working") == {"work"}
    chatter = [said(n, f"Filler line number {n} about nothing much.") for n in range(40)]
    chatter[6] = said(6, JOB)  # what the vector channel's nearest window holds
    chatter[30] = said(30, "The newsletter goes out every Friday.")  # the query's word
    text, cut = excerpt(chatter, "when is the newsletter", 60, window=(4, 8))
    assert cut and "Anthropic" in text and "newsletter" in text
    assert text.startswith("…") and text.count("…") == 3  # before, between and after them
    alone, _ = excerpt(chatter, "where does it go", 60)  # neither: the episode's start
    assert alone.startswith("Dana: Filler line number 0")


def test_a_long_answer_that_repeats_the_query_does_not_crowd_out_what_the_window_found() -> None:
    from slowwave.tasks.memories import excerpt

    advice = " ".join(
        f"Tip {n}: a running shoe for a marathon should fit well and feel light." for n in range(12)
    )
    chat = [said(n, f"Filler line number {n} about nothing much.") for n in range(20)]
    chat[4] = said(
        4,
        "I just bought my first pair of trail shoes in Leeds, after a month of reading reviews "
        "and trying on every pair the shop on Briggate had in my size.",
        speaker="user",
    )
    chat[12] = said(12, f"What running shoe for a marathon? {advice}", speaker="assistant")
    for budget in (150, 240, 400):  # the long answer (220 tokens) fits the larger two whole
        text, cut = excerpt(chat, "which running shoe for a marathon", budget, window=(2, 6))
        assert cut and "trail shoes in Leeds" in text, budget
    assert "Tip 11" in text  # at 400, room is left after them, and it is shown too


def test_asked_what_the_agent_said_the_agents_answer_is_shown_first_cut_to_its_start() -> None:
    """ "Which shoe did you recommend?" asks for the assistant's own answer: it goes first,
    whole where it fits and its start where it does not, instead of after the user's turns
    that the window found (the same chat as above)."""
    from slowwave.tasks.memories import asks_what_agent_said, excerpt

    advice = " ".join(
        f"Tip {n}: a running shoe for a marathon should fit well and feel light." for n in range(12)
    )
    chat = [said(n, f"Filler line number {n} about nothing much.") for n in range(20)]
    chat[4] = said(4, "I just bought my first pair of trail shoes in Leeds.", speaker="user")
    chat[12] = said(12, f"What running shoe for a marathon? {advice}", speaker="assistant")
    query = "Which running shoe did you recommend for a marathon?"
    text, cut = excerpt(chat, query, 150, window=(2, 6))  # the answer is 220 tokens
    assert cut and text.startswith("assistant: What running shoe for a marathon? Tip 0")
    assert text.endswith(" …") and "Leeds" not in text
    for budget in (240, 400):  # whole, and at 400 with room left after it
        text, cut = excerpt(chat, query, budget, window=(2, 6))
        assert cut and "Tip 11: a running shoe for a marathon should fit well" in text, budget
    assert "trail shoes in Leeds" in text
    assert asks_what_agent_said("I remember you told me about CITGO. Can you remind me?")
    assert asks_what_agent_said("What sealant did you say to use?")
    assert not asks_what_agent_said("Can you recommend a running shoe for a marathon?")
    assert not asks_what_agent_said("Which running shoe for a marathon did I buy?")


def test_an_excerpt_takes_the_messages_sharing_words_and_the_windows_in_turn() -> None:
    """A chat's second mention of what is asked is shown beside its first and the window's
    nearest messages, instead of the window's eight filling the budget after the first."""
    from slowwave.tasks.memories import excerpt, query_words

    assert query_words("a recipe, two recipes; stored in the store") >= {"recip", "stor"}
    chatter = [said(n, f"Filler line number {n} about nothing much.") for n in range(40)]
    chatter[2] = said(2, "Made bread for the bake sale on Sunday.")
    chatter[33] = said(33, "Another loaf of bread is rising now.")
    text, cut = excerpt(chatter, "How many times did I bake bread?", 60, window=(12, 20))
    assert cut and "bake sale" in text and "Another loaf of bread" in text
    assert "Filler line number 15" in text or "Filler line number 16" in text


def test_asked_to_be_reminded_the_agents_last_answer_on_it_is_shown() -> None:
    """ "Can you remind me…" asks what the agent said; of two of its answers sharing as many of
    the query's words, the later one (an updated version) is shown."""
    from slowwave.tasks.memories import asks_what_agent_said, excerpt

    rows = " ".join(f"Row {n}: agent {n} on shift {n % 4}." for n in range(14))
    chat = [
        said(n, f"Filler line number {n} about nothing much.", speaker="user") for n in range(12)
    ]
    chat[3] = said(3, f"Here is the shift rotation sheet. {rows}", speaker="assistant")
    chat[9] = said(9, f"Here is the updated shift rotation sheet. {rows}", speaker="assistant")
    query = "Can you remind me what the shift rotation sheet said for Admon?"
    text, cut = excerpt(chat, query, 150, window=(0, 8))
    assert cut and "the updated shift rotation sheet" in text
    assert "Here is the shift rotation sheet" not in text
    assert asks_what_agent_said("Can you remind me of the restaurant in Cihampelas Walk?")
    assert asks_what_agent_said("I'm going back to our previous chat about the one-shot.")


@pytest.mark.slow
def test_an_excerpt_shows_the_message_that_answers_not_one_that_shares_its_small_words(
    db: Database, settings: Settings
) -> None:
    conversation = f"job-{uuid.uuid4().hex[:8]}"
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, _a_long_morning())
        answer = memory.search("Where does the user work?", conversation, memory_tokens=60)

    (found,) = [m for m in answer.memories if m.messages == 24]
    assert found.excerpt and "Anthropic" in found.text, found.text
    assert "greeting" not in found.text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("episodic")
    keys = {
        "acme-write": make_key(home, "acme", "write"),
        "acme-admin": make_key(home, "acme", "admin"),
        "zeta-admin": make_key(home, "zeta", "admin"),
    }
    server = start_server(home)
    server.keys = keys
    try:
        yield server
    finally:
        server.stop()
        assert server.process.returncode is not None
        stop_db(home)


def _found_within(search: Any, text: str, seconds: float = 1.0) -> float:
    """Seconds from now until ``search()`` returns a memory holding ``text``; fails after."""
    started = time.monotonic()
    while True:
        if any(text in m["text"] for m in search()["memories"]):
            return time.monotonic() - started
        assert time.monotonic() - started < seconds, f"not found within {seconds} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_message_recorded_is_found_by_its_meaning_by_the_very_next_search(
    tmp_path: Path,
) -> None:
    """No word of the query is in the message: only the vector channel finds it, so the first
    search must not answer before the message is embedded."""
    key = make_key(tmp_path, "acme", "write")
    server = start_server(tmp_path)
    try:
        with server.client(key) as http:
            recorded = http.post("/v1/conversations/dana/messages", json={"messages": morning()})
            assert recorded.status_code == 200, recorded.text

            answer = http.get(
                "/v1/conversations/dana/search", params={"query": "where does she live"}
            )
            assert answer.status_code == 200, answer.text
            assert [MOVE in m["text"] for m in answer.json()["memories"]] == [True]
    finally:
        server.stop()
        run_cli(tmp_path, "db", "stop")


@pytest.mark.slow
def test_a_message_recorded_over_rest_is_found_within_a_second_by_its_tenant_only(
    served: Served,
) -> None:
    conversation = f"rest-{uuid.uuid4().hex[:8]}"
    path = f"/v1/conversations/{conversation}"
    with served.client(served.keys["acme-write"]) as http:
        recorded = http.post(f"{path}/messages", json={"messages": morning()})
        assert recorded.status_code == 200, recorded.text

        def search() -> Any:
            answer = http.get(f"{path}/search", params={"query": "Manchester canal flat"})
            assert answer.status_code == 200, answer.text
            return answer.json()

        _found_within(search, MOVE)
        body = search()
        assert body["hits"] == [] and body["memories"][0]["conversation_id"] == conversation
        markdown = http.get(
            f"{path}/search", params={"query": "Manchester", "format": "markdown", "fused": True}
        ).json()
        assert "## Episodic Memories\n## Memory 1 [rank: 1, score: 1.00]" in markdown["markdown"]
        assert [r["kind"] for r in markdown["ranked"]] == ["memory"]
    with served.client(served.keys["zeta-admin"]) as http:
        other = http.get(f"{path}/search", params={"query": "Manchester canal flat"})
        assert other.status_code == 404 and MOVE not in other.text
    with served.client(served.keys["acme-admin"]) as http:
        gone = http.delete(path, params={"reason": "erasure"})
        assert gone.status_code == 200, gone.text
        assert gone.json()["rows"]["episode_windows"] >= 1
        after = http.get(f"{path}/search", params={"query": "Manchester canal flat"})
        assert after.status_code in (404, 410) and MOVE not in after.text


@pytest.mark.slow
def test_a_message_recorded_over_mcp_is_found_within_a_second_by_search_memory(
    served: Served,
) -> None:
    conversation = f"mcp-{uuid.uuid4().hex[:8]}"

    async def session() -> float:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {served.keys['acme-write']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as web,
            Client(streamable_http_client(f"{served.url}/mcp", http_client=web)) as client,
        ):
            recorded = await client.call_tool(
                "add_memory", {"conversation_id": conversation, "messages": morning()}
            )
            assert not recorded.is_error
            started = time.monotonic()
            while True:
                found = await client.call_tool(
                    "search_memory", {"conversation_id": conversation, "query": "Manchester"}
                )
                assert not found.is_error
                if MOVE in str(found.structured_content):
                    return time.monotonic() - started
                assert time.monotonic() - started < 1.0
                await anyio.sleep(0.05)

    assert anyio.run(session) < 1.0


@pytest.mark.slow
def test_the_backlog_per_tenant_is_in_the_metrics_the_db_status_and_the_conversation(
    served: Served,
) -> None:
    conversation = f"backlog-{uuid.uuid4().hex[:8]}"
    with served.client(served.keys["acme-write"]) as http:
        before = time.time()
        assert http.post(
            f"/v1/conversations/{conversation}/messages", json={"messages": morning()}
        ).is_success
        status = http.get(f"/v1/conversations/{conversation}").json()
    with served.client(served.keys["zeta-admin"]) as http:
        theirs = http.get("/metrics").text
    with served.client(served.keys["acme-admin"]) as http:
        metrics = http.get("/metrics").text
    assert status["episodes_pending"] == 1
    waited = datetime.fromisoformat(status["oldest_pending_at"]).timestamp()
    assert before - 1 <= waited <= time.time()
    pending = [line for line in metrics.splitlines() if line.startswith("slowwave_episodes_pend")]
    assert any(line.startswith('slowwave_episodes_pending{tenant="acme"} ') for line in pending)
    (oldest,) = [line for line in pending if "oldest_seconds" in line and '"acme"' in line]
    assert 0 <= float(oldest.split()[-1]) < 600
    assert '"acme"' not in theirs  # another tenant's key sees its own backlog only
    shown = run_cli(served.home, "db", "status", "--json")
    assert shown.returncode == 0, shown.stderr
    backlog = {b["tenant"]: b["episodes_pending"] for b in json.loads(shown.stdout)["backlog"]}
    assert backlog["acme"] >= 1 and "zeta" not in backlog


def test_a_server_with_the_vector_channel_off_embeds_no_episode(
    db: Database, settings: Settings
) -> None:
    from slowwave.service import Caller, Service

    conversation = f"plain-{uuid.uuid4().hex[:8]}"
    off = settings.evolve(search_memory_vector_weight=0)
    service = Service(off, db, background=True)  # as `slowwave serve` runs it
    try:
        caller = Caller.operator()
        service.record(caller, conversation, morning())
        found = service.search(caller, "Manchester", conversation)
        time.sleep(1.0)  # a background embedding would have begun by now
    finally:
        service.close()
    assert MOVE in found.memories[0].text  # by full text
    with db.connection() as conn:
        windows = conn.execute(
            "SELECT count(*) FROM episode_windows WHERE conversation_id = %s", (conversation,)
        ).fetchone()
    assert windows == (0,)


def test_weighing_an_episode_by_its_retrievability_never_waits_on_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fsrs's Card, given no id, sleeps a millisecond to make one: a search weighs dozens."""
    import fsrs.card

    from slowwave.tasks.memories import retrievability

    def refuse(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s")

    monkeypatch.setattr(fsrs.card.time, "sleep", refuse)
    end = datetime(2026, 1, 1, tzinfo=UTC)
    never = {"end_at": end, "reviewed_at": None}
    reviewed = {
        "end_at": end,
        "reviewed_at": end + timedelta(days=1),
        "review_state": 2,
        "review_step": None,
        "review_stability": 3.0,
        "review_difficulty": 5.0,
    }
    later = end + timedelta(days=10)
    assert 0 < retrievability(never, later) < retrievability(reviewed, later) < 1


@pytest.mark.slow
def test_the_episodic_search_is_planned_for_its_parameters_every_time(
    db: Database, settings: Settings
) -> None:
    """Prepared (psycopg does so from a statement's sixth run on a connection), Postgres plans
    the episodic search once for any parameters, and that plan ran 7x slower on LoCoMo."""
    from slowwave.models.embedding import load_embedder
    from slowwave.tasks.memories import search_memories

    conversation = f"dana-{uuid.uuid4().hex[:8]}"
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, morning())
    embedder = load_embedder(settings)
    try:
        with db.connection() as conn:
            for _ in range(8):
                found = search_memories(
                    conn, embedder, "Manchester", conversation, k=1, memory_tokens=100
                )
                assert [MOVE in m.text for m in found] == [True]
            prepared = conn.execute(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                ["%episode_windows w%"],
            ).fetchone()
    finally:
        embedder.close()
    assert prepared == (0,)


@pytest.mark.slow
def test_a_message_not_embedded_yet_is_found_first_by_its_own_words(
    db: Database, settings: Settings
) -> None:
    """A server embeds new messages in the background: until then the vector channel cannot
    judge them, and an older episode it can judge must not come first for that alone."""
    from slowwave.models.embedding import load_embedder
    from slowwave.tasks.memories import embed_windows, search_memories

    conversation = f"dana-{uuid.uuid4().hex[:8]}"
    yesterday = NOW - timedelta(days=1)
    with slowwave.Memory(settings) as memory:
        memory.record(conversation, [said(1, "The parcel came, a lamp for the flat.", yesterday)])
    embedder = load_embedder(settings)
    try:
        with db.connection() as conn:
            assert embed_windows(conn, embedder.embed, conversation, 8) == 1
            with slowwave.Memory(settings) as memory:
                memory.record(conversation, [said(2, "The parcel code is zq7 for the locker.")])
            (found,) = search_memories(
                conn,
                embedder,
                "parcel code zq7",
                conversation,
                k=1,
                memory_tokens=100,
                embed_first=False,
            )
    finally:
        embedder.close()
    assert "zq7" in found.text and found.ranks == {"fulltext": 1, "vector": None, "temporal": None}


@pytest.mark.slow
def test_over_rest_a_rerank_is_refused_until_the_reranker_is_set_up_then_orders_the_memories(
    served: Served, prepared_reranker: Path
) -> None:
    from slowwave.models.embedding.catalog import MS_MARCO_MINILM

    path = f"/v1/conversations/rerank-{uuid.uuid4().hex[:8]}"
    query: dict[str, str | int | bool] = {
        "query": "Where did Dana move to?",
        "memories": 3,
        "fused": True,
    }
    said_apart = [  # a day apart: an episode each
        said(n, text, at=NOW - timedelta(days=3 - n))
        for n, text in enumerate(
            [
                "Dana asked where the new lab would move to next term.",
                "Dana is moving to Manchester in July for a new job.",
                "Mia goes bouldering every Saturday.",
            ]
        )
    ]
    with served.client(served.keys["acme-write"]) as http:
        recorded = http.post(f"{path}/messages", json={"messages": said_apart})
        assert recorded.status_code == 200, recorded.text
        refused = http.get(f"{path}/search", params={**query, "rerank": True})
        (served.home / "models").mkdir(exist_ok=True)
        (served.home / "models" / MS_MARCO_MINILM.name).symlink_to(prepared_reranker)
        reranked = http.get(f"{path}/search", params={**query, "rerank": True})
        plain = http.get(f"{path}/search", params=query)

    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "model_not_prepared"
    assert reranked.status_code == 200 and plain.status_code == 200, reranked.text
    memories = reranked.json()["memories"]
    assert len(memories) == 3
    assert "Manchester" in memories[0]["text"] and memories[0]["ranks"]["rerank"] == 1
    assert reranked.json()["ranked"][0]["id"] == memories[0]["id"]
    assert all(m["ranks"].get("rerank") is None for m in plain.json()["memories"])


@pytest.mark.slow
def test_asked_about_now_an_episode_whose_facts_a_later_one_replaced_comes_after_it(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """The quick start's question: the Leeds episode matches "Dana" and "where" best, but the
    Manchester one replaced what it taught; asked about now, Manchester comes first and Leeds
    says it was superseded. Asked about then, the order is the match's."""
    add(
        conn,
        make_episode(
            "dana", "d1", "Hi! I'm Dana. I teach chemistry at a school in Leeds.", at(2023, 3, 4)
        ),
        make_episode("dana", "d2", "Big news: I'm moving to Manchester in July.", at(2023, 5, 20)),
    )
    model = ScriptedModel(
        {
            "d1": lambda r: answer(fact("Dana teaches chemistry at a school in Leeds.")),
            "d2": lambda r: answer(
                fact("I'm moving to Manchester in July.", action=FactAction.update, existing="F1")
            ),
        }
    )
    consolidate(db, model, embedder, with_settings(settings, chunk_size=1, episode_threshold=1))

    def found(query: str, **kw: object) -> list[tuple[str, bool]]:
        hits = search_memories(conn, embedder, query, "dana", k=2, memory_tokens=200, **kw)  # type: ignore[arg-type]
        return [(h.text.split()[-1], h.superseded) for h in hits]

    then = found("Where does Dana teach?")
    assert then == [("Leeds.", True), ("July.", False)]  # the match's order, Leeds marked
    assert found("Where does Dana teach now?") == [("July.", False), ("Leeds.", True)]
    assert found("Does Dana still teach in Leeds?")[0] == ("July.", False)
    # as of a day before the move, nothing had replaced it
    before = found("Where does Dana teach now?", as_of=at(2023, 5, 19))
    assert before == [("Leeds.", False)]
    rendered = render_memories(
        search_memories(
            conn, embedder, "Where does Dana teach now?", "dana", k=2, memory_tokens=200
        )
    )
    assert "(2023-03-04 12:00 UTC, consolidated, superseded)" in rendered


@pytest.mark.slow
def test_an_episodes_words_for_search_are_its_peoples_not_the_agents_answers(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """ "Which bike did I buy?": the user said it once in a short chat; the assistant's long
    answer in another chat says "bike" seven times. By the words alone (no vector channel) the
    user's chat comes first, pending and consolidated alike; a chat of agents only is still
    found by its words."""
    from slowwave.models.consolidation import AGENT_ROLES
    from slowwave.models.episode import Episode, Message
    from slowwave.models.ids import new_id

    conversation = f"bikes-{uuid.uuid4().hex[:8]}"

    def chat(key: str, day: int, *lines: tuple[str, str]) -> Episode:
        return Episode(
            id=new_id(),
            conversation_id=conversation,
            external_key=key,
            messages=[Message(speaker=who, text=text) for who, text in lines],
            start_at=at(2024, 3, day),
            end_at=at(2024, 3, day),
        )

    bought = chat(
        "bought", 1, ("user", "I bought a steel Bianchi bike today!"), ("assistant", "Nice.")
    )
    advice = chat(
        "advice",
        2,
        ("user", "Any tips for the weekend?"),
        ("assistant", " ".join(f"Tip {n}: check the bike, oil the bike chain." for n in range(4))),
    )
    agents = chat("agents", 3, ("assistant", "The tandem order shipped."), ("tool", "ok"))
    add(conn, bought, advice, agents)
    words_only = settings.search.model_copy(update={"memory_vector_weight": 0.0})

    def order(query: str) -> list[str]:
        hits = search_memories(
            conn, embedder, query, conversation, k=3, memory_tokens=200, policy=words_only
        )
        return [{bought.id: "bought", advice.id: "advice", agents.id: "agents"}[h.id] for h in hits]

    assert order("Which bike did I buy?")[0] == "bought"
    assert order("tandem order")[0] == "agents"
    # the roles the SQL leaves out are the agents' roles the prompts know (AGENT_ROLES)
    roles = [{"speaker": f" {r.title()} ", "text": r} for r in sorted(AGENT_ROLES)]
    texts = conn.execute(
        "SELECT slowwave_person_texts(%s::jsonb)",
        (json.dumps([*roles, {"speaker": "Dana", "text": "mine"}, {"text": "no speaker"}]),),
    ).fetchone()
    assert texts == (["mine", "no speaker"],)
    model = ScriptedModel({key: lambda r: answer() for key in ("bought", "advice", "agents")})
    consolidate(db, model, embedder, with_settings(settings, chunk_size=1, episode_threshold=1))
    stored = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE conversation_id = %s AND search_tsv IS NULL",
        (conversation,),
    ).fetchone()
    assert stored == (0,)  # consolidated: the words are the stored ones now
    assert order("Which bike did I buy?")[0] == "bought"
    assert order("tandem order")[0] == "agents"


@pytest.mark.slow
def test_an_episode_from_the_time_a_query_counts_back_comes_first(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """ "Which concert did I go to two weeks ago?", asked on 1 July: of three chats about
    concerts, the one of mid-June comes first, though another says "concert" more often; asked
    with no time, the words' order stands; asked as of another day, its own two weeks ago."""
    conversation = f"concerts-{uuid.uuid4().hex[:8]}"
    chats = {
        "march": (at(2023, 3, 4), "Concert season! I love a concert, any concert at all."),
        "june": (at(2023, 6, 17), "I saw Phoebe Bridgers at the Greek, a great concert."),
        "may": (at(2023, 5, 20), "Concert tickets, concert dates: the concert calendar is full."),
    }
    episodes = [make_episode(conversation, key, text, when) for key, (when, text) in chats.items()]
    add(conn, *episodes)
    keys = {e.id: e.external_key for e in episodes}

    def order(query: str, **kw: Any) -> list[tuple[str, int | None]]:
        hits = search_memories(
            conn,
            embedder,
            query,
            conversation,
            k=3,
            memory_tokens=200,
            policy=settings.search,
            **kw,
        )
        return [(keys[h.id], h.ranks["temporal"]) for h in hits]

    asked = datetime(2023, 7, 1, 9, tzinfo=UTC)
    assert order("Which concert did I go to two weeks ago?", now=asked)[0] == ("june", 1)
    plain = order("Which concert did I go to?", now=asked)
    assert plain[0][0] != "june" and {rank for _, rank in plain} == {None}
    # as of 3 June, two weeks ago is in May; June had not happened yet
    assert order("Which concert did I go to two weeks ago?", as_of=at(2023, 6, 3))[0] == (
        "may",
        1,
    )
    off = settings.search.model_copy(update={"memory_temporal_weight": 0.0})
    hits = search_memories(
        conn, embedder, "Which concert two weeks ago?", conversation, k=3, memory_tokens=200,
        policy=off, now=asked,
    )  # fmt: skip
    assert {h.ranks["temporal"] for h in hits} == {None}


def test_within_the_time_a_query_names_an_episode_with_its_words_and_meaning_comes_first(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """ "What did I bake two weeks ago?": of two chats of that week, the one that says it baked
    among errands ranks first in the temporal channel, above the one nearer in meaning that
    never says "bake" (both orders, words' and meaning's, fused within the window)."""
    conversation = f"baking-{uuid.uuid4().hex[:8]}"
    cakes = "I made a chocolate cake and some cookies for my niece's birthday."
    errands = "Tax forms, a dentist appointment, new tyres for the car, and I bake on Sundays."
    chats = {
        "cakes": (at(2023, 6, 16), cakes),
        "errands": (at(2023, 6, 17), errands),
        "spring": (at(2023, 3, 4), "I bake every weekend: bake, bake, bake."),
    }
    episodes = [make_episode(conversation, key, text, when) for key, (when, text) in chats.items()]
    add(conn, *episodes)
    keys = {e.id: e.external_key for e in episodes}

    hits = search_memories(
        conn, embedder, "What did I bake two weeks ago?", conversation, k=3, memory_tokens=200,
        policy=settings.search, now=datetime(2023, 7, 1, 9, tzinfo=UTC),
    )  # fmt: skip

    ranks = {keys[h.id]: h.ranks for h in hits}
    assert ranks["errands"]["temporal"] == 1 and ranks["cakes"]["temporal"] == 2
    nearer = [key for key, _ in sorted(ranks.items(), key=lambda kv: kv[1]["vector"] or 99)]
    assert nearer.index("cakes") < nearer.index("errands")  # in meaning
    assert ranks["cakes"]["fulltext"] is None and ranks["spring"]["temporal"] is None


def test_what_replaced_an_episodes_facts_comes_before_it_and_the_rest_keep_their_order() -> None:
    ranked = ["leeds", "climbing", "manchester", "japan"]
    replaced_by = {"leeds": ["manchester", "not-found"], "climbing": [], "manchester": []}
    order = successors_first(ranked, lambda e: e, lambda e: replaced_by.get(e, []))
    assert order == ["manchester", "leeds", "climbing", "japan"]
    # a chain: each before what it replaced; a loop (late-arriving episodes) ends
    chain = {"a": ["b"], "b": ["c"], "c": ["a"]}
    assert successors_first(["a", "b", "c"], lambda e: e, lambda e: chain[e]) == ["c", "b", "a"]
    assert asks_about_now("Where does Dana live now?") and asks_about_now("Do I still run?")
    assert asks_about_now("How many bikes do I currently own?")
    assert not asks_about_now("Where did Dana teach in March?")
    assert not asks_about_now("Is she known for it?")  # "now" inside a word


def test_a_question_offering_alternatives_finds_an_episode_for_each(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """ "Which did I set up first, the smart thermostat or the mesh network?" compares what two
    episodes say: the one about the mesh is among the three returned (after the best; among
    five, after the best three), though four chats about the thermostat share more of the
    question's words (and were, before, the first four); a question offering no alternatives,
    or a search with no room for both, keeps the fused order."""
    from slowwave.tasks.memories import alternatives

    conversation = f"devices-{uuid.uuid4().hex[:8]}"
    chats = {
        "thermostat": "I set up the smart thermostat first thing: the device joined the network.",
        "schedule": "Which network for the smart thermostat? I set it up first on the guest one.",
        "battery": "The smart thermostat device battery: set up a reminder to change it first.",
        "firmware": "Set up the smart thermostat device first: which firmware did it need?",
        "mesh": "The mesh arrived, three routers, and the garden finally gets a signal.",
    }
    episodes = [
        make_episode(conversation, key, text, at(2023, 5, 1 + n))
        for n, (key, text) in enumerate(chats.items())
    ]
    add(conn, *episodes)
    keys = {e.id: e.external_key for e in episodes}

    def found(query: str, k: int = 3) -> list[str]:
        hits = search_memories(
            conn, embedder, query, conversation, k=k, memory_tokens=200, policy=settings.search,
            now=at(2023, 6, 1),
        )  # fmt: skip
        return [keys[h.id] for h in hits]

    query = "Which device did I set up first, the smart thermostat or the mesh network?"
    assert alternatives(query) == ("the smart thermostat", "the mesh network")
    offering_none = "Which device did I set up first, the smart thermostat and the mesh network?"
    assert alternatives(offering_none) == () and "mesh" not in found(offering_none)
    before = found(offering_none, k=5)
    assert before[-1] == "mesh"
    first, *alternatives_best = found(query)  # after as many as k leaves room for
    assert first == before[0] and alternatives_best[-1] == "mesh"
    assert found(query, k=5) == [*before[:3], "mesh", before[3]]
    assert found(query, k=2) == found(offering_none, k=2)  # no room for both: as it ranks
    assert alternatives("Did I switch to more water per tablespoon of coffee, or less?") == ()
    assert alternatives("Did I visit with a friend or not?") == ()
