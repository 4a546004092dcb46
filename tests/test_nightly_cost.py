"""The nightly-mix cost benchmark, sized for CI: its harness (the replay model's facts are the
gold observations, so quality is 1) and its token figures against a model over the wire."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fix_model_server import fake_model
from tests.fix_processes import slowwave_env

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = (
    "billed_tokens_per_raw_token",
    "computed_tokens_per_raw_token",
    "fact_recall",
    "fact_precision",
    "end_to_end_recall_at_10",
    "seconds_per_episode",
    "model_calls",
)


def _night(
    home: Path, locomo: Path, *args: str, known: tuple[str, ...] = ("2",), **env: str
) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.nightly_cost",
            "--data",
            str(locomo),
            "--json",
            "--conversations",
            "conv-26",
            "conv-30",
            "--known",
            *known,
            *args,
        ],
        cwd=ROOT,
        env=slowwave_env(home, **env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


@pytest.mark.slow
def test_the_nightly_mix_measures_tonight_only_and_the_gold_model_scores_one(
    tmp_path: Path, locomo_path: Path
) -> None:
    figures = _night(tmp_path, locomo_path, "--engine", "replay", known=("2", "3"))
    assert set(REQUIRED) <= set(figures)
    first, second = figures["by_night"]["known_2"], figures["by_night"]["known_3"]
    # conv-26 brings session 3 tonight, conv-30 sessions 3 and 4; the sample its 10 episodes
    assert first["episodes_tonight"] == 3 + 10
    # a night later: conv-26 brings session 4, conv-30 sessions 4 and 5
    assert second["episodes_tonight"] == 3 + 10
    assert figures["episodes_earlier"] == 4 + 6
    for night in (first, second, figures):
        assert night["fact_recall"] == night["fact_precision"] == 1.0
        assert night["end_to_end_recall_at_10"] == 1.0
        assert night["billed_tokens_per_raw_token"] == 0.0  # the replay model costs nothing
    # pooled: counts added up, not averaged
    assert figures["nights"] == 2
    for count in ("episodes_tonight", "gold_observations", "questions", "facts_written"):
        assert figures[count] == first[count] + second[count] > 0
    # the gold model proposes only new facts, each one that was written among them
    proposed = figures["proposed_actions"]
    assert set(proposed) <= {"new", "new->merge"}
    assert sum(proposed.values()) >= figures["facts_written"] > 0


@pytest.mark.slow
def test_billed_and_computed_tokens_of_a_model_with_a_prefix_cache_are_told_apart(
    tmp_path: Path, locomo_path: Path
) -> None:
    with fake_model() as model:
        figures = _night(tmp_path, locomo_path, "--engine", "openai", known=("2",), **model.env())
    # a chunk's call each (the double is asked nothing else)
    assert figures["model_calls"] >= figures["chunks"] > 0
    assert figures["prompt_tokens"] > figures["prompt_tokens_cached"] > 0
    assert figures["billed_tokens_per_raw_token"] > figures["computed_tokens_per_raw_token"] > 0


def test_a_session_split_into_short_episodes_keeps_its_messages_its_order_and_its_session(
    locomo_path: Path,
) -> None:
    from benchmarks.locomo_extraction import session_number
    from benchmarks.nightly_cost import plan_night, split_session

    whole = plan_night(locomo_path, ["conv-26"], 2)
    night = plan_night(locomo_path, ["conv-26"], 2, episode_messages=4)
    (session,) = whole.tonight
    parts = split_session(session, 4)
    assert [p.external_key for p in night.tonight] == [p.external_key for p in parts]
    assert len(parts) == -(-len(session.messages) // 4)
    assert [m for p in parts for m in p.messages] == session.messages
    assert all(1 <= len(p.messages) <= 4 for p in parts)
    assert {session_number(p.external_key) for p in parts} == {session_number(session.external_key)}
    assert len({p.id for p in parts}) == len(parts)
    assert [p.start_at for p in parts] == sorted(p.start_at for p in parts)
    assert night.gold == whole.gold and night.questions == whole.questions
