"""Model fixtures: the real embedding model, and a scripted stand-in for the language model."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from slowwave.models.change import ChangeJudgement, ChangeVerdict
from slowwave.models.consolidation import ConsolidatedFact, ConsolidationOutput, FactAction
from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose, StructuredModel
from slowwave.models.llm.tokens import estimate_tokens
from slowwave.models.second_look import MessageFact, SecondLookAnswer
from slowwave.models.settings import Settings
from tests.fix_episodes import KEYS_BY_LINE

_SHOWN = re.compile(r"^\[(F\d+)\] \[[a-z]+\] (.*)$", re.M)
_HEADER = re.compile(r"^### E\d+ \| ")


def episode_keys(request: GenerationRequest) -> list[str]:
    """The external keys of the episodes a prompt shows, in order (E1, E2, ...), recognised by
    their message lines (``tests.fix_episodes.add`` records them); a piece of a long message
    is recognised as part of it."""
    keys: list[str] = []
    current: str | None = None
    for line in request.user.splitlines():
        if _HEADER.match(line):
            current = None
            continue
        key = KEYS_BY_LINE.get(line) or _piece_of(line)
        if key is not None and current is None:
            current = key
            keys.append(key)
    return keys


def _piece_of(line: str) -> str | None:
    speaker, _, piece = line.partition(": ")
    if len(piece) < 20:
        return None
    for known, key in KEYS_BY_LINE.items():
        if known.startswith(f"{speaker}: ") and piece in known:
            return key
    return None


def shown_facts(request: GenerationRequest) -> dict[str, str]:
    """fact sentence → short id, as the prompt shows them."""
    return {text: short for short, text in _SHOWN.findall(request.user)}


def fact(
    text: str,
    category: str = "identity",
    action: FactAction = FactAction.new,
    existing: str | None = None,
    keywords: Sequence[str] = ("User",),
    episodes: Sequence[str] = (),
    slot: str | None = None,
) -> ConsolidatedFact:
    return ConsolidatedFact(
        action=action,
        existing_fact_id=existing,
        category=category,
        fact=text,
        keywords=list(keywords),
        episodes=list(episodes),
        slot=slot,
    )


Script = Callable[[GenerationRequest], ConsolidationOutput | str]


@dataclass
class ScriptedModel:
    """A language-model double: answers each chunk by a script keyed on the episodes' keys,
    which it recognises in the prompt (``episode_keys``), as a real model reads the prompt.

    ``script`` maps an external key to a function of the request; the answers of all keys in
    a chunk are concatenated. A function may return raw text to simulate a malformed answer.
    A chunk showing a key of ``cut_off`` gets its answer cut off 20 characters before its end,
    as a runtime returns an answer that reached max_tokens.
    """

    script: dict[str, Script] = field(default_factory=dict)
    name: str = "scripted"
    requests: list[GenerationRequest] = field(default_factory=list)
    cut_off: set[str] = field(default_factory=set)
    # the change check: (known fact, later fact) → the known one no longer holds
    out_of_date: Callable[[str, str], bool] = lambda known, later: False
    # the second look: a message's text → the (fact, category) pairs it states (none by default)
    second_look: Callable[[str], Sequence[tuple[str, str]]] = lambda text: ()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        answers = []
        for request in requests:
            self.requests.append(request)
            if request.purpose is Purpose.change:
                answers.append(self._verdicts(request))
                continue
            if request.purpose is Purpose.second_look:
                answers.append(self._looked(request))
                continue
            facts: list[ConsolidatedFact] = []
            raw: str | None = None
            for key in episode_keys(request):
                if key not in self.script:
                    continue
                out = self.script[key](request)
                if isinstance(out, str):
                    raw = out
                else:
                    facts += out.facts
            text = raw if raw is not None else ConsolidationOutput(facts=facts).model_dump_json()
            cut = bool(self.cut_off & set(episode_keys(request)))
            answers.append(
                ModelAnswer(
                    request.chunk_id,
                    text[:-20] if cut else text,
                    prompt_tokens=100,
                    completion_tokens=20,
                    truncated=cut,
                )
            )
        return answers

    def _verdicts(self, request: GenerationRequest) -> ModelAnswer:
        """A change check's pairs: the known fact rewritten with the later one's value where
        ``out_of_date`` says it no longer holds (never, by default), copied otherwise."""
        pairs = _CHANGE_PAIR.findall(request.user)
        verdicts = [
            ChangeVerdict(
                pair=pair, now=_swapped(known, later) if self.out_of_date(known, later) else known
            )
            for pair, known, later in pairs
        ]
        text = ChangeJudgement(pairs=verdicts).model_dump_json()
        return _within_cap(request, text, prompt_tokens=30)

    def _looked(self, request: GenerationRequest) -> ModelAnswer:
        """A second look's messages: the facts ``second_look`` gives each message's text."""
        facts = [
            MessageFact(message=short, fact=text, category=category)
            for short, message in _SHOWN_MESSAGE.findall(request.user)
            for text, category in self.second_look(message)
        ]
        text = SecondLookAnswer(facts=facts).model_dump_json()
        return _within_cap(request, text, prompt_tokens=40)

    def close(self) -> None:
        return None


def _within_cap(request: GenerationRequest, text: str, *, prompt_tokens: int) -> ModelAnswer:
    """``text`` as a runtime returns it under the request's own cap: cut off where its
    (conservatively counted) tokens pass it."""
    used = estimate_tokens(text)
    if request.max_tokens is not None and used > request.max_tokens:
        cut = text[: request.max_tokens]
        return ModelAnswer(
            request.chunk_id,
            cut,
            prompt_tokens=prompt_tokens,
            completion_tokens=request.max_tokens,
            truncated=True,
        )
    return ModelAnswer(request.chunk_id, text, prompt_tokens=prompt_tokens, completion_tokens=10)


def _swapped(known: str, later: str) -> str:
    """``known`` with its last word swapped for the first name (else word) only ``later`` has,
    as a model rewrites "Kai teaches in Leeds." once "Kai is moving to Manchester"."""
    words = known.rstrip(".").split()
    new = [w.strip(".,!") for w in later.split()[1:] if w.strip(".,!") not in known]
    value = next((w for w in new if w[:1].isupper()), new[0] if new else words[-1])
    return " ".join([*words[:-1], value]) + "."


# a shown message: its label, then everything shown under it up to the next label, as a
# model reads it
_SHOWN_MESSAGE = re.compile(r"^(M\d+) \| .*\n((?:(?!M\d+ \| |Answer with ).*\n?)*)", re.M)
_CHANGE_PAIR = re.compile(r"^(P\d+)\nKnown: (.*)\nLater: (.*)$", re.M)


@dataclass
class Recorded:
    """A real runtime under test, with every answer it gave kept for the assertions; chunks
    record the wrapped runtime's name."""

    model: StructuredModel
    answers: list[ModelAnswer] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.model.name

    @name.setter
    def name(self, name: str) -> None:  # StructuredModel's name is a settable attribute
        self.model.name = name

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        answers = self.model.generate(requests)
        self.answers += answers
        return answers

    def close(self) -> None:
        return None


