"""Surprise as novelty: the pure rule, without a database."""

from __future__ import annotations

import pytest

from slowwave.models.fact import Fact
from slowwave.tasks.surprise import novelty, with_surprise
from tests.fix_episodes import at, make_episode


def _fact() -> Fact:
    return Fact.model_validate(
        {
            "id": "00000000-0000-0000-0000-000000000001",
            "conversation_id": "c",
            "category": "identity",
            "fact": "User teaches chemistry",
            "keywords": ["chemistry"],
            "source_episodic_ids": [],
            "valid_at": at(2025, 1, 1),
            "invalid_at": None,
            "supersedes_id": None,
        }
    )


def test_novelty_is_the_distance_to_the_nearest_fact_capped_to_zero_one() -> None:
    assert novelty([]) == 1.0
    assert novelty([(0.12, _fact()), (0.4, _fact())]) == pytest.approx(0.12)
    assert novelty([(1.7, _fact())]) == 1.0
    assert novelty([(-1e-7, _fact())]) == 0.0


def test_only_episodes_without_a_surprise_are_scored_and_a_split_episode_once() -> None:
    given = make_episode("c", "g", "text", at(2025, 1, 1), surprise=0.9)
    unscored = make_episode("c", "u", "text", at(2025, 1, 2), surprise=None)
    part = unscored.model_copy(update={"messages_from": 1})
    chunks, computed = with_surprise(
        [[given, unscored], [part]], [[[(0.2, _fact())], [(0.3, _fact())]], [[(0.7, _fact())]]]
    )
    assert [e.surprise for chunk in chunks for e in chunk] == [0.9, 0.3, 0.3]
    assert computed == {unscored.id: 0.3}
