"""Claims under concurrency: two runs never take the same episode, and work is done once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

import psycopg
import pytest

from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.ids import new_id
from slowwave.models.run import RunSummary
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.claim import (
    ClaimPolicy,
    ConversationWork,
    claim,
    count_due,
    give_back_split,
    release,
)
from slowwave.tasks.consolidate import consolidate
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
                lambda c=c, r=r: claim(c, r, ClaimPolicy.of(settings))
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
    assert len(claim(conn, holder, ClaimPolicy.of(settings))) == 1
    add(conn, make_episode("conv000", "late", "One more note about coins.", at(2025, 2, 1)))
    assert claim(conn, other, ClaimPolicy.of(settings)) == [], (
        "new episodes of a claimed conversation wait"
    )
    release(conn, holder)
    (work,) = claim(conn, other, ClaimPolicy.of(settings))
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
    # each episode consolidated by exactly one of the two runs, as that run counted it
    with conn.cursor() as cur:
        per_run: dict[UUID, int] = dict(
            cur.execute(
                "SELECT consolidation_run_id, count(*) FROM episodic_memory "
                "GROUP BY consolidation_run_id"
            ).fetchall()
        )
    assert per_run == {s.run_id: s.episodes_consolidated for s in summaries if s.conversations}
    assert sum(per_run.values()) == 36
    rows = facts(conn)
    assert len(rows) == 12 and len({r["fact"] for r in rows}) == 12, "no duplicate facts"


# ── nothing is left behind (small conversations, a failed or crashed run's tail) ──────────


def _two_episodes(
    conn: psycopg.Connection, conversation: str = "small", surprise: float | None = 0.5
) -> None:
    add(
        conn,
        make_episode(
            conversation,
            f"{conversation}-1",
            f"I keep bees ({conversation}).",
            at(2025, 1, 1),
            surprise=surprise,
        ),
        make_episode(
            conversation,
            f"{conversation}-2",
            f"My bees made honey ({conversation}).",
            at(2025, 1, 2),
            surprise=surprise,
        ),
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


@pytest.mark.slow
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
    assert {f["fact"] for f in facts(conn)} == {"User keeps bees", "User's bees made honey"}
    state = episodes_state(conn)
    assert state["small-1"]["consolidated_at"] is not None
    assert state["small-2"]["consolidated_at"] is not None
    assert state["other-1"]["consolidated_at"] is None, "only the named conversation"
    assert summary.episodes_consolidated == 2


@pytest.mark.parametrize("surprise", [0.5, None], ids=["given", "not-yet-scored"])
def test_a_nightly_run_counts_small_conversations_as_not_due_and_leaves_them(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    surprise: float | None,
) -> None:
    _two_episodes(conn, surprise=surprise)
    summary = consolidate(db, _bees(), embedder, settings, kind="nightly")
    assert all(s["consolidated_at"] is None for s in episodes_state(conn).values())
    assert summary.episodes_not_due == 2 and summary.conversations == 0


def test_a_conversation_that_stops_below_the_threshold_is_due_once_it_waited_long_enough(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _two_episodes(conn)
    conn.execute(
        "UPDATE episodic_memory SET created_at = now() - make_interval(secs => %s)",
        (settings.consolidation.due_after_s + 60,),
    )
    conn.commit()
    summary = consolidate(db, _bees(), embedder, settings, kind="nightly")
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert summary.episodes_consolidated == 2


def _tail_answered() -> ScriptedModel:
    """A model that answers the conversation's last chunk (k0-2) this time."""
    return ScriptedModel(
        {
            "k0-2": lambda r: ConsolidationOutput(
                facts=[fact("User keeps coins in albums", "interest")]
            )
        }
    )


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

    fixed = _tail_answered()
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

    resumed = _tail_answered()
    summary = consolidate(db, resumed, embedder, two_per_chunk, kind="nightly")
    assert summary.episodes_consolidated == 1
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())


# ── leases, conflicts and lost commits (review case 2) ─────────────────────────────────────


def _expire_leases(db: Database) -> None:
    with db.connection() as other:
        other.execute("UPDATE episodic_memory SET claimed_until = now() - interval '1 s'")


