"""Slots with a real model: the seeds' residence change and name correction, and controls.

Each scenario is a conversation of two episodes, consolidated one night apart (two runs), as
seeds 000 and 002 tell them. The model runtime answers each prompt once; the same answers are
then applied with ``SLOWWAVE_SLOTS`` off and on (a prompt's answer is reused when the prompt
is byte-identical, so the two settings see the same model decisions and differ only in what
apply does with them). Per scenario and setting: the active facts left, whether the outcome is
the right one (the old value ended and the new one active; for the controls, both active),
the actions the model proposed and the slot keys it gave. ``--scenarios N`` runs the first N.

    python -m benchmarks.slots [--model NAME] [--engine llamacpp|openai|vllm] [--scenarios N]
        [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmarks.homes import fresh_home
from slowwave.models.embedding import Embedder, load_embedder
from slowwave.models.episode import Episode, Message
from slowwave.models.ids import new_id
from slowwave.models.llm import StructuredModel, load_model
from slowwave.models.llm.base import GenerationRequest, ModelAnswer
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import Settings, setting_default
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes


@dataclass(frozen=True)
class Scenario:
    name: str
    said: tuple[str, str]  # what the user says, one night apart
    right: Callable[[list[str]], bool]  # the active facts after both nights are right
    expect: str


def _one_with(word: str, gone: str) -> Callable[[list[str]], bool]:
    """Right when some active fact says ``word`` and none says ``gone`` any more."""
    return lambda active: any(word in f for f in active) and not any(gone in f for f in active)


def _both(a: str, b: str) -> Callable[[list[str]], bool]:
    return lambda active: any(a in f for f in active) and any(b in f for f in active)


SCENARIOS = (
    Scenario(
        "residence change",
        ("I live in Beijing, I've been here for three years now.", "Big news: I moved to Tokyo!"),
        _one_with("Tokyo", "Beijing"),
        "Beijing ended, Tokyo active",
    ),
    Scenario(
        "name correction",
        ("Hi, my name is Bob.", "Sorry, I mistyped earlier: my name is actually Alice."),
        _one_with("Alice", "Bob"),
        "Bob ended, Alice active",
    ),
    Scenario(
        "partner change",
        (
            "My boyfriend Marco and I just adopted a cat.",
            "Marco and I broke up; I'm dating Theo now.",
        ),
        _one_with("Theo", "boyfriend Marco"),
        "Marco as partner ended, Theo active",
    ),
    Scenario(
        "control: another person's residence",
        ("I live in Lyon.", "My sister lives in Seoul."),
        _both("Lyon", "Seoul"),
        "both active",
    ),
    Scenario(
        "control: two values that hold at once",
        ("I love jazz, especially Coltrane.", "I've also been getting into punk rock lately."),
        _both("jazz", "punk"),
        "both active",
    ),
)


class AnswerOnce:
    """The runtime, answering each distinct prompt once: both settings get the same answers."""

    def __init__(self, model: StructuredModel) -> None:
        self.model = model
        self.name = model.name
        self.answers: dict[tuple[str, str], ModelAnswer] = {}

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        missing = [r for r in requests if (r.system, r.user) not in self.answers]
        for request, answer in zip(missing, self.model.generate(missing), strict=True):
            self.answers[(request.system, request.user)] = answer
        return [
            dataclasses.replace(self.answers[(r.system, r.user)], chunk_id=r.chunk_id)
            for r in requests
        ]

    def close(self) -> None:
        self.model.close()


def run_scenario(
    settings: Settings, model: AnswerOnce, embedder: Embedder, scenario: Scenario
) -> dict[str, Any]:
    nights = (datetime(2025, 1, 10, 20, tzinfo=UTC), datetime(2025, 6, 15, 20, tzinfo=UTC))
    with tempfile.TemporaryDirectory(prefix="slowwave-slots-") as home:
        local = settings.evolve(home=fresh_home(home), database_url=None)
        with Database(local) as db:
            migrate(db)
            for night, text in zip(nights, scenario.said, strict=True):
                with db.connection() as conn:
                    load_episodes(conn, [_episode(scenario.name, night, text)])
                consolidate(db, model, embedder, local, kind="backfill")
            with db.connection() as conn:
                active = [
                    r[0]
                    for r in conn.execute(
                        "SELECT fact FROM semantic_memory WHERE invalid_at IS NULL ORDER BY 1"
                    )
                ]
                proposed = conn.execute(
                    "SELECT proposed_action || '→' || action FROM decision_log ORDER BY id"
                ).fetchall()
                slots = conn.execute(
                    "SELECT coalesce(slot, '-') FROM semantic_memory ORDER BY created_at"
                ).fetchall()
    return {
        "right": scenario.right(active),
        "active": active,
        "decisions": [p[0] for p in proposed],
        "slots": [s[0] for s in slots],
    }


def _episode(conversation: str, night: datetime, text: str) -> Episode:
    return Episode(
        id=new_id(),
        conversation_id=conversation,
        external_key=f"{conversation}:{night:%Y-%m-%d}",
        messages=[
            Message(speaker="user", text=text),
            Message(speaker="assistant", text="Thanks for telling me!"),
        ],
        summary=None,
        surprise=None,
        start_at=night,
        end_at=night,
    )


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=setting_default("llm_model"))
    parser.add_argument("--engine", default="llamacpp")
    parser.add_argument(
        "--scenarios", type=int, default=len(SCENARIOS), help="the first N scenarios"
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    scenarios = SCENARIOS[: args.scenarios]
    settings = Settings(llm_model=args.model, llm_runtime=args.engine, gate_min_chars=0)
    embedder = load_embedder(settings)
    model = AnswerOnce(load_model(settings))
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    try:
        for scenario in scenarios:
            results[scenario.name] = {
                "expect": scenario.expect,
                **{
                    label: run_scenario(settings.evolve(slots=on), model, embedder, scenario)
                    for label, on in (("slots_off", False), ("slots_on", True))
                },
            }
    finally:
        model.close()
    for name, result in results.items():
        print(f"{name} (right: {result['expect']})")
        for label in ("slots_off", "slots_on"):
            r = result[label]
            print(f"  {label:>9}: {'RIGHT' if r['right'] else 'wrong'}  active={r['active']}")
            print(f"             decisions={r['decisions']} slots={r['slots']}")
    summary = {
        label: sum(r[label]["right"] for r in results.values())
        for label in ("slots_off", "slots_on")
    }
    print(
        f"right of {len(scenarios)}: {summary}; model {model.name}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    if args.json:
        print(json.dumps({"model": model.name, "right": summary, "scenarios": results}))


if __name__ == "__main__":
    main()
