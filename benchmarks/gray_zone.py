"""The gray-zone merge on LoCoMo's dedupe benchmark, judged by a real model: off vs on.

The facts are LoCoMo's gold observations of the first ``--sessions`` sessions of the chosen
conversations (the replay runtime writes them), consolidated once; then every session is
replayed with its facts restated, as ``locomo_recall``'s dedupe figures do, but shortened to
their first clause (``--reword shorten``, the default: the same fact with less detail, which
cosine alone often misses) or lightly reworded as there (``--reword light``). One session per
chunk, as nights bring them. With the gray zone on, the pairs between the dedupe
threshold and ``SLOWWAVE_GRAY_ZONE_LOWER`` are judged by ``--model`` on ``--engine`` (the
replay runtime never judges). Off and on run on fresh databases from the same data. Reported
per setting: merges caught (the replayed facts merged into their own original), false merges
(first pass: any merge of two different gold sentences; replay: a merge into another
sentence's fact), the gray zone's pairs, merges and refusals, model tokens and seconds.

    python -m benchmarks.gray_zone [--conversations conv-26] [--sessions 6]
        [--model NAME] [--engine llamacpp|openai|vllm] [--reword shorten|light]
        [--faithfulness 0.7 0.8 ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.locomo_extraction import fresh_database, select_subset
from benchmarks.locomo_recall import DEFAULT_DATA, normalize, reword
from slowwave.models.embedding import Embedder, load_embedder
from slowwave.models.ids import new_id
from slowwave.models.llm import StructuredModel, load_model
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import Settings, setting_default
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes


class ReplayWithJudge:
    """Consolidation answered by the replay runtime, gray-zone pairs by a real model."""

    def __init__(self, replay: LoCoMoReplayModel, judge: StructuredModel) -> None:
        self.replay, self.judge = replay, judge
        self.name = f"replay+{judge.name}"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        judged = [r for r in requests if r.purpose is Purpose.merge]
        answers = dict(zip((id(r) for r in judged), self.judge.generate(judged), strict=True))
        rest = [r for r in requests if r.purpose is not Purpose.merge]
        answers.update(zip((id(r) for r in rest), self.replay.generate(rest), strict=True))
        return [answers[id(r)] for r in requests]

    def close(self) -> None:
        return None


_CLAUSE = re.compile(r",| and | because | which | who | when | after | before | since | while ")


def shorten(sentence: str) -> str:
    """The same fact with less detail: the sentence up to its first clause break, when at
    least four words remain (else the light rewording). A restatement a duplicate check by
    cosine alone often misses, and whose original is known."""
    text = sentence.rstrip(". ")
    head = _CLAUSE.split(text, maxsplit=1)[0].strip()
    return head if len(head.split()) >= 4 and head != text else reword(sentence)


def outcomes(conn: Any, first_run: Any, rewritten: dict[str, str]) -> dict[str, Any]:
    """Walk both runs' decisions in order, following which gold sentences each fact holds:
    a merge (dedupe, or gray zone into the fact it updates) is right when the fact it joins
    holds the same original sentence, false otherwise; a replayed fact left new is missed."""
    holds: dict[Any, set[str]] = defaultdict(set)
    counts: Counter[str] = Counter()
    rows = conn.execute(
        "SELECT run_id, action, fact_id, previous_fact_id, proposed_fact, reason "
        "FROM decision_log ORDER BY id"
    ).fetchall()
    for run_id, action, fact_id, previous, sentence, reason in rows:
        text = normalize(sentence or "")
        phase = "first" if run_id == first_run else "replay"
        original = text if phase == "first" else rewritten.get(text, text)
        gray = action == "merge" and previous is not None
        if action == "new":
            holds[fact_id].add(original)
            counts[f"{phase}_new"] += 1
            continue
        joined = previous if gray else fact_id
        if action == "reinforce" and "gray-zone" not in (reason or ""):
            continue  # the model's own reinforce: the replay runtime never answers one
        if action not in ("merge", "reinforce"):
            continue
        right = original in holds[joined]
        counts[f"{phase}_{'gray_' if gray or action == 'reinforce' else ''}merges"] += 1
        counts[f"{phase}_false_merges"] += not right
        holds[fact_id] |= holds[joined] | {original}
    replayed = counts["replay_new"] + counts["replay_merges"] + counts["replay_gray_merges"]
    caught = counts["replay_merges"] + counts["replay_gray_merges"] - counts["replay_false_merges"]
    return {
        **dict(sorted(counts.items())),
        "replayed_facts": replayed,
        "replay_caught_share": round(caught / max(replayed, 1), 4),
    }


def measure(
    settings: Settings, judge: StructuredModel, embedder: Embedder, args: argparse.Namespace
) -> dict[str, Any]:
    subset = select_subset(args.data, args.conversations, args.sessions)
    rewording = shorten if args.reword == "shorten" else reword
    rewritten = {normalize(rewording(o.sentence)): normalize(o.sentence) for o in subset.gold}
    started = time.perf_counter()
    with fresh_database(settings) as db:
        with db.connection() as conn:
            load_episodes(conn, subset.episodes)
        first_model = ReplayWithJudge(LoCoMoReplayModel(args.data), judge)
        first = consolidate(db, first_model, embedder, settings, kind="backfill")
        with db.connection() as conn:
            again = [
                e.model_copy(update={"id": new_id(), "external_key": e.external_key + ":replay"})
                for e in subset.episodes
            ]
            load_episodes(conn, again)
        second_model = ReplayWithJudge(LoCoMoReplayModel(args.data, reword=rewording), judge)
        second = consolidate(db, second_model, embedder, settings, kind="backfill")
        with db.connection() as conn:
            figures = outcomes(conn, first.run_id, rewritten)
    runs = (first, second)
    return {
        **figures,
        "gray_zone_pairs": sum(r.gray_zone_pairs for r in runs),
        "gray_zone_merges": sum(r.gray_zone_merges for r in runs),
        "gray_zone_unfaithful": sum(r.gray_zone_unfaithful for r in runs),
        "judge_prompt_tokens": sum(r.prompt_tokens for r in runs),
        "judge_completion_tokens": sum(r.completion_tokens for r in runs),
        "gray_zone_seconds": round(sum(r.stage_seconds.get("gray_zone", 0.0) for r in runs), 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", nargs="*", default=["conv-26"])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--model", default=setting_default("llm_model"))
    parser.add_argument("--engine", default="llamacpp")
    parser.add_argument(
        "--faithfulness",
        type=float,
        nargs="*",
        default=[setting_default("merge_faithfulness")],
        help="the gray zone on with each of these faithfulness thresholds",
    )
    parser.add_argument(
        "--reword", choices=("shorten", "light"), default="shorten", help="the replay's rewording"
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    settings = Settings(
        llm_model=args.model, llm_runtime=args.engine, replay_data=args.data, chunk_size=1
    )
    embedder = load_embedder(settings)
    judge = load_model(settings)
    figures: dict[str, Any] = {"model": judge.name, "sessions": args.sessions}
    try:
        variants = [("off", {"gray_zone_merge": False})] + [
            (f"on, faithfulness {f}", {"gray_zone_merge": True, "merge_faithfulness": f})
            for f in args.faithfulness
        ]
        for label, update in variants:
            figures[label] = measure(settings.evolve(**update), judge, embedder, args)
    finally:
        judge.close()
    for label, _ in variants:
        print(f"gray zone {label}: " + ", ".join(f"{k}={v}" for k, v in figures[label].items()))
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
