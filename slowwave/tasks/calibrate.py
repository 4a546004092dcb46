"""calibrate: one model call per chunk, its answer parsed strictly (seed 001 step 2).

Builds the prompt (byte-identical system part, then facts and episodes under short ids) and
parses each answer strictly; ``tasks.chains`` sends the prompts to the runtime. A malformed
answer fails that chunk only, with the reason. An answer cut off at max_tokens (a small model
that keeps going) keeps the items it wrote whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from slowwave.models.consolidation import SYSTEM_PROMPT, ConsolidationOutput, render_user_prompt
from slowwave.models.episode import Episode
from slowwave.models.errors import MalformedAnswer
from slowwave.models.fact import Fact
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose


@dataclass(frozen=True)
class Calibration:
    """The parsed answer for one chunk, or the reason there is none."""

    chunk_id: str
    output: ConsolidationOutput | None
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # of prompt_tokens, served by the engine's prefix cache
    cut_off: bool = False  # the answer reached max_tokens: only its complete items are kept


def build_request(
    chunk_id: str, facts: Sequence[Fact], episodes: Sequence[Episode], flashbulb_surprise: float
) -> GenerationRequest:
    return GenerationRequest(
        chunk_id=chunk_id,
        purpose=Purpose.consolidate,
        system=SYSTEM_PROMPT,
        user=render_user_prompt(facts, episodes, flashbulb_surprise),
        json_schema=ConsolidationOutput.response_schema(),
    )


def parse_answer(text: str) -> ConsolidationOutput:
    """Strict: the whole answer must be the schema's JSON object, nothing around it."""
    try:
        return ConsolidationOutput.model_validate_json(text.strip())
    except ValidationError as exc:
        raise _malformed(exc) from exc


def _malformed(exc: ValidationError) -> MalformedAnswer:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "answer"
    return MalformedAnswer(
        f"model answer is not a valid consolidation output ({exc.error_count()} "
        f"error(s); first at {where}: {first['msg']})"
    )


def complete_items(text: str) -> ConsolidationOutput | None:
    """The items of an answer cut off at max_tokens that were written whole, as an answer;
    None when not one was. Each item stands alone (its action, its target, its episodes), so
    the ones before the cut are as good as in a finished answer; the cut one is dropped.
    ``MalformedAnswer`` when the whole items are not the schema's."""
    start = text.find("[", text.find('"facts"'))
    if start < 0:
        return None
    decoder = json.JSONDecoder()
    items: list[Any] = []
    at = start + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            break
        items.append(item)
    if not items:
        return None
    try:
        return ConsolidationOutput.model_validate({"facts": items})
    except ValidationError as exc:
        raise _malformed(exc) from exc


def calibration_of(answer: ModelAnswer) -> Calibration:
    """The runtime's answer parsed strictly, or the reason it cannot be used. An answer cut off
    at max_tokens keeps its complete items (``complete_items``); ``cut_off`` says so."""
    tokens = (answer.prompt_tokens, answer.completion_tokens, answer.cached_tokens)
    if answer.error is not None or answer.text is None:
        reason = answer.error or "model returned no answer"
        return Calibration(answer.chunk_id, None, f"model call failed: {reason}", *tokens)
    if answer.truncated:
        try:
            kept = complete_items(answer.text)
        except MalformedAnswer as exc:
            return Calibration(
                answer.chunk_id, None, f"answer cut off at max_tokens; {exc}", *tokens
            )
        if kept is None:
            reason = f"answer cut off at max_tokens ({answer.completion_tokens} tokens)"
            return Calibration(answer.chunk_id, None, f"model call failed: {reason}", *tokens)
        return Calibration(answer.chunk_id, kept, None, *tokens, cut_off=True)
    try:
        return Calibration(answer.chunk_id, parse_answer(answer.text), None, *tokens)
    except MalformedAnswer as exc:
        return Calibration(answer.chunk_id, None, str(exc), *tokens)
