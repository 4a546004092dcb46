"""What is true now: LongMemEval's knowledge-update and single-session-user questions, each
question's sessions replayed night by night through the nightly pipeline, and the facts it
leaves scored against the answer.

LongMemEval (oracle variant, MIT; ``../shared/datasets/longmemeval/``) is user–assistant chats
in which a fact about the user is stated in one session and, for a ``knowledge-update``
question, changed in a later one ("How many bikes do I currently own?": the later value). Each
question is a conversation of its own; night N brings every question's N-th session (in date
order), and a nightly run (``tasks.consolidate``, the default model unless told otherwise)
consolidates it, the episodes dated as their sessions.

Scored per question, over the facts the runs left:

- ``knowledge-update``: whether a fact active at the question's date states the answer (for a
  question about an earlier value, "previous", "initially", "before": any version written,
  ended or not); and, where the superseded value is a number, whether a fact active at the
  question's date still states it;
- ``single-session-user``: whether a fact states the answer.

How a fact "states" a value (the rule, with the cases it gets wrong, is in the benchmark's
page, ``docs/benchmarks/longmemeval.md``): the fact shares a word with the question, and
holds every number of the answer (digits and words alike: "five" is 5, "twice" 2, "25:50" is
25 and 50), or, for an answer with no number, two thirds of its words. Abstention questions
(``_abs``) and answers with no number and no word to look for ("Yes") are not scored.

Cost: billed tokens (prompt and completion, summaries included) per raw transcript token,
model calls, seconds per episode and per question.

    python -m benchmarks.longmemeval [--data PATH] [--questions N] [--single-session N]
        [--summaries] [--engine E] [--model M] [--set NAME=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from benchmarks.locomo_extraction import fresh_database, raw_transcript_tokens
from benchmarks.locomo_recall import add_set_option
from benchmarks.report import print_figures
from slowwave.models.embedding import load_embedder
from slowwave.models.episode import Episode, Message
from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.ids import new_id
from slowwave.models.llm import check_runtime, load_model
from slowwave.models.llm.base import prompt_limits
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import LLMRuntimeName, Settings
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.summarize import SummaryReport, summarize_missing

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared/datasets/longmemeval/longmemeval_oracle_dev.json"
)
KNOWLEDGE_UPDATE, SINGLE_SESSION_USER = "knowledge-update", "single-session-user"
DEFAULT_QUESTIONS = 30
DEFAULT_SINGLE_SESSION = 10
# what the nights' runs did, added up
COUNTED = (
    "facts_inserted",
    "facts_reinforced",
    "facts_updated",
    "facts_invalidated",
    "dedupe_merges",
    "actions_rejected",
    "change_pairs",
    "changes_found",
    "gray_zone_pairs",
    "gray_zone_merges",
    "answers_cut_off",
    "chunks_failed",
)


@dataclass(frozen=True)
class Question:
    """One question and its sessions, oldest first."""

    id: str
    type: str
    question: str
    answer: str
    asked_at: datetime
    sessions: list[tuple[datetime, list[dict[str, Any]]]]  # (date, turns)

    @property
    def conversation(self) -> str:
        return f"longmemeval-{self.id}"

    @property
    def scored_at(self) -> datetime:
        """When the question is asked, or after its last session where the file dates the
        question before it: three of its knowledge-update questions are asked on the day of
        their last session, hours before its time, and that session holds the answer."""
        return max([self.asked_at, *(at for at, _ in self.sessions[-1:])])

    @property
    def about_an_earlier_value(self) -> bool:
        """Asks for the value before the change ("What was my previous personal best?")."""
        return EARLIER.search(self.question) is not None

    def episodes(self) -> list[Episode]:
        """A session an episode, dated as the session, the turns as messages (their roles as
        speakers)."""
        return [
            Episode(
                id=new_id(),
                conversation_id=self.conversation,
                external_key=f"longmemeval:{self.id}:{n}",
                messages=[Message(speaker=t["role"], text=t["content"]) for t in turns],
                start_at=at,
                end_at=at,
            )
            for n, (at, turns) in enumerate(self.sessions)
        ]

    def superseded_numbers(self) -> set[str]:
        """The numbers of the evidence turns of every answer session but the last that are in
        neither the answer nor the question: the values the later session changed."""
        evidence = [
            turn["content"]
            for _, turns in self.sessions[:-1]
            for turn in turns
            if turn.get("has_answer") and turn["role"] == "user"
        ]
        found = set().union(*(numbers(text) for text in evidence)) if evidence else set()
        return found - numbers(self.answer) - numbers(self.question)


EARLIER = re.compile(r"\b(previous|previously|initially|originally|earlier|before I)\b", re.I)


def parse_date(text: str) -> datetime:
    """LongMemEval's ``2023/05/25 (Thu) 20:21``, as UTC."""
    day, _, clock = text.partition(" (")
    return datetime.strptime(f"{day} {clock.split(') ')[-1]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def read_questions(data: Path, kind: str, count: int) -> list[Question]:
    """The first ``count`` questions of ``kind`` in the file, abstention ones left out, each
    with its sessions in date order."""
    picked: list[Question] = []
    for item in json.loads(data.read_text(encoding="utf-8")):
        if len(picked) >= count:
            break
        if item["question_type"] != kind or item["question_id"].endswith("_abs"):
            continue
        sessions = sorted(
            zip(map(parse_date, item["haystack_dates"]), item["haystack_sessions"], strict=True),
            key=lambda pair: pair[0],
        )
        picked.append(
            Question(
                id=item["question_id"],
                type=kind,
                question=item["question"],
                answer=str(item["answer"]),
                asked_at=parse_date(item["question_date"]),
                sessions=sessions,
            )
        )
    return picked


# ---- the scoring rule (docs/benchmarks/longmemeval.md) ---------------------------------------

NUMBER_WORDS = {
    "zero": 0,
    "once": 1,
    "one": 1,
    "twice": 2,
    "two": 2,
    "thrice": 3,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "dozen": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
}
_TENS = {"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
_CLOCK = re.compile(r"(?<![\w.])(\d{1,2}):(\d{2})(?!\d)")
_DIGITS = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?:st|nd|rd|th)?(?![\w])")
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "so",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "i",
        "i'm",
        "i've",
        "me",
        "my",
        "mine",
        "you",
        "your",
        "we",
        "our",
        "us",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "how",
        "many",
        "much",
        "what",
        "which",
        "who",
        "whom",
        "where",
        "when",
        "why",
        "long",
        "currently",
        "current",
        "now",
        "still",
        "since",
        "start",
        "started",
        "starting",
        "ever",
        "any",
        "some",
        "more",
        "most",
        "than",
        "then",
        "there",
        "their",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "about",
        "into",
        "just",
        "also",
        "would",
        "could",
        "should",
        "will",
        "can",
        "may",
        "might",
        "get",
        "got",
        "go",
        "went",
        "up",
        "out",
        "new",
        "time",
        "times",
        "again",
        "last",
        "recently",
        "recent",
        "usually",
        "often",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "user",
        "user's",
    ]
)


