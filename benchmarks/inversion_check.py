"""Can the model catch a fact that says the opposite of its source, at a price worth paying?

A fact that inverts what was said ("Dana is much better at it than she is" for "Mia is much
better at overhangs than I am") passes every check of the guard: its names and numbers are
all in the messages. The candidate remedy is a second call: the model reads each item it
wrote beside the messages it cites and says whether they support it. This measures that call
on LoCoMo: ``--pairs`` gold observations, each with its evidence turn and the turn before it,
checked as they are and negated by a fixed rule ("X is ..." → "X is not ...", "X loves ..." →
"X does not love ..."). Reported: how often the model calls a true fact supported and a
negated one contradicted or not stated (caught), answers it did not give in the schema, and
the tokens per check; with ``--nightly-facts`` and ``--nightly-tokens`` (a night's facts
written and billed tokens, e.g. from ``benchmarks.nightly_cost``), what checking every fact
of that night would add to its bill.

    python -m benchmarks.inversion_check [--pairs 40] [--model NAME] [--engine ENGINE]
        [--nightly-facts N --nightly-tokens T] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.locomo_recall import DEFAULT_DATA
from benchmarks.report import print_figures
from slowwave.models.llm import load_model
from slowwave.models.llm.base import GenerationRequest, Purpose
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import Settings, setting_default

SYSTEM = """You check a statement about a person against the messages it was taken from.
Answer "supported" when the messages say it, "contradicted" when they say the opposite or
something that excludes it, "not_stated" when they say neither.
Answer with JSON only: {"verdict": "supported"}"""
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["supported", "contradicted", "not_stated"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}
# the rules that negate a sentence whose subject is one word (a name): the first that applies
_SUBJECT = r"^([A-Z][\w']*) "
_NEGATIONS = (
    (re.compile(_SUBJECT + r"(is|was|are|were|can|will|would|has been|had been)\b"), r"\1 \2 not"),
    (re.compile(_SUBJECT + r"(has|have|had) (?=\w+ed\b)"), r"\1 \2 not "),
    (
        re.compile(
            _SUBJECT + r"(loves|likes|enjoys|wants|plans|hopes|feels|thinks|finds|needs|"
            r"knows|believes|prefers|owns|works|lives|plays|paints|writes|reads)\b"
        ),
        None,
    ),
)


def negate(sentence: str) -> str | None:
    """The sentence negated by the first rule that applies, or None."""
    for pattern, replacement in _NEGATIONS:
        match = pattern.search(sentence)
        if match is None:
            continue
        if replacement is not None:
            return pattern.sub(replacement, sentence, count=1)
        subject, verb = match.group(1), match.group(2)
        return f"{subject} does not {verb[:-1]}" + sentence[match.end() :]
    return None


def pairs(data: Path, count: int) -> Iterator[tuple[str, str, str]]:
    """(messages, gold sentence, its negation), spread over the conversations: each
    observation with one evidence turn that a rule can negate, every n-th of them."""
    found = []
    for conversation in json.loads(data.read_text()):
        turns = {
            t["dia_id"]: t
            for key, session in conversation["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for t in session
        }
        order = list(turns)
        for by_speaker in conversation["observation"].values():
            for items in by_speaker.values():
                for sentence, evidence in items:
                    ids = [evidence] if isinstance(evidence, str) else evidence
                    negated = negate(sentence)
                    if len(ids) != 1 or ids[0] not in turns or negated is None:
                        continue
                    at = order.index(ids[0])
                    shown = [turns[i] for i in order[max(0, at - 1) : at + 1]]
                    text = "\n".join(f"{t['speaker']}: {t['text']}" for t in shown)
                    found.append((text, sentence, negated))
    step = max(1, len(found) // max(count, 1))
    yield from found[::step][:count]


def request(index: int, messages: str, statement: str) -> GenerationRequest:
    return GenerationRequest(
        chunk_id=f"check-{index}",
        purpose=Purpose.merge,  # a judgement of sentences, answered as short as a merge's
        system=SYSTEM,
        user=f"Messages:\n{messages}\n\nStatement: {statement}",
        json_schema=SCHEMA,
    )


def verdict(text: str | None) -> str:
    try:
        value = json.loads(text or "")["verdict"]
    except (ValueError, KeyError, TypeError):
        return "unparsed"
    return value if value in ("supported", "contradicted", "not_stated") else "unparsed"


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--model", default=setting_default("llm_model"))
    parser.add_argument("--engine", default=setting_default("llm_runtime"))
    parser.add_argument("--nightly-facts", type=int, default=0, help="facts a night writes")
    parser.add_argument("--nightly-tokens", type=int, default=0, help="tokens a night bills")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    chosen = list(pairs(args.data, args.pairs))
    requests = [
        request(2 * i + j, messages, statement)
        for i, (messages, gold, negated) in enumerate(chosen)
        for j, statement in enumerate((gold, negated))
    ]
    model = load_model(Settings(llm_model=args.model, llm_runtime=args.engine))
    try:
        answers = model.generate(requests)
    finally:
        model.close()
    on_gold = Counter(verdict(a.text) for a in answers[0::2])
    on_negated = Counter(verdict(a.text) for a in answers[1::2])
    n = len(chosen)
    tokens = sum(a.prompt_tokens + a.completion_tokens for a in answers)
    per_check = round(tokens / len(answers), 1) if answers else 0.0
    figures: dict[str, Any] = {
        "model": model.name,
        "pairs": n,
        "true_facts_supported": round(on_gold["supported"] / n, 3) if n else 0.0,
        "negated_facts_caught": round(
            (on_negated["contradicted"] + on_negated["not_stated"]) / n, 3
        )
        if n
        else 0.0,
        "verdicts_on_true_facts": dict(on_gold),
        "verdicts_on_negated_facts": dict(on_negated),
        "tokens_per_check": per_check,
    }
    if args.nightly_facts and args.nightly_tokens:
        figures["added_to_nightly_bill"] = round(
            per_check * args.nightly_facts / args.nightly_tokens, 3
        )
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()
