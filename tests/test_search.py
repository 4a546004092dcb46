"""Retrieval: hybrid ranking, event-time queries, category filter, exact vector search."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import numpy as np
import psycopg
import pytest

from slowwave.memory import Memory
from slowwave.models.consolidation import ConsolidationOutput, FactAction
from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import EpisodicHit
from slowwave.models.fact import embedding_text
from slowwave.models.settings import SearchSettings, Settings
from slowwave.service.answers import fuse
from slowwave.sql.copy import copy_rows
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.search import context, render_markdown, render_split, search
from slowwave.tasks.timeframe import counted_back, named_dates, named_days, temporal_window
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_facts import COLUMNS, copy_facts
from tests.fix_models import ScriptedModel, fact, shown_facts
from tests.test_consolidation import answer

NOW = datetime(2024, 1, 1, tzinfo=UTC)

# (category, fact, keywords): a small labelled memory of one person
MEMORY = [
    (
        "identity",
        "Priya works as a veterinary nurse at the Riverside animal clinic",
        ["Priya", "Riverside"],
    ),
    ("identity", "Priya grew up in Nairobi before moving abroad", ["Nairobi"]),
    ("preference", "Priya's favourite food is spicy ramen", ["ramen"]),
    ("preference", "Priya dislikes horror movies", ["horror"]),
    ("interest", "Priya plays the cello in a community orchestra", ["cello", "orchestra"]),
    ("interest", "Priya collects vintage postcards from train stations", ["postcards"]),
    ("relationship", "Priya's brother Tomasz is a pilot for a cargo airline", ["Tomasz"]),
    ("relationship", "Priya adopted a three-legged greyhound called Biscuit", ["Biscuit"]),
    ("experience", "Priya ran the Berlin marathon in 2021", ["Berlin", "marathon"]),
    ("experience", "Priya broke her wrist while ice skating last winter", ["wrist"]),
    ("goal", "Priya wants to open a cat cafe within five years", ["cafe"]),
    ("goal", "Priya is saving money for a trip to Patagonia", ["Patagonia"]),
    ("personality", "Priya gets anxious before public speaking", ["anxious"]),
    ("guideline", "The assistant should keep answers short when Priya is at work", ["short"]),
    ("guideline", "The assistant should never mention Priya's ex-partner", ["ex-partner"]),
]
# (query, index of the relevant fact): keyword-led and meaning-led questions
QUESTIONS = [
    ("Where does Priya work?", 0),
    ("Which city did she grow up in?", 1),
    ("What meal does Priya love most?", 2),
    ("What kind of films does she avoid?", 3),
    ("Which instrument does Priya play?", 4),
    ("What does Priya collect?", 5),
    ("What is Tomasz's job?", 6),
    ("What is the name of Priya's dog?", 7),
    ("Has Priya run a marathon?", 8),
    ("Which bone did she fracture?", 9),
    ("What business does Priya dream of starting?", 10),
    ("Where is Priya planning to travel?", 11),
    ("How does Priya feel about giving talks?", 12),
    ("How long should replies be during her shift?", 13),
]


def _insert(
    conn: psycopg.Connection,
    conversation: str,
    rows: list[tuple[str, str, list[str]]],
    vectors: np.ndarray,
) -> list[uuid.UUID]:
    return copy_facts(conn, conversation, rows, vectors, NOW)


@pytest.fixture
def priya(conn: psycopg.Connection, embedder: Embedder) -> list[uuid.UUID]:
    vectors = embedder.embed([embedding_text(c, f, k) for c, f, k in MEMORY])
    return _insert(conn, "priya", MEMORY, vectors)


def _recall(ranked: list[list[uuid.UUID]], ids: list[uuid.UUID], k: int) -> float:
    hits = [ids[target] in found[:k] for found, (_, target) in zip(ranked, QUESTIONS, strict=True)]
    return sum(hits) / len(hits)


def test_hybrid_ranking_beats_or_equals_each_single_ranker(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings, priya: list[uuid.UUID]
) -> None:
    results = {}
    for ranker in ("hybrid", "vector", "fulltext"):
        ranked = [
            [h.id for h in search(conn, embedder, q, "priya", 5, ranker=ranker)]
            for q, _ in QUESTIONS
        ]
        results[ranker] = {k: _recall(ranked, priya, k) for k in (1, 3, 5)}
    for k in (1, 3, 5):
        assert results["hybrid"][k] >= results["vector"][k], results
        assert results["hybrid"][k] >= results["fulltext"][k], results
    assert results["hybrid"][3] >= 0.8, results


def test_hits_carry_both_ranks_and_the_fused_score(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings, priya: list[uuid.UUID]
) -> None:
    (top, *_) = search(conn, embedder, "Biscuit the greyhound", "priya", 3)
    assert top.id == priya[7]
    assert top.fulltext_rank == 1 and top.vector_rank == 1 and top.session_rank == 1
    # both rankers' first, and the session channel's first at a weight of at most 1
    assert 2 / (settings.search.rrf_k + 1) < top.score <= 3 / (settings.search.rrf_k + 1)
    alone = SearchSettings(rrf_k=30, session_weight=0)
    (top30, *_) = search(conn, embedder, "Biscuit the greyhound", "priya", 3, policy=alone)
    assert top30.score == pytest.approx(2 / 31) and top30.session_rank is None


def test_the_category_filter_keeps_only_that_category(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings, priya: list[uuid.UUID]
) -> None:
    hits = search(conn, embedder, "Priya", "priya", 10, category="guideline")
    assert {h.id for h in hits} == {priya[13], priya[14]}
    split = render_split(hits)
    assert split.startswith("## Known Facts\n- (none)\n\n## Behavioral Guidelines\n- The assistant")


def test_search_never_returns_another_conversations_facts(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings, priya: list[uuid.UUID]
) -> None:
    other = [
        ("identity", "Priya works as a veterinary nurse at the Riverside animal clinic", ["Priya"])
    ]
    _insert(conn, "someone-else", other, embedder.embed([other[0][1]]))
    hits = search(conn, embedder, "veterinary nurse Riverside", "priya", 20)
    assert {h.id for h in hits} <= set(priya)


def test_markdown_follows_seed_001(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings, priya: list[uuid.UUID]
) -> None:
    hits = search(conn, embedder, "cello orchestra", "priya", 1)
    assert render_markdown(hits) == (
        "## Semantic Memory\n"
        "- [interest] Priya plays the cello in a community orchestra (sources: 1 conversation)"
    )


def test_context_packs_guidelines_then_identity_and_preferences_into_the_budget(
    conn: psycopg.Connection, priya: list[uuid.UUID]
) -> None:
    full = context(conn, "priya", 1000)
    assert full.splitlines()[0] == "## Behavioral Guidelines"
    assert "[identity] Priya grew up in Nairobi" in full and "[preference]" in full
    assert "[interest]" not in full and "[goal]" not in full
    small = context(conn, "priya", 60)
    assert len(small) / 4 <= 60
    assert small.count("[guideline]") == 2, "guidelines are packed first"
    assert "[identity]" not in small, "the identity facts do not fit; shorter ones may"


def test_as_of_returns_beijing_before_the_move_and_tokyo_after(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    moved = at(2025, 6, 15)
    add(
        conn,
        make_episode("m", "m1", "I live in Beijing with my parents.", at(2025, 1, 1)),
        make_episode("m", "m2", "The weather is nice today, sunny and warm.", at(2025, 2, 1)),
        make_episode("m", "m3", "I moved to Tokyo for a new job!", moved),
    )

    def move(r: object) -> ConsolidationOutput:
        old = shown_facts(r)["User lives in Beijing"]  # type: ignore[arg-type]
        return ConsolidationOutput(
            facts=[
                fact(
                    "User lives in Tokyo",
                    action=FactAction.update,
                    existing=old,
                    keywords=["Tokyo"],
                )
            ]
        )

    model = ScriptedModel(
        {
            "m1": lambda r: ConsolidationOutput(
                facts=[fact("User lives in Beijing", keywords=["Beijing"])]
            ),
            "m3": move,
        }
    )
    consolidate(db, model, embedder, with_settings(settings, chunk_size=1))

    def where(as_of: datetime | None) -> list[str]:
        hits = search(
            conn,
            embedder,
            "Where does the user live?",
            "m",
            5,
            as_of=as_of,
            policy=settings.search,
        )
        return [h.fact for h in hits]

    assert where(at(2025, 3, 1)) == ["User lives in Beijing"]
    assert where(at(2025, 7, 1)) == ["User lives in Tokyo"]
    assert where(None) == ["User lives in Tokyo"]
    assert where(at(2024, 12, 31)) == []


def test_the_vector_query_is_exact_on_a_conversation_of_5000_facts(
    conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    rng = np.random.default_rng(42)
    vectors = rng.standard_normal((5000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [("interest", f"Fact number {i} about topic {i % 97}", ["topic"]) for i in range(5000)]
    ids = _insert(conn, "big", rows, vectors)
    noise = rng.standard_normal((5000, 384)).astype(np.float32)
    _insert(conn, "other", rows, noise)
    conn.execute("ANALYZE semantic_memory")

    query = "a question about topic forty-two"
    expected = np.argsort(-(vectors @ embedder.embed([query])[0]), kind="stable")[:100]
    hits = search(conn, embedder, query, "big", 100, ranker="vector")
    assert [h.id for h in hits] == [ids[i] for i in expected]


def test_the_python_api_searches_and_builds_context(
    database: Database,
    settings: Settings,
    embedder: Embedder,
    conn: psycopg.Connection,
    priya: list[uuid.UUID],
) -> None:
    with Memory(settings, embedder=embedder) as memory:
        answer = memory.search("What is Tomasz's job?", "priya", k=2, output="markdown")
        assert answer.hits[0].id == priya[6]
        assert (answer.markdown or "").startswith(
            "## Semantic Memory\n- [relationship] Priya's brother"
        )
        assert "## Behavioral Guidelines" in memory.context("priya", 200).context


def test_named_dates_reads_a_day_or_a_month_with_its_year() -> None:
    june_3 = (date(2023, 6, 3), date(2023, 6, 3))
    assert named_dates("What did Maria start, as mentioned on 3 June, 2023?") == june_3
    assert named_dates("what happened on June 3rd, 2023") == june_3
    assert named_dates("notes from 2023-06-03") == june_3
    assert named_dates("the photo shared on December 1,2023") == (
        date(2023, 12, 1),
        date(2023, 12, 1),
    )
    assert named_dates("What did Nate do in April 2022?") == (date(2022, 4, 1), date(2022, 4, 30))
    for none in ("What did Maria say in March?", "Where does Priya work?", "February 30, 2023"):
        assert named_dates(none) is None
    start, end = temporal_window("on 3 June, 2023", SearchSettings(temporal_before_days=1))
    assert (start, end) == (
        datetime(2023, 6, 2, tzinfo=UTC),
        datetime(2023, 6, 4 + SearchSettings().temporal_after_days, tzinfo=UTC),
    )


def test_a_time_counted_back_from_the_search_is_read_as_the_days_it_names() -> None:
    today = date(2023, 7, 1)  # a Saturday

    def days(query: str) -> tuple[str, str] | None:
        named = counted_back(query, today)
        return None if named is None else (named[0].isoformat(), named[1].isoformat())

    # the day counted back, widened by a quarter of the count (half where the count is vague)
    assert days("I mentioned a sports event two weeks ago. What was it?") == (
        "2023-06-14",
        "2023-06-20",
    )
    assert days("What did I post 5 days ago?") == ("2023-06-25", "2023-06-27")
    assert days("what did I buy a day ago") == ("2023-06-30", "2023-06-30")
    assert days("the museum I visited a couple of months ago") == ("2023-04-02", "2023-06-01")
    assert days("What did I do yesterday?") == ("2023-06-30", "2023-06-30")
    assert days("Who did I meet for lunch last Tuesday?") == ("2023-06-27", "2023-06-27")
    assert days("Where did I go last Saturday?") == ("2023-06-24", "2023-06-24")  # not today
    assert days("What game did I beat last weekend?") == ("2023-06-24", "2023-06-25")
    assert days("How far did I run last week?") == ("2023-06-19", "2023-06-25")
    assert days("What certification did I complete last month?") == ("2023-06-01", "2023-06-30")
    assert days("books I read last year") == ("2022-01-01", "2022-12-31")
    # a span up to today
    assert days("How many plants did I buy in the last month?") == ("2023-06-01", "2023-07-01")
    assert days("What did I spend in the past few months?") == ("2023-04-02", "2023-07-01")
    assert days("How often did I bake in the past two weeks?") == ("2023-06-17", "2023-07-01")
    assert days("the jewelry I bought over the last 3 months") == ("2023-04-02", "2023-07-01")
    assert days("How many days did I camp this year?") == ("2023-01-01", "2023-07-01")
    assert days("I've been sneezing a lot lately. Why?") == ("2023-06-01", "2023-07-01")
    assert days("What did I spend since the start of the month?") == ("2023-07-01", "2023-07-01")
    # a month with no year: the latest one begun by today
    assert days("How many doctor's appointments did I go to in March?") == (
        "2023-03-01",
        "2023-03-31",
    )
    assert days("my trips in August") == ("2022-08-01", "2022-08-31")
    assert days("the rides from November to February") == ("2022-11-01", "2023-02-28")
    for none in (
        "How many days ago did I meet Emma?",  # asks for a count, names no time
        "What did I do on the last day of the trip?",
        "Can you recommend a show to watch tonight?",  # ahead, not back
        "Any plans for this weekend?",
        "I may go in May 2024",  # a month with its year is named_dates'
        "Where does Priya work?",
    ):
        assert days(none) is None, none
    # a date with its year is read first; the window counts from the search's time
    june_3 = (date(2023, 6, 3), date(2023, 6, 3))
    assert named_days("two weeks ago, on 3 June, 2023", today) == june_3
    then = datetime(2023, 7, 1, 9, tzinfo=UTC)
    start, end = temporal_window("yesterday", SearchSettings(temporal_before_days=1), then)
    assert (start, end) == (
        datetime(2023, 6, 29, tzinfo=UTC),
        datetime(2023, 7, 1 + SearchSettings().temporal_after_days, tzinfo=UTC),
    )


def test_the_temporal_channel_prefers_facts_from_the_time_the_query_names(
    conn: psycopg.Connection, embedder: Embedder
) -> None:
    row = [("experience", "Sam went hiking in the hills", ["hiking"])]
    vector = embedder.embed([row[0][1]])
    (january,) = copy_facts(conn, "sam", row, vector, datetime(2023, 1, 10, tzinfo=UTC))
    (june,) = copy_facts(conn, "sam", row, vector, datetime(2023, 6, 5, tzinfo=UTC))
    query = "What did Sam do on 3 June, 2023?"
    first, second = search(conn, embedder, query, "sam", 2, policy=SearchSettings())
    assert (first.id, first.temporal_rank) == (june, 1)
    assert (second.id, second.temporal_rank) == (january, None)
    off = search(conn, embedder, query, "sam", 2, policy=SearchSettings(temporal_weight=0))
    assert {h.temporal_rank for h in off} == {None}
    # a time counted back counts from the search's time: asked on 4 July, a month ago is June
    back = "What did Sam do a month ago?"
    first, second = search(conn, embedder, back, "sam", 2, as_of=datetime(2023, 7, 4, tzinfo=UTC))
    assert (first.id, first.temporal_rank, second.temporal_rank) == (june, 1, None)
    # asked in February, January (and June's fact was not valid yet)
    (first,) = search(conn, embedder, back, "sam", 2, as_of=datetime(2023, 2, 10, tzinfo=UTC))
    assert (first.id, first.temporal_rank) == (january, 1)


def _facts_at(
    conn: psycopg.Connection, embedder: Embedder, question: str, episodes: list[uuid.UUID]
) -> list[uuid.UUID]:
    """One fact per entry of ``episodes`` (its source episode), each a little less similar to
    ``question`` than the one before, so the vector ranker ranks them in this order."""
    query = embedder.embed([question])[0]
    rng = np.random.default_rng(7)
    vectors = []
    for n in range(len(episodes)):
        similarity = 0.99 - 0.01 * n
        other = rng.standard_normal(query.shape[0]).astype(np.float32)
        other -= (other @ query) * query
        other /= np.linalg.norm(other)
        vectors.append(similarity * query + np.sqrt(1 - similarity**2) * other)
    ids = [uuid.uuid4() for _ in episodes]
    with conn.transaction():
        copy_rows(
            conn,
            "semantic_memory",
            COLUMNS,
            [
                (i, "sam", "interest", f"Sam fact {n}", [], [episode], NOW, vector)
                for n, (i, episode, vector) in enumerate(zip(ids, episodes, vectors, strict=True))
            ],
        )
    return ids


def test_diversity_lets_another_episode_into_the_top_k(
    conn: psycopg.Connection, embedder: Embedder
) -> None:
    question = "What does Sam do on weekends?"
    one, two = uuid.uuid4(), uuid.uuid4()
    ids = _facts_at(conn, embedder, question, [one, one, one, two])

    def top(diversity: float) -> list[uuid.UUID]:
        policy = SearchSettings(diversity=diversity, diversity_dominant=diversity)
        hits = search(conn, embedder, question, "sam", 3, ranker="vector", policy=policy)
        return [h.id for h in hits]

    assert top(1.0) == ids[:3]
    assert top(0.3) == [ids[0], ids[3], ids[1]]


def test_one_dominant_episode_keeps_its_facts_together_and_alike_episodes_share_the_top_k(
    conn: psycopg.Connection, embedder: Embedder
) -> None:
    """The session channel and the diversity follow how the episodes' summed scores spread:
    one episode that answers keeps its second fact in the top 2 (a fixed diversity of 0.7
    would put the other episode's lone fact there), while two that answer alike both get in
    (no diversity at all would keep the first one's two facts)."""
    question = "What does Sam do on weekends?"
    a, b = uuid.uuid4(), uuid.uuid4()
    dominant = _facts_at(conn, embedder, question, [a, a, a, b])  # a: ranks 1-3, b: 4
    assert [h.id for h in search(conn, embedder, question, "sam", 2)] == dominant[:2]
    fixed = SearchSettings(diversity=0.7, diversity_dominant=0.7, session_weight=0)
    assert [h.id for h in search(conn, embedder, question, "sam", 2, policy=fixed)] == [
        dominant[0],
        dominant[3],
    ]

    conn.execute("DELETE FROM semantic_memory WHERE conversation_id = 'sam'")
    alike = _facts_at(conn, embedder, question, [a, a, b, b])  # a: ranks 1-2, b: 3-4
    hits = search(conn, embedder, question, "sam", 2)
    assert [h.id for h in hits] == [alike[0], alike[2]]
    assert [h.session_rank for h in hits] == [1, 2]
    unmixed = SearchSettings(diversity=1.0, diversity_dominant=1.0, session_weight=0)
    assert [h.id for h in search(conn, embedder, question, "sam", 2, policy=unmixed)] == alike[:2]


def test_a_fact_a_later_episode_reinforced_is_found_through_that_episodes_transcript(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """The same sentence said again a week later is one fact with both sources (dedupe), and
    the episode channel ranks it by its best source for the query, not only its first: what
    was said only in the later episode ("Whitby") finds it, as a second row would have."""
    nightly = with_settings(settings, chunk_size=1, episode_threshold=1)
    biscuit = "Rae walks her greyhound Biscuit every morning."
    add(
        conn,
        make_episode(
            "rae", "b1", "Morning walk with Biscuit, my greyhound, as ever.", at(2025, 3, 1)
        ),
        make_episode("rae", "b2", "I like jazz on vinyl, mostly Coltrane.", at(2025, 3, 2)),
        make_episode(
            "rae",
            "b3",
            "Walked Biscuit on the sands at Whitby this morning, the waves scared her.",
            at(2025, 3, 9),
        ),
    )
    model = ScriptedModel(
        {
            "b1": lambda r: answer(fact(biscuit, "interest")),
            "b2": lambda r: answer(fact("Rae listens to jazz on vinyl.", "interest")),
            "b3": lambda r: answer(fact(biscuit, "experience", keywords=["dog"])),
        }
    )
    consolidate(db, model, embedder, nightly)
    rows = conn.execute(
        "SELECT fact, cardinality(source_episodic_ids) FROM semantic_memory "
        "WHERE conversation_id = 'rae' AND invalid_at IS NULL ORDER BY fact"
    ).fetchall()
    assert rows == [("Rae listens to jazz on vinyl.", 1), (biscuit, 2)]

    (hit, *_) = search(conn, embedder, "Where did Rae go, Whitby?", "rae", 2)
    assert hit.fact == biscuit and hit.episode_rank == 1


def _memory(episode: uuid.UUID) -> EpisodicHit:
    return EpisodicHit(
        id=episode,
        conversation_id="c",
        start_at=NOW,
        end_at=NOW,
        pending=False,
        messages=1,
        text="Dana: I'm moving to Manchester in July.",
        excerpt=False,
        score=1.0,
        ranks={},
        retrievability=1.0,
        reviews=0,
    )


def test_the_fused_list_puts_an_episode_before_the_fact_it_taught_at_the_same_rank() -> None:
    moved, lab, climbing = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    move_fact, lab_fact = uuid.uuid4(), uuid.uuid4()
    facts = [(move_fact, [moved]), (lab_fact, [lab])]
    memories = [_memory(moved), _memory(climbing)]
    ranked = fuse(facts, memories, 10, rrf_k=10)
    # at each rank the memory first: the episode's excerpt carries the messages its fact was
    # drawn from, and the fact, reaching no other episode, comes after what does
    assert [(r.kind, r.id) for r in ranked] == [
        ("memory", moved),
        ("memory", climbing),
        ("fact", lab_fact),
        ("fact", move_fact),
    ]
    assert [r.score for r in ranked] == [1 / 11, 1 / 12, 1 / 12, 1 / 11]
    # a better rank still comes first, whatever the kind
    first = fuse([(lab_fact, [lab])], [_memory(climbing), _memory(moved)], 10, rrf_k=10)
    assert [r.id for r in first] == [climbing, lab_fact, moved]


def test_the_fused_list_fills_its_places_with_what_reaches_no_new_episode_after_what_does() -> None:
    """Two facts of one episode: the second reaches no episode the first has not, so it comes
    after the fact of another episode, and fills a place the list would otherwise leave empty
    (it carries other messages of that episode); a list too short for all keeps the reach."""
    moved, lab = uuid.uuid4(), uuid.uuid4()
    move_fact, college_fact, lab_fact = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    facts = [(move_fact, [moved]), (college_fact, [moved]), (lab_fact, [lab])]
    assert [r.id for r in fuse(facts, [], 3, rrf_k=10)] == [move_fact, lab_fact, college_fact]
    assert [r.id for r in fuse(facts, [], 2, rrf_k=10)] == [move_fact, lab_fact]
    # an episode's memory and a fact drawn from it: the fact after the other episode's fact
    both = fuse([(college_fact, [moved]), (lab_fact, [lab])], [_memory(moved)], 3, rrf_k=10)
    assert [(r.kind, r.id) for r in both] == [
        ("memory", moved),
        ("fact", lab_fact),
        ("fact", college_fact),
    ]
