"""Claims under concurrency: two runs never take the same episode, and work is done once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg
import pytest

from models.consolidation import ConsolidationOutput
from models.embedding.base import Embedder
from models.ids import new_id
from models.run import RunSummary
from slowwave.db import Database
from slowwave.settings import Settings
from tasks.claim import ConversationWork, claim, release
from tasks.consolidate import consolidate
from tests.fix_episodes import add, at, episodes_state, facts, make_episode, with_settings
from tests.fix_models import ScriptedModel, fact

T = TypeVar("T")


def in_parallel(*calls: Callable[[], T]) -> list[T]:
    """Run the calls at the same moment, each in its own thread."""
    barrier = threading.Barrier(len(calls))
    results: list[T | BaseException | None] = [None] * len(calls)

    def runner(i: int, call: Callable[[], T]) -> None:
        barrier.wait()
        try:
            results[i] = call()
        except BaseException as exc:  # re-raised in the main thread
            results[i] = exc

    threads = [threading.Thread(target=runner, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


def _seed(conn: psycopg.Connection, conversations: int, per: int = 3) -> None:
    add(
        conn,
        *[
            make_episode(
                f"conv{c:03d}", f"k{c}-{i}", f"I collect coins, note {c}/{i}.", at(2025, 1, i + 1)
            )
            for c in range(conversations)
            for i in range(per)
        ],
    )


def _episode_ids(work: list[ConversationWork]) -> set[object]:
    return {e.id for w in work for chunk in w.chunks for e in chunk}


@pytest.mark.parametrize("attempt", range(5))
def test_two_concurrent_claimers_never_take_the_same_episode(
    db: Database, conn: psycopg.Connection, settings: Settings, attempt: int
) -> None:
    _seed(conn, conversations=60)
    runs = [new_id(), new_id()]
    connections = [db.raw_connection(autocommit=True) for _ in runs]
    try:
        first, second = in_parallel(
            *[
                lambda c=c, r=r: claim(c, r, settings)
                for c, r in zip(connections, runs, strict=True)
            ]
        )
    finally:
        for c in connections:
            c.close()
    a, b = _episode_ids(first), _episode_ids(second)
    assert a.isdisjoint(b)
    assert len(a | b) == 180, "every due episode was claimed by one of them"
    conversations_a = {w.conversation_id for w in first}
    conversations_b = {w.conversation_id for w in second}
    assert conversations_a.isdisjoint(conversations_b), "a conversation is claimed whole"
    for run in runs:
        release(conn, run)


def test_a_live_claim_keeps_other_runs_off_a_conversation_until_released(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    _seed(conn, conversations=1)
    holder, other = new_id(), new_id()
    assert len(claim(conn, holder, settings)) == 1
    add(conn, make_episode("conv000", "late", "One more note about coins.", at(2025, 2, 1)))
    assert claim(conn, other, settings) == [], "new episodes of a claimed conversation wait"
    release(conn, holder)
    (work,) = claim(conn, other, settings)
    assert work.episodes == 4


def _one_fact_each(keys: list[str]) -> ScriptedModel:
    def answer_for(key: str) -> Callable[[object], ConsolidationOutput]:
        return lambda r: ConsolidationOutput(
            facts=[fact(f"User noted coin number {key} in the album", "interest")]
        )

    return ScriptedModel({k: answer_for(k) for k in keys})


def test_two_concurrent_runs_consolidate_every_episode_exactly_once(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _seed(conn, conversations=12)
    keys = [f"k{c}-0" for c in range(12)]
    summaries: list[RunSummary] = in_parallel(
        lambda: consolidate(db, _one_fact_each(keys), embedder, settings),
        lambda: consolidate(db, _one_fact_each(keys), embedder, settings),
    )
    state = episodes_state(conn)
    assert all(s["consolidated_at"] is not None for s in state.values())
    assert sum(s.episodes_consolidated for s in summaries) == 36
    by_run = {s["external_key"]: s for s in state.values()}
    assert len(by_run) == 36
    rows = facts(conn)
    assert len(rows) == 12 and len({r["fact"] for r in rows}) == 12, "no duplicate facts"


# ── nothing is left behind (small conversations, a failed or crashed run's tail) ──────────


def _two_episodes(conn: psycopg.Connection, conversation: str = "small") -> None:
    add(
        conn,
        make_episode(
            conversation, f"{conversation}-1", "I keep bees in my garden.", at(2025, 1, 1)
        ),
        make_episode(conversation, f"{conversation}-2", "My bees made honey.", at(2025, 1, 2)),
    )


def _bees() -> ScriptedModel:
    return ScriptedModel(
        {
            "small-1": lambda r: ConsolidationOutput(facts=[fact("User keeps bees", "interest")]),
            "small-2": lambda r: ConsolidationOutput(
                facts=[fact("User's bees made honey", "experience")]
            ),
        }
    )


def test_a_backfill_takes_every_pending_episode_of_a_small_conversation(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _two_episodes(conn)
    summary = consolidate(db, _bees(), embedder, settings, kind="backfill")
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert {f["fact"] for f in facts(conn)} == {"User keeps bees", "User's bees made honey"}
    assert summary.episodes_consolidated == 2 and summary.episodes_not_due == 0


def test_a_run_that_names_its_conversation_takes_every_pending_episode(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _two_episodes(conn)
    _two_episodes(conn, "other")
    summary = consolidate(db, _bees(), embedder, settings, conversations=["small"])
    state = episodes_state(conn)
    assert state["small-1"]["consolidated_at"] is not None
    assert state["small-2"]["consolidated_at"] is not None
    assert state["other-1"]["consolidated_at"] is None, "only the named conversation"
    assert summary.episodes_consolidated == 2


def test_a_nightly_run_counts_small_conversations_as_not_due_and_leaves_them(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _two_episodes(conn)
    summary = consolidate(db, _bees(), embedder, settings, kind="nightly")
    assert all(s["consolidated_at"] is None for s in episodes_state(conn).values())
    assert summary.episodes_not_due == 2 and summary.conversations == 0


def test_a_conversation_that_stops_below_the_threshold_is_due_once_it_waited_long_enough(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _two_episodes(conn)
    conn.execute(
        "UPDATE episodic_memory SET created_at = now() - make_interval(secs => %s)",
        (settings.due_after_s + 60,),
    )
    conn.commit()
    summary = consolidate(db, _bees(), embedder, settings, kind="nightly")
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert summary.episodes_consolidated == 2


def test_a_failed_last_chunk_of_one_episode_is_retried_at_the_next_nightly_run(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    two_per_chunk = with_settings(settings, chunk_size=2)
    _seed(conn, conversations=1)  # conv000: 3 episodes → chunks of 2 and 1
    broken = ScriptedModel(
        {
            "k0-0": lambda r: ConsolidationOutput(facts=[fact("User collects coins", "interest")]),
            "k0-2": lambda r: '{"facts": [',
        }
    )
    first = consolidate(db, broken, embedder, two_per_chunk, kind="nightly")
    assert first.chunks_failed == 1 and episodes_state(conn)["k0-2"]["consolidated_at"] is None

    fixed = ScriptedModel(
        {
            "k0-2": lambda r: ConsolidationOutput(
                facts=[fact("User keeps coins in albums", "interest")]
            )
        }
    )
    second = consolidate(db, fixed, embedder, two_per_chunk, kind="nightly")
    assert second.episodes_consolidated == 1
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert {f["fact"] for f in facts(conn)} == {"User collects coins", "User keeps coins in albums"}


def test_the_tail_of_a_run_killed_between_two_chunks_is_due_at_the_next_run(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    two_per_chunk = with_settings(settings, chunk_size=2)
    _seed(conn, conversations=1)

    def killed(r: object) -> ConsolidationOutput:
        raise KeyboardInterrupt  # the process dies while the last chunk is with the model

    dying = ScriptedModel(
        {
            "k0-0": lambda r: ConsolidationOutput(facts=[fact("User collects coins", "interest")]),
            "k0-2": killed,
        }
    )
    with pytest.raises(KeyboardInterrupt):
        consolidate(db, dying, embedder, two_per_chunk, kind="nightly")
    # a killed process never releases: its lease simply runs out
    conn.execute(
        "UPDATE episodic_memory SET claimed_by = %s, claimed_until = now() - interval '1 s' "
        "WHERE consolidated_at IS NULL",
        (new_id(),),
    )
    conn.commit()
    assert [k for k, s in episodes_state(conn).items() if s["consolidated_at"] is None] == ["k0-2"]

    resumed = ScriptedModel(
        {
            "k0-2": lambda r: ConsolidationOutput(
                facts=[fact("User keeps coins in albums", "interest")]
            )
        }
    )
    summary = consolidate(db, resumed, embedder, two_per_chunk, kind="nightly")
    assert summary.episodes_consolidated == 1
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
