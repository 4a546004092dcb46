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
from tests.fix_episodes import add, at, episodes_state, facts, make_episode
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
