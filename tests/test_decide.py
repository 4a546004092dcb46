"""The decisions apply takes, as a pure function: no database, no model.

Vectors are unit vectors chosen by hand: equal vectors are duplicates (cosine 1), orthogonal
ones are unrelated (cosine 0).
"""

from __future__ import annotations

from uuid import UUID

import numpy as np

from slowwave.models.category import Category
from slowwave.models.consolidation import ConsolidationOutput, FactAction
from slowwave.models.episode import Episode
from slowwave.models.fact import Fact
from slowwave.models.ids import new_id
from slowwave.models.plan import Decision, Plan, PlannedAction, Rejection
from slowwave.tasks.decide import Known, decide
from slowwave.tasks.evidence import attribute_evidence
from slowwave.tasks.grounding import Grounding
from slowwave.tasks.guard import guard as guard_plan
from tests.fix_episodes import at, make_episode
from tests.fix_models import fact

THRESHOLD = 0.95


def unit(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def act(
    action: FactAction,
    text: str,
    month: int,
    *,
    target: UUID | None = None,
    ref: int | None = None,
    episode: UUID | None = None,
) -> PlannedAction:
    return PlannedAction(
        action=action,
        proposed=action,
        target_id=target,
        target_ref=ref,
        category=Category.identity,
        fact=text,
        episode_ids=[episode or new_id()],
        event_time=at(2025, month, 1),
    )


def plan_of(*actions: PlannedAction) -> Plan:
    return Plan(
        chunk_id=new_id(),
        conversation_id="c",
        episode_ids=[e for a in actions for e in a.episode_ids],
        actions=list(actions),
        event_time=max(a.event_time for a in actions),
    )


def test_new_facts_that_duplicate_each_other_become_one_row_with_both_sources() -> None:
    first, second = act(FactAction.new, "likes Rust", 1), act(FactAction.new, "likes Rust.", 2)
    writes = decide(plan_of(first, second), np.stack([unit(0), unit(0)]), {}, {}, THRESHOLD)
    (row,) = writes.inserts
    assert row.source_episodic_ids == [*first.episode_ids, *second.episode_ids]
    assert row.valid_at == at(2025, 1, 1)
    assert [e.action for e in writes.log] == [Decision.new, Decision.merge]


def test_a_new_fact_that_duplicates_an_existing_one_reinforces_it() -> None:
    existing = new_id()
    new = act(FactAction.new, "likes Rust", 3)
    writes = decide(plan_of(new), np.stack([unit(0)]), {}, {0: (existing, 0.97)}, THRESHOLD)
    assert writes.inserts == []
    assert writes.reinforcements == [(existing, new.episode_ids[0])]
    assert writes.log[0].action is Decision.merge and writes.log[0].similarity == 0.97


def test_an_update_and_a_new_fact_of_the_same_sentence_write_one_version() -> None:
    beijing = new_id()
    known = {beijing: Known(at(2025, 1, 1), unit(1))}
    update = act(FactAction.update, "lives in Tokyo", 3, target=beijing)
    new = act(FactAction.new, "lives in Tokyo", 3)
    writes = decide(plan_of(update, new), np.stack([unit(2), unit(2)]), known, {}, THRESHOLD)
    (tokyo,) = writes.inserts
    assert tokyo.supersedes_id == beijing and tokyo.invalid_at is None
    assert writes.endings == {beijing: at(2025, 3, 1)}


def test_a_new_fact_then_an_update_of_the_same_sentence_give_the_new_fact_the_lineage() -> None:
    beijing = new_id()
    known = {beijing: Known(at(2025, 1, 1), unit(1))}
    new = act(FactAction.new, "lives in Tokyo", 3)
    update = act(FactAction.update, "lives in Tokyo", 3, target=beijing)
    writes = decide(plan_of(new, update), np.stack([unit(2), unit(2)]), known, {}, THRESHOLD)
    (tokyo,) = writes.inserts
    assert tokyo.supersedes_id == beijing
    assert [e.action for e in writes.log] == [Decision.new, Decision.update]


def test_an_update_of_the_plans_own_fact_keeps_the_history_in_event_time() -> None:
    beijing = act(FactAction.new, "lives in Beijing", 1)
    tokyo = act(FactAction.update, "lives in Tokyo", 5, ref=0)
    writes = decide(plan_of(beijing, tokyo), np.stack([unit(1), unit(2)]), {}, {}, THRESHOLD)
    first, second = writes.inserts
    assert (first.valid_at, first.invalid_at) == (at(2025, 1, 1), at(2025, 5, 1))
    assert (second.valid_at, second.invalid_at, second.supersedes_id) == (
        at(2025, 5, 1),
        None,
        first.id,
    )


def test_an_invalidate_of_the_plans_own_fact_ends_it_never_before_it_began() -> None:
    job = act(FactAction.new, "works at Acme", 6)
    quit_ = act(FactAction.invalidate, "works at Acme", 2, ref=0)  # an earlier episode
    writes = decide(plan_of(job, quit_), np.stack([unit(3)]), {}, {}, THRESHOLD)
    (row,) = writes.inserts
    assert row.invalid_at == row.valid_at == at(2025, 6, 1)


def test_an_update_that_restates_its_fact_reinforces_it() -> None:
    rust = new_id()
    known = {rust: Known(at(2025, 1, 1), unit(0))}
    update = act(FactAction.update, "likes Rust a lot", 2, target=rust)
    writes = decide(plan_of(update), np.stack([unit(0)]), known, {}, THRESHOLD)
    assert writes.inserts == [] and writes.endings == {}
    assert writes.reinforcements == [(rust, update.episode_ids[0])]
    assert writes.log[0].action is Decision.reinforce


def test_a_fact_the_plan_asserts_while_ending_it_is_rejected_with_the_reason() -> None:
    beijing = new_id()
    known = {beijing: Known(at(2025, 1, 1), unit(1))}
    end = act(FactAction.invalidate, "lives in Beijing", 3, target=beijing)
    again = act(FactAction.new, "lives in Beijing", 2)
    writes = decide(plan_of(end, again), np.stack([unit(1)]), known, {}, THRESHOLD)
    assert writes.inserts == []
    assert writes.endings == {beijing: at(2025, 3, 1)}
    rejected = writes.log[1]
    assert rejected.action is Decision.rejected and rejected.fact_id is None
    assert (rejected.reason or "").startswith("contradicts the plan itself")


def test_a_fact_asserted_again_after_the_plan_ended_it_is_new_history_not_a_contradiction() -> None:
    beijing = new_id()
    known = {beijing: Known(at(2025, 1, 1), unit(1))}
    left = act(FactAction.invalidate, "lives in Beijing", 3, target=beijing)
    back = act(FactAction.new, "lives in Beijing again", 9)
    writes = decide(plan_of(left, back), np.stack([unit(1)]), known, {}, THRESHOLD)
    (row,) = writes.inserts
    assert row.valid_at == at(2025, 9, 1) and row.invalid_at is None


def guard(
    output: ConsolidationOutput, shown: list[Fact], episodes: list[Episode]
) -> tuple[list[PlannedAction], list[Rejection]]:
    """The guard on ids, evidence and conflicts; its grounding is tests.test_grounding's."""
    return guard_plan(output, shown, episodes, Grounding.off)


def _episodes() -> list:
    return [
        make_episode("c", f"g{i}", f"Episode number {i} of the chunk.", at(2025, i, 1))
        for i in (1, 2, 3)
    ]


def test_the_guard_maps_n_ids_to_earlier_actions_and_drops_forward_references() -> None:
    episodes = _episodes()
    output = ConsolidationOutput(
        facts=[
            fact("User lives in Beijing", episodes=["E1"]),
            fact("User lives in Tokyo", action=FactAction.update, existing="N1", episodes=["E3"]),
            fact("User lives in Osaka", action=FactAction.invalidate, existing="N4"),
        ]
    )
    actions, rejections = guard(output, [], episodes)
    assert [a.action for a in actions] == [FactAction.new, FactAction.update]
    assert actions[1].target_ref == 0 and actions[1].target_id is None
    assert actions[1].event_time == episodes[2].end_at
    assert rejections[0].reason == "invalidate of unknown fact id 'N4' dropped"


def test_the_guard_marks_an_item_that_cites_no_episode_as_uncited() -> None:
    episodes = _episodes()
    output = ConsolidationOutput(
        facts=[fact("User likes tea a lot", episodes=[]), fact("User has a cat", episodes=["E9"])]
    )
    actions, _ = guard(output, [], episodes)
    assert [a.cited for a in actions] == [False, False]
    cited, _ = guard(
        ConsolidationOutput(facts=[fact("User has a cat", episodes=["E2"])]), [], episodes
    )
    assert cited[0].cited and cited[0].episode_ids == [episodes[1].id]


def test_an_uncited_action_is_attributed_to_its_most_similar_episode_only() -> None:
    episodes = _episodes()
    output = ConsolidationOutput(
        facts=[
            fact("User moved to Lisbon last spring", episodes=[]),
            fact("User works at Acme", action=FactAction.invalidate, existing="N1"),
        ]
    )
    actions, _ = guard(output, [], episodes)
    plan = plan_of(*actions)
    episode_vectors = np.stack([unit(0), unit(1), unit(2)])
    attribute_evidence(plan, episodes, episode_vectors, np.stack([unit(1)]), np.stack([unit(2)]))
    moved, ended = plan.actions
    assert moved.episode_ids == [episodes[1].id] and moved.event_time == episodes[1].end_at
    assert ended.episode_ids == [episodes[2].id]
    assert "attributed to the most similar episode" in (moved.reason or "")


def test_an_update_of_a_fact_that_merged_into_a_known_one_ends_the_known_one() -> None:
    boston = new_id()
    known = {boston: Known(at(2025, 1, 1), unit(1))}
    again = act(FactAction.new, "lives in Boston", 2)
    moved = act(FactAction.update, "lives in New York", 3, ref=0)
    writes = decide(
        plan_of(again, moved), np.stack([unit(1), unit(2)]), known, {0: (boston, 0.99)}, 0.95
    )
    (new_york,) = writes.inserts
    assert writes.endings == {boston: at(2025, 3, 1)} and new_york.supersedes_id == boston


def test_a_refused_new_version_leaves_the_fact_it_was_to_succeed_as_it_was() -> None:
    beijing, tokyo = new_id(), new_id()
    known = {beijing: Known(at(2025, 1, 1), unit(1)), tokyo: Known(at(2024, 1, 1), unit(2))}
    left_tokyo = act(FactAction.invalidate, "lives in Tokyo", 6, target=tokyo)
    moved = act(FactAction.update, "lives in Tokyo", 3, target=beijing)  # before it was ended
    writes = decide(plan_of(left_tokyo, moved), np.stack([unit(2)]), known, {}, THRESHOLD)
    assert writes.inserts == []
    assert writes.endings == {tokyo: at(2025, 6, 1)}, "Beijing is not ended without successor"
    assert writes.log[1].action is Decision.rejected


def test_two_reinforcements_keep_the_cited_evidence_not_the_uncited_chunk() -> None:
    episodes = _episodes()
    shown = [
        Fact(
            id=new_id(),
            conversation_id="c",
            category=Category.interest,
            fact="User plays the piano",
            source_episodic_ids=[new_id()],
            valid_at=at(2024, 1, 1),
        )
    ]
    output = ConsolidationOutput(
        facts=[
            fact("User plays the piano", action=FactAction.reinforce, existing="F1", episodes=[]),
            fact("User plays piano", action=FactAction.reinforce, existing="F1", episodes=["E2"]),
        ]
    )
    (merged,), _ = guard(output, shown, episodes)
    assert merged.cited and merged.episode_ids == [episodes[1].id]


def _shown(text: str) -> list[Fact]:
    return [
        Fact(
            id=new_id(),
            conversation_id="c",
            category=Category.preference,
            fact=text,
            source_episodic_ids=[new_id()],
            valid_at=at(2024, 1, 1),
        )
    ]


def test_the_guard_keeps_one_action_per_fact_update_over_invalidate_over_reinforce() -> None:
    shown = _shown("User's favourite colour is blue")
    output = ConsolidationOutput(
        facts=[
            fact("User's favourite colour is blue", action=FactAction.reinforce, existing="F1"),
            fact("User's favourite colour is blue", action=FactAction.invalidate, existing="F1"),
            fact("User's favourite colour is green", action=FactAction.update, existing="F1"),
            fact("User's favourite colour is red", action=FactAction.update, existing="F1"),
        ]
    )
    actions, rejections = guard(output, shown, _episodes())
    assert [(a.action, a.fact) for a in actions] == [
        (FactAction.update, "User's favourite colour is green"),
        (FactAction.new, "User's favourite colour is red"),
    ]
    assert actions[1].reason == "second update of the same fact treated as new"
    assert sorted(r.reason for r in rejections) == [
        "invalidate overridden by update of the same fact",
        "reinforce overridden by update of the same fact",
    ]


def test_the_guard_rejects_what_cannot_be_a_fact_and_unknown_categories() -> None:
    output = ConsolidationOutput(
        facts=[
            fact("Jolene", "relationship"),
            fact("User enjoys long walks", "hobby"),
            fact("family family family family", "relationship"),
            fact("User enjoys long walks in the hills", "interest"),
        ]
    )
    actions, rejections = guard(output, [], _episodes())
    assert [a.fact for a in actions] == ["User enjoys long walks in the hills"]
    assert [r.reason.split(":")[0] for r in rejections] == [
        "degenerate fact",
        "unknown category 'hobby'",
        "degenerate fact",
    ]