def test_a_run_whose_lease_another_run_took_over_is_not_charged_and_counts_a_conflict(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _seed(conn, conversations=1)
    taker = new_id()

    def slow(r: object) -> ConsolidationOutput:
        # while the model works, the lease runs out and another run takes the conversation
        _expire_leases(db)
        with db.connection() as other:
            assert len(claim(other, taker, ClaimPolicy.of(settings))) == 1
        return ConsolidationOutput(facts=[fact("User collects old coins", "interest")])

    summary = consolidate(db, ScriptedModel({"k0-0": slow}), embedder, settings)
    assert summary.chunks_conflicted == 1 and summary.chunks_failed == 0
    assert summary.episodes_conflicted == 3 and summary.status == "completed"
    state = episodes_state(conn)
    assert all(s["attempts"] == 0 and s["quarantined_at"] is None for s in state.values())
    assert all(s["claimed_by"] == taker for s in state.values()), "still the taker's"
    assert facts(conn) == []
    with conn.cursor() as cur:
        chunk = cur.execute("SELECT status FROM consolidation_chunks").fetchone()
    assert chunk is not None
    (status,) = chunk
    assert status == "conflict"


def test_three_overlapping_runs_never_quarantine_healthy_episodes(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _seed(conn, conversations=1)
    broken = ScriptedModel({"k0-0": lambda r: '{"facts": ['})  # fails, after the takeover
    for _ in range(3):
        taker = new_id()

        def takeover(r: object, taker: object = taker) -> str:
            _expire_leases(db)
            with db.connection() as other:
                claim(other, taker, ClaimPolicy.of(settings))  # type: ignore[arg-type]
            return '{"facts": ['

        broken.script["k0-0"] = takeover
        consolidate(db, broken, embedder, settings)
        release(conn, taker)
    state = episodes_state(conn)
    assert all(s["attempts"] == 0 and s["quarantined_at"] is None for s in state.values())


@pytest.mark.slow
def test_a_run_renews_its_lease_while_the_model_works(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _seed(conn, conversations=1)
    short = with_settings(settings, claim_lease_s=10)  # renewed every 3.3 s
    seen: list[object] = []

    def lease() -> object:
        with db.connection() as other:
            row = other.execute("SELECT max(claimed_until) FROM episodic_memory").fetchone()
        return row[0] if row else None

    def slow(r: object) -> ConsolidationOutput:
        seen.append(lease())
        time.sleep(4)  # longer than a renewal interval
        seen.append(lease())
        return ConsolidationOutput(facts=[fact("User collects old coins", "interest")])

    summary = consolidate(db, ScriptedModel({"k0-0": slow}), embedder, short)
    assert seen[1] > seen[0], "the lease was extended while the run worked"  # type: ignore[operator]
    assert summary.episodes_consolidated == 3


@pytest.fixture
def lost_commit(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Once armed, the next transaction loses its connection at COMMIT: after the commit
    landed (``landed``) or before it (rolled back)."""
    plan = {"armed": False, "landed": True}
    original = psycopg.Transaction.__exit__

    def exit_(self: psycopg.Transaction, kind: Any, exc: Any, tb: Any) -> bool:
        if not plan["armed"] or kind is not None:
            return original(self, kind, exc, tb)
        plan["armed"] = False
        if plan["landed"]:
            original(self, None, None, None)
        else:
            original(self, RuntimeError, RuntimeError("lost"), None)
        self.connection.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(psycopg.Transaction, "__exit__", exit_)
    return plan


def _coins_then_lose(lost: dict[str, bool]) -> ScriptedModel:
    def answer(r: object) -> ConsolidationOutput:
        lost["armed"] = True  # the chunk's apply transaction is the next one
        return ConsolidationOutput(facts=[fact("User collects old coins", "interest")])

    return ScriptedModel({"k0-0": answer})


def test_a_commit_whose_confirmation_was_lost_is_read_back_and_counted_once(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    lost_commit: dict[str, bool],
) -> None:
    _seed(conn, conversations=1)
    summary = consolidate(db, _coins_then_lose(lost_commit), embedder, settings)
    assert summary.status == "completed" and summary.chunks_failed == 0
    assert summary.episodes_consolidated == 3 and summary.facts_inserted == 1
    state = episodes_state(conn)
    assert all(s["consolidated_at"] is not None and s["attempts"] == 0 for s in state.values())
    assert [f["fact"] for f in facts(conn)] == ["User collects old coins"]


def test_a_commit_lost_before_it_landed_charges_nothing_and_the_next_run_applies_it_once(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    lost_commit: dict[str, bool],
) -> None:
    _seed(conn, conversations=1)
    lost_commit["landed"] = False
    with pytest.raises(psycopg.OperationalError):
        consolidate(db, _coins_then_lose(lost_commit), embedder, settings)
    state = episodes_state(conn)
    assert all(s["consolidated_at"] is None and s["attempts"] == 0 for s in state.values())
    assert facts(conn) == []
    again = consolidate(db, _one_fact_each(["k0-0"]), embedder, settings)
    assert again.episodes_consolidated == 3 and len(facts(conn)) == 1


def test_the_shards_of_one_run_claim_disjoint_conversations_and_a_retried_shard_gets_its_own_back(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    _seed(conn, conversations=30)
    run = new_id()
    policy = ClaimPolicy.of(settings)
    connections = [db.raw_connection(autocommit=True) for _ in range(3)]
    try:
        shards = in_parallel(
            *[
                lambda c=c, k=k: claim(c, run, policy, shard=k, max_conversations=10)
                for k, c in enumerate(connections)
            ]
        )
    finally:
        for c in connections:
            c.close()
    taken = [{w.conversation_id for w in work} for work in shards]
    assert [len(t) for t in taken] == [10, 10, 10]
    assert taken[0].isdisjoint(taken[1]) and taken[1].isdisjoint(taken[2])
    assert taken[0].isdisjoint(taken[2]), "a shard never takes what another shard of its run holds"
    again = claim(conn, run, policy, shard=1, max_conversations=10)
    assert {w.conversation_id for w in again} == taken[1], "a retried shard gets its claim back"
    assert claim(conn, run, policy, shard=3, max_conversations=10) == []
    release(conn, run)


def test_a_run_plans_its_shards_from_a_count_and_claims_nothing_up_front(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    _seed(conn, conversations=7)
    run = new_id()
    due = count_due(conn, run, ClaimPolicy.of(settings))
    assert (due.conversations, due.episodes) == (7, 21)
    five = with_settings(settings, claim_max_conversations=5)
    capped = count_due(conn, run, ClaimPolicy.of(five))
    assert capped.conversations == 5
    (claimed,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE claimed_by IS NOT NULL"
    ).fetchone()  # type: ignore[misc]
    assert claimed == 0


def test_a_conversation_claimed_in_part_while_another_claimer_committed_is_given_back_whole(
    db: Database, conn: psycopg.Connection, settings: Settings
) -> None:
    """The race a claim can lose: another claimer commits its claim on a conversation between
    this claim's snapshot and its lock, and an episode ingested meanwhile is all this claim
    takes of it. Checked again on a fresh snapshot before the claim commits, such a
    conversation is given back, and the other claimer keeps it whole."""
    _seed(conn, conversations=2, per=2)
    mine, other = new_id(), new_id()
    with conn.transaction():  # the state the race leaves: conv000 split, conv001 whole
        conn.execute(
            "UPDATE episodic_memory SET claimed_by = %s, claim_shard = 0, "
            "claimed_until = now() + interval '1 hour' WHERE external_key = 'k0-0'",
            (other,),
        )
        conn.execute(
            "UPDATE episodic_memory SET claimed_by = %s, claim_shard = 1, "
            "claimed_until = now() + interval '1 hour' "
            "WHERE external_key IN ('k0-1', 'k1-0', 'k1-1')",
            (mine,),
        )
    with conn.transaction():
        given_back = give_back_split(conn, mine, 1, ["conv000", "conv001"])
    assert given_back == {"conv000"}
    held: dict[str, UUID | None] = dict(
        conn.execute(
            "SELECT external_key, claimed_by FROM episodic_memory ORDER BY external_key"
        ).fetchall()
    )
    assert held == {"k0-0": other, "k0-1": None, "k1-0": mine, "k1-1": mine}


def test_a_conversations_lone_last_episode_is_consolidated_in_the_request_before_it(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    joining = with_settings(settings, chunk_size=2, chunk_lone_joins=True)
    _seed(conn, conversations=1)  # 3 episodes: one request of 3, not one of 2 and one of 1
    model = ScriptedModel(
        {
            "k0-0": lambda r: ConsolidationOutput(facts=[fact("User collects coins", "interest")]),
            "k0-2": lambda r: ConsolidationOutput(facts=[fact("User keeps coins in albums")]),
        }
    )
    summary = consolidate(db, model, embedder, joining, kind="nightly")
    assert summary.chunks == 1 and len(model.requests) == 1
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert {f["fact"] for f in facts(conn)} == {"User collects coins", "User keeps coins in albums"}
