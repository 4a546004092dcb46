"""Retrieval quality on LongMemEval: every session one haystack, each question searched in it.

No language model: every session of the file (each once, however many questions share it) is
recorded as an episode of one conversation, dated as the session, its turns the messages (the
role as the speaker), and every question that has evidence (abstention questions, ``_abs``, are
left out) is searched against all of them with the shipped search of episodic memories
(``tasks.memories.search_memories``: windows embedded as a server would, then the fusion of
the full-text, vector and temporal channels, FSRS weighing, each episode's text cut to the
token budget as a search returns it), as asked at the question's own date
(``question_date``): "two weeks ago" counts back from it, and retrievability is taken then.
Sessions dated after it (other questions') stay in the haystack, as if just recorded
(retrievability 1), which favours none of a question's own. Per question:

- session recall@k (k = 5, 10): whether an evidence session (``answer_session_ids``) is among
  the top k episodes;
- all-evidence recall@10: whether every evidence session is among the top ten;
- turn recall@10: the share of the evidence turns (``has_answer``) whose text the top ten carry
  as returned: the turn's whole line in an episode's text, or the start of it where a single
  message longer than the budget was cut.

Reported in all and by question type, with the embedder that made the vectors. With
``--rerank`` the same figures again (``reranked``) for the same search's best
``SLOWWAVE_SEARCH_RERANK_CANDIDATES`` episodes put in the order the reranker
(``SLOWWAVE_SEARCH_RERANK_MODEL``, prepared in the configured home) scores them, and what the
reranker took per search. ``--set``
takes any setting (``embedding_model=...``, ``search_memory_tokens=...``). ``--questions N``
takes the first N questions and only their sessions as the haystack: a run in seconds that
checks the harness, not figures to quote.

    python -m benchmarks.longmemeval_recall [--data PATH] [--questions N] [--rerank]
        [--set NAME=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.locomo_recall import add_set_option
from benchmarks.longmemeval import parse_date
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared/datasets/longmemeval/longmemeval_oracle_dev.json"
)
CONVERSATION = "longmemeval"
KS = (5, 10)
CUT = " …"  # how an excerpt ends a single message longer than its budget


@dataclass(frozen=True)
class Haystack:
    """The sessions recorded (id → date, turns) and the questions searched."""

    sessions: dict[str, tuple[datetime, list[dict[str, Any]]]]
    questions: list[dict[str, Any]]


def read_haystack(data: Path, questions: int | None = None) -> Haystack:
    """The file's questions that have evidence (the first ``questions``), and the sessions of
    every question of the file (of only those, when ``questions`` is given), each once."""
    items = json.loads(data.read_text(encoding="utf-8"))
    picked = [q for q in items if not q["question_id"].endswith("_abs")]
    if questions is not None:
        picked = picked[:questions]
    sessions: dict[str, tuple[datetime, list[dict[str, Any]]]] = {}
    for item in picked if questions is not None else items:
        for sid, date, turns in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            sessions.setdefault(sid, (parse_date(date), turns))
    return Haystack(sessions, picked)


def episodes(haystack: Haystack) -> list[Any]:
    """A session an episode of one conversation; a turn's message id is ``session:index``."""
    from slowwave.models.episode import Episode, Message
    from slowwave.models.ids import new_id

    return [
        Episode(
            id=new_id(),
            conversation_id=CONVERSATION,
            external_key=f"longmemeval-session:{sid}",
            messages=[
                Message(speaker=t["role"], text=t["content"], message_id=f"{sid}:{i}")
                for i, t in enumerate(turns)
            ],
            start_at=at,
            end_at=at,
        )
        for sid, (at, turns) in sorted(haystack.sessions.items(), key=lambda s: s[1][0])
    ]


def evidence_turns(question: dict[str, Any]) -> set[tuple[str, int]]:
    """The question's evidence turns, as (session id, index)."""
    return {
        (sid, i)
        for sid, turns in zip(
            question["haystack_session_ids"], question["haystack_sessions"], strict=True
        )
        for i, turn in enumerate(turns)
        if turn.get("has_answer")
    }


def carried(text: str, messages: Sequence[dict[str, Any]]) -> set[int]:
    """The indexes of ``messages`` whose line ``text`` (an episode as a search returned it)
    carries: whole (a message of several lines too), or the start of it where the excerpt is
    one message cut to the budget (``… `` ends it)."""
    from slowwave.tasks.memories import lines

    framed = f"\n{text}\n"
    start = text.removesuffix(CUT).rstrip() if text.endswith(CUT) else None
    return {
        i
        for i, line in enumerate(lines(messages))
        if f"\n{line}\n" in framed or (start and line.startswith(start))
    }


