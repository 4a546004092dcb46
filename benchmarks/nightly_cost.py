"""What a night costs: tokens, computed tokens, calls and seconds per episode on a nightly mix,
and the quality of the night's facts.

A real night is many conversations with one to three new episodes each, most with facts
already known, not the long sessions of ``benchmarks.locomo_extraction``. The mix:

- LoCoMo conversations whose first ``--known`` sessions were consolidated on earlier nights
  (by the replay model: their gold observations are the facts already known, the same for
  every runtime measured) and whose next sessions arrive tonight: one session for every other
  conversation, two for the rest; with ``--episode-messages N`` each of tonight's sessions
  arrives as episodes of N messages, as an agent that records a chat a few messages at a time
  makes them (the short episodes that share a call, ``SLOWWAVE_CHUNK_MIN_TOKENS``, measured
  against the same gold);
- the README's sample conversations (``examples/transcripts/sample-chats.jsonl``: short,
  several episodes each), new tonight.

Tonight's run (summaries first with ``--summaries``, as backfill writes them) is measured, per
``--runtime`` in a fresh database of its own, on the same mix. ``--known 3 5 7`` measures three
such nights (sessions 1-3 known and the next arriving, then 1-5, then 1-7), each on its own,
and pools them: tokens, calls and seconds added up, recall and precision over all their gold
observations, facts and questions together. One night's 61 gold observations tell two
configurations apart only when they differ by more than a greedy decoder's drift; several
nights over all seven conversations give several hundred.

- billed tokens: the prompt and completion tokens the model was sent and wrote, per raw
  transcript token (tonight's messages as ``speaker: text`` lines, counted with the runtime's
  tokenizer where it has one);
- computed tokens: the prompt tokens the engine computed (billed less those its prefix cache
  served, as the engine reports them; an engine that reports none counts every billed token
  as computed) plus the completion tokens, per raw token;
- model calls and seconds per episode;
- fact recall and precision: the facts tonight's run wrote in the LoCoMo conversations
  against the gold observations of tonight's sessions (``benchmarks.locomo_extraction``'s
  matching); recall with reinforced: the same over the facts it wrote or added evidence to (a
  sentence said again is one row with both sources, not a second row); end-to-end recall@k
  of the questions whose evidence lies wholly in tonight's sessions, over all the
  conversation's active facts.

    python -m benchmarks.nightly_cost --runtime llamacpp:qwen2.5-coder-1.5b-instruct
        [--runtime vllm:smollm2-135m-instruct ...] [--conversations conv-26 ...] [--known 3 ...]
        [--summaries] [--set NAME=VALUE ...] [--data PATH] [--json]

``--model``/``--engine`` name a single runtime as the other benchmarks do. With ``--json`` the
last line holds the first runtime's figures at the top level and every runtime's under
``by_runtime``; with several nights, each runtime's figures are the nights pooled, and each
night's own are under its ``by_night``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

from benchmarks.locomo_extraction import (
    ExtractedFact,
    Observation,
    Question,
    end_to_end_recall,
    extracted_facts,
    fact_quality,
    failures_by_reason,
    fresh_database,
    gold_of,
    questions_of,
    raw_transcript_tokens,
    read_records,
    refusal_quality,
    refused_facts,
    reinforced_facts,
    session_number,
)
from benchmarks.locomo_recall import DEFAULT_DATA, KS, add_set_option
from benchmarks.report import print_figures
from slowwave.models.embedding import Embedder, load_embedder
from slowwave.models.episode import Episode, Message
from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.ids import new_id
from slowwave.models.llm import StructuredModel, check_runtime, load_model
from slowwave.models.llm.base import prompt_limits
from slowwave.models.llm.llamacpp_runtime import PYTHON_SERVER_MODULES
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.processes import LocalServer, unwind_on_sigterm
from slowwave.models.settings import LLMRuntimeName, Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.ingest.locomo import read_locomo
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.summarize import SummaryReport, summarize_missing
from slowwave.tasks.ingest.transcripts import ingest
from slowwave.tasks.predict import episode_vectors, nearest_facts

PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
SAMPLE = Path(__file__).resolve().parents[1] / "examples/transcripts/sample-chats.jsonl"
# four LoCoMo conversations, three sessions known: with the sample, 13 episodes tonight, about
# 12 minutes with the 1.5B model on two cores
DEFAULT_CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42")
DEFAULT_KNOWN = 3
MATCH, STRICT_MATCH = 0.7, 0.8


@dataclass(frozen=True)
class Night:
    """Earlier nights' episodes, tonight's, and what tonight is measured against."""

    conversations: list[str]  # the LoCoMo ones
    earlier: list[Episode]
    tonight: list[Episode]
    tonight_sessions: dict[str, set[int]]
    gold: list[Observation]  # of tonight's sessions
    questions: list[Question]  # whose evidence lies wholly in tonight's sessions


@dataclass(frozen=True)
class Runtime:
    engine: str
    model: str

    @classmethod
    def parse(cls, text: str) -> Runtime:
        engine, _, model = text.partition(":")
        if engine not in get_args(LLMRuntimeName):
            raise argparse.ArgumentTypeError(
                f"unknown engine {engine!r}: one of {', '.join(get_args(LLMRuntimeName))}"
            )
        return cls(engine, model or Settings().llm.model)

    @property
    def label(self) -> str:
        return "replay" if self.engine == "replay" else f"{self.engine}:{self.model}"


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    args = parse_args()
    started = time.perf_counter()
    nights = [
        plan_night(args.data, args.conversations, known, args.episode_messages)
        for known in args.known
    ]
    results: dict[str, dict[str, Any]] = {}
    embedder: Embedder | None = None
    for runtime in args.runtimes:
        settings = Settings(
            **dict(args.set),
            llm_model=runtime.model,
            llm_runtime=runtime.engine,
            replay_data=args.data,
        )
        try:
            check_runtime(settings)
        except RuntimeNotAvailable as exc:
            raise SystemExit(f"{runtime.label}: {exc}") from None
        embedder = embedder or load_embedder(settings)
        by_night = {
            f"known_{known}": measure_night(
                settings, embedder, night, args.data, summaries=args.summaries
            )
            for known, night in zip(args.known, nights, strict=True)
        }
        results[runtime.label] = (
            next(iter(by_night.values()))
            if len(by_night) == 1
            else {**pooled(list(by_night.values())), "by_night": by_night}
        )
    first = next(iter(results.values()))
    figures = {
        "conversations": list(args.conversations),
        "known_sessions": args.known[0] if len(args.known) == 1 else args.known,
        "episodes_earlier": sum(len(n.earlier) for n in nights),
        **first,
        "by_runtime": results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print_figures(figures, as_json=args.json)


def parse_args() -> argparse.Namespace:
    defaults = Settings()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runtime",
        dest="runtimes",
        action="append",
        type=Runtime.parse,
        metavar="ENGINE[:MODEL]",
        help="a runtime to measure (repeatable), e.g. llamacpp:qwen2.5-coder-1.5b-instruct",
    )
    parser.add_argument("--model", default=None, help="with --engine: a single runtime")
    parser.add_argument("--engine", choices=get_args(LLMRuntimeName), default=None)
    parser.add_argument(
        "--conversations", nargs="+", default=list(DEFAULT_CONVERSATIONS), metavar="SAMPLE_ID"
    )
    parser.add_argument(
        "--known",
        type=int,
        nargs="+",
        default=[DEFAULT_KNOWN],
        help="sessions consolidated on earlier nights; several: one night each, pooled",
    )
    parser.add_argument(
        "--summaries",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="have the runtime write tonight's episode summaries first, as backfill does",
    )
    parser.add_argument(
        "--episode-messages",
        type=int,
        default=None,
        metavar="N",
        help="tonight's sessions arrive as episodes of N messages each",
    )
    add_set_option(parser, "chunk_size=4 or llamacpp_parallel=1")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    if min(args.known) < 1:
        parser.error("--known must be at least 1")
    if len(set(args.known)) < len(args.known):
        parser.error("--known names each night once")  # a night twice would be pooled as one
    if args.episode_messages is not None and args.episode_messages < 1:
        parser.error("--episode-messages must be at least 1")
    if args.runtimes and (args.model or args.engine):
        parser.error("give --runtime, or --model/--engine, not both")
    if not args.runtimes:
        engine = args.engine or defaults.llm.runtime
        args.runtimes = [Runtime(engine, args.model or defaults.llm.model)]
    if args.summaries and any(r.engine == "replay" for r in args.runtimes):
        parser.error("--summaries needs a model: the replay runtime writes no summaries")
    return args


def plan_night(
    data: Path, conversations: Sequence[str], known: int, episode_messages: int | None = None
) -> Night:
    """Sessions 1..known of each conversation were earlier nights; tonight brings the next one
    (every other conversation) or two, each session as one episode or, with
    ``episode_messages``, as episodes of that many messages. LoCoMo's human-written session
    summaries are dropped: a transcript has none."""
    records = read_records(data, conversations)
    tonight_sessions = {
        c: set(range(known + 1, known + 2 + i % 2)) for i, c in enumerate(conversations)
    }
    earlier, tonight = [], []
    for e in read_locomo(data):
        if e.conversation_id not in records:
            continue
        session = session_number(e.external_key)
        e = e.model_copy(update={"summary": None})
        if session <= known:
            earlier.append(e)
        elif session in tonight_sessions[e.conversation_id]:
            tonight.append(e)
    arrived = {(e.conversation_id, session_number(e.external_key)) for e in tonight}
    missing = sorted(
        c for c, sessions in tonight_sessions.items() if not {(c, s) for s in sessions} <= arrived
    )
    if missing:
        raise SystemExit(f"fewer than {known + 2} sessions in {', '.join(missing)}: lower --known")
    if episode_messages:
        tonight = [part for e in tonight for part in split_session(e, episode_messages)]
    gold = gold_of(records, tonight_sessions)
    questions = questions_of(records, tonight_sessions)
    return Night(list(conversations), earlier, tonight, tonight_sessions, gold, questions)


def split_session(episode: Episode, size: int) -> list[Episode]:
    """A session as consecutive episodes of ``size`` messages, a minute apart, each keyed by
    the session and its first message (``locomo:conv-26:session_3:m4``)."""
    return [
        episode.model_copy(
            update={
                "id": new_id(),
                "external_key": f"{episode.external_key}:m{first}",
                "messages": episode.messages[first : first + size],
                "start_at": episode.start_at + timedelta(minutes=n),
                "end_at": episode.start_at + timedelta(minutes=n),
            }
        )
        for n, first in enumerate(range(0, len(episode.messages), size))
    ]


def measure_night(
    settings: Settings, embedder: Embedder, night: Night, data: Path, *, summaries: bool
) -> dict[str, Any]:
    """Earlier nights by the replay model, then tonight by the runtime the settings name, in a
    fresh database; tonight's figures."""
    with fresh_database(settings) as db:
        # the night comes a day after the episodes were recorded: every one is due
        db.settings = db.settings.evolve(due_after_s=0)
        with db.connection() as conn:
            load_episodes(conn, night.earlier)
        # the facts known are the gold observations: the speaker check judges a model's
        # reading of who said what, not the annotators'
        gold = db.settings.evolve(check_speaker=False)
        consolidate(db, LoCoMoReplayModel(data), embedder, gold, kind="earlier nights")
        with db.connection() as conn:
            load_episodes(conn, night.tonight)
        ingest(db, SAMPLE, IngestPolicy.of(db.settings))
        model = load_model(settings)
        try:
            return measure_tonight(db, model, embedder, night, summaries=summaries)
        finally:
            model.close()