def numbers(text: str) -> set[str]:
    """The numbers ``text`` states, digits or words, as digit strings: "25:50" and "25
    minutes and 50 seconds" both give {25, 50}; "6:00 pm" gives {6}; "1,300" 1300; "twenty-five"
    25; "5th" 5; a number glued to other letters ("5K", "80D") is a name, not a number."""
    lowered = text.lower()
    found: set[str] = set()
    for match in _CLOCK.finditer(lowered):
        found.add(str(int(match.group(1))))
        if int(match.group(2)):
            found.add(str(int(match.group(2))))
    rest = _CLOCK.sub(" ", lowered)
    for match in _DIGITS.finditer(rest):
        digits = re.sub(r"(st|nd|rd|th)$", "", match.group(0)).replace(",", "")
        found.add(str(float(digits)).removesuffix(".0") if "." in digits else str(int(digits)))
    words = re.findall(r"[a-z]+", rest)
    for i, word in enumerate(words):
        if word not in NUMBER_WORDS:
            continue
        value = NUMBER_WORDS[word]
        if word in _TENS and i + 1 < len(words) and NUMBER_WORDS.get(words[i + 1], 10) < 10:
            value += NUMBER_WORDS[words[i + 1]]
        elif i > 0 and words[i - 1] in _TENS and value < 10:
            continue  # "five" of "twenty-five": counted with its tens
        if word == "one" and i + 1 < len(words) and words[i + 1] in {"of", "day", "more"}:
            continue  # "one of", "one day": no count
        found.add(str(value))
    return found


