"""A model that misbehaves in every way the reliability suite injects: per chunk, where an
episode says ``fault: KIND [ARG]``; elsewhere it follows the commands (``fix_commands``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slowwave.models.consolidation import ConsolidatedFact, ConsolidationOutput, FactAction
from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.llm.base import GenerationRequest, ModelAnswer
from tests.reliability.fix_commands import CommandModel, commands, follow, shown


def item(action: FactAction, text: str, existing: str | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "action": action,
        "existing_fact_id": existing,
        "category": kw.get("category", "identity"),
        "fact": text,
        "keywords": ["Ivo"],
        "episodes": ["E1"],
    }


def answer_json(*items: dict[str, Any]) -> str:
    return ConsolidationOutput(facts=[ConsolidatedFact(**i) for i in items]).model_dump_json()


def _first(request: GenerationRequest) -> str:
    return next(iter(shown(request).values()))


# fault → the answer text (None: the runtime reports an error instead)
FAULTS: dict[str, Callable[[GenerationRequest, str], str | None]] = {
    "timeout": lambda r, arg: None,
    "malformed": lambda r, arg: '{"facts": [{"action": "new", "fact": Ivo rides}',
    "truncated": lambda r, arg: answer_json(item(FactAction.new, "Ivo rides to work daily."))[:40],
    "empty": lambda r, arg: "",
    "unknown_ids": lambda r, arg: answer_json(
        item(FactAction.reinforce, "Ivo rides to work daily.", "F99"),
        item(FactAction.invalidate, "Ivo no longer volunteers.", "F77"),
    ),
    "other_conversation": lambda r, arg: answer_json(
        item(FactAction.invalidate, "That fact is not true any more.", arg)
    ),
    "invalid_category": lambda r, arg: answer_json(
        item(FactAction.new, "Ivo believes in horoscopes.", category="astrology"),
        item(FactAction.new, "Ivo rides to work daily."),
    ),
    "oversized": lambda r, arg: answer_json(
        *[
            item(FactAction.new, f"Ivo owns a bicycle with serial number {n:04d}.")
            for n in range(150)
        ],
        item(FactAction.new, "Ivo " + "really " * 80 + "likes bicycles."),
    ),
    "conflicting": lambda r, arg: answer_json(
        item(FactAction.reinforce, "Ivo repairs old bicycles.", _first(r)),
        item(FactAction.invalidate, "Ivo stopped repairing bicycles.", _first(r)),
        item(FactAction.update, "Ivo repairs old motorbikes in his garage.", _first(r)),
    ),
}


@dataclass
class FaultyModel(CommandModel):
    """Follows the commands, except in a chunk with a ``fault: KIND [ARG]`` message, which it
    answers with that fault; ``engine_dies`` raises for the whole batch, as a dead engine."""

    name: str = "faulty"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        answers = []
        for request in requests:
            faults = [t.split(" ", 2)[1:] for _, t in commands(request) if t.startswith("fault:")]
            if not faults:
                answers.append(
                    ModelAnswer(request.chunk_id, follow(request).model_dump_json(), None, 100, 20)
                )
                continue
            kind, arg = faults[0][0], (faults[0][1:] or [""])[0]
            if kind == "engine_dies":
                raise RuntimeUnreachable("the engine died mid-batch (EngineDeadError)")
            text = FAULTS[kind](request, arg)
            error = "ReadTimeout: timed out after 120 s" if text is None else None
            answers.append(ModelAnswer(request.chunk_id, text, error, 100, 20))
        return answers