@pytest.fixture(autouse=True)
def fresh_episode_lines() -> Iterator[None]:
    """Each test recognises only the episodes it stored itself."""
    KEYS_BY_LINE.clear()
    yield
    KEYS_BY_LINE.clear()


@pytest.fixture(scope="session")
def embedder(settings: Settings) -> Iterator[Embedder]:
    model = load_embedder(settings)
    yield model
    model.close()


PREPARED_MODELS = Path(__file__).resolve().parents[1] / ".slowwave" / "models"


def prepared_onnx(name: str) -> Path:
    """The repository's prepared ONNX model ``name`` (`slowwave models setup --model NAME`):
    a skip where it is not, unless ``SLOWWAVE_REQUIRE_ONNX=1`` (CI prepares it) fails."""
    folder = PREPARED_MODELS / name
    if not (folder / "model.onnx").is_file():
        reason = f"no {name} at {folder} (slowwave models setup --model {name})"
        if os.environ.get("SLOWWAVE_REQUIRE_ONNX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return folder


@pytest.fixture
def prepared_reranker() -> Path:
    """The folder of the prepared cross-encoder, which a setting may name as the reranker."""
    from slowwave.models.embedding.catalog import MS_MARCO_MINILM

    return prepared_onnx(MS_MARCO_MINILM.name)
