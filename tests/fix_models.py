"""Model fixtures: the real embedding model, and a scripted stand-in for the language model."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from models.consolidation import ConsolidatedFact, ConsolidationOutput, FactAction
from models.embedding import load_embedder
from models.embedding.base import Embedder
from models.llm.base import ConsolidationRequest, ModelAnswer
from models.settings import Settings

_SHOWN = re.compile(r"^\[(F\d+)\] \[[a-z]+\] (.*)$", re.M)


def shown_facts(request: ConsolidationRequest) -> dict[str, str]:
    """fact sentence → short id, as the prompt shows them."""
    return {text: short for short, text in _SHOWN.findall(request.user)}


def fact(
    text: str,
    category: str = "identity",
    action: FactAction = FactAction.new,
    existing: str | None = None,
    keywords: Sequence[str] = ("User",),
    episodes: Sequence[str] = (),
) -> ConsolidatedFact:
    return ConsolidatedFact(
        action=action,
        existing_fact_id=existing,
        category=category,
        fact=text,
        keywords=list(keywords),
        episodes=list(episodes),
    )


Script = Callable[[ConsolidationRequest], ConsolidationOutput | str]


@dataclass
class ScriptedModel:
    """A language-model double: answers each chunk by a script keyed on the episodes' keys.

    ``script`` maps an external key to a function of the request; the answers of all keys in
    a chunk are concatenated. A function may return raw text to simulate a malformed answer.
    """

    script: dict[str, Script] = field(default_factory=dict)
    name: str = "scripted"
    requests: list[ConsolidationRequest] = field(default_factory=list)

    def consolidate(self, requests: Sequence[ConsolidationRequest]) -> list[ModelAnswer]:
        answers = []
        for request in requests:
            self.requests.append(request)
            facts: list[ConsolidatedFact] = []
            raw: str | None = None
            for key in request.episode_keys:
                if key not in self.script:
                    continue
                out = self.script[key](request)
                if isinstance(out, str):
                    raw = out
                else:
                    facts += out.facts
            text = raw if raw is not None else ConsolidationOutput(facts=facts).model_dump_json()
            answers.append(
                ModelAnswer(request.chunk_id, text, prompt_tokens=100, completion_tokens=20)
            )
        return answers

    def close(self) -> None:
        return None


@pytest.fixture(scope="session")
def embedder(settings: Settings) -> Iterator[Embedder]:
    model = load_embedder(settings)
    yield model
    model.close()