def stem(word: str) -> str:
    """A word without its plural: "suburbs" is "suburb", "classes" "class", "stories" "story"."""
    word = word.replace("’", "'").removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry meaning, stemmed; numbers and stopwords left out."""
    return {
        stem(w)
        for w in _WORD.findall(text.lower())
        if w not in STOPWORDS and w not in NUMBER_WORDS and not w.isdigit()
    }


def alternatives(answer: str) -> list[str]:
    """The values an answer accepts: "25 minutes and 50 seconds (or 25:50)" is either."""
    main, _, rest = answer.partition("(")
    found = [main.strip(" .")]
    if rest:
        found.append(rest.rstrip(") .").removeprefix("or ").strip())
    return [a for a in found if a]


def states(fact: str, value: str, question: str) -> bool:
    """``fact`` states ``value`` as the answer to ``question``: it shares a word with the
    question, and holds every number of the value, or (a value with no number) two thirds of
    its words."""
    words = content_words(fact)
    topic = content_words(question)
    if topic and not topic & words:
        return False
    wanted = numbers(value)
    if wanted:
        return wanted <= numbers(fact)
    needed = content_words(value)
    return bool(needed) and len(needed & words) * 3 >= 2 * len(needed)


def scorable(question: Question) -> bool:
    """An answer with a number or a word to look for ("Yes" has neither)."""
    return any(numbers(a) or content_words(a) for a in alternatives(question.answer))


def answered_by(question: Question, facts: Iterable[str]) -> str | None:
    """The first of ``facts`` that states one of the answer's values."""
    for fact in facts:
        if any(states(fact, value, question.question) for value in alternatives(question.answer)):
            return fact
    return None


def still_stating_superseded(question: Question, active: Iterable[str]) -> str | None:
    """The first active fact that states a superseded number (and not the answer), when the
    superseded value is a number; None otherwise."""
    old = question.superseded_numbers()
    if not old:
        return None
    for fact in active:
        if answered_by(question, [fact]) is not None:
            continue
        topic = content_words(question.question)
        if numbers(fact) & old and (not topic or topic & content_words(fact)):
            return fact
    return None


# ---- the run ---------------------------------------------------------------------------------


def main() -> None:
    unwind_on_sigterm()
    args = parse_args()
    if not args.data.is_file():
        print_figures(
            {"skipped": f"LongMemEval data not found at {args.data}: give --data PATH"},
            as_json=args.json,
        )
        return
    questions = read_questions(args.data, KNOWLEDGE_UPDATE, args.questions) + read_questions(
        args.data, SINGLE_SESSION_USER, args.single_session
    )
    settings = Settings(
        **dict(args.set),
        **({"llm_runtime": args.engine} if args.engine else {}),
        **({"llm_model": args.model} if args.model else {}),
    )
    try:
        check_runtime(settings)
    except RuntimeNotAvailable as exc:
        raise SystemExit(str(exc)) from None
    print_figures(measure(settings, questions, summaries=args.summaries), as_json=args.json)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--questions",
        type=int,
        default=DEFAULT_QUESTIONS,
        metavar="N",
        help="knowledge-update questions, the first N of the file (abstention ones left out)",
    )
    parser.add_argument(
        "--single-session",
        type=int,
        default=DEFAULT_SINGLE_SESSION,
        metavar="N",
        help="single-session-user questions, the first N of the file",
    )
    parser.add_argument(
        "--summaries",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="have the model write each night's episode summaries first, as backfill does",
    )
    parser.add_argument("--engine", choices=get_args(LLMRuntimeName), default=None)
    parser.add_argument("--model", default=None)
    add_set_option(parser, "chunk_size=4 or change_check=false")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    if args.questions < 0 or args.single_session < 0:
        parser.error("--questions and --single-session are counts: 0 or more")
    if args.engine == "replay":
        parser.error("the replay runtime answers only LoCoMo: give a model")
    return args