def measure(haystack: Haystack, settings: Any, *, rerank: bool = False) -> dict[str, Any]:
    """Record the haystack on a fresh embedded database and search every question in it
    (the embedding model, and the reranker with ``rerank``, those ``settings`` name, prepared
    in its home)."""
    from benchmarks.locomo_extraction import fresh_database
    from slowwave.models.embedding import load_embedder
    from slowwave.models.rerank import load_reranker
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.memories import embed_windows, search_memories
    from slowwave.tasks.rerank import rerank as rerank_hits

    policy = settings.search
    embedder = load_embedder(settings)
    reranker = load_reranker(settings) if rerank else None
    depth = max(max(KS), settings.search.rerank_candidates) if reranker else max(KS)
    recorded = episodes(haystack)
    lists = ("first_stage", "reranked") if reranker else ("first_stage",)
    sums: dict[str, dict[str, float]] = {name: defaultdict(float) for name in lists}
    by_type: dict[str, dict[str, dict[str, float]]] = {
        name: defaultdict(lambda: defaultdict(float)) for name in lists
    }
    latencies: list[float] = []
    rerank_latencies: list[float] = []
    with fresh_database(settings) as db, db.connection() as conn:
        load_episodes(conn, recorded)
        started = time.perf_counter()
        windows = embed_windows(conn, embedder.embed, CONVERSATION, policy.memory_window) or 0
        embed_s = time.perf_counter() - started
        rows = conn.execute(
            "SELECT id, external_key, messages FROM episodic_memory WHERE conversation_id = %s",
            (CONVERSATION,),
        ).fetchall()
        session_of = {i: key.removeprefix("longmemeval-session:") for i, key, _ in rows}
        messages_of = {i: messages for i, _, messages in rows}
        for question in haystack.questions:
            gold = set(question["answer_session_ids"])
            turns = evidence_turns(question)
            started = time.perf_counter()
            hits = search_memories(
                conn,
                embedder,
                question["question"],
                CONVERSATION,
                k=depth,
                memory_tokens=policy.memory_tokens,
                policy=policy,
                now=parse_date(question["question_date"]),  # "two weeks ago" counts from it
                embed_first=False,
            )
            latencies.append(time.perf_counter() - started)
            ranked = {"first_stage": hits[: max(KS)]}
            if reranker is not None:
                started = time.perf_counter()
                ranked["reranked"] = rerank_hits(
                    reranker, question["question"], [], hits, k=0, memories_k=max(KS)
                ).memories
                rerank_latencies.append(time.perf_counter() - started)
            for name, top in ranked.items():
                found = [session_of[h.id] for h in top]
                got_turns = {
                    (session_of[h.id], i) for h in top for i in carried(h.text, messages_of[h.id])
                }
                scores = {
                    "questions": 1.0,
                    **{f"session@{k}": float(bool(gold & set(found[:k]))) for k in KS},
                    "all_evidence@10": float(gold <= set(found[:10])),
                }
                if turns:
                    scores |= {"with_turns": 1.0, "turn@10": len(turns & got_turns) / len(turns)}
                kind = by_type[name][question["question_type"]]
                for score, value in scores.items():
                    sums[name][score] += value
                    kind[score] += value
    reranked: dict[str, Any] = {}
    if reranker is not None:
        reranked["reranked"] = {
            **_shares(sums["reranked"]),
            "by_type": {t: _shares(s) for t, s in sorted(by_type["reranked"].items())},
            "reranker": settings.search.rerank_model,
            "candidates": depth,
            "rerank_p50_ms": round(statistics.median(rerank_latencies) * 1000, 1),
        }
    return {
        **_shares(sums["first_stage"]),
        "by_type": {t: _shares(s) for t, s in sorted(by_type["first_stage"].items())},
        **reranked,
        "sessions": len(recorded),
        "windows": windows,
        "embedder": settings.embedding.model,
        "memory_tokens": policy.memory_tokens,
        "embed_seconds": round(embed_s, 1),
        "search_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
    }


def _shares(sums: dict[str, float]) -> dict[str, Any]:
    """Sums over questions as shares (turn recall over the questions with evidence turns)."""
    n, with_turns = int(sums["questions"]), int(sums["with_turns"])
    return {
        "questions": n,
        **{
            name: round(sums[name] / max(n, 1), 4)
            for name in (*(f"session@{k}" for k in KS), "all_evidence@10")
        },
        "turn@10": round(sums["turn@10"] / max(with_turns, 1), 4),
    }


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the server it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--questions", type=int, default=None, help="the first N, with only their sessions"
    )
    add_set_option(parser, "search_memory_tokens=800")
    parser.add_argument(
        "--rerank", action="store_true", help="also the best candidates in the reranker's order"
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"no LongMemEval file at {args.data}: pass --data PATH (see the benchmark's page)")

    from slowwave.models.settings import Settings

    started = time.perf_counter()
    haystack = read_haystack(args.data, args.questions)
    figures = measure(haystack, Settings(**dict(args.set), _env_file=None), rerank=args.rerank)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    _print(figures)
    if args.json:
        print(json.dumps(figures))


def _print(figures: dict[str, Any]) -> None:
    print(
        f"{figures['questions']} questions, {figures['sessions']} sessions "
        f"({figures['windows']} windows, {figures['embedder']}, embedded in "
        f"{figures['embed_seconds']} s); search p50 {figures['search_p50_ms']} ms"
    )
    columns = (*(f"session@{k}" for k in KS), "all_evidence@10", "turn@10")
    tables = [("first stage", figures)]
    if "reranked" in figures:
        reranked = figures["reranked"]
        tables.append(
            (
                f"reranked ({reranked['reranker']}, best {reranked['candidates']}, "
                f"p50 {reranked['rerank_p50_ms']} ms a search)",
                reranked,
            )
        )
    for title, table in tables:
        print(title)
        print(f"{'':>26} {'n':>4} " + " ".join(f"{c:>15}" for c in columns))
        for name, row in [("all", table), *table["by_type"].items()]:
            cells = " ".join(f"{row[c]:>15.3f}" for c in columns)
            print(f"{name:>26} {row['questions']:>4} {cells}")
    print(f"took {figures['seconds']} s")


if __name__ == "__main__":
    main()
