"""The memory a model runtime makes from LoCoMo: fact quality, end-to-end retrieval, cost.

The subset is the first ``--sessions`` sessions of each conversation (all seven, or those
named). They are ingested without LoCoMo's human-written session summaries, as a transcript
comes, into a fresh embedded Postgres, and consolidated by ``--model`` on ``--engine``; with
``--summaries`` the runtime first writes episode summaries, as backfill does. Then:

- fact quality: the extracted facts (every fact version the run wrote: new facts and new
  versions of updated ones; a proposal merged into, or reinforcing, an existing fact writes
  none) against the gold observations of the same sessions, matched by the cosine of their
  embeddings at or above ``--match`` (and ``--strict-match``) when they are about the same
  person (a fact that starts with a speaker's name matches only that speaker's observations;
  ``*_any_subject``: the figures without that condition). Recall: the share of gold
  observations matched by some fact of their conversation; precision: the share of facts
  matching some gold observation of theirs; grounded: the share of facts matching a gold
  observation of a session they cite (their source episodes);
- end to end: for every question whose evidence sessions all lie in the subset, the share of
  them among the source sessions of the top 5 / 10 / 20 facts hybrid search returns
  (``benchmarks.locomo_recall``), beside the same with the replay model's gold facts
  consolidated from the same episodes in a second fresh database; ``*_fused_*``: over the one
  list of facts and episodic memories search gives by default (a memory counts for its
  session);
- cost: the model's prompt and completion tokens (summaries included) per token of raw
  transcript (``speaker: text`` lines, counted with the runtime's tokenizer where it has
  one), seconds per episode (summaries and consolidation), and the guard's rejections by
  reason (the decision log's ``reason``, its quoted text and times left out), each printed
  with its item (``rejected: reason | fact``);
- refusals: the facts the guard refused for what they say (ungrounded, not self-contained)
  and the share of them that match a gold observation (``refused_precision``: right facts
  thrown away).

With the replay engine the extracted facts are the gold observations: recall and precision
near 1 and the end-to-end ratio near 1 check the harness. At the default of
``DEFAULT_SESSIONS`` sessions, the whole subset with the 1.5B model on two cores runs in
under 40 minutes.

    python -m benchmarks.locomo_extraction --model NAME --engine vllm|llamacpp|openai|replay
        --sessions N [--conversations conv-26 ...] [--match 0.7] [--strict-match 0.8]
        [--summaries/--no-summaries] [--data PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

import numpy as np

from benchmarks.homes import fresh_home
from benchmarks.locomo_recall import (
    DEFAULT_DATA,
    KS,
    add_set_option,
    fact_sessions,
    session_of,
    session_recall,
)
from benchmarks.locomo_recall import turns as evidence_turns
from benchmarks.report import print_figures
from slowwave.models.embedding import Embedder, load_embedder
from slowwave.models.episode import Episode
from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.llm import StructuredModel, check_runtime, load_model
from slowwave.models.llm.base import prompt_limits
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.llm.tokens import TokenCounter
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.run import RunSummary
from slowwave.models.settings import LLMRuntimeName, SearchSettings, Settings
from slowwave.sql.db import Database, migrate
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.locomo import read_locomo
from slowwave.tasks.ingest.summarize import SummaryReport, summarize_missing
from slowwave.tasks.search import search

# Sessions per conversation: at this N the whole subset with the 1.5B model on two cores runs
# in under 40 minutes (time it again when changing it).
DEFAULT_SESSIONS = 2
DEFAULT_MATCH = 0.7
DEFAULT_STRICT_MATCH = 0.8
# what varies between rejections of one kind: quoted text, times, parenthesised detail
_REASON_DETAIL = re.compile(
    r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\d{4}-\d\d-\d\dT[\d:.]+(?:[+-]\d\d:\d\d|Z)?"
)
_PARENTHESES = re.compile(r"\s*\([^()]*\)")
MAX_REASON_CHARS = 200


@dataclass(frozen=True)
class Observation:
    """A gold observation of the subset."""

    conversation_id: str
    session: int
    sentence: str
    speaker: str  # whom it is about: LoCoMo files each observation under a speaker


@dataclass(frozen=True)
class Question:
    """A LoCoMo question whose evidence sessions all lie in the subset."""

    conversation_id: str
    text: str
    sessions: set[int]


@dataclass(frozen=True)
class Subset:
    """The first sessions of the chosen conversations: episodes, gold and questions."""

    conversations: list[str]
    episodes: list[Episode]
    gold: list[Observation]
    questions: list[Question]


@dataclass(frozen=True)
class ExtractedFact:
    """A fact version the run wrote, and the sessions it cites."""

    conversation_id: str
    text: str
    sessions: frozenset[int]


@dataclass(frozen=True)
class ModelRun:
    """What the measured model did with the subset."""

    summary: RunSummary
    summaries: SummaryReport
    seconds: float
    raw_tokens: int
    gated_raw_tokens: int  # of the episodes the gate consolidated without the model
    facts: list[ExtractedFact]
    refused: list[ExtractedFact]  # refused by the guard for what they say
    rejections: dict[str, int]
    recall: dict[str, dict[int, float]]  # facts, and fused with the episodic memories


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    args = parse_args()
    started = time.perf_counter()
    settings = Settings(
        **dict(args.set),
        llm_model=args.model,
        llm_runtime=args.engine,
        replay_data=args.data,
    )
    try:
        check_runtime(settings)  # a runtime that cannot start fails in one line, before Postgres
    except RuntimeNotAvailable as exc:
        raise SystemExit(str(exc)) from None
    subset = select_subset(args.data, args.conversations, args.sessions)
    embedder = load_embedder(settings)
    model = load_model(settings)
    try:
        run = measure_model(settings, model, embedder, subset, summaries=args.summaries)
    finally:
        model.close()
    gold_recall = replay_recall(settings, embedder, subset, args.data)
    figures = {
        "model": model_name(settings),
        "engine": settings.llm.runtime,
        "sessions": args.sessions,
        "conversations": subset.conversations,
        "match_threshold": args.match,
        "strict_match_threshold": args.strict_match,
        **fact_quality(run.facts, subset.gold, embedder, args.match, args.strict_match),
        **{f"end_to_end_recall_at_{k}": run.recall["facts"][k] for k in KS},
        **{f"end_to_end_recall_fused_at_{k}": run.recall["fused"][k] for k in KS},
        **{f"gold_end_to_end_recall_at_{k}": gold_recall[k] for k in KS},
        "end_to_end_ratio_at_10": _share(run.recall["facts"][10], gold_recall[10]),
        "questions": len(subset.questions),
        **cost(run, len(subset.episodes)),
        "gold_observations": len(subset.gold),
        "facts_extracted": len(run.facts),
        **refusal_quality(run.refused, subset.gold, embedder),
        "rejections_by_reason": run.rejections,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print_figures(figures, as_json=args.json)


def parse_args() -> argparse.Namespace:
    defaults = Settings()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default=defaults.llm.model, help="catalog name or path")
    parser.add_argument("--engine", choices=get_args(LLMRuntimeName), default=defaults.llm.runtime)
    parser.add_argument(
        "--sessions", type=int, default=DEFAULT_SESSIONS, help="first N sessions of each"
    )
    parser.add_argument("--conversations", nargs="+", default=None, metavar="SAMPLE_ID")
    parser.add_argument(
        "--match", type=float, default=DEFAULT_MATCH, help="cosine that counts as a match"
    )
    parser.add_argument(
        "--strict-match",
        type=float,
        default=DEFAULT_STRICT_MATCH,
        help="the strict figures' cosine",
    )
    parser.add_argument(
        "--summaries",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="have the runtime write episode summaries first, as backfill does",
    )
    add_set_option(parser, "chunk_size=4 or gate_max_surprise=0.4")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    if args.sessions < 1:
        parser.error("--sessions must be at least 1")
    if args.summaries and args.engine == "replay":
        parser.error("--summaries needs a model: the replay runtime writes no summaries")
    return args


def model_name(settings: Settings) -> str:
    """The model that answered: ``--model`` names it for the local runtimes only."""
    if settings.llm.runtime == "replay":
        return "gold observations"
    if settings.llm.runtime == "openai":
        return settings.openai.model
    return settings.llm.model


def select_subset(data: Path, conversations: Sequence[str] | None, sessions: int) -> Subset:
    """The first ``sessions`` sessions of each chosen conversation, without LoCoMo's own
    summaries (a transcript has none: the model's are what ``--summaries`` measures)."""
    records = read_records(data, conversations)
    chosen = list(records)
    episodes = [
        e.model_copy(update={"summary": None})
        for e in read_locomo(data)
        if e.conversation_id in chosen and session_number(e.external_key) <= sessions
    ]
    first = {c: set(range(1, sessions + 1)) for c in chosen}
    return Subset(chosen, episodes, gold_of(records, first), questions_of(records, first))


def read_records(data: Path, conversations: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """The LoCoMo records of ``conversations`` (all when None) by sample id, in file order; a
    conversation the file lacks ends the benchmark, naming it."""
    records = {
        str(c["sample_id"]): c
        for c in json.loads(data.read_text(encoding="utf-8"))
        if conversations is None or c["sample_id"] in conversations
    }
    missing = sorted(set(conversations or ()) - set(records))
    if missing:
        raise SystemExit(f"no such conversation in {data}: {', '.join(missing)}")
    return records


def gold_of(records: dict[str, dict[str, Any]], sessions: dict[str, set[int]]) -> list[Observation]:
    """The gold observations of each conversation's ``sessions``."""
    return [
        Observation(c, number, sentence, speaker)
        for c, record in records.items()
        for key, by_speaker in record.get("observation", {}).items()
        if (number := int(key.split("_")[1])) in sessions[c]
        for speaker, items in by_speaker.items()
        for sentence, _evidence in items
    ]


def questions_of(
    records: dict[str, dict[str, Any]], sessions: dict[str, set[int]]
) -> list[Question]:
    """Every question with evidence (as locomo_recall) whose evidence sessions all lie in its
    conversation's ``sessions``."""
    questions = []
    for c, record in records.items():
        for qa in record["qa"]:
            asked = {session_of(t) for t in evidence_turns(qa.get("evidence", []))}
            if asked and asked <= sessions[c]:
                questions.append(Question(c, str(qa["question"]), asked))
    return questions


def session_number(external_key: str) -> int:
    """``locomo:conv-26:session_3`` → 3 (and so for a part of it, ``…:session_3:m4``)."""
    return int(external_key.split(":")[2].removeprefix("session_"))


@contextmanager
def fresh_database(settings: Settings) -> Iterator[Database]:
    """A migrated embedded Postgres in a temporary home, stopped and deleted on exit, errors
    included; ``settings.home`` (the prepared models) is left alone."""
    with tempfile.TemporaryDirectory(prefix="slowwave-extraction-") as home:
        local = settings.evolve(home=fresh_home(home), database_url=None)
        with Database(local) as db:
            migrate(db)
            yield db


def measure_model(
    settings: Settings,
    model: StructuredModel,
    embedder: Embedder,
    subset: Subset,
    *,
    summaries: bool,
) -> ModelRun:
    """Summaries (when asked) and consolidation of the subset by ``model``, timed, then what
    the run wrote and how search does over it."""
    _, counter = prompt_limits(model)
    with fresh_database(settings) as db:
        with db.connection() as conn:
            load_episodes(conn, subset.episodes)
        started = time.perf_counter()
        written = SummaryReport()
        if summaries:
            with db.connection() as conn:
                written = summarize_missing(
                    conn,
                    model,
                    conversations=subset.conversations,
                    min_chars=db.settings.ingest.summary_min_chars,
                )
        summary = consolidate(db, model, embedder, db.settings, conversations=subset.conversations)
        seconds = time.perf_counter() - started
        with db.connection() as conn:
            facts = extracted_facts(conn, summary.run_id)
            rejections = rejections_by_reason(conn, summary.run_id)
            refused = refused_facts(conn, summary.run_id)
            for reason, text in conn.execute(
                "SELECT reason, proposed_fact FROM decision_log "
                "WHERE run_id = %s AND action = 'rejected' ORDER BY id",
                (summary.run_id,),
            ):
                print(f"rejected: {reason} | {text}")
            recall = end_to_end_recall(conn, embedder, settings.search, subset.questions)
            gated = {
                k for (k,) in conn.execute("SELECT external_key FROM episodic_memory WHERE gated")
            }
    return ModelRun(
        summary=summary,
        summaries=written,
        seconds=seconds,
        raw_tokens=raw_transcript_tokens(subset.episodes, counter),
        gated_raw_tokens=raw_transcript_tokens(
            [e for e in subset.episodes if e.external_key in gated], counter
        ),
        facts=facts,
        refused=refused,
        rejections=rejections,
        recall=recall,
    )


def replay_recall(
    settings: Settings, embedder: Embedder, subset: Subset, data: Path
) -> dict[int, float]:
    """End-to-end recall over the gold facts of the same episodes: the replay model's
    consolidation in a second fresh database, the yardstick for the model's."""
    with fresh_database(settings) as db:
        with db.connection() as conn:
            load_episodes(conn, subset.episodes)
        consolidate(
            db, LoCoMoReplayModel(data), embedder, db.settings, conversations=subset.conversations
        )
        with db.connection() as conn:
            return end_to_end_recall(conn, embedder, settings.search, subset.questions)["facts"]


def extracted_facts(
    conn: Any, run_id: UUID, conversations: Sequence[str] | None = None
) -> list[ExtractedFact]:
    """Every fact row the run created (in ``conversations``, LoCoMo's, when given), superseded
    versions included: exactly what new and update actions wrote (a merge or a reinforcement
    adds evidence to a row, not a row). Its cited sessions are those of its source episodes."""
    return _facts_where(conn, "f.created_by_run_id = %s", run_id, conversations)


def reinforced_facts(
    conn: Any, run_id: UUID, conversations: Sequence[str] | None = None
) -> list[ExtractedFact]:
    """The facts the run wrote or added evidence to (a merge of the same sentence, a
    reinforcement): one row for a sentence said again, where a dedupe by vector alone writes a
    second row that ``extracted_facts`` would count."""
    return _facts_where(
        conn,
        "f.id IN (SELECT fact_id FROM decision_log WHERE run_id = %s "
        "AND action IN ('new', 'update', 'merge', 'reinforce'))",
        run_id,
        conversations,
    )


def _facts_where(
    conn: Any, where: str, run_id: UUID, conversations: Sequence[str] | None
) -> list[ExtractedFact]:
    """Fact rows matching ``where`` (of the run ``run_id``), with their sources' sessions."""
    rows = conn.execute(
        "SELECT f.conversation_id, f.fact, array_agg(e.external_key) "
        "FROM semantic_memory f JOIN episodic_memory e ON e.id = ANY(f.source_episodic_ids) "
        f"WHERE {where} "
        "AND (%s::text[] IS NULL OR f.conversation_id = ANY(%s::text[])) "
        "GROUP BY f.id, f.conversation_id, f.fact",
        (run_id, conversations, conversations),
    ).fetchall()
    return [
        ExtractedFact(conversation, text, frozenset(session_number(k) for k in keys))
        for conversation, text, keys in rows
    ]


# the guard's refusals of what a fact says (tasks.guard): ungrounded, not self-contained
REFUSED_SAYING = ("ungrounded:", "not self-contained:", "says more than one thing:")


def refused_facts(
    conn: Any, run_id: UUID, conversations: Sequence[str] | None = None
) -> list[ExtractedFact]:
    """The facts the guard refused for what they say (``REFUSED_SAYING``), with the sessions
    of their chunk: measured against the gold observations like the facts written, they show
    what the refusals cost (a refused fact that matches one was right)."""
    rows = conn.execute(
        "SELECT d.conversation_id, d.proposed_fact, array_agg(e.external_key) "
        "FROM decision_log d JOIN episodic_memory e ON e.id = ANY(d.episode_ids) "
        "WHERE d.run_id = %s AND d.action = 'rejected' AND d.reason LIKE ANY(%s::text[]) "
        "AND (%s::text[] IS NULL OR d.conversation_id = ANY(%s::text[])) "
        "GROUP BY d.id, d.conversation_id, d.proposed_fact",
        (run_id, [f"{p}%" for p in REFUSED_SAYING], conversations, conversations),
    ).fetchall()
    return [
        ExtractedFact(conversation, text, frozenset(session_number(k) for k in keys))
        for conversation, text, keys in rows
        if text
    ]


def refusal_quality(
    refused: Sequence[ExtractedFact], gold: Sequence[Observation], embedder: Embedder
) -> dict[str, float]:
    """How many facts were refused for what they say, and the share of them that match a
    gold observation (at the match threshold): right facts the guard threw away."""
    matched = fact_quality(refused, gold, embedder, DEFAULT_MATCH, DEFAULT_MATCH)["fact_precision"]
    return {"facts_refused": len(refused), "refused_precision": matched}


def rejections_by_reason(conn: Any, run_id: UUID) -> dict[str, int]:
    """The run's rejected actions (guard and apply refusals, in the decision log) counted by
    kind of reason: the reason without the quoted fact, ids and times that vary."""
    counts: Counter[str] = Counter()
    for reason, count in conn.execute(
        "SELECT reason, count(*) FROM decision_log "
        "WHERE run_id = %s AND action = 'rejected' GROUP BY reason",
        (run_id,),
    ):
        counts[reason_kind(reason or "no reason given")] += int(count)
    return dict(counts.most_common())


def reason_kind(reason: str) -> str:
    """``unknown category 'hobby'`` → ``unknown category …``."""
    kind = _PARENTHESES.sub("", _REASON_DETAIL.sub("…", reason))
    return " ".join(kind.split())


def end_to_end_recall(
    conn: Any,
    embedder: Embedder,
    policy: SearchSettings,
    questions: Sequence[Question],
    memories: SearchSettings | None = None,
) -> dict[str, dict[int, float]]:
    """Session-level evidence recall@k of hybrid search over the active facts (``facts``), as
    ``benchmarks.locomo_recall`` measures it; and of the one list of facts and episodic
    memories a fused search gives (``fused``: a fact counts for its sources, a memory for its
    session)."""
    from benchmarks.locomo_recall import session_number
    from slowwave.service.answers import fuse
    from slowwave.tasks.memories import search_memories

    memories = memories or SearchSettings()
    sessions_of = fact_sessions(conn)
    sums = {name: dict.fromkeys(KS, 0.0) for name in ("facts", "fused")}
    for question in questions:
        hits = search(
            conn, embedder, question.text, question.conversation_id, max(KS), policy=policy
        )
        said = search_memories(
            conn,
            embedder,
            question.text,
            question.conversation_id,
            k=max(KS),
            memory_tokens=memories.memory_tokens,
            policy=memories,
        )
        for m in said:
            (key,) = conn.execute(
                "SELECT external_key FROM episodic_memory WHERE id = %s", (m.id,)
            ).fetchone()
            sessions_of[m.id] = {session_number(key)} if key.startswith("locomo:") else set()
        cited = [(h.id, h.source_episodic_ids) for h in hits]
        for k in KS:
            sums["facts"][k] += session_recall(hits[:k], sessions_of, question.sessions)
            # as the service fuses: a search's k facts and the memories it gives
            both = fuse(cited[:k], said[: memories.memories], k, policy.rrf_k)
            sums["fused"][k] += session_recall(both, sessions_of, question.sessions)
    return {
        name: {k: _share(total, len(questions)) for k, total in by_k.items()}
        for name, by_k in sums.items()
    }


def fact_quality(
    facts: Sequence[ExtractedFact],
    gold: Sequence[Observation],
    embedder: Embedder,
    match: float,
    strict: float,
) -> dict[str, float]:
    """Recall, precision (at ``match`` and ``strict``) and grounded share: a fact and a gold
    observation match when they belong to one conversation, are about the same person (a fact
    that starts with a speaker's name is about that speaker, and matches only observations
    LoCoMo files under them) and their cosine reaches the threshold; a grounded fact matches
    one of a session it cites. The cosine alone cannot tell "Nate is allergic to cats" from
    "Joanna is allergic to cats": ``*_any_subject`` are the figures without the subject, as
    measured before it was looked at. The speakers are those the gold files observations
    under (LoCoMo files some of both speakers in every session)."""
    similarity = (
        embedder.embed([f.text for f in facts]) @ embedder.embed([g.sentence for g in gold]).T
        if facts and gold
        else np.zeros((len(facts), len(gold)), dtype=np.float32)
    )
    speakers: dict[str, set[str]] = {}
    for g in gold:
        speakers.setdefault(g.conversation_id, set()).add(g.speaker)
    subject = {f: subject_of(f.text, speakers.get(f.conversation_id, set())) for f in facts}
    conversation = _pairwise(facts, gold, lambda f, g: f.conversation_id == g.conversation_id)
    same = conversation & _pairwise(facts, gold, lambda f, g: subject[f] in (None, g.speaker))
    cited = same & _pairwise(facts, gold, lambda f, g: g.session in f.sessions)
    figures: dict[str, float] = {}
    for suffix, threshold, pairs in (
        ("", match, same),
        ("_strict", strict, same),
        ("_any_subject", match, conversation),
    ):
        matched = pairs & (similarity >= threshold)
        figures[f"fact_recall{suffix}"] = _share(matched.any(axis=0).sum(), len(gold))
        figures[f"fact_precision{suffix}"] = _share(matched.any(axis=1).sum(), len(facts))
    grounded = (cited & (similarity >= match)).any(axis=1).sum()
    figures["grounded_share"] = _share(grounded, len(facts))
    return figures


def subject_of(fact: str, speakers: set[str]) -> str | None:
    """The speaker ``fact`` starts with the name of ("Nate's turtles ..." → Nate), or None."""
    first = re.match(r"\s*([^\W\d_][\w-]*)", fact)
    if first is None:
        return None
    name = first.group(1)
    return next((s for s in speakers if s.split()[0] == name), None)


def _pairwise(
    facts: Sequence[ExtractedFact],
    gold: Sequence[Observation],
    test: Callable[[ExtractedFact, Observation], bool],
) -> np.ndarray:
    """``test`` of every (fact, observation) pair, as a facts × observations mask."""
    rows = [[test(f, g) for g in gold] for f in facts]
    return np.array(rows, dtype=bool).reshape(len(facts), len(gold))


def raw_transcript_tokens(episodes: Sequence[Episode], counter: TokenCounter) -> int:
    """Tokens of the subset's messages as ``speaker: text`` lines: what the memory costs is
    measured against reading the transcript itself."""
    return sum(counter("\n".join(f"{m.speaker}: {m.text}" for m in e.messages)) for e in episodes)


def cost(run: ModelRun, episodes: int) -> dict[str, Any]:
    """Tokens, calls and time of the model's work, summaries included, per raw token and
    per episode; the run's chunk counts."""
    summary, written = run.summary, run.summaries
    prompt = summary.prompt_tokens + written.prompt_tokens
    completion = summary.completion_tokens + written.completion_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "model_calls": summary.model_calls + written.summarized + written.failed,
        "summaries_written": written.summarized,
        "summaries_failed": written.failed,
        "raw_transcript_tokens": run.raw_tokens,
        "episodes_gated": summary.episodes_skipped,
        "gated_raw_token_share": _share(run.gated_raw_tokens, run.raw_tokens),
        "answers_cut_off": summary.answers_cut_off,
        "tokens_per_raw_token": _share(prompt + completion, run.raw_tokens),
        "seconds_per_episode": round(run.seconds / episodes, 2) if episodes else 0.0,
        "episodes": episodes,
        "episodes_consolidated": summary.episodes_consolidated,
        "chunks": summary.chunks,
        "chunks_failed": summary.chunks_failed,
        "chunk_failures_by_reason": failures_by_reason(summary),
    }


def failures_by_reason(summary: RunSummary) -> dict[str, int]:
    """Why chunks failed (an answer cut off or malformed, a plan held), by reason as given:
    what a small model gets wrong shows here rather than among the rejections."""
    reasons = Counter(" ".join(f.reason.split())[:MAX_REASON_CHARS] for f in summary.failures)
    return dict(reasons.most_common())


def _share(part: float, whole: float) -> float:
    return round(float(part) / whole, 4) if whole else 0.0


if __name__ == "__main__":
    main()