def measure(
    settings: Settings, questions: Sequence[Question], *, summaries: bool
) -> dict[str, Any]:
    """Every question's sessions, night by night, in one fresh database; the figures."""
    embedder = load_embedder(settings)
    nights = max((len(q.sessions) for q in questions), default=0)
    by_question = {q.conversation: q for q in questions}
    prompt = completion = calls = raw = 0
    counts = dict.fromkeys(COUNTED, 0)
    written = SummaryReport()
    started = time.perf_counter()
    with fresh_database(settings) as db:
        # each night comes after its sessions: every episode is due
        db.settings = db.settings.evolve(due_after_s=0)
        model = load_model(settings)
        try:
            _, counter = prompt_limits(model)
            for night in range(nights):
                episodes = [
                    episode
                    for q in questions
                    if night < len(q.sessions)
                    for episode in q.episodes()[night : night + 1]
                ]
                raw += raw_transcript_tokens(episodes, counter)
                with db.connection() as conn:
                    load_episodes(conn, episodes)
                if summaries:
                    with db.connection() as conn:
                        report = summarize_missing(
                            conn, model, min_chars=db.settings.ingest.summary_min_chars
                        )
                    written.summarized += report.summarized
                    written.failed += report.failed
                    prompt += report.prompt_tokens
                    completion += report.completion_tokens
                    calls += report.summarized + report.failed
                run = consolidate(db, model, embedder, db.settings, kind=f"night {night + 1}")
                for name in COUNTED:
                    counts[name] += getattr(run, name, 0)  # a field an older release lacks
                prompt += run.prompt_tokens
                completion += run.completion_tokens
                calls += run.model_calls
        finally:
            model.close()
        seconds = time.perf_counter() - started
        with db.connection() as conn:
            rows = conn.execute(
                "SELECT conversation_id, fact, valid_at, invalid_at FROM semantic_memory "
                "WHERE conversation_id = ANY(%s) ORDER BY created_at",
                (list(by_question),),
            ).fetchall()
    facts: dict[str, list[tuple[str, datetime, datetime | None]]] = {c: [] for c in by_question}
    for conversation, fact, valid_at, invalid_at in rows:
        facts[conversation].append((fact, valid_at, invalid_at))
    scored = [score(q, facts[q.conversation]) for q in questions]
    replayed = sum(len(q.sessions) for q in questions)
    return {
        "runtime": settings.llm.runtime,
        "model": settings.llm.model,
        **figures(scored),
        "episodes": replayed,
        "raw_transcript_tokens": raw,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "billed_tokens_per_raw_token": round((prompt + completion) / raw, 3) if raw else 0.0,
        "model_calls": calls,
        "summaries_written": written.summarized,
        "facts_written": len(rows),
        **counts,
        "seconds": round(seconds, 1),
        "seconds_per_episode": round(seconds / replayed, 2) if replayed else 0.0,
        "seconds_per_question": round(seconds / len(questions), 2) if questions else 0.0,
        "by_question": scored,
    }


def score(
    question: Question, facts: Sequence[tuple[str, datetime, datetime | None]]
) -> dict[str, Any]:
    """What the question's facts state: the answer (by a fact active at the question's date,
    or by any version for a question about an earlier value) and, for a knowledge update, a
    superseded value still active."""
    at = question.scored_at
    active = [f for f, valid, invalid in facts if valid <= at and (invalid is None or invalid > at)]
    searched = [f for f, *_ in facts] if question.about_an_earlier_value else active
    result: dict[str, Any] = {
        "id": question.id,
        "type": question.type,
        "answer": question.answer,
        "scored": scorable(question),
        "stated_by": answered_by(question, searched),
        "active_facts": len(active),
        # every version written, for checking the rule by hand: an ended one is marked
        "facts": [f if f in active else f"(ended) {f}" for f, *_ in facts],
    }
    if question.type == KNOWLEDGE_UPDATE and not question.about_an_earlier_value:
        old = question.superseded_numbers()
        result["superseded"] = sorted(old)
        result["superseded_active"] = still_stating_superseded(question, active)
    return result


def figures(scored: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The shares of the scored questions."""

    def share(part: int, whole: int) -> float:
        return round(part / whole, 3) if whole else 0.0

    updates = [s for s in scored if s["type"] == KNOWLEDGE_UPDATE and s["scored"]]
    singles = [s for s in scored if s["type"] == SINGLE_SESSION_USER and s["scored"]]
    checked = [s for s in updates if s.get("superseded")]
    return {
        "knowledge_update_questions": len(updates),
        "current_value_stated": share(sum(bool(s["stated_by"]) for s in updates), len(updates)),
        "superseded_questions": len(checked),
        "superseded_still_active": share(
            sum(bool(s["superseded_active"]) for s in checked), len(checked)
        ),
        "single_session_questions": len(singles),
        "single_session_answer_stated": share(
            sum(bool(s["stated_by"]) for s in singles), len(singles)
        ),
        "questions_not_scored": sum(not s["scored"] for s in scored),
    }


if __name__ == "__main__":
    main()
