"""The LoCoMo replay model: answers a chunk of LoCoMo sessions with their gold observations.

LoCoMo's ``observation`` facts are human-checked statements with evidence, i.e. realistic
consolidation output. Replaying them as ``new`` facts gives tests and benchmarks real facts
without a language model. Like a real model it reads only the prompt: each episode shown
(E1, E2, ...) is recognised as a LoCoMo session by its dialogue lines. Categories and keywords
are not in the data; they are derived by fixed rules so a replay is deterministic.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

from slowwave.models.category import Category
from slowwave.models.change import ChangeJudgement
from slowwave.models.consolidation import (
    ConsolidatedFact,
    ConsolidationOutput,
    FactAction,
    keywords_of,
    render_message_line,
)
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.locomo import locomo_message
from slowwave.models.merge import MergeJudgement

_EPISODE_HEADER = re.compile(r"^### (E\d+) \| ")

_CATEGORY_RULES: tuple[tuple[Category, re.Pattern[str]], ...] = (
    (
        Category.goal,
        re.compile(
            r"\b(plan|plans|planning|want|wants|hope|hopes|goal|dream|"
            r"aspire|intend|going to|looking forward|aim)\b",
            re.I,
        ),
    ),
    (
        Category.preference,
        re.compile(
            r"\b(like|likes|love|loves|enjoy|enjoys|favorite|"
            r"favourite|prefer|prefers|fan of|dislike|hate)\b",
            re.I,
        ),
    ),
    (
        Category.relationship,
        re.compile(
            r"\b(friend|friends|husband|wife|partner|kids|children|"
            r"daughter|son|mother|mom|father|dad|family|sister|"
            r"brother|married|grandma|colleague)\b",
            re.I,
        ),
    ),
    (
        Category.identity,
        re.compile(
            r"\b(is a|works as|lives in|moved to|from|years old|"
            r"identifies|transgender|job|career|name)\b",
            re.I,
        ),
    ),
    (
        Category.interest,
        re.compile(
            r"\b(interested|hobby|passion|paint|painting|music|art|"
            r"reading|books|sports|photography|pottery|hiking)\b",
            re.I,
        ),
    ),
    (
        Category.personality,
        re.compile(
            r"\b(feels|felt|proud|happy|grateful|kind|supportive|"
            r"determined|values|believes)\b",
            re.I,
        ),
    ),
)


def categorize(sentence: str) -> Category:
    """The first category whose cue words the sentence contains; experience otherwise."""
    for category, pattern in _CATEGORY_RULES:
        if pattern.search(sentence):
            return category
    return Category.experience


class LoCoMoReplayModel:
    """A ``StructuredModel`` that answers from a LoCoMo JSON file."""

    name = "replay"

    def __init__(self, data_path: Path, reword: Callable[[str], str] | None = None) -> None:
        if not data_path.is_file():
            raise FileNotFoundError(
                f"LoCoMo replay data not found at {data_path}; set SLOWWAVE_REPLAY_DATA"
            )
        self.data_path = data_path
        self.reword = reword

    @cached_property
    def _observations(self) -> dict[tuple[str, int], list[tuple[str, str, list[str]]]]:
        """(sample_id, session) → [(speaker, fact, evidence dia_ids)]."""
        table: dict[tuple[str, int], list[tuple[str, str, list[str]]]] = {}
        for conversation in json.loads(self.data_path.read_text(encoding="utf-8")):
            sample = conversation["sample_id"]
            for key, by_speaker in conversation.get("observation", {}).items():
                session = int(key.split("_")[1])
                rows = table.setdefault((sample, session), [])
                for speaker, items in by_speaker.items():
                    for fact, evidence in items:
                        dia_ids = [evidence] if isinstance(evidence, str) else list(evidence)
                        rows.append((speaker, fact, dia_ids))
        return table

    @cached_property
    def _sessions_by_line(self) -> dict[str, Counter[tuple[str, int]]]:
        """A dialogue line, as the prompt shows it → the sessions it occurs in."""
        index: dict[str, Counter[tuple[str, int]]] = {}
        for conversation in json.loads(self.data_path.read_text(encoding="utf-8")):
            sample = str(conversation["sample_id"])
            for key, turns in conversation.get("conversation", {}).items():
                if not key.startswith("session_") or not isinstance(turns, list):
                    continue
                session = int(key.split("_")[1])
                for turn in turns:
                    line = render_message_line(locomo_message(turn))
                    index.setdefault(line, Counter())[(sample, session)] += 1
        return index

    def sessions_shown(self, prompt: str) -> list[tuple[str, tuple[str, int] | None]]:
        """(E-id, the LoCoMo session it shows, or None) for every episode of the prompt."""
        shown: list[tuple[str, Counter[tuple[str, int]]]] = []
        for line in prompt.splitlines():
            header = _EPISODE_HEADER.match(line)
            if header is not None:
                shown.append((header.group(1), Counter()))
            elif shown and line in self._sessions_by_line:
                shown[-1][1].update(self._sessions_by_line[line])
        return [(short, votes.most_common(1)[0][0] if votes else None) for short, votes in shown]

    def answer(self, request: GenerationRequest) -> ConsolidationOutput:
        facts: list[ConsolidatedFact] = []
        for short, session in self.sessions_shown(request.user):
            for speaker, sentence, _evidence in (
                self._observations.get(session, []) if session else []
            ):
                facts.append(
                    ConsolidatedFact(
                        action=FactAction.new,
                        category=categorize(sentence).value,
                        fact=self.reword(sentence) if self.reword else sentence,
                        keywords=keywords_of(sentence, speaker),
                        episodes=[short],
                    )
                )
        return ConsolidationOutput(facts=facts)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: GenerationRequest) -> ModelAnswer:
        if request.purpose is Purpose.consolidate:
            return ModelAnswer(request.chunk_id, self.answer(request).model_dump_json())
        if request.purpose is Purpose.second_look:  # its answers hold every gold observation
            return ModelAnswer(request.chunk_id, ConsolidationOutput(facts=[]).model_dump_json())
        # the file judges no pair: no known fact ended, none the same as another (each fact
        # as the file writes it)
        if request.purpose is Purpose.change:
            return ModelAnswer(request.chunk_id, ChangeJudgement(pairs=[]).model_dump_json())
        if request.purpose is Purpose.merge:
            return ModelAnswer(request.chunk_id, MergeJudgement(pairs=[]).model_dump_json())
        return ModelAnswer(
            request.chunk_id, None, f"the replay runtime does not answer {request.purpose}"
        )

    def close(self) -> None:
        return None