def measure_tonight(
    db: Database, model: StructuredModel, embedder: Embedder, night: Night, *, summaries: bool
) -> dict[str, Any]:
    _, counter = prompt_limits(model)
    with db.connection() as conn:
        pending = pending_episodes(conn)
    started = time.perf_counter()
    written = SummaryReport()
    if summaries:
        with db.connection() as conn:
            written = summarize_missing(conn, model, min_chars=db.settings.ingest.summary_min_chars)
    with db.connection() as conn:
        hits = predict_hits(
            conn, embedder, pending_episodes(conn), db.settings.consolidation.related_facts_limit
        )
    summary = consolidate(db, model, embedder, db.settings, kind="tonight")
    seconds = time.perf_counter() - started
    with db.connection() as conn:
        facts = extracted_facts(conn, summary.run_id, night.conversations)
        reinforced = reinforced_facts(conn, summary.run_id, night.conversations)
        refused = refused_facts(conn, summary.run_id, night.conversations)
        recall = end_to_end_recall(
            conn,
            embedder,
            db.settings.search,
            night.questions,
            db.settings.search,
        )
        proposed = proposed_actions(conn, summary.run_id)
    raw = raw_transcript_tokens(pending, counter)
    prompt = summary.prompt_tokens + written.prompt_tokens
    completion = summary.completion_tokens + written.completion_tokens
    cached = summary.prompt_tokens_cached + written.cached_tokens
    cached_from = "engine"
    if not cached and (logged := logged_prefix_hits(model)) is not None:
        cached, cached_from = logged, "server log"
    billed = prompt + completion
    return {
        "runtime": model.name,
        "episodes_tonight": len(pending),
        "raw_transcript_tokens": raw,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "prompt_tokens_cached": cached,
        "prompt_tokens_cached_from": cached_from,
        "billed_tokens_per_raw_token": _share(billed, raw),
        "computed_tokens_per_raw_token": _share(billed - cached, raw),
        "model_calls": summary.model_calls + written.summarized + written.failed,
        "summaries_written": written.summarized,
        **hits,
        "seconds_tonight": round(seconds, 2),
        "seconds_per_episode": round(seconds / len(pending), 2) if pending else 0.0,
        "episodes_per_hour": round(3600 * len(pending) / seconds, 1) if seconds else 0.0,
        **quality(facts, night, embedder),
        "fact_recall_with_reinforced": fact_quality(
            reinforced, night.gold, embedder, MATCH, STRICT_MATCH
        )["fact_recall"],
        **{f"end_to_end_recall_at_{k}": recall["facts"][k] for k in KS},
        **{f"end_to_end_recall_fused_at_{k}": recall["fused"][k] for k in KS},
        "questions": len(night.questions),
        "gold_observations": len(night.gold),
        "facts_written": len(facts),
        **refusal_quality(refused, night.gold, embedder),
        "chunks": summary.chunks,
        "chunks_failed": summary.chunks_failed,
        "chunk_failures_by_reason": failures_by_reason(summary),
        "proposed_actions": proposed,
        "episodes_gated": summary.episodes_skipped,
        "answers_cut_off": summary.answers_cut_off,
    }


