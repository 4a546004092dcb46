"""The consolidation core against the real Postgres and the real embedding model.

The language model is a scripted double: each test says what the model answers; everything
after it (guard, embeddings, dedupe, the transaction) is the production path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
import pytest

from slowwave.models.consolidation import (
    AGENT_MESSAGE_CHARS,
    ConsolidationOutput,
    FactAction,
    episode_time,
    render_message_line,
)
from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Episode, Message
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.llm.tokens import estimate_tokens
from slowwave.models.second_look import ShownMessage, render_second_look_prompt
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
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
from tests.fix_models import Script, ScriptedModel, episode_keys, fact, shown_facts
from tests.fix_processes import gone_pid


def answer(*items: object) -> ConsolidationOutput:
    return ConsolidationOutput(facts=list(items))


@pytest.fixture
def one_per_chunk(settings: Settings) -> Settings:
    """Each episode its own chunk, so a conversation's chunks run in order across rounds."""
    return with_settings(settings, chunk_size=1)


# ── seed 000 scenarios ───────────────────────────────────────────────────────


def test_scenario_a_a_repeated_mention_merges_into_one_fact(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    e1, e2, e5 = add(
        conn,
        make_episode("c", "a1", "I like Rust, it is my favourite language.", at(2025, 1, 1)),
        make_episode("c", "a2", "Let's talk about the weather today, it is sunny.", at(2025, 1, 2)),
        make_episode("c", "a5", "Did I tell you I like Rust? I really do.", at(2025, 1, 5)),
    )
    model = ScriptedModel(
        {
            "a1": lambda r: answer(fact("User likes Rust", "preference", keywords=["Rust"])),
            "a5": lambda r: answer(fact("User likes Rust.", "preference", keywords=["Rust"])),
        }
    )
    summary = consolidate(db, model, embedder, one_per_chunk)

    rows = facts(conn, "c")
    assert [r["fact"] for r in rows] == ["User likes Rust"]
    assert rows[0]["source_episodic_ids"] == [e1.id, e5.id]
    assert rows[0]["valid_at"] == e1.end_at
    assert summary.dedupe_merges == 1
    merge = [d for d in decisions(conn) if d["action"] == "merge"]
    assert len(merge) == 1 and merge[0]["similarity"] >= 0.95
    assert merge[0]["fact_id"] == rows[0]["id"] and merge[0]["proposed_action"] == "new"
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    assert e2.id not in rows[0]["source_episodic_ids"]


def test_scenario_b_additive_preferences_coexist(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        make_episode("c", "b1", "I like Rust a lot, honestly the best language.", at(2025, 1, 1)),
        make_episode("c", "b2", "Nothing much happened today, just a normal day.", at(2025, 1, 2)),
        make_episode("c", "b3", "I like TypeScript too, for the frontend work.", at(2025, 1, 3)),
    )
    model = ScriptedModel(
        {
            "b1": lambda r: answer(fact("User likes Rust", "preference", keywords=["Rust"])),
            "b3": lambda r: answer(
                fact("User likes TypeScript", "preference", keywords=["TypeScript"])
            ),
        }
    )
    consolidate(db, model, embedder, one_per_chunk)
    assert set(active(conn, "c")) == {"User likes Rust", "User likes TypeScript"}


@pytest.mark.slow
def test_scenario_c_a_residence_change_updates_in_event_time_with_lineage(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    moved = at(2025, 6, 15, 9)
    add(
        conn,
        make_episode("c", "c1", "I live in Beijing, near the university.", at(2025, 1, 1)),
        make_episode("c", "c2", "Work has been busy with meetings all week.", at(2025, 3, 1)),
        make_episode("c", "c10", "Big news: I moved to Tokyo last week!", moved),
    )
    model = ScriptedModel(
        {
            "c1": lambda r: answer(fact("User lives in Beijing", keywords=["Beijing"])),
            "c10": lambda r: answer(
                fact(
                    "User lives in Tokyo",
                    action=FactAction.update,
                    existing=shown_facts(r)["User lives in Beijing"],
                    keywords=["Tokyo"],
                )
            ),
        }
    )
    summary = consolidate(db, model, embedder, one_per_chunk)

    rows = {r["fact"]: r for r in facts(conn, "c")}
    beijing, tokyo = rows["User lives in Beijing"], rows["User lives in Tokyo"]
    assert beijing["invalid_at"] == moved
    assert tokyo["valid_at"] == moved and tokyo["invalid_at"] is None
    assert tokyo["supersedes_id"] == beijing["id"]
    assert summary.facts_updated == 1
    update = next(d for d in decisions(conn) if d["action"] == "update")
    assert (update["fact_id"], update["previous_fact_id"]) == (tokyo["id"], beijing["id"])
    assert update["event_time"] == moved
    # system time is kept apart from event time
    assert update["recorded_at"] > moved


@pytest.mark.slow
def test_scenario_d_a_name_correction_replaces_the_wrong_name(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        make_episode("c", "d1", "Hi! My name is Bob, nice to meet you.", at(2025, 1, 1)),
        make_episode("c", "d2", "Can you recommend a good book about history?", at(2025, 1, 2)),
        make_episode("c", "d3", "Sorry, my name is actually Alice, not Bob.", at(2025, 1, 3)),
    )
    model = ScriptedModel(
        {
            "d1": lambda r: answer(fact("User's name is Bob", keywords=["Bob"])),
            "d3": lambda r: answer(
                fact(
                    "User's name is Alice",
                    action=FactAction.update,
                    existing=shown_facts(r)["User's name is Bob"],
                    keywords=["Alice"],
                )
            ),
        }
    )
    consolidate(db, model, embedder, one_per_chunk)
    assert set(active(conn, "c")) == {"User's name is Alice"}
    bob = next(r for r in facts(conn, "c") if r["fact"] == "User's name is Bob")
    assert bob["invalid_at"] == at(2025, 1, 3)


# ── actions ──────────────────────────────────────────────────────────────────


def test_invalidate_ends_a_fact_at_event_time_and_keeps_its_row(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    e1, _, _ = add(
        conn,
        make_episode("c", "i1", "I work at Acme Corp as an engineer.", at(2025, 1, 1)),
        make_episode("c", "i2", "Went hiking on the weekend, it was lovely.", at(2025, 2, 1)),
        make_episode("c", "i3", "I quit Acme. Taking a break from work for now.", at(2025, 3, 1)),
    )
    model = ScriptedModel(
        {
            "i1": lambda r: answer(
                fact("User works at Acme Corp", "experience", keywords=["Acme"])
            ),
            "i3": lambda r: answer(
                fact(
                    "User works at Acme Corp",
                    "experience",
                    action=FactAction.invalidate,
                    existing=shown_facts(r)["User works at Acme Corp"],
                )
            ),
        }
    )
    summary = consolidate(db, model, embedder, one_per_chunk)
    (acme,) = facts(conn, "c")
    assert acme["invalid_at"] == at(2025, 3, 1)
    assert acme["source_episodic_ids"] == [e1.id]
    assert summary.facts_invalidated == 1
    assert active(conn, "c") == {}


@pytest.mark.slow
def test_reinforce_unions_episode_ids_and_is_idempotent(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    e1, e2, e3 = add(
        conn,
        make_episode("c", "r1", "I play the piano every evening after work.", at(2025, 1, 1)),
        make_episode("c", "r2", "Practised piano again tonight, Chopin this time.", at(2025, 1, 2)),
        make_episode("c", "r3", "Some more piano practice today, scales and Bach.", at(2025, 1, 3)),
    )

    def reinforce(r: object) -> ConsolidationOutput:
        short = shown_facts(r)["User plays the piano"]  # type: ignore[arg-type]
        again = fact("User plays the piano", "interest", FactAction.reinforce, short)
        return answer(again, again)  # the same reinforce twice in one answer

    model = ScriptedModel(
        {
            "r1": lambda r: answer(fact("User plays the piano", "interest", keywords=["piano"])),
            "r2": reinforce,
            "r3": reinforce,
        }
    )
    summary = consolidate(db, model, embedder, one_per_chunk)
    (piano,) = facts(conn, "c")
    assert piano["source_episodic_ids"] == [e1.id, *sorted([e2.id, e3.id])]
    assert summary.facts_reinforced == 2

    # replaying the same reinforcement changes nothing
    from slowwave import sql

    conn.execute(
        sql.statement("apply_reinforce"),
        {"fact_ids": [piano["id"]] * 2, "episode_ids": [e2.id, e3.id], "conversations": ["c"] * 2},
    )
    assert facts(conn, "c")[0]["source_episodic_ids"] == piano["source_episodic_ids"]


def test_new_facts_that_duplicate_each_other_in_one_answer_merge(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode(
                "c",
                f"n{i}",
                f"Episode {i}: I adore hiking in the Alps with Rex, my dog.",
                at(2025, 1, i),
            )
            for i in range(1, 4)
        ],
    )
    model = ScriptedModel(
        {
            "n1": lambda r: answer(
                fact("User likes hiking in the Alps", "interest", keywords=["Alps"]),
                fact("User likes hiking in the Alps.", "interest", keywords=["Alps"]),
                fact("User has a dog named Rex", "relationship", keywords=["Rex"]),
            )
        }
    )
    summary = consolidate(db, model, embedder, settings)
    assert set(active(conn, "c")) == {"User likes hiking in the Alps", "User has a dog named Rex"}
    assert summary.dedupe_merges == 1 and summary.facts_inserted == 2


# ── guard ────────────────────────────────────────────────────────────────────


def test_unknown_ids_turn_reinforce_and_update_into_new_and_drop_invalidate(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode(
                "c",
                f"u{i}",
                f"Talking about stamps, Japanese and my bicycle, round {i}.",
                at(2025, 1, i),
            )
            for i in range(1, 4)
        ],
    )
    model = ScriptedModel(
        {
            "u1": lambda r: answer(
                fact("User collects vintage stamps", "interest", FactAction.reinforce, "F9"),
                fact("User is learning Japanese", "goal", FactAction.update, "F4"),
                fact("User owns a red bicycle", "identity", FactAction.invalidate, "F2"),
            )
        }
    )
    consolidate(db, model, embedder, settings)
    assert set(active(conn, "c")) == {"User collects vintage stamps", "User is learning Japanese"}
    log = {(d["proposed_action"], d["action"]): d for d in decisions(conn)}
    assert "unknown fact id 'F9'" in log[("reinforce", "new")]["reason"]
    assert "unknown fact id 'F4'" in log[("update", "new")]["reason"]
    assert "invalidate of unknown fact id 'F2' dropped" in log[("invalidate", "rejected")]["reason"]


@pytest.mark.slow
def test_conflicting_actions_on_one_fact_resolve_update_over_invalidate_over_reinforce(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        make_episode("c", "k1", "My favourite colour is blue, always has been.", at(2025, 1, 1)),
        make_episode("c", "k2", "Let me think about colours for the new room.", at(2025, 1, 2)),
        make_episode("c", "k3", "I changed my mind: my favourite colour is green.", at(2025, 1, 3)),
    )

    def conflicting(r: object) -> ConsolidationOutput:
        short = shown_facts(r)["User's favourite colour is blue"]  # type: ignore[arg-type]
        return answer(
            fact("User's favourite colour is blue", "preference", FactAction.reinforce, short),
            fact("User's favourite colour is blue", "preference", FactAction.invalidate, short),
            fact("User's favourite colour is green", "preference", FactAction.update, short),
        )

    model = ScriptedModel(
        {
            "k1": lambda r: answer(fact("User's favourite colour is blue", "preference")),
            "k3": conflicting,
        }
    )
    consolidate(db, model, embedder, one_per_chunk)
    assert set(active(conn, "c")) == {"User's favourite colour is green"}
    rejected = [d["reason"] for d in decisions(conn) if d["action"] == "rejected"]
    assert sorted(rejected) == [
        "invalidate overridden by update of the same fact",
        "reinforce overridden by update of the same fact",
    ]
    texts = {d["proposed_fact"] for d in decisions(conn) if d["action"] == "rejected"}
    assert texts == {"User's favourite colour is blue"}


@pytest.mark.slow
def test_bad_categories_and_degenerate_facts_are_rejected_with_a_reason(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode(
                "c", f"g{i}", f"We talked about Jolene and family, part {i}.", at(2025, 1, i)
            )
            for i in range(1, 4)
        ],
    )
    model = ScriptedModel(
        {
            "g1": lambda r: answer(
                fact("User enjoys long walks", "hobby"),
                fact("Jolene", "relationship"),
                fact("family family family family", "relationship"),
                fact("{{#1}}} #1 | 2023-03-11T09:16:10+00:00 to 2023", "identity"),
                fact(
                    "Jolene is the user's sister",
                    "relationship",
                    keywords=["family_family_family", "Jolene"],
                ),
            )
        }
    )
    summary = consolidate(db, model, embedder, settings)
    kept = active(conn, "c")
    assert set(kept) == {"Jolene is the user's sister"}
    assert kept["Jolene is the user's sister"]["keywords"] == ["Jolene"]
    reasons = sorted(d["reason"] for d in decisions(conn) if d["action"] == "rejected")
    assert reasons[0].startswith("degenerate fact: 'family' repeated 3 times")
    assert reasons[1].startswith("degenerate fact: fewer than 3 words")
    assert reasons[2] == "degenerate fact: mostly symbols and digits, not a sentence"
    assert reasons[3].startswith("unknown category 'hobby'")
    assert summary.actions_rejected == 4


@pytest.mark.slow
def test_a_fact_of_another_conversation_can_never_be_touched(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode("a", f"x{i}", f"I live in Paris, chapter {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    consolidate(
        db,
        ScriptedModel({"x1": lambda r: answer(fact("User lives in Paris", keywords=["Paris"]))}),
        embedder,
        settings,
    )
    (paris,) = facts(conn, "a")

    add(
        conn,
        *[
            make_episode("b", f"y{i}", f"I live in Paris too, Lyon next, part {i}.", at(2025, 2, i))
            for i in (1, 2, 3)
        ],
    )

    def attack(r: object) -> ConsolidationOutput:
        shown = shown_facts(r)  # type: ignore[arg-type]
        assert "User lives in Paris" not in shown, "another conversation's fact was shown"
        return answer(
            fact("User lives in Paris", action=FactAction.invalidate, existing=str(paris["id"])),
            fact("User lives in Lyon", action=FactAction.update, existing="F1"),
            fact("User lives in Paris", action=FactAction.reinforce, existing=str(paris["id"])),
        )

    consolidate(db, ScriptedModel({"y1": attack}), embedder, settings)
    assert facts(conn, "a") == [paris]
    assert set(active(conn, "b")) == {"User lives in Lyon", "User lives in Paris"}


def test_apply_refuses_a_plan_that_names_another_conversations_fact(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """Even a plan built past the guard cannot reach across conversations: SQL checks again."""
    from slowwave.models.ids import new_id
    from slowwave.models.plan import Plan, PlannedAction
    from slowwave.tasks.apply import apply_plan
    from slowwave.tasks.claim import ClaimPolicy, claim
    from slowwave.tasks.runs import start_run

    add(
        conn,
        *[
            make_episode("a", f"p{i}", f"I live in Oslo, part {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    consolidate(
        db,
        ScriptedModel({"p1": lambda r: answer(fact("User lives in Oslo", keywords=["Oslo"]))}),
        embedder,
        settings,
    )
    (oslo,) = facts(conn, "a")
    (b1, b2, b3) = add(
        conn,
        *[make_episode("b", f"q{i}", f"Hello there, part {i}.", at(2025, 2, i)) for i in (1, 2, 3)],
    )
    run = start_run(conn)
    (_work,) = claim(conn, run.run_id, ClaimPolicy.of(settings))
    plan = Plan(
        chunk_id=new_id(),
        conversation_id="b",
        episode_ids=[b1.id, b2.id, b3.id],
        event_time=b3.end_at,
        actions=[
            PlannedAction(
                action=FactAction.invalidate,
                proposed=FactAction.invalidate,
                target_id=oslo["id"],
                episode_ids=[b1.id],
                event_time=b3.end_at,
            )
        ],
    )
    result = apply_plan(conn, plan, embedder.embed([]), run.run_id, settings.consolidation)
    assert not result.applied and "IsolationViolation" in (result.error or "")
    assert facts(conn, "a") == [oslo]
    state = episodes_state(conn)
    assert state["q1"]["attempts"] == 1 and state["q1"]["consolidated_at"] is None


def test_in_a_batch_only_the_refused_chunk_is_charged_and_the_others_apply(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    from slowwave.models.chunk import ChunkToApply
    from slowwave.models.ids import new_id
    from slowwave.models.plan import Plan, PlannedAction
    from slowwave.tasks.apply import apply_plans
    from slowwave.tasks.claim import ClaimPolicy, claim
    from slowwave.tasks.runs import start_run

    add(conn, make_episode("a", "o1", "I live in Oslo these days.", at(2025, 1, 1)))
    consolidate(
        db,
        ScriptedModel({"o1": lambda r: answer(fact("User lives in Oslo", keywords=["Oslo"]))}),
        embedder,
        settings,
        kind="backfill",
    )
    (oslo,) = facts(conn, "a")
    (b1,) = add(conn, make_episode("b", "r1", "Hello from b.", at(2025, 2, 1)))
    (c1,) = add(conn, make_episode("c", "s1", "I play chess on Sundays.", at(2025, 2, 2)))
    run = start_run(conn)
    claim(conn, run.run_id, ClaimPolicy.of(settings), everything=True)

    def plan_of(episode: Episode, action: PlannedAction) -> Plan:
        return Plan(
            chunk_id=new_id(),
            conversation_id=episode.conversation_id,
            episode_ids=[episode.id],
            event_time=episode.end_at,
            actions=[action],
        )

    hostile = plan_of(  # names conversation a's fact from conversation b
        b1,
        PlannedAction(
            action=FactAction.invalidate,
            proposed=FactAction.invalidate,
            target_id=oslo["id"],
            episode_ids=[b1.id],
            event_time=b1.end_at,
        ),
    )
    chess = plan_of(
        c1,
        PlannedAction(
            action=FactAction.new,
            proposed=FactAction.new,
            category="interest",
            fact="User plays chess on Sundays",
            keywords=["chess"],
            episode_ids=[c1.id],
            event_time=c1.end_at,
        ),
    )
    results = apply_plans(
        conn,
        [
            ChunkToApply(hostile, embedder.embed([])),
            ChunkToApply(chess, embedder.embed(["User plays chess on Sundays"])),
        ],
        run.run_id,
        settings.consolidation,
    )
    assert [r.applied for r in results] == [False, True]
    assert "IsolationViolation" in (results[0].error or "")
    assert facts(conn, "a") == [oslo]
    assert [f["fact"] for f in facts(conn, "c")] == ["User plays chess on Sundays"]
    state = episodes_state(conn)
    assert (state["r1"]["attempts"], state["r1"]["consolidated_at"]) == (1, None)
    assert state["s1"]["attempts"] == 0 and state["s1"]["consolidated_at"] is not None


# ── gate, trigger, flashbulb ─────────────────────────────────────────────────


def test_the_gate_consolidates_short_unsurprising_episodes_without_the_model(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        make_episode("c", "s1", "ok", at(2025, 1, 1), surprise=0.1),
        make_episode("c", "s2", "thanks!", at(2025, 1, 2), surprise=0.2),
        make_episode("c", "s3", "got it", at(2025, 1, 3), surprise=0.1),
        make_episode("d", "t1", "fine", at(2025, 1, 1), surprise=0.1),
        make_episode("d", "t2", "ok!", at(2025, 1, 2), surprise=0.9),  # surprising: not gated
        make_episode("d", "t3", "I have decided to move to Canada next spring.", at(2025, 1, 3)),
    )
    model = ScriptedModel({"t3": lambda r: answer(fact("User plans to move to Canada", "goal"))})
    summary = consolidate(db, model, embedder, settings)

    state = episodes_state(conn)
    assert all(s["consolidated_at"] is not None for s in state.values())
    assert {k for k, s in state.items() if s["gated"]} == {"s1", "s2", "s3", "t1"}
    assert summary.episodes_skipped == 4
    with conn.cursor() as cur:
        chunks: dict[str, str | None] = dict(
            cur.execute("SELECT conversation_id, model FROM consolidation_chunks")
        )
    assert chunks == {"c": None, "d": "scripted"}
    assert set(active(conn, "d")) == {"User plans to move to Canada"}


def test_an_answer_cut_off_at_max_tokens_applies_its_whole_items_and_the_run_says_so(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode(
                "cut",
                f"cut{i}",
                f"A long talk about chemistry in Leeds, Mia and Japan, part {i}.",
                at(2025, 1, i),
            )
            for i in (1, 2, 3)
        ],
    )
    model = ScriptedModel(
        {
            "cut1": lambda r: answer(
                fact("User teaches chemistry in Leeds"),
                fact("User climbs with her sister Mia", "relationship"),
                fact("User is saving up to visit Japan", "goal"),
            )
        },
        cut_off={"cut1"},
    )
    summary = consolidate(db, model, embedder, settings)

    assert set(active(conn, "cut")) == {
        "User teaches chemistry in Leeds",
        "User climbs with her sister Mia",
    }  # the third item was cut: dropped, not guessed
    assert summary.answers_cut_off == 1 and summary.chunks_failed == 0
    assert all(s["consolidated_at"] is not None for s in episodes_state(conn).values())
    with conn.cursor() as cur:
        (recorded,) = cur.execute("SELECT summary->>'answers_cut_off' FROM consolidation_runs")
    assert recorded == ("1",)


def test_an_episode_without_surprise_is_scored_by_novelty_and_the_gate_skips_the_familiar(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode(
                "n", f"n{i}", f"A long first talk about my work in Leeds, part {i}.", at(2025, 1, i)
            )
            for i in (1, 2, 3)
        ],
    )
    model = ScriptedModel({"n1": lambda r: answer(fact("User teaches chemistry in Leeds"))})
    consolidate(db, model, embedder, settings)
    add(
        conn,
        make_episode("n", "n4", "I teach chemistry in Leeds.", at(2025, 2, 1), surprise=None),
        make_episode("n", "n5", "We adopted a puppy, Rex!", at(2025, 2, 2), surprise=None),
        make_episode("n", "n6", "Thanks, that is all.", at(2025, 2, 3), surprise=0.9),
        make_episode("fresh", "f1", "Hello there.", at(2025, 2, 1), surprise=None),
    )
    model.requests.clear()
    summary = consolidate(db, model, embedder, with_settings(settings, episode_threshold=1))

    state = episodes_state(conn)
    assert state["n4"]["surprise"] < 0.3 and state["n4"]["gated"]  # says what a fact says
    assert state["n5"]["surprise"] > 0.6 and not state["n5"]["gated"]  # short, but new
    assert state["n6"]["surprise"] == pytest.approx(0.9)  # the source's own is kept
    assert state["n6"]["novelty"] is None and state["n4"]["novelty"] is not None
    assert state["n1"]["surprise"] == pytest.approx(0.5)
    assert state["f1"]["surprise"] == 1.0  # nothing known yet: all of it is new
    assert all(s["consolidated_at"] is not None for s in state.values())
    shown = [key for r in model.requests for key in episode_keys(r)]
    assert "n4" not in shown and {"n5", "n6", "f1"} <= set(shown)  # the gated one cost no call
    assert summary.model_calls == len(model.requests)
    prompt = next(r for r in model.requests if "f1" in episode_keys(r)).user
    assert "E1 is unlike what is known (a note, not part of the conversation)" in prompt
    assert "surprise" not in prompt  # no score for a model to copy into a fact


def test_a_conversation_is_due_at_three_episodes_or_one_flashbulb(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        make_episode("two", "w1", "A perfectly ordinary conversation, first.", at(2025, 1, 1)),
        make_episode("two", "w2", "A perfectly ordinary conversation, second.", at(2025, 1, 2)),
        *[
            make_episode("three", f"h{i}", f"An ordinary conversation, number {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
        make_episode(
            "flash", "f1", "My father passed away this morning.", at(2025, 1, 1), surprise=0.9
        ),
    )
    model = ScriptedModel(
        {"f1": lambda r: answer(fact("User's father died in January 2025", "experience"))}
    )
    consolidate(db, model, embedder, settings)
    state = episodes_state(conn)
    assert {k for k, s in state.items() if s["consolidated_at"] is not None} == {
        "h1",
        "h2",
        "h3",
        "f1",
    }
    flash_prompt = next(r for r in model.requests if "f1" in episode_keys(r)).user
    assert "E1 is unlike what is known" in flash_prompt
    ordinary = next(r for r in model.requests if "h1" in episode_keys(r)).user
    assert "Extract facts more thoroughly" not in ordinary


def test_the_system_prompt_is_byte_identical_and_facts_are_shown_under_short_ids(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        *[
            make_episode("c", f"z{i}", f"I like jazz music, especially record {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    model = ScriptedModel({"z1": lambda r: answer(fact("User likes jazz music", "preference"))})
    consolidate(db, model, embedder, one_per_chunk)
    (jazz,) = facts(conn, "c")
    first, second, third = (r for r in model.requests if r.purpose is Purpose.consolidate)
    assert first.system == second.system == third.system
    assert "[F1] [preference] User likes jazz music" in second.user
    assert str(jazz["id"]) not in second.user
    assert "(none yet: every fact is new)" in first.user


# ── failures ─────────────────────────────────────────────────────────────────


def test_a_malformed_answer_fails_only_its_chunk(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode("bad", f"m{i}", f"Some chatter about gardens, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
        *[
            make_episode("good", f"o{i}", f"I grow tomatoes in my garden, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    model = ScriptedModel(
        {
            "m1": lambda r: '{"facts": [{"action": "new"',
            "o1": lambda r: answer(fact("User grows tomatoes in a garden", "interest")),
        }
    )
    summary = consolidate(db, model, embedder, settings)
    state = episodes_state(conn)
    assert state["m1"]["consolidated_at"] is None and state["m1"]["attempts"] == 1
    assert "model answer is not a valid consolidation output" in state["m1"]["last_error"]
    assert state["o1"]["consolidated_at"] is not None
    assert set(active(conn, "good")) == {"User grows tomatoes in a garden"}
    assert summary.status == "completed_with_failures" and summary.chunks_failed == 1
    assert state["m1"]["claimed_by"] is None, "the failed conversation's claim is released"


FAULT = """
CREATE FUNCTION fail_decision_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.conversation_id = 'faulty' THEN
        RAISE EXCEPTION 'injected fault for %', NEW.conversation_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fail_decision_log BEFORE INSERT ON decision_log
    FOR EACH ROW EXECUTE FUNCTION fail_decision_log();
"""


@pytest.fixture
def faulty_decision_log(conn: psycopg.Connection) -> object:
    """A fault inside apply's transaction: the decision-log write fails for one conversation."""
    conn.execute(FAULT)
    conn.commit()
    yield
    conn.execute("DROP TRIGGER fail_decision_log ON decision_log")
    conn.execute("DROP FUNCTION fail_decision_log()")
    conn.commit()


@pytest.mark.slow
def test_a_fault_inside_the_transaction_applies_nothing_and_quarantines_after_k_attempts(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    faulty_decision_log: object,
) -> None:
    k = with_settings(settings, chunk_size=2, max_attempts=2)
    add(
        conn,
        *[
            make_episode("faulty", f"v{i}", f"I build ships in bottles, {i}.", at(2025, 1, i))
            for i in (1, 2, 3, 4)
        ],
    )
    model = ScriptedModel(
        {
            "v1": lambda r: answer(fact("User builds ships in bottles", "interest")),
            "v3": lambda r: answer(fact("User sells ships in bottles", "experience")),
        }
    )
    first = consolidate(db, model, embedder, k)
    state = episodes_state(conn)
    assert facts(conn, "faulty") == [], "nothing of the failed chunk was applied"
    assert [state[f"v{i}"]["attempts"] for i in (1, 2, 3, 4)] == [1, 1, 0, 0]
    assert "injected fault for faulty" in state["v1"]["last_error"]
    assert first.episodes_deferred == 2, "later chunks wait while an earlier one is retried"

    second = consolidate(db, model, embedder, k)
    state = episodes_state(conn)
    assert state["v1"]["quarantined_at"] is not None and state["v2"]["quarantined_at"] is not None
    assert second.episodes_quarantined == 2
    # once quarantined, the conversation goes on (and fails again on the same fault)
    assert state["v3"]["attempts"] == 1
    with conn.cursor() as cur:
        statuses = [
            r[0]
            for r in cur.execute("SELECT status FROM consolidation_chunks ORDER BY recorded_at")
        ]
    assert statuses == ["failed", "quarantined", "failed"]


def test_a_rerun_after_success_claims_nothing_and_adds_no_facts(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(
        conn,
        *[
            make_episode("c", f"e{i}", f"I study marine biology, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )
    model = ScriptedModel(
        {"e1": lambda r: answer(fact("User studies marine biology", "experience"))}
    )
    consolidate(db, model, embedder, settings)
    before = facts(conn)
    again = consolidate(db, model, embedder, settings)
    assert again.conversations == 0 and again.chunks == 0
    assert facts(conn) == before
    with conn.cursor() as cur:
        runs = cur.execute(
            "SELECT status, episodes_consolidated FROM consolidation_runs ORDER BY started_at"
        ).fetchall()
    assert runs == [("completed", 3), ("completed", 0)]


# ── evidence and event time (review case 3) ──────────────────────────────────────────────


def test_a_fact_that_cites_no_episode_is_dated_by_its_most_similar_episode_not_the_chunk_end(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    _, march, _ = add(
        conn,
        make_episode("c", "ev1", "Work was busy, lots of meetings about budgets.", at(2025, 1, 10)),
        make_episode(
            "c", "ev2", "Big news: I moved to Lisbon, Portugal this week!", at(2025, 3, 5)
        ),
        make_episode("c", "ev3", "I tried a new recipe for lemon cake today.", at(2025, 8, 20)),
    )
    model = ScriptedModel(
        {"ev1": lambda r: answer(fact("User lives in Lisbon, Portugal", keywords=["Lisbon"]))}
    )
    consolidate(db, model, embedder, settings)
    (lisbon,) = facts(conn, "c")
    assert lisbon["source_episodic_ids"] == [march.id]
    assert lisbon["valid_at"] == march.end_at
    (logged,) = [d for d in decisions(conn) if d["action"] == "new"]
    assert "attributed to the most similar episode" in logged["reason"]


def test_a_fact_that_cites_an_episode_without_its_names_is_dated_by_the_episode_that_says_them(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """The quick start's way: the default model cited Dana's April episode (short answers on
    weekdays) for her move to Manchester, said in May, and Leeds ended seven weeks early."""
    april, may = add(
        conn,
        make_episode("c", "mc1", "Please keep your answers short on weekdays.", at(2023, 4, 2)),
        make_episode(
            "c", "mc2", "Big news: I'm moving to Manchester in July for a new job.", at(2023, 5, 20)
        ),
    )
    moving = "The user is moving to Manchester in July for a new job."
    model = ScriptedModel(
        {
            "mc1": lambda r: answer(
                fact("The user wants short answers on weekdays.", "guideline", episodes=["E1"]),
                fact(moving, keywords=["Manchester"], episodes=["E1"]),
            )
        }
    )
    consolidate(db, model, embedder, with_settings(settings, episode_threshold=1))
    now = active(conn, "c")
    assert now[moving]["source_episodic_ids"] == [may.id]
    assert now[moving]["valid_at"] == may.end_at
    short = now["The user wants short answers on weekdays."]
    assert short["source_episodic_ids"] == [april.id]  # its cited episode says what it says
    (logged,) = [d for d in decisions(conn) if d["proposed_fact"] == moving]
    assert "cited" in logged["reason"] and "Manchester" in logged["reason"]


def test_a_fact_whose_cited_episode_says_it_keeps_its_date_though_another_names_its_person(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    """The quick start's Mia: her overhangs are said in March's second episode, Dana's name
    only in the first ("Hi! I'm Dana."); the fact names both and stays with what it says."""
    _, overhangs = add(
        conn,
        make_episode("c", "mi1", "Hi! I'm Dana. I teach chemistry in Leeds.", at(2023, 3, 4)),
        make_episode(
            "c", "mi2", "My sister Mia is much better at overhangs than I am.", at(2023, 3, 11)
        ),
    )
    better = "Mia is climbing overhangs better than Dana does."
    model = ScriptedModel(
        {"mi1": lambda r: answer(fact(better, "preference", keywords=["Mia"], episodes=["E2"]))}
    )
    consolidate(db, model, embedder, with_settings(settings, episode_threshold=1))
    assert active(conn, "c")[better]["source_episodic_ids"] == [overhangs.id]


# ── actions checked against each other (review case 4) ──────────────────────────────────


@pytest.mark.slow
def test_an_update_and_a_new_fact_of_the_same_sentence_leave_one_active_fact(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        make_episode("c", "t1", "I live in Beijing, near the university.", at(2025, 1, 1)),
        make_episode("c", "t2", "Packing boxes all week, what a chore.", at(2025, 2, 1)),
        make_episode("c", "t3", "I moved to Tokyo! New flat in Shibuya.", at(2025, 3, 1)),
    )
    model = ScriptedModel(
        {
            "t1": lambda r: answer(fact("User lives in Beijing", keywords=["Beijing"])),
            "t3": lambda r: answer(
                fact(
                    "User lives in Tokyo",
                    action=FactAction.update,
                    existing=shown_facts(r)["User lives in Beijing"],
                    keywords=["Tokyo"],
                    episodes=["E1"],
                ),
                fact("User lives in Tokyo", keywords=["Tokyo"], episodes=["E1"]),
            ),
        }
    )
    consolidate(db, model, embedder, one_per_chunk)
    live = active(conn, "c")
    assert set(live) == {"User lives in Tokyo"}
    beijing = next(f for f in facts(conn, "c") if f["fact"] == "User lives in Beijing")
    assert live["User lives in Tokyo"]["supersedes_id"] == beijing["id"]
    assert [d["action"] for d in decisions(conn)][-2:] == ["update", "merge"]


def test_a_change_inside_one_chunk_keeps_its_history_in_event_time(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    e1, _, e3 = add(
        conn,
        make_episode("c", "h1", "I just moved to Beijing for a new job.", at(2025, 1, 1)),
        make_episode("c", "h2", "The food here is amazing, dumplings every day.", at(2025, 2, 1)),
        make_episode("c", "h3", "Company relocated me again: I now live in Tokyo.", at(2025, 5, 1)),
    )
    model = ScriptedModel(
        {
            "h1": lambda r: answer(
                fact("User lives in Beijing", keywords=["Beijing"], episodes=["E1"]),
                fact(
                    "User lives in Tokyo",
                    action=FactAction.update,
                    existing="N1",
                    keywords=["Tokyo"],
                    episodes=["E3"],
                ),
            )
        }
    )
    consolidate(db, model, embedder, settings)
    rows = {f["fact"]: f for f in facts(conn, "c")}
    beijing, tokyo = rows["User lives in Beijing"], rows["User lives in Tokyo"]
    assert (beijing["valid_at"], beijing["invalid_at"]) == (e1.end_at, e3.end_at)
    assert (tokyo["valid_at"], tokyo["invalid_at"]) == (e3.end_at, None)
    assert tokyo["supersedes_id"] == beijing["id"]
    assert set(active(conn, "c")) == {"User lives in Tokyo"}


def test_a_plan_that_asserts_a_fact_it_ends_is_refused_with_a_reason(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    add(
        conn,
        make_episode("c", "x1", "I live in Beijing, near the university.", at(2025, 1, 1)),
        make_episode("c", "x2", "Still in Beijing for now, we'll see.", at(2025, 2, 1)),
        make_episode("c", "x3", "I left Beijing for good last month.", at(2025, 3, 1)),
    )

    def contradicting(r: object) -> ConsolidationOutput:
        beijing = shown_facts(r)["User lives in Beijing"]  # type: ignore[arg-type]
        return answer(
            fact("User lives in Beijing", action=FactAction.invalidate, existing=beijing),
            fact("User lives in Beijing", keywords=["Beijing"]),
        )

    model = ScriptedModel(
        {
            "x1": lambda r: answer(fact("User lives in Beijing", keywords=["Beijing"])),
            "x3": contradicting,
        }
    )
    consolidate(db, model, embedder, one_per_chunk)
    assert active(conn, "c") == {}
    (beijing,) = facts(conn, "c")
    assert beijing["invalid_at"] == at(2025, 3, 1)
    (refused,) = [d for d in decisions(conn) if d["action"] == "rejected"]
    assert refused["reason"].startswith("contradicts the plan itself")


# ── only the chunk's own failures count against it (review case 7) ─────────────────────


def test_a_programming_error_in_apply_fails_the_run_and_charges_no_attempt(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    add(
        conn,
        *[
            make_episode("c", f"b{i}", f"I paint watercolours, {i}.", at(2025, 1, i))
            for i in (1, 2, 3)
        ],
    )

    def bug(*args: object, **kwargs: object) -> object:
        raise ValueError("a bug in slowwave, not in the chunk")

    monkeypatch.setattr("slowwave.tasks.apply.decide", bug)
    model = ScriptedModel({"b1": lambda r: answer(fact("User paints watercolours", "interest"))})
    with pytest.raises(ValueError, match="a bug in slowwave"):
        consolidate(db, model, embedder, settings)
    state = episodes_state(conn)
    assert all(s["attempts"] == 0 and s["quarantined_at"] is None for s in state.values())
    assert all(s["claimed_by"] is None for s in state.values())
    with conn.cursor() as cur:
        run = cur.execute("SELECT status, error FROM consolidation_runs").fetchone()
    assert run is not None
    (status, error) = run
    assert status == "failed" and "a bug in slowwave" in error


# ── chunks cut by tokens, long episodes in parts (review case 5) ────────────────────────


@dataclass
class SmallContextModel(ScriptedModel):
    """A model with a small context window that refuses any prompt over it, as an engine does."""

    context_tokens: int = 3072
    max_tokens: int = 256
    prompts: list[int] = field(default_factory=list)

    def count_tokens(self, text: str, /) -> int:
        return estimate_tokens(text)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        answers = []
        for request in requests:
            size = self.count_tokens(request.system) + self.count_tokens(request.user)
            self.prompts.append(size)
            if size + self.max_tokens > self.context_tokens:
                answers.append(ModelAnswer(request.chunk_id, None, f"prompt of {size} tokens"))
            else:
                answers += super().generate([request])
        return answers


def _long(key: str, when: object, messages: int, words: int = 60) -> Episode:
    episode = make_episode("c", key, "", when)  # type: ignore[arg-type]
    text = " ".join(f"word{i}" for i in range(words))
    episode.messages = [Message(speaker="user", text=f"{j}: {key} {text}") for j in range(messages)]
    return episode


@pytest.mark.slow
def test_the_parts_of_a_long_episode_share_the_surprise_its_first_part_was_given(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2, episode_threshold=1)
    huge = _long("S", at(2025, 2, 1), messages=24).model_copy(update={"surprise": None})
    add(conn, huge)
    model = SmallContextModel(
        {"S": lambda r: answer(fact("User wrote a long essay", "experience"))}
    )
    consolidate(db, model, embedder, small)

    assert len(model.requests) > 1  # opened in parts, the later ones after facts exist
    for request in model.requests:  # no facts when the first part opened: 1.0, for every part
        assert "E1 is unlike what is known" in request.user
    assert episodes_state(conn)["S"]["novelty"] == 1.0


@pytest.mark.slow
def test_long_episodes_are_cut_by_tokens_and_split_by_messages_never_over_the_context(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2)
    episodes = [_long(f"L{i}", at(2025, 1, i + 1), messages=3) for i in range(8)]
    huge = _long("H", at(2025, 2, 1), messages=24)
    add(conn, *episodes, huge)

    def note(i: int) -> Script:
        return lambda r: answer(fact(f"User wrote note number {i}", "experience"))

    model = SmallContextModel(
        {
            **{f"L{i}": note(i) for i in range(8)},
            "H": lambda r: answer(fact("User wrote a very long essay", "experience")),
        }
    )
    summary = consolidate(db, model, embedder, small)
    assert summary.chunks_failed == 0 and summary.episodes_quarantined == 0
    assert max(model.prompts) + 256 <= 3072, "no prompt over the context"
    state = episodes_state(conn)
    assert all(s["consolidated_at"] is not None and s["attempts"] == 0 for s in state.values())
    huge_parts = [r for r in model.requests if "H" in episode_keys(r)]
    assert len(huge_parts) > 1, "the oversized episode went in parts"
    assert all(episode_time(huge) in r.user for r in huge_parts), "parts keep its time"
    shown = "".join(r.user for r in huge_parts)
    assert all(shown.count(f"user: {j}: H word0 ") == 1 for j in range(24)), "every message, once"
    with conn.cursor() as cur:
        row = cur.execute(
            "SELECT consolidated_messages FROM episodic_memory WHERE external_key = 'H'"
        ).fetchone()
    assert row is not None
    (done,) = row
    assert done == 24
    (essay,) = [f for f in facts(conn, "c") if "essay" in f["fact"]]
    assert essay["source_episodic_ids"] == [huge.id] and essay["valid_at"] == huge.end_at


@pytest.mark.slow
def test_a_long_episode_interrupted_between_parts_resumes_at_its_first_pending_message(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2)
    huge = _long("H", at(2025, 2, 1), messages=24)
    add(conn, huge)
    calls = {"n": 0}

    def part(r: object) -> ConsolidationOutput:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the process dies with the second part at the model
        return answer(fact(f"User wrote essay part {calls['n']}", "experience"))

    with pytest.raises(KeyboardInterrupt):
        consolidate(db, SmallContextModel({"H": part}), embedder, small, kind="backfill")
    with conn.cursor() as cur:
        row = cur.execute(
            "SELECT consolidated_messages, consolidated_at FROM episodic_memory"
        ).fetchone()
    assert row is not None
    (done, finished) = row
    assert 0 < done < 24 and finished is None

    resumed = SmallContextModel({"H": part})
    consolidate(db, resumed, embedder, small, kind="backfill")
    first_shown = resumed.requests[0].user
    assert f"user: {done}: H word0" in first_shown
    assert f"user: {done - 1}: H word0" not in first_shown
    state = episodes_state(conn)["H"]
    assert state["consolidated_at"] is not None and state["attempts"] == 0
    assert {f["fact"] for f in facts(conn, "c")} >= {"User wrote essay part 1"}


@pytest.mark.slow
def test_a_message_too_long_for_one_prompt_goes_in_pieces_each_applied_once(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2)
    huge = _long("H", at(2025, 2, 1), messages=1, words=1500)  # one message, several prompts
    add(conn, huge)
    calls = {"n": 0}

    def piece(r: object) -> ConsolidationOutput:
        calls["n"] += 1
        return answer(fact(f"User wrote essay piece {calls['n']}", "experience"))

    model = SmallContextModel({"H": piece})
    summary = consolidate(db, model, embedder, small, kind="backfill")
    assert calls["n"] >= 3 and max(model.prompts) + 256 <= 3072
    logged = decisions(conn)
    assert [d["proposed_fact"] for d in logged] == [
        f"User wrote essay piece {n}" for n in range(1, calls["n"] + 1)
    ], "every piece applied, none read back as another"
    assert len({d["chunk_id"] for d in logged}) == calls["n"]
    assert summary.chunks == calls["n"] and summary.episodes_consolidated == 1
    assert episodes_state(conn)["H"]["consolidated_at"] is not None


def test_an_episode_no_cut_makes_fit_is_quarantined_with_the_reason_and_the_rest_goes_on(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    small = with_settings(settings, llm_max_tokens=256, related_facts_limit=2)
    odd = make_episode("c", "odd", "hello there", at(2025, 1, 1), speaker="x" * 9000)
    fine = make_episode("c", "fine", "I play the cello in an orchestra.", at(2025, 1, 2))
    add(conn, odd, fine)
    model = SmallContextModel({"fine": lambda r: answer(fact("User plays the cello", "interest"))})
    summary = consolidate(db, model, embedder, small, kind="backfill")
    state = episodes_state(conn)
    assert state["odd"]["quarantined_at"] is not None
    assert "cannot be cut to fit the model's context" in state["odd"]["last_error"]
    assert state["fine"]["consolidated_at"] is not None
    assert summary.episodes_quarantined == 1 and summary.episodes_consolidated == 1


def test_an_update_of_a_new_fact_that_merged_into_a_known_one_ends_the_known_one(
    db: Database, conn: psycopg.Connection, embedder: Embedder, one_per_chunk: Settings
) -> None:
    _, _, moved = add(
        conn,
        make_episode("c", "m1", "I live in Boston, love the harbour.", at(2025, 1, 1)),
        make_episode("c", "m2", "Still in Boston, the winter is cold.", at(2025, 2, 1)),
        make_episode("c", "m3", "Moved to New York last week!", at(2025, 3, 1)),
    )
    model = ScriptedModel(
        {
            "m1": lambda r: answer(fact("User lives in Boston", keywords=["Boston"])),
            "m3": lambda r: answer(
                fact("User lives in Boston", keywords=["Boston"], episodes=["E1"]),
                fact(
                    "User lives in New York",
                    action=FactAction.update,
                    existing="N1",
                    keywords=["New York"],
                    episodes=["E1"],
                ),
            ),
        }
    )
    summary = consolidate(db, model, embedder, one_per_chunk)
    rows = {f["fact"]: f for f in facts(conn, "c")}
    boston, new_york = rows["User lives in Boston"], rows["User lives in New York"]
    assert boston["invalid_at"] == moved.end_at and new_york["supersedes_id"] == boston["id"]
    assert set(active(conn, "c")) == {"User lives in New York"}
    assert summary.chunks_failed == 0


def test_a_context_too_small_for_any_episode_fails_the_run_with_the_reason_recorded(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    add(conn, make_episode("c", "tiny", "I like tea very much indeed.", at(2025, 1, 1)))
    model = SmallContextModel({}, context_tokens=1024)  # the answer alone takes all of it
    with pytest.raises(ValueError, match="no room for episodes"):
        consolidate(db, model, embedder, with_settings(settings, llm_max_tokens=1024))
    with conn.cursor() as cur:
        run = cur.execute("SELECT status, error FROM consolidation_runs").fetchone()
    assert run is not None
    (status, error) = run
    assert status == "failed" and "no room for episodes" in error
    assert episodes_state(conn)["tiny"]["attempts"] == 0


def test_a_run_whose_process_died_is_marked_crashed_with_what_its_chunks_applied(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    import socket

    add(
        conn,
        *[make_episode("c", f"d{i}", f"I sail boats, {i}.", at(2025, 1, i)) for i in (1, 2, 3)],
    )
    model = ScriptedModel({"d1": lambda r: answer(fact("User sails boats", "interest"))})
    consolidate(db, model, embedder, settings)
    dead_pid = gone_pid()
    # the run's row as a killed process leaves it: running, zero counts, its pid gone
    conn.execute(
        "UPDATE consolidation_runs SET status = 'running', finished_at = NULL, chunks = 0, "
        "episodes_consolidated = 0, facts_inserted = 0, host = %s, pid = %s",
        (socket.gethostname(), dead_pid),
    )
    conn.commit()

    consolidate(db, ScriptedModel({}), embedder, settings)  # any later run notices
    with conn.cursor() as cur:
        rows = cur.execute(
            "SELECT status, chunks, episodes_consolidated, facts_inserted, error "
            "FROM consolidation_runs ORDER BY started_at"
        ).fetchall()
    crashed, later = rows
    assert crashed[:4] == ("crashed", 1, 3, 1) and "process died" in crashed[4]
    assert later[0] == "completed"


def test_a_run_killed_on_this_host_gives_its_leases_back_at_the_next_run_without_waiting(
    db: Database, conn: psycopg.Connection, embedder: Embedder, settings: Settings
) -> None:
    import socket

    from slowwave.tasks.runs import start_run

    add(
        conn,
        *[make_episode("c", f"k{i}", f"I keep bees, {i}.", at(2025, 1, i)) for i in (1, 2, 3)],
    )
    killed = start_run(conn, kind="backfill")
    # as SIGKILL leaves it: running, its claims leased for another hour, its process gone
    conn.execute(
        "UPDATE consolidation_runs SET host = %s, pid = %s WHERE id = %s",
        (socket.gethostname(), gone_pid(), killed.run_id),
    )
    conn.execute(
        "UPDATE episodic_memory SET claimed_by = %s, claimed_until = now() + interval '1 hour', "
        "first_claimed_at = now()",
        (killed.run_id,),
    )
    conn.commit()

    model = ScriptedModel({"k1": lambda r: answer(fact("User keeps bees", "interest"))})
    summary = consolidate(db, model, embedder, settings, kind="backfill")
    assert summary.episodes_consolidated == 3 and summary.episodes_held_elsewhere == 0
    status = conn.execute(
        "SELECT status FROM consolidation_runs WHERE id = %s", (killed.run_id,)
    ).fetchone()
    assert status == ("crashed",)
    assert all(e["consolidated_at"] and e["attempts"] == 0 for e in episodes_state(conn).values())


def test_the_prompt_shows_an_agents_long_answer_cut_and_a_persons_message_whole() -> None:
    advice = "Here are ten tips for a faster 5K. " * 40
    said = "I set a new personal best of 25:50 at the charity 5K on Sunday! " * 10
    shown = render_message_line(Message(speaker="assistant", text=advice))
    assert shown.startswith("assistant: Here are ten tips") and shown.endswith(" […]")
    assert len(shown) < len("assistant: ") + AGENT_MESSAGE_CHARS + 5
    assert render_message_line(Message(speaker="user", text=said)) == f"user: {said}"
    short = "Congratulations on your new personal best!"
    assert render_message_line(Message(speaker="assistant", text=short)) == f"assistant: {short}"


def test_the_prompt_shows_a_quoted_title_in_quotes_that_cannot_end_a_json_string() -> None:
    said = 'I\'m now on page 220 of "The Nightingale", and "Circe" is next. He said "wait'
    shown = render_message_line(Message(speaker="user", text=said))
    assert (
        shown
        == "user: I'm now on page 220 of “The Nightingale”, and “Circe” is next. He said ”wait"
    )
    assert '"' not in render_second_look_prompt([ShownMessage("Dana", said)])