# figures a pooled night adds up; the shares are worked out again from them
ADDED = (
    "episodes_tonight",
    "raw_transcript_tokens",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_cached",
    "model_calls",
    "summaries_written",
    "seconds_tonight",
    "questions",
    "gold_observations",
    "facts_written",
    "facts_refused",
    "chunks",
    "chunks_failed",
    "episodes_gated",
    "answers_cut_off",
)
# a share and what it is a share of: pooled, the matches of every night over all their wholes
SHARES = {
    "fact_recall": "gold_observations",
    "fact_recall_strict": "gold_observations",
    "fact_recall_with_reinforced": "gold_observations",
    "fact_precision": "facts_written",
    "fact_precision_strict": "facts_written",
    "refused_precision": "facts_refused",
    **{f"end_to_end_recall_at_{k}": "questions" for k in KS},
    **{f"end_to_end_recall_fused_at_{k}": "questions" for k in KS},
}


def pooled(nights: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several nights' figures as one: counts added up, each share the matches of all nights
    over all their gold observations, facts or questions (not a mean of means)."""
    total: dict[str, Any] = {k: sum(n[k] for n in nights) for k in ADDED}
    for share, whole in SHARES.items():
        matched = sum(n[share] * n[whole] for n in nights)
        total[share] = _share(matched, total[whole])
    raw, billed = (
        total["raw_transcript_tokens"],
        total["prompt_tokens"] + total["completion_tokens"],
    )
    episodes, seconds = total["episodes_tonight"], total["seconds_tonight"]
    return {
        "runtime": nights[0]["runtime"],
        "nights": len(nights),
        **total,
        "prompt_tokens_cached_from": nights[0]["prompt_tokens_cached_from"],
        "billed_tokens_per_raw_token": _share(billed, raw),
        "computed_tokens_per_raw_token": _share(billed - total["prompt_tokens_cached"], raw),
        "seconds_per_episode": round(seconds / episodes, 2) if episodes else 0.0,
        "episodes_per_hour": round(3600 * episodes / seconds, 1) if seconds else 0.0,
        "chunk_failures_by_reason": _added(n["chunk_failures_by_reason"] for n in nights),
        "proposed_actions": _added(n["proposed_actions"] for n in nights),
    }


def _added(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return dict(sorted(total.items()))


def proposed_actions(conn: Any, run_id: UUID) -> dict[str, int]:
    """What tonight's answers asked for, item by item, and what was done (``update->new``: an
    update the guard or dedupe turned into a new fact, say): where the completion tokens went."""
    rows = conn.execute(
        "SELECT proposed_action, action, count(*) FROM decision_log WHERE run_id = %s"
        " GROUP BY proposed_action, action ORDER BY proposed_action, action",
        (run_id,),
    ).fetchall()
    return {
        proposed if proposed == done else f"{proposed}->{done}": count
        for proposed, done, count in rows
    }


def logged_prefix_hits(model: StructuredModel) -> int | None:
    """llama-cpp-python's server reports no cached tokens, but reuses the previous request's
    matching prefix in its one slot and logs it (``Llama.generate: N prefix-match hit``): the
    tokens it served so, from the log of the server that answered tonight (started for it), or
    None for any other runtime."""
    server = getattr(model, "server", None)
    if not isinstance(server, LocalServer) or not set(PYTHON_SERVER_MODULES.values()) & set(
        server.command
    ):
        return None
    text = server.log.read_text(errors="replace")
    return sum(int(n) for n in PREFIX_HIT.findall(text))


def quality(facts: list[ExtractedFact], night: Night, embedder: Embedder) -> dict[str, float]:
    figures = fact_quality(facts, night.gold, embedder, MATCH, STRICT_MATCH)
    return {k: v for k, v in figures.items() if k != "grounded_share"}


def pending_episodes(conn: Any) -> list[Episode]:
    """Tonight's episodes, as the run will read them: every one not consolidated yet."""
    rows = conn.execute(
        "SELECT id, conversation_id, external_key, messages, summary, start_at, end_at "
        "FROM episodic_memory WHERE consolidated_at IS NULL ORDER BY conversation_id, start_at"
    ).fetchall()
    return [
        Episode.model_construct(
            id=i,
            conversation_id=c,
            external_key=key,
            messages=[Message.model_validate(m) for m in messages],
            summary=summary,
            start_at=start,
            end_at=end,
        )
        for i, c, key, messages, summary, start, end in rows
    ]


def predict_hits(
    conn: Any, embedder: Embedder, episodes: Sequence[Episode], limit: int
) -> dict[str, float]:
    """What predict finds for tonight's episodes by what it embeds: with summaries written, the
    share of the known facts found through each episode's summary that its transcript (the
    gist without a summary) finds too, and an extractive gist (its longest messages that fit
    the embedding model's window) finds too."""
    summarized = [e for e in episodes if e.summary]
    if not summarized:
        return {}
    by_text = {
        "summary": [e.summary or "" for e in summarized],
        "transcript": [e.model_copy(update={"summary": None}).gist for e in summarized],
        "extractive": [extractive_gist(e) for e in summarized],
    }
    found: dict[str, list[set[Any]]] = {}
    for name, texts in by_text.items():
        pairs = zip(summarized, texts, strict=True)
        chunks = [[e.model_copy(update={"summary": t})] for e, t in pairs]
        nearest = nearest_facts(conn, chunks, episode_vectors(embedder, chunks), limit)
        found[name] = [{f.id for _, f in per[0]} for per in nearest]
    shown = sum(len(s) for s in found["summary"])
    return {
        f"predict_{name}_finds_summary_hits": _share(
            sum(len(a & b) for a, b in zip(found["summary"], found[name], strict=True)), shown
        )
        for name in ("transcript", "extractive")
    }


def extractive_gist(episode: Episode, budget_words: int = 180) -> str:
    """The episode's longest messages, in their order, up to about what the embedding model
    reads (256 word pieces)."""
    ranked = sorted(range(len(episode.messages)), key=lambda i: -len(episode.messages[i].text))
    kept: set[int] = set()
    words = 0
    for i in ranked:
        n = len(episode.messages[i].text.split())
        if words + n > budget_words and kept:
            continue
        kept.add(i)
        words += n
    return " ".join(f"{m.speaker}: {m.text}" for i, m in enumerate(episode.messages) if i in kept)


def _share(part: float, whole: float) -> float:
    return round(float(part) / whole, 4) if whole else 0.0


if __name__ == "__main__":
    main()
